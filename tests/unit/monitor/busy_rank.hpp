// A synthetic busy rank's trace windows, as the interposer would collect them: small all-reduces
// on MPI_COMM_WORLD and a split communicator, point-to-point messages to and from its
// neighbours, every recorded instance sampled as the wrappers sample (monitor/sampling.hpp), and
// the per-window rows a real job writes besides (aggregates, progress, TCP counters every 5 s,
// a clock estimate every 10,000 world collectives, call totals). For the trace budget's tests
// and bench/writer --hour.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "monitor/monitor.hpp"

namespace commtap::testing {

struct BusyRank {
  int rank = 0;
  int world_size = 2;
  double collectives_per_s = 24000;  // on each rank, all communicators together
  double messages_per_s = 24000;     // sent by each rank (and as many received)
  std::uint64_t sample = 16;         // COMMTAP_SAMPLE
  double window_s = 1.0;
  std::uint64_t start_wall_ns = 1'800'000'000'000'000'000ull;
  // Distinct aggregate keys per communicator (call sites x size classes of each function).
  int sites = 2;

  static constexpr std::int64_t kWorld = 0x1000, kSplit = 0x2000;

  std::uint64_t wall_at(std::size_t window) const {
    return start_wall_ns +
           static_cast<std::uint64_t>(static_cast<double>(window + 1) * window_s * 1e9);
  }

  // Window `i` (0-based): the calls made in it.
  monitor::Snapshot window(std::size_t i) const {
    using monitor::InstanceRecord;
    using monitor::RecordKind;
    monitor::Snapshot s;
    s.function_names = {"MPI_Allreduce", "MPI_Isend", "MPI_Irecv", "MPI_Waitall", "MPI_Barrier"};
    s.wall_ns = wall_at(i);
    s.wall_minus_monotonic_ns = static_cast<std::int64_t>(start_wall_ns);
    const auto per_window = [&](double rate) {
      return static_cast<std::uint64_t>(rate * window_s);
    };
    const std::uint64_t collectives = per_window(collectives_per_s);
    const std::uint64_t messages = per_window(messages_per_s);
    const std::uint64_t window_ns = static_cast<std::uint64_t>(window_s * 1e9);
    const std::uint64_t t0 = static_cast<std::uint64_t>(i) * window_ns;
    // Three in four collectives on the world, the rest on the split communicator.
    const std::uint64_t on_world = collectives * 3 / 4, on_split = collectives - on_world;
    auto add_collectives = [&](std::int64_t comm, std::uint64_t count) {
      for (std::uint64_t n = 1; n <= count; ++n) {
        const std::uint64_t seq = static_cast<std::uint64_t>(i) * count + n;
        if (!monitor::is_sampled(comm, seq, sample)) continue;
        const std::uint64_t at = t0 + n * window_ns / (count + 1);
        s.instances.push_back({comm, seq, 8, at, at + 2000, 0, -1, 1, 0});
      }
    };
    add_collectives(kWorld, on_world);
    add_collectives(kSplit, on_split);
    const int right = (rank + 1) % world_size, left = (rank + world_size - 1) % world_size;
    for (std::uint64_t n = 1; n <= messages; ++n) {
      const std::uint64_t msg = static_cast<std::uint64_t>(i) * messages + n;
      const std::uint64_t at = t0 + n * window_ns / (messages + 1);
      if (monitor::is_message_sampled(kWorld, rank, right, 7, msg, sample))
        s.instances.push_back({kWorld, msg, 64, at, at + 900, 1, right, 2, 7, RecordKind::send});
      if (monitor::is_message_sampled(kWorld, left, rank, 7, msg, sample))
        s.instances.push_back({kWorld, msg, 64, at, at + 1500, 2, left, 3, 7, RecordKind::recv});
    }
    // Every call counted, sampled or not.
    for (std::int64_t comm : {kWorld, kSplit}) {
      const std::uint64_t calls = comm == kWorld ? on_world : on_split;
      for (int site = 1; site <= sites; ++site)
        for (std::uint64_t bucket : {8ull, 64ull}) {
          const std::uint64_t share = calls / static_cast<std::uint64_t>(sites * 2);
          if (share > 0)
            s.aggregates.push_back({{comm, 0, static_cast<std::uint32_t>(site), bucket},
                                    share,
                                    share * 2000,
                                    1500,
                                    9000 + i % 7});
        }
    }
    s.aggregates.push_back({{kWorld, 1, 2, 64}, messages, messages * 900, 500, 4000});
    s.aggregates.push_back({{kWorld, 2, 3, 64}, messages, messages * 1500, 700, 6000});
    const std::uint64_t done_world = (static_cast<std::uint64_t>(i) + 1) * on_world;
    const std::uint64_t done_split = (static_cast<std::uint64_t>(i) + 1) * on_split;
    s.progress = {{kWorld, done_world, done_world}, {kSplit, done_split, done_split}};
    const std::uint64_t total_collectives = (i + 1) * collectives;
    const std::uint64_t total_messages = (i + 1) * messages;
    s.functions = {{"MPI_Allreduce",
                    "collective",
                    {total_collectives, total_collectives * 2000, total_collectives * 8, 0, 0}},
                   {"MPI_Isend",
                    "p2p_start",
                    {total_messages, total_messages * 300, total_messages * 64, total_messages,
                     total_messages * 900}},
                   {"MPI_Irecv",
                    "p2p_start",
                    {total_messages, total_messages * 300, total_messages * 64, total_messages,
                     total_messages * 1500}},
                   {"MPI_Waitall", "completion", {total_messages, total_messages * 600, 0, 0, 0}}};
    if (i == 0) {
      s.communicators = {{kWorld, 0, "MPI_COMM_WORLD", world_size, rank, false, ""},
                         {kSplit, kWorld, "MPI_Comm_split", world_size, rank, false, ""}};
      for (int site = 1; site <= 3 + sites; ++site) {
        monitor::CallSite cs;
        cs.id = static_cast<std::uint32_t>(site);
        for (int f = 0; f < 3; ++f)
          cs.frames.push_back({0x400000u + static_cast<std::uint64_t>(site * 64 + f), "/work/app",
                               "step_" + std::to_string(site), 0x40, "app.cpp", 100 + site});
        s.new_sites.push_back(cs);
      }
    }
    // The clock is re-estimated every 10,000 world collectives.
    const std::uint64_t before = static_cast<std::uint64_t>(i) * on_world / 10000;
    for (std::uint64_t e = before + 1; e <= (i + 1) * on_world / 10000; ++e)
      s.clock_estimates.push_back(
          {t0 + (e * 10000 - i * on_world) * window_ns / std::max<std::uint64_t>(1, on_world),
           {static_cast<std::int64_t>(e % 50) - 25, 400}});
    if (i % 5 == 4)
      for (int peer = 0; peer < 2; ++peer)
        s.tcp_links.push_back({"10.0.0." + std::to_string(rank + 1),
                               "10.0.0." + std::to_string(peer + 3), 2, i * 100000ull, i * 90000ull,
                               i * 80ull, i * 70ull, i / 100, -1, 120 + i % 9, 80});
    s.writer_ns = i * 3'000'000ull;
    s.stalled_ns = i * 1'000'000ull;
    return s;
  }
};

}  // namespace commtap::testing
