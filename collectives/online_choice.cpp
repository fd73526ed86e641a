// The trials of `auto`: the contenders in turn on the job's own calls, the ranks' times agreed
// by one small all-reduce, and the decision (online_choice.hpp).
#include "collectives/online_choice.hpp"

#include <algorithm>
#include <bit>

#include "world/world.hpp"

namespace commtap::collectives {

namespace {

constexpr std::uint64_t kLongestInterval = 65536;
constexpr std::uint64_t kSoonAfter = 32;
constexpr int kSoonInARow = 2;

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  return values.size() % 2 ? values[half] : (values[half - 1] + values[half]) / 2;
}

}  // namespace

Algorithm decide(const std::vector<Algorithm>& contenders, const std::vector<TrialTimes>& times,
                 Algorithm incumbent) {
  if (contenders.size() < 2 || times.size() != contenders.size()) return Algorithm::native;
  const TrialTimes& library = times[0];
  auto clear_win = [&](std::size_t i) {
    return times[i].median_s <= 0.9 * library.median_s && times[i].slowest_s <= library.median_s;
  };
  std::size_t best = 1;
  for (std::size_t i = 2; i < contenders.size(); ++i)
    if (times[i].median_s < times[best].median_s) best = i;
  // A form chosen before stays while it still wins clearly and is within 10% of the best: two
  // forms that read alike do not take turns (each change of form changes the results' last
  // bits).
  for (std::size_t i = 1; i < contenders.size(); ++i)
    if (contenders[i] == incumbent && clear_win(i) &&
        times[i].median_s <= 1.1 * times[best].median_s)
      return incumbent;
  return clear_win(best) ? contenders[best] : Algorithm::native;
}

SizeTrial::SizeTrial(std::vector<Algorithm> contenders, int rounds)
    : contenders_(std::move(contenders)), rounds_(std::max(1, rounds)) {
  if (contenders_.empty() || contenders_.front() != Algorithm::native)
    contenders_.insert(contenders_.begin(), Algorithm::native);
  seconds_.resize(contenders_.size());
}

std::uint64_t SizeTrial::trial_calls() const noexcept {
  // Native alone has nothing to compare.
  return contenders_.size() < 2 ? 0 : 2 * rounds_ * contenders_.size();
}

Algorithm SizeTrial::next() const noexcept {
  if (calls_ >= trial_start_ && calls_ - trial_start_ < trial_calls())
    return contenders_[(calls_ - trial_start_) / 2 % contenders_.size()];
  return chosen_;
}

bool SizeTrial::record(double seconds) {
  const std::uint64_t in_trial = calls_ - trial_start_;
  const bool measuring = calls_ >= trial_start_ && in_trial < trial_calls();
  ++calls_;
  if (!measuring) return false;
  // Each contender runs twice in a row and the second call is timed: a rank enters it as the
  // contender's own previous call left the ranks, as in a loop of it. Timing a single call would
  // charge it the previous contender's stragglers: ranks that left that one early wait here for
  // the late ones (on the emulated cluster at 8 KiB that read the library's 1.1 ms as 2.5 ms).
  // The first call of each pair also warms up (connections are made on first use).
  if (in_trial % 2 == 1) seconds_[in_trial / 2 % contenders_.size()].push_back(seconds);
  return in_trial + 1 == trial_calls();
}

void SizeTrial::agree(MPI_Comm comm, bool yield) {
  // Per contender: this rank's median and slowest round; the slowest rank's of each, on all.
  std::vector<double> mine, slowest(2 * contenders_.size());
  for (const std::vector<double>& rounds : seconds_) {
    mine.push_back(median_of(rounds));
    mine.push_back(rounds.empty() ? 0 : *std::max_element(rounds.begin(), rounds.end()));
  }
  MPI_Request request;
  PMPI_Iallreduce(mine.data(), slowest.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX,
                  comm, &request);
  world::wait_all(1, &request, yield);
  times_.clear();
  for (std::size_t i = 0; i < contenders_.size(); ++i)
    times_.push_back({slowest[2 * i], slowest[2 * i + 1]});
  chosen_ = decide(contenders_, times_, chosen_);
  measured_ = contenders_;
  ++trials_;
  std::size_t best = 1;
  for (std::size_t i = 2; i < contenders_.size(); ++i)
    if (times_[i].median_s < times_[best].median_s) best = i;
  // The first verdict is confirmed soon: its calls came first at this size, when a form's
  // private communicators and the library's shared-memory segments were new (on the emulated
  // cluster with 8 ranks on 2 cores, the best form read 2.5 ms against 1.5 ms later). So is a
  // form that read faster by the median but not clearly (a round slowed by the machine): it is
  // the faster one, so trying it again costs nothing. Otherwise the intervals double.
  const bool unclear = chosen_ == Algorithm::native && times_[best].median_s < times_[0].median_s;
  soon_in_a_row_ = unclear ? soon_in_a_row_ + 1 : 0;
  // (A form a few percent faster stays unclear: two quick retries, then the intervals double;
  // retried every 32 calls, it read 0.90x at 32 bytes on the emulated cluster.)
  if (trials_ == 1 || (unclear && soon_in_a_row_ <= kSoonInARow)) {
    trial_start_ = calls_ + kSoonAfter;
  } else {
    trial_start_ = calls_ + interval_;
    interval_ = std::min(2 * interval_, kLongestInterval);
  }
  // The next trial: the library's and the forms that read within 30% of the fastest form (the
  // choice among them), fastest first; the forms that lost clearly are not run again.
  std::vector<std::pair<double, Algorithm>> close;
  for (std::size_t i = 1; i < contenders_.size(); ++i)
    if (times_[i].median_s <= 1.3 * times_[best].median_s || contenders_[i] == chosen_)
      close.emplace_back(times_[i].median_s, contenders_[i]);
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  contenders_ = {Algorithm::native};
  for (const auto& [seconds, form] : close) contenders_.push_back(form);
  seconds_.assign(contenders_.size(), {});
}

int size_class(MPI_Count bytes) noexcept {
  return static_cast<int>(
      std::bit_width(static_cast<std::uint64_t>(std::max<MPI_Count>(1, bytes)) - 1));
}

}  // namespace commtap::collectives
