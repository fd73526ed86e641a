// What `auto` runs for one communicator and one size class, measured in the job itself: the
// library's all-reduce and the cost model's few best forms take turns on the job's own calls
// (a trial), the ranks agree on the times, and a form replaces the library's only where it was
// clearly faster. The model only picks who takes part; the trial decides, and is repeated at
// growing intervals so that a choice follows the network. Internal to collectives/ (its tests
// use it too).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "collectives/collectives.hpp"

namespace commtap::collectives {

// A trial's agreed figures for one contender: the slowest rank's median over the measured
// rounds, and the slowest rank's slowest round (seconds per call).
struct TrialTimes {
  double median_s = 0;
  double slowest_s = 0;
};

// The decision from agreed figures (`times[i]` for `contenders[i]`, the library's first): the
// fastest of commtap's forms by the median where its median is at least 10% below the
// library's and even its slowest round is no slower than the library's median; else native.
// The margin is the measurement's own spread: a form that wins by less than the library's
// rounds differ from each other is not taken. `incumbent`, the form chosen by the trial before,
// stays while it still wins clearly and is within 10% of the fastest.
Algorithm decide(const std::vector<Algorithm>& contenders, const std::vector<TrialTimes>& times,
                 Algorithm incumbent = Algorithm::native);

// The state of one size class on one communicator. Every rank makes the same calls on a
// communicator in the same order with the same sizes, so counting them gives every rank the
// same schedule without a message: the calls of a trial run the contenders in turn, each twice
// in a row with the second call timed, for `rounds` rounds; the last one is followed by agree().
// The first verdict is confirmed 32 calls later; then the next trial starts after an interval
// that doubles from 1,024 calls up to 65,536 (32 calls after a trial where a form read faster
// by the median but not clearly, twice in a row at most). The trials after the first run the
// library's and the forms that read within 30% of the fastest form in the one before.
class SizeTrial {
 public:
  // `contenders`: the library's first, then the forms to try in the first trial (native alone:
  // no trial).
  SizeTrial(std::vector<Algorithm> contenders, int rounds);

  // What the next call of this size class runs.
  Algorithm next() const noexcept;
  // After that call: its time on this rank. True when it was a trial's last call: the caller
  // runs agree() now (collective).
  bool record(double seconds);
  // Collective over `comm` (every rank of it, at the same call): the ranks' figures, the
  // decision, and when the next trial starts. `yield`: the wait tests and yields.
  void agree(MPI_Comm comm, bool yield);

  Algorithm chosen() const noexcept { return chosen_; }
  // The contenders of the trial under way or next.
  const std::vector<Algorithm>& contenders() const noexcept { return contenders_; }
  // The last trial's contenders and their agreed figures.
  const std::vector<Algorithm>& measured() const noexcept { return measured_; }
  int trials() const noexcept { return trials_; }
  // (per contender of measured())
  const std::vector<TrialTimes>& times() const noexcept { return times_; }

 private:
  std::uint64_t trial_calls() const noexcept;

  std::vector<Algorithm> contenders_;
  int rounds_ = 0;
  std::uint64_t calls_ = 0;                   // calls of this size class so far
  std::uint64_t trial_start_ = 0;             // the call that starts the current or next trial
  std::uint64_t interval_ = 1024;             // calls from a trial's end to the next one's start
  int trials_ = 0;                            // trials agreed so far
  int soon_in_a_row_ = 0;                     // unclear trials in a row, each retried soon
  std::vector<std::vector<double>> seconds_;  // this rank's measured rounds, per contender
  std::vector<Algorithm> measured_;
  std::vector<TrialTimes> times_;
  Algorithm chosen_ = Algorithm::native;
};

// The size class of a call of `bytes` (> 0): calls within a factor of two share a trial.
int size_class(MPI_Count bytes) noexcept;

}  // namespace commtap::collectives
