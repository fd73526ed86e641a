// analyzer/finding_avoid: a finding's share of the avoid list (health.hpp), with the costs
// collectives/ weighs routes by.
#include <algorithm>

#include "analyzer/health.hpp"

namespace commtap::analyzer {

avoid_list::AvoidList avoid_host(const std::string& host) {
  avoid_list::AvoidList list;
  list.hosts.push_back(host);
  return list;
}

avoid_list::AvoidList avoid_link(const std::string& from, const std::string& to,
                                 bool both_directions, double extra_latency_ns, double mb_per_s,
                                 double baseline_mb_per_s) {
  const double latency_s = std::max(0.0, extra_latency_ns) * 1e-9;
  // Time per byte is 1e-6 / MB/s; a link measured no slower than the baseline costs nothing more.
  const double per_byte_s = mb_per_s > 0 && baseline_mb_per_s > mb_per_s
                                ? (1 / mb_per_s - 1 / baseline_mb_per_s) * 1e-6
                                : 0.0;
  avoid_list::AvoidList list;
  list.links.push_back({from, to, latency_s, per_byte_s});
  if (both_directions) list.links.push_back({to, from, latency_s, per_byte_s});
  return list;
}

}  // namespace commtap::analyzer
