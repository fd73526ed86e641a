#include "analyzer/health.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/findings/statistics.hpp"
#include "analyzer/trace/reader_pool.hpp"
#include "analyzer/trace/recent_rows.hpp"
#include "analyzer/trace/report_inputs.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

namespace fs = std::filesystem;

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
    same->evidence.also = std::make_shared<const FindingEvidence>(std::move(f.evidence));
    same->also_source = f.source;
  }
  findings = std::move(merged);
}

// One fault, one finding: a slow link at a host that a network finding names already (its NIC,
// its lost packets) is that host's fault seen on one of its pairs, not a second one. The link
// goes into the host's evidence (`links`).
void absorb_links_into_hosts(std::vector<Finding>& findings) {
  for (Finding& host : findings) {
    if (host.kind != finding_kind::slow_host_network) continue;
    std::erase_if(findings, [&](const Finding& link) {
      if (link.kind != finding_kind::slow_link || (link.from != host.host && link.to != host.host))
        return false;
      host.evidence.absorbed_links.push_back(link.subject);
      return true;
    });
  }
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

// How much more of its time a host must be held off the CPU or throttled than the others for
// that, not the messages it waits for, to be the cause of its lateness: a rank found slow by its
// change, since the change; a stalled host with a network finding that stands, against the other
// hosts' median.
constexpr double kHeldOffMoreShare = 0.10;

// A host whose process was held off the CPU in the latest window receives late (its receives
// complete when it runs again), answers probes late and sends late: its links and its network
// read slow, and the stall is the cause. Those findings are left out (listed in the evidence),
// and it no longer counts as a delayed host. Lost packets are the exception: the kernel counts
// them whether or not the process runs. So are the link probes where they record the leaders'
// held times (version 13): each measurement is judged on what is left once the time its
// messages may have waited off the CPU is taken out, so a link they find slow is slow with the
// stall accounted for (an NPB CG link +4 ms at load 6, named by the probes at 3 ms against
// 16 us while the job ran, was dropped after it: its rank 0 was held off 25-30% of its last
// 2 s; docs/faults.md, sweep 35).
//
// A host its own cgroup CPU limit held through the latest window (HostLimits) sends, receives
// and answers late the same way, whether or not the writer's ticks show it held off (NPB LU's
// host at 15 ms of CPU per 100 ms was throttled 57% of each second and held off 23%, and its
// messages out named `slow_link ctap1 -> ctap3` beside its slow_host, docs/faults.md sweep
// 54). The probes and the stalled transfers account for the limit measurement by measurement,
// and the kernel's losses are no process's: those stand.
void leave_out_what_held_hosts_explain(const Job& job, const HealthOptions& options,
                                       const HostLimits& limits, std::vector<Finding>& findings,
                                       JobEvidence& evidence) {
  const std::map<std::string, double>& stalled = evidence.stalls.stalled;
  const std::int64_t now = static_cast<std::int64_t>(job.now_wall);
  const std::set<std::string> limited =
      limits.held_through(now - static_cast<std::int64_t>(options.window_s * 1e9), now);
  if (stalled.empty() && limited.empty()) return;
  auto accounted = [&](const std::string& source, bool by_limit) {
    return source == "tcp" || (source == "probes" && (by_limit || evidence.probes.held_recorded)) ||
           (source == "stalls" && by_limit);
  };
  std::erase_if(findings, [&](const Finding& f) {
    const bool network =
        f.kind == finding_kind::slow_link || f.kind == finding_kind::slow_host_network;
    if (!network) return false;
    // A link into or out of a stalled host that stands apart from the host's other pairs
    // that way is not the stall's (MessageLinkEvidence::apart_at).
    const auto* link = std::get_if<MessageLinkEvidence>(&f.evidence.rule);
    auto apart_at = [&](const std::string& host) {
      return link != nullptr &&
             std::find(link->apart_at.begin(), link->apart_at.end(), host) != link->apart_at.end();
    };
    // A limit is not judged by how the host's pairs stand apart: it holds a sender in the
    // middle of its transfers, and slows its large messages to one peer more than its small
    // ones to the others (the LU host's pair out to ctap3 read slow, apart from its others).
    auto explains = [&](const std::string& host) {
      if (host.empty()) return false;
      const bool held = stalled.count(host) > 0 && !apart_at(host) && !accounted(f.source, false) &&
                        !accounted(f.also_source, false);
      const bool limit =
          limited.count(host) > 0 && !accounted(f.source, true) && !accounted(f.also_source, true);
      return held || limit;
    };
    const bool explained = explains(f.host) || explains(f.from) || explains(f.to);
    if (explained) evidence.explained_by_stalls.push_back({f.kind, f.subject});
    return explained;
  });
  // A stalled host whose network finding stands (the probes took its held times out, the kernel
  // counted its losses, or a link stands apart from its other pairs) still waits for that
  // network, and stays delayed unless it is held off kHeldOffMoreShare more than the other hosts'
  // median: the find_stalled_hosts bar (5% of the time and 3 times the others) is low enough to
  // set aside whatever a stall may explain, and a link's receiver crosses it on a loaded machine.
  // A halo's ctap3 behind a delayed `ctap2 -> ctap3`, held off 6% of a window against 1% for the
  // others, was named `slow_host ctap3` by its lateness beside the link (docs/faults.md sweep
  // 56 B); ranks stopped by a SIGSTOP duty cycle were held off 56-64% of the time (sweep 57).
  auto on_standing_network_finding = [&](const std::string& host) {
    return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) {
      return (f.kind == finding_kind::slow_link || f.kind == finding_kind::slow_host_network) &&
             (f.host == host || f.from == host || f.to == host);
    });
  };
  auto held_off_apart = [&](const std::string& host) {
    std::vector<double> others;
    for (const auto& [other, share] : evidence.stalls.shares)
      if (other != host) others.push_back(share);
    return others.empty() || stalled.at(host) >= median_of(others) + kHeldOffMoreShare;
  };
  std::erase_if(evidence.delayed_hosts, [&](const std::string& host) {
    if (limited.count(host) > 0) return true;
    return stalled.count(host) > 0 && (!on_standing_network_finding(host) || held_off_apart(host));
  });
}

bool analyze_files(const HealthOptions& options, JobHealth& health, Job& job, ReportInputs* report,
                   std::string& error) {
  if (!load_facts(job, options, error)) return false;
  set_read_horizon(job, options);
  health.job_id = job.job_id;
  health.ranks = static_cast<int>(job.ranks.size());
  health.hosts = static_cast<int>(job.hosts.size());
  health.now_ns = job.now_wall;
  for (const auto& [number, r] : job.ranks) health.running |= r.ended_by == "running";
  JobEvidence& evidence = health.evidence;
  evidence.clocks.method = job.clock_method.describe();
  if (job.clock_method.collective_ranks + job.clock_method.host_ranks > 0)
    evidence.clocks.collective_error_us = job.clock_method.error_ns / 1e3;
  std::vector<Finding>& findings = health.findings;
  detect_hangs(job, options, findings);
  // Each rank's time second by second, for the three rules that read it, and the seconds in which
  // a host's own CPU limit held it, for the probes and the held hosts below.
  JobTimes times;
  if (!read_bin_times(job, since_wall_ns(job, options), times, error) ||
      !find_stalled_hosts(job, options, evidence.stalls, error) ||
      !detect_slow_nodes(job, options, times, findings, health.instances, evidence.lateness,
                         evidence.unproven, error))
    return false;
  const HostLimits limits(job, times);
  // The network side: the messages' one-way times need the hosts' clocks corrected first; the
  // probes read which direction the messages found slow; the TCP counters and the stalls then
  // name only what the others have not.
  {
    JoinedMessages messages;
    if (!join_messages(job, options, messages, error) ||
        !align_host_clocks(job, options, messages.between_hosts, evidence.clocks, error))
      return false;
    health.messages = messages.joined;
    detect_slow_links(job, options, messages.between_hosts, evidence.clocks, findings,
                      evidence.messages, evidence.delayed_hosts);
    evidence.unproven.insert(evidence.unproven.end(), evidence.messages.unproven.begin(),
                             evidence.messages.unproven.end());
  }
  if (!detect_probed_links(job, options, limits, evidence.messages, evidence.clocks, findings,
                           evidence.probes, evidence.delayed_hosts, error))
    return false;
  {
    // The stall span's TCP counters, read once for both rules that judge them.
    TcpSpan tcp;
    const std::int64_t counted_since =
        std::max(static_cast<std::int64_t>(job.now_wall) - stall_span_ns(options),
                 since_wall_ns(job, options));
    if (!read_tcp_span(job, counted_since, tcp, error)) return false;
    evidence.tcp_links = tcp_links_of(job, tcp);
    const std::vector<std::pair<int, int>> rate_limited =
        detect_link_rates(job, options, tcp, findings, evidence.tcp_links,
                          evidence.tcp_awaiting_hosts, evidence.delayed_hosts);
    detect_lost_packets(job, options, tcp, rate_limited, findings, evidence.tcp_links,
                        evidence.tcp_awaiting_hosts, evidence.delayed_hosts);
  }
  if (!detect_stalled_links(job, options, evidence.messages.stalls, evidence.probes, findings,
                            error) ||
      !detect_degradation(job, options, findings, error))
    return false;
  hold_links_at_probed_hosts(job, health.running, evidence.probes, findings);
  hold_links_at_tcp_awaiting_pairs(health.running, evidence.tcp_awaiting_hosts, findings,
                                   evidence.held_for_tcp_pairs);
  merge_same_subject(findings);
  absorb_links_into_hosts(findings);
  leave_out_what_held_hosts_explain(job, options, limits, findings, evidence);
  // A host that receives slow messages arrives late at the next collective because it waits for
  // them: the network finding explains it, so no compute-side finding is made for it. Except one
  // found by its change whose CPU shows it: held off the CPU (the writer's ticks) or throttled by
  // its cgroup limit 10 points or more of the time more since the change. Waiting for messages
  // holds no process off the CPU, while a host stopped half of every 20 ms sends late and
  // receives late and its pairs read suspect: NPB BT's, held off 0.16-0.43 of each second
  // before and 0.52-0.64 after, was named so until, in the analysis after the job, one of its
  // pairs read suspect and took the finding away (docs/faults.md sweep 48). A link's sender whose
  // own share rose as its messages slowed, held off no more, is still left out.
  const std::vector<std::string>& delayed = evidence.delayed_hosts;
  auto held_off_more = [](const Finding& f) {
    const auto* change = std::get_if<RankChangeEvidence>(&f.evidence.rule);
    if (change == nullptr) return false;
    double rise = change->held_share_after - change->held_share_before;
    if (change->throttled_share_before && change->throttled_share_after)
      rise = std::max(rise, *change->throttled_share_after - *change->throttled_share_before);
    return rise >= kHeldOffMoreShare;
  };
  std::erase_if(findings, [&](const Finding& f) {
    if (f.kind != finding_kind::slow_host && f.kind != finding_kind::slow_rank) return false;
    if (held_off_more(f)) return false;
    return std::find(delayed.begin(), delayed.end(), f.host) != delayed.end();
  });
  cost_network_findings(job, options, times, findings);
  // A call that became slower because everyone now waits for a slow, stuck or lost rank, host or
  // link is that finding's consequence, not a second problem: the cause is reported alone.
  const bool explained = std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.kind != finding_kind::degradation;
  });
  if (explained)
    std::erase_if(findings, [](const Finding& f) { return f.kind == finding_kind::degradation; });
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.kind != b.kind) return kind_order(a.kind) < kind_order(b.kind);
    return a.strength > b.strength;
  });
  evidence.hosts = job.hosts;
  // The report's time axes start at the job's start; its aggregates come in windows of the
  // job's COMMTAP_INTERVAL.
  evidence.start_ns = job.start_wall();
  evidence.interval_s = job.interval_s;
  // Last: the report's windows need the job's start, interval and newest heartbeat, and the
  // files have passed the facts pass's content checks.
  if (report != nullptr)
    read_report_inputs(job.files,
                       {health.evidence.start_ns, health.now_ns, health.evidence.interval_s},
                       *report, job.readers.get());
  return true;
}

}  // namespace

bool analyze_job(const std::string& path, const HealthOptions& options, JobHealth& health,
                 std::string& error, ReportInputs* report) {
  health = JobHealth{};
  health.path = clean_text(path);
  Job job;
  job.path = health.path;
  job.threads = reading_threads(options.threads);
  const bool listed = job_files(path, true, job.files, error, &health.skipped);
  for (std::string& line : health.skipped) line = clean_text(line);
  if (!listed) return false;
  // Every pass reads the files through one pool: each is opened and checked once (ReaderPool).
  job.readers = std::make_shared<ReaderPool>(job.files);
  for (const std::string& file : job.files) {
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) continue;
    const bool trusted = info.st_uid == 0 || info.st_uid == ::geteuid();
    if (health.owner_uid < 0 || !trusted) health.owner_uid = static_cast<long>(info.st_uid);
    if (!trusted) break;
  }
  double seconds = job_time_limit(job.files, options.job_timeout_s);
  const bool share = options.run_share_s > 0 && options.run_share_s < seconds;
  if (share) seconds = options.run_share_s;
  const Deadline deadline(seconds);
  bool ok = false;
  try {
    ok = analyze_files(options, health, job, report, error);
    health.rows_read = job.rows_read;
  } catch (const std::exception& e) {
    // A value no check foresaw must cost this job, never the run over every job.
    error = health.path + ": cannot be analyzed: " + e.what();
  }
  if (!ok && Deadline::passed()) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%.0f", seconds);
    error = health.path + ": not analyzed within its time limit of " + limit +
            (share ? " s (its share of the run's --deadline): " : " s (--job-timeout): ") + error;
  }
  if (!ok) health.findings.clear();
  return ok;
}

}  // namespace commtap::analyzer
