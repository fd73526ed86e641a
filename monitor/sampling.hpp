// Which instances are recorded (COMMTAP_SAMPLE = N: one in N). Every rank decides alike from
// what names an instance job-wide, so that the analyzer finds all sides of what it compares:
// every member's record of the same collective, both ends of the same message.
#pragma once

#include <cstdint>

namespace commtap::monitor {

// Whether `value` is a multiple of `sample`; a mask for powers of two (the default, 16): a
// division costs more than the rest of a wrapper's bookkeeping.
inline bool is_multiple_of(std::uint64_t value, std::uint64_t sample) noexcept {
  if ((sample & (sample - 1)) == 0) return (value & (sample - 1)) == 0;
  return value % sample == 0;
}

// What names a collective job-wide, mixed into 64 bits: its communicator and its sequence number
// there (both equal on every member).
inline std::uint64_t collective_hash(std::int64_t comm_id, std::uint64_t seq) noexcept {
  std::uint64_t x =
      static_cast<std::uint64_t>(comm_id) * 0xBF58476D1CE4E5B9ull ^ seq * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

// A collective: by a hash of its communicator and sequence number, not by the number alone. A
// training loop repeats every few collectives (DDP: 3 gradient buckets and an AllGather a step);
// "every 16th sequence number" would sample the same positions of that period forever and never
// the others. A hash samples every position of any period in proportion.
inline bool is_sampled(std::int64_t comm_id, std::uint64_t seq, std::uint64_t sample) noexcept {
  return sample <= 1 || is_multiple_of(collective_hash(comm_id, seq), sample);
}

// What names a message job-wide, mixed into 64 bits: its communicator, the world ranks of both
// ends, its tag and the pair's message number. Both ends compute the same value.
inline std::uint64_t message_hash(std::int64_t comm_id, int sender, int receiver, int tag,
                                  std::uint64_t msg) noexcept {
  std::uint64_t x = static_cast<std::uint64_t>(comm_id) ^ msg * 0x9E3779B97F4A7C15ull;
  x ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(sender)) << 32 |
        static_cast<std::uint32_t>(receiver)) *
       0xBF58476D1CE4E5B9ull;
  x ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

// A message: by its hash rather than the number alone, so that programs that give every message
// a tag of its own (the step number, say) are sampled too.
inline bool is_message_sampled(std::int64_t comm_id, int sender, int receiver, int tag,
                               std::uint64_t msg, std::uint64_t sample) noexcept {
  if (sample <= 1) return true;
  return is_multiple_of(message_hash(comm_id, sender, receiver, tag, msg), sample);
}

// The trace budget's thinning (monitor/trace_budget.hpp), nested in the sampling above: at level
// k a recorded instance is kept when key / sample is a multiple of 2^k, where the key is a
// collective's hash or a message's hash (so the levels do not alias with a period either). For a
// key the sampling chose (a multiple of `sample`) that is "a multiple of sample * 2^k"; every level
// keeps a subset of what each lower level keeps, so ranks that chose different levels still share
// the higher level's instances whole. Records the sampling did not choose by key (the messages of
// commtap's own all-reduce steps, NCCL's proxy operations, all inside sampled collectives) are
// thinned alike by the same rule: one in 2^k, equal on both ends.
inline bool is_kept_at_level(std::uint64_t key, std::uint64_t sample, unsigned level) noexcept {
  if (level == 0) return true;
  const std::uint64_t above = sample <= 1 ? key : key / sample;
  if (level >= 64) return above == 0;
  return (above & ((std::uint64_t{1} << level) - 1)) == 0;
}

}  // namespace commtap::monitor
