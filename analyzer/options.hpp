// analyzer/options: the analysis's thresholds and limits, which every stage reads (a leaf: it
// includes nothing of the analyzer).
#pragma once

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

}  // namespace commtap::analyzer
