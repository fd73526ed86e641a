#include "monitor/trace_budget.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "monitor/sampling.hpp"

namespace commtap::monitor {

namespace {

// The settings' texts are the validated values the library ran with; anything else (a tool's
// hand-made list) that does not parse leaves the default.
bool parse_number(const std::string& text, std::uint64_t& out) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return false;
  out = value;
  return true;
}

constexpr unsigned kMaxLevel = 64;  // keeps only keys below `sample`: none, in practice

}  // namespace

TraceBudgetSettings TraceBudgetSettings::from(
    const std::vector<std::pair<std::string, std::string>>& settings) {
  TraceBudgetSettings out;
  for (const auto& [name, value] : settings) {
    std::uint64_t number = 0;
    if (!parse_number(value, number)) continue;
    if (name == "COMMTAP_TRACE_BUDGET")
      out.bytes_per_hour = number * 1'000'000;
    else if (name == "COMMTAP_SAMPLE")
      out.sample = std::max<std::uint64_t>(1, number);
    else if (name == "COMMTAP_INTERVAL" && number > 0)
      out.interval_s = static_cast<double>(number) / 1e3;
  }
  return out;
}

std::uint64_t thinning_key(const InstanceRecord& record, int own_rank) {
  if (record.kind == RecordKind::collective) return collective_hash(record.comm_id, record.seq);
  const bool send = record.kind == RecordKind::send;
  return message_hash(record.comm_id, send ? own_rank : record.root, send ? record.root : own_rank,
                      record.tag, record.seq);
}

unsigned thinning_depth(const InstanceRecord& record, int own_rank, std::uint64_t sample) {
  const std::uint64_t key = thinning_key(record, own_rank);
  const std::uint64_t above = sample <= 1 ? key : key / sample;
  return above == 0 ? 64u : static_cast<unsigned>(__builtin_ctzll(above));
}

InstanceThinning::InstanceThinning(const TraceBudgetSettings& settings)
    : sample_(std::max<std::uint64_t>(1, settings.sample)) {
  if (settings.bytes_per_hour == 0) return;
  rows_per_second_ =
      static_cast<double>(settings.bytes_per_hour) * kSampledShare / 3600.0 / kBytesPerSampledRow;
  credit_rows_ = rows_per_second_ * kStartSeconds;
}

ThinnedWindow InstanceThinning::thin(const std::vector<InstanceRecord>& records, int own_rank,
                                     double seconds) {
  ThinnedWindow out;
  if (!bounded()) {
    for (const InstanceRecord& r : records)
      (r.kind == RecordKind::collective ? out.collectives : out.transfers).push_back(&r);
    return out;
  }
  // How many records each level keeps: a record of depth d is kept at levels 0..d.
  std::vector<std::uint8_t> depths(records.size());
  std::array<std::uint64_t, 66> at_depth{};
  for (std::size_t i = 0; i < records.size(); ++i) {
    depths[i] = static_cast<std::uint8_t>(thinning_depth(records[i], own_rank, sample_));
    ++at_depth[depths[i]];
  }
  std::array<std::uint64_t, 66> kept_at{};  // kept_at[k]: records of depth >= k
  for (int k = 64; k >= 0; --k)
    kept_at[static_cast<std::size_t>(k)] = at_depth[static_cast<std::size_t>(k)] + kept_at[k + 1];

  seconds = std::clamp(seconds, 1e-3, 3600.0);
  const auto rows = static_cast<double>(records.size());
  if (smoothed_rows_ < 0) {
    smoothed_rows_ = rows;
    smoothed_seconds_ = seconds;
  } else {
    smoothed_rows_ += (rows - smoothed_rows_) / 4;
    smoothed_seconds_ += (seconds - smoothed_seconds_) / 4;
  }
  const double rate = smoothed_rows_ / smoothed_seconds_;
  auto rate_at = [&](unsigned level) { return std::ldexp(rate, -static_cast<int>(level)); };
  while (level_ < kMaxLevel && rate_at(level_) > rows_per_second_) ++level_;
  while (level_ > 0 && rate_at(level_ - 1) < rows_per_second_ / 2) --level_;

  const double burst = rows_per_second_ * kBurstSeconds;
  unsigned level = 0;
  if (starting_) {
    credit_rows_ =
        std::min(credit_rows_ + rows_per_second_ * seconds, rows_per_second_ * kStartSeconds);
    starting_ = static_cast<double>(kept_at[0]) + burst <= credit_rows_;
  }
  if (!starting_) {
    credit_rows_ = std::min(credit_rows_ + rows_per_second_ * seconds, burst);
    level = level_;
    auto overdraws = [&](unsigned k) { return static_cast<double>(kept_at[k]) > credit_rows_; };
    while (level < kMaxLevel && overdraws(level)) ++level;
  }
  credit_rows_ -= static_cast<double>(kept_at[level]);

  out.level = level;
  out.thinned = records.size() - kept_at[level];
  thinned_ += out.thinned;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (depths[i] < level) continue;
    const InstanceRecord& r = records[i];
    (r.kind == RecordKind::collective ? out.collectives : out.transfers).push_back(&r);
  }
  return out;
}

}  // namespace commtap::monitor
