// netdelay: holds every packet of an NFQUEUE queue for a fixed time, then lets it go; the
// emulated cluster's one-way delay (this kernel has no netem). Fed by an iptables rule in a host
// namespace, e.g. (delaying what h2 receives, from everyone or from one peer only):
//
//   iptables -A INPUT -i eth0 [-s 10.77.0.1] -j NFQUEUE --queue-num 3 --queue-bypass
//   netdelay --queue 3 --delay-us 1000
//
// Packets keep their order (one queue, one fixed delay). Runs until SIGTERM or SIGINT, then
// releases everything it still holds.
#include <arpa/inet.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>

namespace {

using Clock = std::chrono::steady_clock;

struct Held {
  std::uint32_t id;
  Clock::time_point release;
};

struct State {
  nfq_q_handle* queue = nullptr;
  std::deque<Held> held;
  std::chrono::microseconds delay{0};
};

volatile sig_atomic_t stopping = 0;
void on_signal(int) {
  stopping = 1;
}

int on_packet(nfq_q_handle*, nfgenmsg*, nfq_data* data, void* context) {
  auto* state = static_cast<State*>(context);
  const nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(data);
  if (header == nullptr) return 0;
  state->held.push_back({ntohl(header->packet_id), Clock::now() + state->delay});
  return 0;
}

void release_due(State& state, bool everything) {
  const auto now = Clock::now();
  while (!state.held.empty() && (everything || state.held.front().release <= now)) {
    nfq_set_verdict(state.queue, state.held.front().id, NF_ACCEPT, 0, nullptr);
    state.held.pop_front();
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Hold every packet of an NFQUEUE queue for a fixed delay"};
  int queue_number = 0;
  long delay_us = 0;
  app.add_option("--queue", queue_number, "NFQUEUE number")->required();
  app.add_option("--delay-us", delay_us, "One-way delay in microseconds")
      ->required()
      ->check(CLI::Range(0L, 10'000'000L));
  CLI11_PARSE(app, argc, argv);

  State state;
  state.delay = std::chrono::microseconds(delay_us);
  nfq_handle* handle = nfq_open();
  if (handle == nullptr) {
    std::fprintf(stderr, "netdelay: nfq_open: %s (root and the nfnetlink_queue module needed)\n",
                 std::strerror(errno));
    return 1;
  }
  state.queue =
      nfq_create_queue(handle, static_cast<std::uint16_t>(queue_number), on_packet, &state);
  if (state.queue == nullptr || nfq_set_mode(state.queue, NFQNL_COPY_META, 0) < 0) {
    std::fprintf(stderr, "netdelay: cannot bind queue %d: %s\n", queue_number,
                 std::strerror(errno));
    nfq_close(handle);
    return 1;
  }
  nfq_set_queue_maxlen(state.queue, 65536);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  const int fd = nfq_fd(handle);
  char buffer[65536] __attribute__((aligned));
  while (!stopping) {
    // Sleep until the next packet is due (ppoll's nanosecond timeout, no busy waiting: the
    // emulated hosts' ranks need the cores) or another packet arrives.
    timespec timeout{};
    timespec* wait = nullptr;
    if (!state.held.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
          state.held.front().release - Clock::now());
      const long long ns = std::max<long long>(0, left.count());
      timeout.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
      timeout.tv_nsec = static_cast<long>(ns % 1'000'000'000);
      wait = &timeout;
    }
    pollfd readable{fd, POLLIN, 0};
    const int ready = ppoll(&readable, 1, wait, nullptr);
    if (ready > 0) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) nfq_handle_packet(handle, buffer, static_cast<int>(n));
    }
    release_due(state, false);
  }
  release_due(state, true);
  nfq_destroy_queue(state.queue);
  nfq_close(handle);
  return 0;
}
