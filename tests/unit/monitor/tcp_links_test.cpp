// monitor/tcp_links against the kernel: a real TCP connection over loopback, its counters as
// both ends see them, and the writer's reader that reports only what changed.
#include "monitor/tcp_links.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace monitor = commtap::monitor;

namespace {

std::string address_of(int fd, bool peer) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (rc != 0) return "";
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

std::optional<monitor::TcpConnection> find(const std::vector<monitor::TcpConnection>& rows,
                                           const std::string& local, const std::string& peer) {
  for (const monitor::TcpConnection& row : rows)
    if (row.local == local && row.peer == peer) return row;
  return std::nullopt;
}

// A connected pair over 127.0.0.1 and its listening socket (closed by the destructor).
struct Connection {
  int listener = -1, client = -1, server = -1;
  Connection() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      return;
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return;
    server = ::accept(listener, nullptr, nullptr);
    const int one = 1;  // acknowledge at once: the client's counters settle when the data is in
    ::setsockopt(server, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
  }
  ~Connection() {
    for (int fd : {listener, client, server})
      if (fd >= 0) ::close(fd);
  }
  // Sends `bytes` from the client and reads them all at the server.
  bool transfer(std::size_t bytes) {
    std::vector<char> data(bytes, 'x');
    std::size_t sent = 0, received = 0;
    while (received < bytes) {
      pollfd fds[2] = {{client, sent < bytes ? short(POLLOUT) : short(0), 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 10'000) <= 0) return false;
      if (fds[0].revents & POLLOUT) {
        const ssize_t n = ::send(client, data.data() + sent, bytes - sent, MSG_DONTWAIT);
        if (n > 0) sent += static_cast<std::size_t>(n);
      }
      if (fds[1].revents & POLLIN) {
        const ssize_t n = ::recv(server, data.data(), data.size(), MSG_DONTWAIT);
        if (n <= 0) return false;
        received += static_cast<std::size_t>(n);
      }
    }
    return true;
  }
};

}  // namespace

TEST(TcpLinks, ReadsBothEndsOfAConnectionAndNotTheListener) {
  Connection c;
  ASSERT_GE(c.server, 0) << "no loopback TCP here";
  ASSERT_TRUE(c.transfer(200'000));
  const std::string client = address_of(c.client, false), server = address_of(c.server, false);
  const std::vector<monitor::TcpConnection> rows = monitor::read_tcp_connections();
  const auto sender = find(rows, client, server), receiver = find(rows, server, client);
  ASSERT_TRUE(sender.has_value());
  ASSERT_TRUE(receiver.has_value());
  EXPECT_EQ(sender->local_ip, "127.0.0.1");
  EXPECT_EQ(sender->peer_ip, "127.0.0.1");
  EXPECT_EQ(receiver->bytes_received, 200'000u);
  EXPECT_GE(sender->data_segs_out, 4u);  // 200 kB in segments of at most 64 KiB
  EXPECT_GE(receiver->data_segs_in, 4u);
  // Loopback loses nothing; a resend that a timer fired on a busy machine is reported back.
  if (sender->has_dsack) {
    EXPECT_EQ(sender->retrans_segs, sender->dsack_dups);
  }
  // The listener has the accepted connection's local address, and no peer: one row there.
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(),
                          [&](const monitor::TcpConnection& row) { return row.local == server; }),
            1);
}

// A receiver that does not read: its sender's data stays in flight, and the kernel counts that
// time as busy and, once the receiver's window is full, as limited by it (Linux 4.10). The
// writer's row carries both, the full window's within the busy time.
TEST(TcpLinks, ASenderWaitingOnAFullReceiverCountsBusyAndWindowLimitedTime) {
  Connection c;
  ASSERT_GE(c.server, 0) << "no loopback TCP here";
  const std::string client = address_of(c.client, false), server = address_of(c.server, false);
  std::vector<char> data(1 << 20, 'x');
  std::optional<monitor::TcpConnection> sender;
  // Fills the receiver's buffers and waits (up to 20 s, by the kernel's count) for the window
  // limit to grow past a few of its ticks.
  for (int attempt = 0; attempt < 2000; ++attempt) {
    while (::send(c.client, data.data(), data.size(), MSG_DONTWAIT) > 0) {
    }
    sender = find(monitor::read_tcp_connections(), client, server);
    ASSERT_TRUE(sender.has_value());
    if (!sender->has_busy) GTEST_SKIP() << "this kernel does not report busy time";
    if (sender->rwnd_limited_us >= 20'000) break;
    pollfd none{-1, 0, 0};
    ::poll(&none, 0, 10);  // the kernel's clock moves on; nothing else is waited for
  }
  EXPECT_GE(sender->rwnd_limited_us, 20'000u);
  EXPECT_GE(sender->busy_us, sender->rwnd_limited_us);
  monitor::TcpLinkCounters counters(1'000'000'000, 1.0);
  std::optional<monitor::TcpLinkRow> row;
  for (const monitor::TcpLinkRow& r : counters.due(1'000'000'000))
    if (r.local == "127.0.0.1" && r.peer == "127.0.0.1") row = r;
  ASSERT_TRUE(row.has_value());
  EXPECT_GE(row->rwnd_limited_us, static_cast<std::int64_t>(sender->rwnd_limited_us));
  EXPECT_GE(row->busy_us, row->rwnd_limited_us);
}

// Rows per address pair: both directions of the loopback connection add up on 127.0.0.1 ->
// 127.0.0.1, only when a read is due, only when something changed, and totals never go down when
// a connection closes.
TEST(TcpLinks, CountersAddUpPerAddressPairAndOnlyGrow) {
  monitor::TcpLinkCounters counters(1'000'000'000, 1.0);  // a read a second, never spaced out
  auto loopback_row = [](const std::vector<monitor::TcpLinkRow>& rows) {
    for (const monitor::TcpLinkRow& row : rows)
      if (row.local == "127.0.0.1" && row.peer == "127.0.0.1") return std::optional{row};
    return std::optional<monitor::TcpLinkRow>{};
  };
  std::uint64_t received_before = 0;
  {
    Connection c;
    ASSERT_GE(c.server, 0) << "no loopback TCP here";
    ASSERT_TRUE(c.transfer(10'000));
    const auto first = loopback_row(counters.due(1'000'000'000));
    ASSERT_TRUE(first.has_value());
    // Other loopback connections of this process (none in a test binary) would add to these.
    EXPECT_GE(first->bytes_received, 10'000u);
    EXPECT_GE(first->connections, 2u);
    received_before = first->bytes_received;
    ASSERT_TRUE(c.transfer(5'000));
    EXPECT_TRUE(counters.due(1'500'000'000).empty()) << "read before the interval was over";
    const auto second = loopback_row(counters.due(2'000'000'000));
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->bytes_received, received_before + 5'000);
    received_before = second->bytes_received;
  }
  // The connection closed: nothing new, nothing taken away.
  const auto after = loopback_row(counters.due(3'000'000'000));
  if (after.has_value()) {
    EXPECT_EQ(after->bytes_received, received_before);
    EXPECT_EQ(after->connections, 0u);
  }
  Connection again;
  ASSERT_GE(again.server, 0);
  ASSERT_TRUE(again.transfer(1'000));
  const auto more = loopback_row(counters.due(4'000'000'000));
  ASSERT_TRUE(more.has_value());
  EXPECT_EQ(more->bytes_received, received_before + 1'000);
}

// A read that costs more than its share of the interval in CPU time spaces out the next, by at
// most 10 intervals more.
TEST(TcpLinks, AReadOverItsShareSpacesOutTheNext) {
  Connection c;
  ASSERT_GE(c.server, 0) << "no loopback TCP here";
  monitor::TcpLinkCounters counters(1000, 0.001);  // a budget of 1 ns: every read is over it
  EXPECT_FALSE(counters.due(1'000'000).empty());
  ASSERT_TRUE(c.transfer(1000));
  EXPECT_TRUE(counters.due(1'000'000 + 2000).empty()) << "read again at once";
  EXPECT_FALSE(counters.due(1'000'000 + 11'000).empty()) << "spaced out by more than 10 intervals";
}
