// analyzer/trace_rows: rows of the trace tables as the detectors read them, one struct per kind
// and one reader each, so that a table's columns are named in one place. A reader runs over
// every file of the job in turn (memory does not grow with the files) and calls `row` for each
// row; times are the writing rank's monotonic clock unless named wall.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "analyzer/job_model.hpp"

namespace commtap::analyzer {

// A link probe measurement (the probes table): a latency round (bytes <= 1) or a transfer.
struct ProbeRow {
  int rank = 0;  // the measuring rank
  std::uint64_t at_ns = 0;
  int from_node = 0, to_node = 0;
  std::string from_host, to_host;  // clean_text
  std::int64_t bytes = 0;
  std::int64_t ns = 0;                            // the fastest round trip's half, or transfer
  std::int64_t slowest_ns = 0;                    // the slowest (0 where the file has none)
  std::optional<std::int64_t> slowest_oneway_ns;  // the longest one-way leg (version 9 and later)
  // The fastest round trip's four times (sent and received on the measuring rank's clock, the
  // others on the peer leader's), where recorded.
  std::optional<std::int64_t> sent_ns;
  std::int64_t peer_received_ns = 0, peer_replied_ns = 0, received_ns = 0;
};
// Each file's probes oldest first.
bool each_probe(const Job& job, const std::function<void(const ProbeRow&)>& row,
                std::string& error);

// A point-to-point transfer (the transfers table), sent or received.
struct TransferRow {
  int rank = 0, peer = 0;  // world ranks
  std::int64_t comm_id = 0, tag = 0, msg = 0;
  std::int64_t bytes = 0;
  std::uint64_t start_ns = 0;  // the send's start, or the receive's post
  std::uint64_t end_ns = 0;    // its completion
};
bool each_send(const Job& job, const std::function<void(const TransferRow&)>& row,
               std::string& error);
bool each_receive(const Job& job, const std::function<void(const TransferRow&)>& row,
                  std::string& error);

}  // namespace commtap::analyzer
