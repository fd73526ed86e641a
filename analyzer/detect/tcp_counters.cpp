#include "analyzer/detect/tcp_counters.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <tuple>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {
namespace {

// A read's paced time at most (a file's times are not range-checked as its _ns columns are, and
// sums of them must stay in 64 bits): a day.
constexpr std::int64_t kMostPacedUs = 86'400'000'000;

bool loopback(const std::string& ip) {
  return ip.rfind("127.", 0) == 0 || ip == "::1";
}

bool read_tcp_addresses(const Job& job, TcpAddresses& out, std::string& error) {
  return each_tcp_address(
             job,
             [&](const TcpAddressRow& s) {
               auto rank = job.ranks.find(s.rank);
               if (rank == job.ranks.end()) return;
               auto [found, added] = out.hosts.try_emplace(s.local_address, rank->second.host);
               if (!added && found->second != rank->second.host) found->second = -1;
             },
             error) &&
         each_setting_value(
             job, "COMMTAP_TCP_INTERVAL",
             [&](const std::string& value) {
               if (const double v = std::atof(value.c_str()); v > 0) out.interval_s = v;
             },
             error);
}

// Every read up to --at between two hosts, in each connection's time order.
bool each_tcp_read(const Job& job, const TcpAddresses& addresses,
                   const std::function<void(const TcpRead&)>& read, std::string& error) {
  struct Totals {
    std::uint64_t segments = 0, resent = 0, duplicates = 0, bytes = 0;
    std::int64_t busy_us = -1, rwnd_limited_us = -1;
    std::int64_t wall_ns = 0;
  };
  std::map<std::tuple<int, std::string, std::string>, Totals> previous;
  const auto interval_ns =
      static_cast<std::int64_t>(std::min(addresses.interval_s, 86'400.0) * 1e9);  // a day at most
  return each_tcp_link(
      job,
      [&](const TcpLinkRow& s) {
        auto rank = job.ranks.find(s.rank);
        if (rank == job.ranks.end() || s.wall_ns > job.until_wall) return;
        auto peer_host = addresses.hosts.find(s.peer_address);
        if (peer_host == addresses.hosts.end() || peer_host->second < 0 ||
            peer_host->second == rank->second.host || loopback(s.peer_address))
          return;
        const Totals total{s.data_segs_out, s.retrans_segs,    s.dsack_dups, s.bytes_acked,
                           s.busy_us,       s.rwnd_limited_us, s.wall_ns};
        Totals& last = previous[{s.rank, s.local_address, s.peer_address}];
        // Totals only grow; one that fell is a file written by something else: start over.
        if (total.segments < last.segments || total.resent < last.resent ||
            total.duplicates < last.duplicates || total.bytes < last.bytes ||
            total.busy_us < last.busy_us || total.rwnd_limited_us < last.rwnd_limited_us)
          last = Totals{};
        TcpRead r{.wall_ns = s.wall_ns,
                  .interval_ns = last.wall_ns > 0 ? std::min(s.wall_ns - last.wall_ns, interval_ns)
                                                  : interval_ns,
                  .from = rank->second.host,
                  .to = peer_host->second,
                  .segments = total.segments - last.segments,
                  .resent = total.resent - last.resent,
                  .duplicates = total.duplicates - last.duplicates,
                  .bytes = total.bytes - last.bytes};
        if (total.busy_us >= 0 && total.rwnd_limited_us >= 0) {
          const std::int64_t busy = total.busy_us - std::max<std::int64_t>(last.busy_us, 0);
          const std::int64_t full =
              total.rwnd_limited_us - std::max<std::int64_t>(last.rwnd_limited_us, 0);
          r.paced_us = std::clamp<std::int64_t>(busy - full, 0, kMostPacedUs);
          r.notsent_bytes = s.notsent_bytes;
        }
        last = total;
        read(r);
      },
      error);
}

}  // namespace

bool read_tcp_span(const Job& job, std::int64_t counted_since, TcpSpan& span, std::string& error) {
  if (!read_tcp_addresses(job, span.addresses, error)) return false;
  if (span.addresses.hosts.empty()) return true;
  return each_tcp_read(
      job, span.addresses,
      [&](const TcpRead& r) {
        if (r.wall_ns < counted_since) return;
        span.first_counted = std::min(span.first_counted, r.wall_ns);
        span.pairs[{r.from, r.to}].push_back(r);
      },
      error);
}

std::vector<TcpLink> tcp_links_of(const Job& job, const TcpSpan& span) {
  std::vector<TcpLink> links;
  links.reserve(span.pairs.size());
  for (const auto& [pair, reads] : span.pairs)
    links.push_back({.from = job.hosts[static_cast<std::size_t>(pair.first)],
                     .to = job.hosts[static_cast<std::size_t>(pair.second)]});
  return links;
}

void name_tcp_subjects(const Job& job, const std::vector<Finding>& findings, int host,
                       const std::vector<std::pair<int, int>>& host_directions,
                       const std::vector<std::pair<int, int>>& found,
                       const std::function<bool(const std::vector<std::pair<int, int>>&)>& awaits,
                       std::vector<AwaitingLink>& awaiting_hosts,
                       const std::function<void(const TcpSubject&)>& add) {
  const auto host_name = [&](int h) { return job.hosts[static_cast<std::size_t>(h)]; };
  if (host >= 0) {
    bool into = false, out_of = false;
    for (const auto& [from, to] : host_directions) (to == host ? into : out_of) = true;
    add({.subject = "host " + host_name(host),
         .directions = host_directions,
         .network = NetworkSubject{.host = host_name(host)},
         .where = into && out_of ? "to and from it" : (into ? "to it" : "from it")});
    return;
  }
  const NamedNetworkSubjects named = named_network_subjects(findings);
  std::set<std::string> subjects;
  for (const Finding& f : findings) subjects.insert(f.subject);
  for (const auto& [from, to] : found) {
    const bool both = std::find(found.begin(), found.end(), std::pair{to, from}) != found.end();
    if (both && from > to) continue;  // named once, as a <-> b
    const std::string a = host_name(from), b = host_name(to);
    const std::string subject = "link " + a + (both ? " <-> " : " -> ") + b;
    if (named.names_link(a, b) && !subjects.count(subject)) continue;
    std::vector<std::pair<int, int>> mine = {{from, to}};
    if (both) mine.push_back({to, from});
    if (!subjects.count(subject) && awaits(mine)) {
      awaiting_hosts.push_back({{finding_kind::slow_link, subject}, a, b});
      continue;
    }
    add({.subject = subject,
         .directions = mine,
         .network = NetworkSubject{.from = a, .to = b, .both_directions = both},
         .where = "over it"});
  }
}

void hold_links_at_tcp_awaiting_pairs(bool running, const std::vector<AwaitingLink>& tcp_awaiting,
                                      std::vector<Finding>& findings,
                                      std::vector<ExplainedFinding>& held) {
  if (!running || tcp_awaiting.empty()) return;
  std::erase_if(findings, [&](const Finding& f) {
    if (f.kind != finding_kind::slow_link || f.source == "tcp" || f.from.empty() || f.to.empty())
      return false;
    const bool at_its_hosts =
        std::any_of(tcp_awaiting.begin(), tcp_awaiting.end(), [&](const AwaitingLink& pair) {
          const bool same =
              (pair.from == f.from && pair.to == f.to) || (pair.from == f.to && pair.to == f.from);
          return !same &&
                 (pair.from == f.from || pair.to == f.from || pair.from == f.to || pair.to == f.to);
        });
    if (at_its_hosts) held.push_back({f.kind, f.subject});
    return at_its_hosts;
  });
}

}  // namespace commtap::analyzer
