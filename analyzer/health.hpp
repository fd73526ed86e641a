// analyzer/health: C4-style health analysis of trace databases (`commtap analyze`, `commtap
// report`); render/ turns its results into text, JSON, HTML and other tools' formats. Each job is
// read rank by rank, in a few streaming passes, so memory grows with the number of collective
// instances and ranks, not with instances x ranks.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/job_evidence.hpp"
#include "avoid_list/avoid_list.hpp"

namespace commtap::analyzer {

// Thresholds of the detectors; the defaults are documented in docs/analyzer.md.
struct HealthOptions {
  double hang_after_s = 3.0;     // in the same collective this long: stuck
  double stale_after_s = 0.0;    // no heartbeat for this long while others go on: lost (0: three
                                 // of the job's COMMTAP_INTERVAL plus 1 s)
  double since_s = 0.0;          // only data of the last this many seconds (0: all)
  double at_s = 0.0;             // analyze the job as it stood this many seconds after its
                                 // start, ignoring later rows (0: as it is now)
  double window_s = 10.0;        // persistence windows
  double persistence = 0.6;      // flagged in at least this fraction of the eligible windows
  int min_instances = 8;         // a window needs this many aligned instances to count
  double min_lateness_ms = 1.0;  // slow rank: median lateness at least this ...
  double lateness_factor = 5.0;  // ... and this many times the ranks' lower quartile ...
  double last_fraction = 0.4;    // ... and its host last to arrive this often
  // The evidence a finding needs (evidence.hpp): the chance that a healthy job shows it, over
  // every subject the job's analysis tested, at most this. An ERROR needs a thousand times
  // less, and an effect that costs the job at least error_cost_share of its time (slow ranks
  // and hosts); a cron user pages someone on an ERROR.
  double false_alarm_rate = 1e-3;
  double error_cost_share = 0.10;
  double link_factor = 3.0;        // slow link: median latency this many times the baseline
  double min_link_delay_us = 200;  // ... and at least this much more
  // Link probes: a pair's throughput this many times below the baseline is slow (higher than
  // link_factor: probes on a busy 2-core VM spread by ~3x between healthy pairs).
  double probe_throughput_factor = 10.0;
  double host_cell_fraction = 0.66;  // slow host (network): this fraction of its links slow
  double degradation_factor = 2.0;   // degradation: recent windows this much slower ...
  double min_degradation_us = 50;    // ... by at least this much per call
  int degradation_windows = 3;       // ... in each of this many latest aggregate windows
  // Reading and analyzing one job stops after this many seconds, and the job counts as
  // unreadable (0: default_job_seconds of its files' size, untrusted_input.hpp).
  double job_timeout_s = 0;
  // Set by a run over many jobs with a deadline (`analyze --deadline`): this job's share of the
  // run's time left, when shorter than job_timeout_s's limit (0: none).
  double run_share_s = 0;
  // Threads that read a job's files (0: one per core). The findings are the same whatever it is.
  int threads = 0;
  // With since_s, read every row anyway (and filter), rather than only the recent ones: the
  // findings are the same (recent_rows.hpp); for comparisons and benchmarks.
  bool read_all = false;
};

enum class Severity { info, warning, error, critical };
const char* severity_name(Severity severity);
bool parse_severity(const std::string& text, Severity& severity);

// Every kind of finding, most urgent first: reports and stores list them in this order.
#define COMMTAP_FINDING_KINDS(X) \
  X(hang)                        \
  X(communication_hang)          \
  X(rank_lost)                   \
  X(comm_aborted)                \
  X(slow_host)                   \
  X(slow_host_network)           \
  X(slow_link)                   \
  X(slow_rank)                   \
  X(degradation)
namespace finding_kind {
#define COMMTAP_FINDING_KIND_NAME(name) inline constexpr char name[] = #name;
COMMTAP_FINDING_KINDS(COMMTAP_FINDING_KIND_NAME)
#undef COMMTAP_FINDING_KIND_NAME
}  // namespace finding_kind

struct Finding {
  std::string kind;     // one of finding_kind
  std::string subject;  // "host h2", "rank 3 (h1)", "link h1 -> h2", "comm 1", ...
  Severity severity = Severity::warning;
  std::string summary;  // one line with the evidence in numbers
  nlohmann::json evidence = nlohmann::json::object();
  std::uint64_t first_seen_ns = 0;  // wall clock, from the data
  std::uint64_t last_seen_ns = 0;
  // How far from healthy (a ratio to the baseline): of several findings of one kind and
  // severity, the clearest comes first. Not stored or printed.
  double strength = 0;
  // One minus the chance that a healthy job shows this evidence (evidence.hpp; the test is in
  // `evidence.test`); -1 where the rule is not a test against chance (a hang, a lost rank).
  double confidence = -1;
  // What the later stages read of it (the network detectors, health.cpp), also in `evidence`:
  // the host it names, or its link's ends; the data its rule read ("probes", "tcp", "stalls";
  // empty: the job's messages or collectives); and that of another rule's finding of the same
  // subject merged into it (`evidence.also`).
  std::string host, from, to, source, also_source;
  // What a later job's collectives route around because of it (slow_host, slow_host_network:
  // the host; slow_link: its directed link or links and their costs), stored next to the
  // findings (avoid_list/). Not printed.
  avoid_list::AvoidList avoid;
};

// A slow host's share of the avoid list.
avoid_list::AvoidList avoid_host(const std::string& host);
// A slow link's: from -> to, and to -> from too where `both_directions`, each costing
// `extra_latency_ns` (clamped at 0) more per message and, where both throughputs are known and
// the link's is below the baseline's, the difference of their times per byte.
avoid_list::AvoidList avoid_link(const std::string& from, const std::string& to,
                                 bool both_directions, double extra_latency_ns, double mb_per_s = 0,
                                 double baseline_mb_per_s = 0);

struct JobHealth {
  std::string job_id;
  std::string path;
  int ranks = 0;
  int hosts = 0;
  bool running = false;              // some rank has not ended
  std::uint64_t now_ns = 0;          // wall clock of the newest heartbeat: "now" for the detectors
  std::uint64_t instances = 0;       // aligned collective instances looked at
  std::uint64_t messages = 0;        // joined transfers looked at
  std::uint64_t rows_read = 0;       // rows the analysis read from the job's files
  std::vector<Finding> findings;     // most severe first
  std::vector<std::string> skipped;  // files of the job directory left out, and why
  // Who wrote the job's files: their owner (a user's other than root's or the analyzing user's
  // where the files have several owners); -1 where not known (taken as the analyzing user's).
  // Decides whether its findings' hosts may enter the store's avoid list (store_findings).
  long owner_uid = -1;
  JobEvidence evidence;  // what the detectors measured, for the report and --json
};

// The jobs named by `paths`: a job directory (rank-<N>.db or job.db), a database file, or a
// directory whose subdirectories are jobs. Unreadable paths go to `unreadable`. A subdirectory that
// is a symbolic link is followed only as check_input_file (untrusted_input.hpp) follows links.
struct UnreadableInput {
  std::string path, why;  // clean_text, like everything taken from a job directory
};
std::vector<std::string> find_jobs(const std::vector<std::string>& paths,
                                   std::vector<UnreadableInput>& unreadable);

struct ReportInputs;

// Analyzes one job, in isolation: unreadable, corrupt or hostile input, an exception, or reading
// past options.job_timeout_s make it false with `error` naming the job and why, and nothing
// else. health.path and every string taken from the files are clean_text. With `report`, also
// reads what `commtap report` draws besides the findings (report_inputs.hpp) from the same
// files, within the same time limit; its failure costs only those charts (`report->error`).
bool analyze_job(const std::string& path, const HealthOptions& options, JobHealth& health,
                 std::string& error, ReportInputs* report = nullptr);

// Records findings in `store` (created if missing) without duplicates across runs: a finding
// seen again updates last_seen; the job's findings not seen in this run become inactive.
// The hosts and links its findings name enter the store's avoid list (which later jobs route
// around) only from trusted traces: files owned by root or by the user running the analysis. A
// host or link named by another user's job enters once jobs of at least two different owners
// named it within the last day (or a trusted trace did): one user's forged trace (`host` set to
// another node's name) cannot take a node out of everyone's collectives. Who named what is kept in
// the store's `avoid_witnesses` table.
bool store_findings(const std::string& store, const std::vector<JobHealth>& jobs,
                    std::string& error);

// Weighs the jobs' slow_rank and slow_host findings against the other jobs of the same program
// in `store` (a missing or unreadable store changes nothing): lateness that follows the rank
// number onto other hosts is the program's own imbalance (rank 0 reads the input), and its
// ERROR becomes a warning; lateness that stays with the host as the ranks change is the machine.
// The evidence says which (`across_jobs`).
void weigh_against_other_jobs(const std::string& store, std::vector<JobHealth>& jobs);

}  // namespace commtap::analyzer
