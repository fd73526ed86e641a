// analyzer/store/findings_store: the findings of many runs over many jobs, kept in one SQLite
// database (`commtap analyze --store`): what cron's alerts, the avoid list and the weighing of a
// job against the program's other jobs read.
#pragma once

#include <string>
#include <vector>

#include "analyzer/health.hpp"

namespace commtap::analyzer {

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
