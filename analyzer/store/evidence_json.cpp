// analyzer/store/evidence_json: each rule's evidence struct, field by field, as JSON.
#include "analyzer/store/evidence_json.hpp"

namespace commtap::analyzer {

using json = nlohmann::json;

namespace {

json rule_json(const std::monostate&) {
  return json::object();
}

json rule_json(const HangEvidence& e) {
  return {{"comm_id", e.comm_id},
          {"seq", e.seq},
          {"function", e.function},
          {"stuck_ranks", e.stuck_ranks},
          {"culprits", e.culprits},
          {"waiting_in_calls", e.waiting_in_calls},
          {"members", e.members},
          {"stuck_ns", e.stuck_ns},
          {"survived_wait_ns", e.survived_wait_ns}};
}

json rule_json(const CommunicationHangEvidence& e) {
  return {{"comm_id", e.comm_id},
          {"seq", e.seq},
          {"stuck_ranks", e.stuck_ranks},
          {"stuck_ns", e.stuck_ns},
          {"survived_wait_ns", e.survived_wait_ns}};
}

json rule_json(const NcclHangEvidence& e) {
  json out = {{"comm_id", e.comm_id},         {"seq", e.seq},         {"source", "nccl_progress"},
              {"stuck_ranks", e.stuck_ranks}, {"members", e.members}, {"stuck_ns", e.stuck_ns},
              {"aborted", e.aborted}};
  if (!e.culprits.empty()) {
    out["culprits"] = e.culprits;
    out["waiting_in_calls"] = e.waiting_in_calls;
  }
  return out;
}

json rule_json(const RankLostEvidence& e) {
  return {{"rank", e.rank},
          {"host", e.host},
          {"last_heartbeat_ns", e.last_heartbeat_ns},
          {"silent_ns", e.silent_ns},
          {"last_state", e.last_state},
          {"last_function", e.last_function},
          {"named_by_mpi_errors", e.named_by_mpi_errors}};
}

json rule_json(const MpiErrorEvidence& e) {
  json out = {
      {"rank", e.rank}, {"function", e.function}, {"class", e.error_class}, {"text", e.text}};
  if (e.comm_id != 0) out["comm_id"] = e.comm_id;
  if (e.peer >= 0) out["peer"] = e.peer;
  return out;
}

json rule_json(const CommAbortedEvidence& e) {
  return {{"ranks", e.ranks}, {"calls", e.calls}};
}

void add_subject(const SlowComputeSubject& who, json& out) {
  out["host"] = who.host;
  out["program"] = who.program;
  out["ranks"] = who.ranks;
  if (who.across_jobs)
    out["across_jobs"] = {
        {"same_rank_late_on_other_hosts", who.across_jobs->same_rank_late_on_other_hosts},
        {"same_host_late_with_other_ranks", who.across_jobs->same_host_late_with_other_ranks}};
}

json rule_json(const LatenessEvidence& e) {
  json out = {{"last_fraction", e.last_fraction},
              {"median_lateness_ns", e.median_lateness_ns},
              {"others_lateness_ns", e.others_lateness_ns},
              {"windows_flagged", e.windows_flagged},
              {"windows", e.windows},
              {"cost_share", e.cost_share},
              {"test", evidence_test_json(e.test)}};
  add_subject(e.who, out);
  if (e.suspected) {
    const bool call_sites = *e.suspected == SuspectedStructure::call_sites;
    out["program_structure_suspected"] = call_sites ? "call sites" : "rank 0";
    out["severity_if_the_machine"] = severity_name(e.severity_if_the_machine);
    if (call_sites) out["late_sites"] = e.late_sites;
  }
  out[e.collective_times ? "collective_ns" : "mpi_time_share"] = e.own_collective;
  out[e.collective_times ? "others_collective_ns" : "others_mpi_time_share"] = e.others_collective;
  if (e.stall_share) out["stall_share"] = *e.stall_share;
  if (e.others_stall_share) out["others_stall_share"] = *e.others_stall_share;
  return out;
}

json rule_json(const RankChangeEvidence& e) {
  json out = {{"rule", "change"},
              {"changed_at_s", e.changed_at_s},
              {"excess_before", e.excess_before},
              {"excess_after", e.excess_after},
              {"excess_latest", e.excess_latest},
              {"own_share_before", e.own_share_before},
              {"own_share_after", e.own_share_after},
              {"held_share_before", e.held_share_before},
              {"held_share_after", e.held_share_after},
              {"cost_share", e.cost_share},
              {"cost_from", e.cost_from_progress ? "progress" : "others_waiting"},
              {"test", evidence_test_json(e.test)}};
  if (e.throttled_share_before) out["throttled_share_before"] = *e.throttled_share_before;
  if (e.throttled_share_after) out["throttled_share_after"] = *e.throttled_share_after;
  add_subject(e.who, out);
  return out;
}

json rule_json(const MessageHostEvidence& e) {
  return {{"host", e.host},
          {"median_latency_ns", e.median_latency_ns},
          {"others_latency_ns", e.others_latency_ns},
          {"messages", e.messages},
          {"test", evidence_test_json(e.test)}};
}

json rule_json(const MessageLinkEvidence& e) {
  json out = {{"from", e.from},
              {"to", e.to},
              {"both_directions", e.both_directions},
              {"median_latency_ns", e.median_latency_ns},
              {"baseline_ns", e.baseline_ns},
              {"ratio", e.ratio},
              {"recent_slow", e.recent_slow},
              {"recent_fast", e.recent_fast},
              {"messages", e.messages},
              {"test", evidence_test_json(e.test)}};
  // Only where some were: files before version 12 have none.
  if (e.recent_censored > 0) out["recent_censored"] = e.recent_censored;
  if (e.slow_since_s > 0) {
    out["slow_since_s"] = e.slow_since_s;
    out["since_slow"] = e.since_slow;
    out["since_fast"] = e.since_fast;
  }
  out["apart_at"] = e.apart_at;
  return out;
}

json rule_json(const ProbedHostEvidence& e) {
  json out = {{"host", e.host},
              {"source", "probes"},
              {"test", evidence_test_json(e.test)},
              {"latency_ns", e.latency_ns},
              {"mb_per_s", e.mb_per_s},
              {"baseline_latency_ns", e.baseline_latency_ns},
              {"baseline_mb_per_s", e.baseline_mb_per_s},
              {"rounds", e.rounds}};
  if (e.held_rounds > 0) out["held_rounds"] = e.held_rounds;  // files since version 13
  if (e.alike_rounds > 0) out["alike_rounds"] = e.alike_rounds;
  if (!e.message_links.empty()) out["message_links"] = e.message_links;
  return out;
}

json rule_json(const ProbedLinkEvidence& e) {
  json out = {{"from", e.from},
              {"to", e.to},
              {"source", "probes"},
              {"test", evidence_test_json(e.test)},
              {"both_directions", e.both_directions},
              {"latency_ns", e.latency_ns},
              {"mb_per_s", e.mb_per_s},
              {"baseline_latency_ns", e.baseline_latency_ns},
              {"baseline_mb_per_s", e.baseline_mb_per_s},
              {"slow_rounds", e.slow_rounds},
              {"rounds", e.rounds}};
  if (e.held_rounds > 0) out["held_rounds"] = e.held_rounds;  // files since version 13
  if (e.alike_rounds > 0) out["alike_rounds"] = e.alike_rounds;
  return out;
}

json rule_json(const ProbesAlsoEvidence& e) {
  return {{"source", "probes"},
          {"latency_ns", e.latency_ns},
          {"mb_per_s", e.mb_per_s},
          {"baseline_latency_ns", e.baseline_latency_ns},
          {"baseline_mb_per_s", e.baseline_mb_per_s}};
}

json subject_json(const NetworkSubject& s) {
  if (!s.host.empty()) return {{"host", s.host}};
  return {{"from", s.from}, {"to", s.to}, {"both_directions", s.both_directions}};
}

json rule_json(const LostPacketsEvidence& e) {
  json out = subject_json(e.subject);
  out["source"] = "tcp";
  out["segments"] = e.segments;
  out["lost"] = e.lost;
  out["resent"] = e.resent;
  out["share"] = e.share;
  out["baseline_share"] = e.baseline_share;
  return out;
}

json rule_json(const LinkRateEvidence& e) {
  json out = subject_json(e.subject);
  out["source"] = "tcp_rate";
  out["bytes"] = e.bytes;
  out["paced_ns"] = e.paced_ns;
  out["mb_per_s"] = e.mb_per_s;
  out["baseline_mb_per_s"] = e.baseline_mb_per_s;
  out["links_compared"] = e.links_compared;
  out["moments"] = e.moments;
  return out;
}

json rule_json(const StalledTransfersEvidence& e) {
  json out = subject_json(e.subject);
  out["source"] = "stalls";
  out["stalls"] = e.stalls;
  out["moments"] = e.moments;
  out["longest_ns"] = e.longest_ns;
  out["baseline_ns"] = e.baseline_ns;
  out["stalls_elsewhere"] = e.stalls_elsewhere;
  out["by_scheduler"] = e.by_scheduler;
  out["probe_transfers"] = e.probe_transfers;
  out["probe_transfers_stalled"] = e.probe_transfers_stalled;
  out["steady"] = e.steady;
  json transfers = json::array();
  for (const StalledTransfer& t : e.transfers) {
    json one = {{"from", t.from},
                {"to", t.to},
                {"at_ns", t.at_ns},
                {"ns", t.ns},
                {"baseline_ns", t.baseline_ns},
                {"probe", t.probe},
                {"by_scheduler", t.by_scheduler}};
    for (const auto& [name, end] : {std::pair{"sender", &t.sender}, {"receiver", &t.receiver}})
      if (end->rank >= 0)
        one[name] = {{"rank", end->rank},
                     {"held_off_ns", end->held_off_ns},
                     {"interval_ns", end->interval_ns},
                     {"throttled_ns", end->throttled_ns}};
    transfers.push_back(std::move(one));
  }
  out["transfers"] = std::move(transfers);
  return out;
}

json rule_json(const DegradationEvidence& e) {
  return {{"function", e.function},     {"symbol", e.symbol},
          {"size_class", e.size_class}, {"baseline_ns", e.baseline_ns},
          {"recent_ns", e.recent_ns},   {"windows", e.windows},
          {"calls", e.calls},           {"mix_change", e.mix_change}};
}

}  // namespace

json evidence_test_json(const EvidenceTest& test) {
  return {{"test", "binomial tail bound (Chernoff)"},
          {"observed", test.observed_what},
          {"spacing_s", test.spacing_s},
          {"observations", test.observations},
          {"hits", test.hits},
          {"chance", test.chance},
          {"samples", test.samples},
          {"comparisons", test.comparisons},
          {"p_value", test.p_value()},
          {"false_alarm", test.false_alarm()}};
}

json evidence_json(const FindingEvidence& evidence) {
  json out = std::visit([](const auto& rule) { return rule_json(rule); }, evidence.rule);
  if (evidence.also) out["also"] = evidence_json(*evidence.also);
  for (const std::string& link : evidence.absorbed_links) out["links"].push_back(link);
  if (evidence.job_pace_fall) out["job_pace_fall"] = *evidence.job_pace_fall;
  return out;
}

std::string evidence_text(const FindingEvidence& evidence) {
  return evidence_json(evidence).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace commtap::analyzer
