#include "analyzer/health.hpp"

#include <algorithm>
#include <filesystem>

#include "analyzer/detectors.hpp"
#include "analyzer/trace_files.hpp"
#include "analyzer/untrusted_input.hpp"

namespace commtap::analyzer {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

namespace {

int kind_order(const std::string& kind) {
#define COMMTAP_FINDING_KIND_TEXT(name) std::string(finding_kind::name),
  static const std::vector<std::string> order = {COMMTAP_FINDING_KINDS(COMMTAP_FINDING_KIND_TEXT)};
#undef COMMTAP_FINDING_KIND_TEXT
  auto found = std::find(order.begin(), order.end(), kind);
  return static_cast<int>(found - order.begin());
}

// Two detectors may find the same thing (a slow host's messages and its link probes): one
// finding, the more severe, with the other's summary and evidence added.
void merge_same_subject(std::vector<Finding>& findings) {
  std::vector<Finding> merged;
  for (Finding& f : findings) {
    auto same = std::find_if(merged.begin(), merged.end(), [&](const Finding& m) {
      return m.kind == f.kind && m.subject == f.subject;
    });
    if (same == merged.end()) {
      merged.push_back(std::move(f));
      continue;
    }
    if (f.severity > same->severity) std::swap(*same, f);
    same->summary += "; also " + f.summary.substr(f.subject.size() + 2);
    same->evidence["also"] = f.evidence;
  }
  findings = std::move(merged);
}

}  // namespace

std::vector<std::string> find_jobs(const std::vector<std::string>& paths,
                                   std::vector<UnreadableInput>& unreadable) {
  auto refuse = [&](const std::string& path, const std::string& why) {
    unreadable.push_back({clean_text(path), why});
  };
  std::vector<std::string> jobs;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      jobs.push_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec)) {
      refuse(path, "no such file or directory");
      continue;
    }
    // A directory whose rank files are all unreadable (FIFOs, links) is still a job: it is
    // named as unreadable rather than passed over.
    auto is_job = [](const std::string& directory) {
      std::vector<std::string> files, skipped;
      std::string ignored;
      return job_files(directory, true, files, ignored, &skipped) || !skipped.empty();
    };
    if (is_job(path)) {
      jobs.push_back(path);
      continue;
    }
    // A directory of job directories (what cron scans).
    std::vector<std::string> children;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      std::error_code entry_ec;
      const bool link = entry.is_symlink(entry_ec);
      if (!entry.is_directory(entry_ec)) continue;
      const std::string child = entry.path().string();
      if (link) {
        const InputFile in = check_input_file(child, /*directory=*/true);
        if (!in.why_not.empty()) {
          refuse(child, "skipped: " + in.why_not);
          continue;
        }
      }
      if (is_job(child)) children.push_back(child);
    }
    std::sort(children.begin(), children.end());
    if (children.empty()) refuse(path, "no job directories or trace databases in it");
    jobs.insert(jobs.end(), children.begin(), children.end());
  }
  return jobs;
}

namespace {

bool analyze_files(const HealthOptions& options, JobHealth& health, Job& job, std::string& error) {
  if (!load_facts(job, options, error)) return false;
  health.job_id = job.job_id;
  health.ranks = static_cast<int>(job.ranks.size());
  health.hosts = static_cast<int>(job.hosts.size());
  health.now_ns = job.now_wall;
  for (const auto& [number, r] : job.ranks) health.running |= r.ended_by == "running";
  detect_hangs(job, options, health.findings);
  if (!find_stalled_hosts(job, options, health, error) ||
      !detect_slow_nodes(job, options, health, error) ||
      !detect_slow_links(job, options, health, error) ||
      !detect_probed_links(job, options, health, error) ||
      !detect_lost_packets(job, options, health, error) ||
      !detect_stalled_links(job, options, health, error) ||
      !detect_degradation(job, options, health, error))
    return false;
  merge_same_subject(health.findings);
  // A host whose process was held off the CPU in the latest window receives late (its receives
  // complete when it runs again), answers probes late and sends late: its links and its network
  // read slow, and the stall is the cause. Those findings are left out (listed in details), and
  // it counts as no delayed host below. Lost packets are the exception: the kernel counts them
  // whether or not the process runs.
  if (health.details.contains("stalled_hosts")) {
    const json stalled = health.details["stalled_hosts"];
    json explained = json::array();
    std::erase_if(health.findings, [&](const Finding& f) {
      const bool network =
          (f.kind == finding_kind::slow_link || f.kind == finding_kind::slow_host_network) &&
          f.evidence.value("source", "") != "tcp" &&
          !(f.evidence.contains("also") && f.evidence["also"].value("source", "") == "tcp");
      const bool touches = stalled.contains(f.evidence.value("host", "")) ||
                           stalled.contains(f.evidence.value("from", "")) ||
                           stalled.contains(f.evidence.value("to", ""));
      if (network && touches) explained.push_back({{"kind", f.kind}, {"subject", f.subject}});
      return network && touches;
    });
    if (!explained.empty()) health.details["explained_by_stalls"] = explained;
    if (health.details.contains("delayed_hosts")) {
      json& delayed = health.details["delayed_hosts"];
      json kept = json::array();
      for (const json& host : delayed)
        if (!stalled.contains(host.get<std::string>())) kept.push_back(host);
      delayed = kept;
    }
  }
  // A host that receives slow messages arrives late at the next collective because it waits for
  // them: the network finding explains it, so no compute-side finding is made for it.
  if (health.details.contains("delayed_hosts")) {
    const auto delayed = health.details["delayed_hosts"];
    std::erase_if(health.findings, [&](const Finding& f) {
      if (f.kind != finding_kind::slow_host && f.kind != finding_kind::slow_rank) return false;
      const std::string host = f.evidence.value("host", "");
      return std::find(delayed.begin(), delayed.end(), host) != delayed.end();
    });
  }
  // A call that became slower because everyone now waits for a slow, stuck or lost rank, host or
  // link is that finding's consequence, not a second problem: the cause is reported alone.
  const bool explained =
      std::any_of(health.findings.begin(), health.findings.end(),
                  [](const Finding& f) { return f.kind != finding_kind::degradation; });
  if (explained)
    std::erase_if(health.findings,
                  [](const Finding& f) { return f.kind == finding_kind::degradation; });
  std::stable_sort(health.findings.begin(), health.findings.end(),
                   [](const Finding& a, const Finding& b) {
                     if (a.severity != b.severity) return a.severity > b.severity;
                     if (a.kind != b.kind) return kind_order(a.kind) < kind_order(b.kind);
                     return a.strength > b.strength;
                   });
  json hosts = json::array();
  for (const std::string& h : job.hosts) hosts.push_back(h);
  health.details["hosts"] = hosts;
  // The report's time axes start at the job's start; its aggregates come in windows of the
  // job's COMMTAP_INTERVAL.
  health.details["start_ns"] = job.start_wall();
  health.details["interval_s"] = job.interval_s;
  return true;
}

}  // namespace

bool analyze_job(const std::string& path, const HealthOptions& options, JobHealth& health,
                 std::string& error) {
  health = JobHealth{};
  health.path = clean_text(path);
  Job job;
  job.path = health.path;
  const bool listed = job_files(path, true, job.files, error, &health.skipped);
  for (std::string& line : health.skipped) line = clean_text(line);
  if (!listed) return false;
  const double seconds = job_time_limit(job.files, options.job_timeout_s);
  const Deadline deadline(seconds);
  bool ok = false;
  try {
    ok = analyze_files(options, health, job, error);
  } catch (const std::exception& e) {
    // A value no check foresaw must cost this job, never the run over every job.
    error = health.path + ": cannot be analyzed: " + e.what();
  }
  if (!ok && Deadline::passed()) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%.0f", seconds);
    error = health.path + ": not analyzed within its time limit of " + limit +
            " s (--job-timeout): " + error;
  }
  if (!ok) health.findings.clear();
  return ok;
}

}  // namespace commtap::analyzer
