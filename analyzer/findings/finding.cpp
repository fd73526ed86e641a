// analyzer/findings/finding: severities by name, and a finding's share of the avoid list with the
// costs collectives/ weighs routes by.
#include <algorithm>

#include "analyzer/findings/finding.hpp"

namespace commtap::analyzer {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::info:
      return "info";
    case Severity::warning:
      return "warning";
    case Severity::error:
      return "error";
    case Severity::critical:
      return "critical";
  }
  return "?";
}

bool parse_severity(const std::string& text, Severity& severity) {
  for (Severity s : {Severity::info, Severity::warning, Severity::error, Severity::critical})
    if (text == severity_name(s)) {
      severity = s;
      return true;
    }
  return false;
}

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

namespace commtap::analyzer {

const SlowComputeSubject* slow_compute_subject(const FindingEvidence& evidence) {
  if (const auto* lateness = std::get_if<LatenessEvidence>(&evidence.rule)) return &lateness->who;
  if (const auto* change = std::get_if<RankChangeEvidence>(&evidence.rule)) return &change->who;
  return nullptr;
}

SlowComputeSubject* slow_compute_subject(FindingEvidence& evidence) {
  return const_cast<SlowComputeSubject*>(
      slow_compute_subject(static_cast<const FindingEvidence&>(evidence)));
}

}  // namespace commtap::analyzer
