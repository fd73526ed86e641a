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

// A collective: by its sequence number on its communicator (equal on all members).
inline bool is_sampled(std::uint64_t seq, std::uint64_t sample) noexcept {
  return sample <= 1 || is_multiple_of(seq, sample);
}

// A message: a hash of its whole name (communicator, world ranks of both ends, tag, the pair's
// message number) rather than the number alone, so that programs that give every message a tag
// of its own (the step number, say) are sampled too.
inline bool is_message_sampled(std::int64_t comm_id, int sender, int receiver, int tag,
                               std::uint64_t msg, std::uint64_t sample) noexcept {
  if (sample <= 1) return true;
  std::uint64_t x = static_cast<std::uint64_t>(comm_id) ^ msg * 0x9E3779B97F4A7C15ull;
  x ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(sender)) << 32 |
        static_cast<std::uint32_t>(receiver)) *
       0xBF58476D1CE4E5B9ull;
  x ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return is_multiple_of(x, sample);
}

}  // namespace commtap::monitor
