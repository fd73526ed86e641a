// render/text_json: the analysis as text and as JSON (text_json.hpp).
#include "render/text_json.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/store/evidence_json.hpp"

namespace commtap::render {

using namespace commtap::analyzer;

using json = nlohmann::json;

namespace {

// What the analysis found and left out because other evidence explains it, and why.
struct SetAside {
  const ExplainedFinding* finding;
  const char* why;
};
std::vector<SetAside> set_aside(const JobEvidence& evidence) {
  std::vector<SetAside> out;
  for (const ExplainedFinding& f : evidence.explained_by_stalls)
    out.push_back({&f, "a host at its end was held off the CPU"});
  for (const ExplainedFinding& f : evidence.probes.not_confirmed)
    out.push_back({&f, "the link probes found its pairs fine"});
  for (const ExplainedFinding& f : evidence.probes.awaiting_hosts)
    out.push_back({&f, "until its hosts' other pairs are measured fine since it slowed"});
  for (const ExplainedFinding& f : evidence.probes.awaiting_probed_hosts)
    out.push_back({&f, "while the link probes find another pair of its hosts slow"});
  for (const ExplainedFinding& f : evidence.tcp_awaiting_hosts)
    out.push_back(
        {&f, "until its hosts' other pairs have sent enough since it first lost or read slow"});
  for (const ExplainedFinding& f : evidence.held_for_tcp_pairs)
    out.push_back({&f, "while the kernel's TCP counters hold another pair of its hosts"});
  return out;
}

// What the link probes measured, where they ran: the range of the directed host pairs' median
// latencies and throughputs, so that a job whose pairs all read milliseconds (leaders that answer
// a ping only where they next call MPI: docs/faults.md sweep 49) shows that a delay smaller than
// that could not be seen, rather than only "healthy".
std::string probed_links_text(const std::vector<ProbedLink>& links) {
  if (links.empty()) return "";
  double fastest_us = INFINITY, slowest_us = 0, least_mb = INFINITY, most_mb = 0;
  for (const ProbedLink& l : links) {
    fastest_us = std::min(fastest_us, l.latency_us);
    slowest_us = std::max(slowest_us, l.latency_us);
    least_mb = std::min(least_mb, l.mb_per_s);
    most_mb = std::max(most_mb, l.mb_per_s);
  }
  return "  link probes: " + count_text(links.size(), "directed host pair") + ", median latency " +
         ms_text(fastest_us * 1e3) + " to " + ms_text(slowest_us * 1e3) + ", throughput " +
         mb_text(least_mb) + " to " + mb_text(most_mb) + "\n";
}

}  // namespace

std::string health_text(const std::vector<JobHealth>& jobs) {
  std::string out;
  for (const JobHealth& job : jobs) {
    out += "job " + job.job_id + " (" + job.path + "): " + count_text(job.ranks, "rank") + " on " +
           count_text(job.hosts, "host") + ", " + (job.running ? "running" : "ended") + "; " +
           with_commas(job.instances) + " collective instances and " + with_commas(job.messages) +
           " messages compared\n";
    if (job.findings.empty()) out += "  healthy: no findings\n";
    for (const Finding& f : job.findings) {
      std::string severity = severity_name(f.severity);
      for (char& c : severity) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += "  " + severity + " " + f.kind + ": " + f.summary + "\n";
    }
    for (const UnprovenSubject& u : job.evidence.unproven)
      out += "  (not a finding: " + u.subject + " stood out, but " + u.test + ")\n";
    for (const SetAside& a : set_aside(job.evidence))
      out += "  (set aside: " + a.finding->kind + " " + a.finding->subject + ", " + a.why + ")\n";
    out += probed_links_text(job.evidence.probes.links);
  }
  return out;
}

namespace {

// The job's messages per directed host pair (detect_slow_links' matrix).
json links_json(const std::vector<MessageLink>& links) {
  json out = json::array();
  for (const MessageLink& l : links)
    out.push_back({{"from", l.from},
                   {"to", l.to},
                   {"median_us", l.median_us},
                   {"ratio", l.ratio},
                   {"messages", l.messages},
                   {"recent_slow", l.recent_slow},
                   {"recent_fast", l.recent_fast},
                   {"slow", l.slow},
                   {"suspect", l.suspect},
                   {"echo_of_reverse", l.echo_of_reverse}});
  return out;
}

// The link probes' newest rounds per directed host pair (detect_probed_links' matrix).
json probed_links_json(const std::vector<ProbedLink>& links) {
  json out = json::array();
  for (const ProbedLink& l : links)
    out.push_back({{"from", l.from},
                   {"to", l.to},
                   {"latency_us", l.latency_us},
                   {"mb_per_s", l.mb_per_s},
                   {"rounds", l.rounds},
                   {"slow", l.slow}});
  return out;
}

}  // namespace

json health_json(const std::vector<JobHealth>& jobs,
                 const std::vector<UnreadableInput>& unreadable) {
  json out = {{"format", "commtap-health"},
              {"version", 1},
              {"jobs", json::array()},
              {"unreadable", json::array()}};
  for (const UnreadableInput& input : unreadable)
    out["unreadable"].push_back({{"path", input.path}, {"error", input.why}});
  for (const JobHealth& job : jobs) {
    json findings = json::array();
    for (const Finding& f : job.findings)
      findings.push_back({{"kind", f.kind},
                          {"subject", f.subject},
                          {"severity", severity_name(f.severity)},
                          {"summary", f.summary},
                          {"evidence", analyzer::evidence_json(f.evidence)},
                          {"confidence", f.confidence < 0 ? json(nullptr) : json(f.confidence)},
                          {"first_seen_ns", f.first_seen_ns},
                          {"last_seen_ns", f.last_seen_ns}});
    json unproven = json::array();
    for (const UnprovenSubject& u : job.evidence.unproven)
      // Not "kind" and "subject": what reads a report's findings by those keys must not count
      // these.
      unproven.push_back({{"would_be", u.kind},
                          {"for", u.subject},
                          {"false_alarm", u.false_alarm},
                          {"test", u.test}});
    // Keyed as `unproven` is, for the same reason.
    json left_out = json::array();
    for (const SetAside& a : set_aside(job.evidence))
      left_out.push_back(
          {{"would_be", a.finding->kind}, {"for", a.finding->subject}, {"why", a.why}});
    out["jobs"].push_back({{"job_id", job.job_id},
                           {"path", job.path},
                           {"ranks", job.ranks},
                           {"hosts", job.hosts},
                           {"running", job.running},
                           {"now_ns", job.now_ns},
                           {"instances", job.instances},
                           {"messages", job.messages},
                           {"healthy", job.findings.empty()},
                           {"clocks", job.evidence.clocks.method},
                           {"clock_error_us", job.evidence.clocks.collective_error_us
                                                  ? json(*job.evidence.clocks.collective_error_us)
                                                  : json(nullptr)},
                           {"skipped_files", job.skipped},
                           {"findings", findings},
                           {"unproven", unproven},
                           {"set_aside", left_out},
                           {"links", links_json(job.evidence.messages.links)},
                           {"probed_links", probed_links_json(job.evidence.probes.links)}});
  }
  return out;
}

}  // namespace commtap::render
