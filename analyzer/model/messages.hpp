// analyzer/model/messages: the job's point-to-point messages joined end to end, and the host
// clocks corrected by them (message_links.cpp, clock_alignment.cpp), which the network detectors
// read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/findings/job_evidence.hpp"
#include "analyzer/model/job_model.hpp"

namespace commtap::analyzer {

// The job's point-to-point messages between hosts, sends joined with their receives, times on
// rank 0's clock (message_links.cpp). The message arrived in (pending, done]: `pending` is the
// last moment its receive was seen not yet done (transfers.seen_pending_ns), or `done` where that
// is not known (files before version 12, receives not watched), which reads the completion as
// the arrival.
struct JoinedMessage {
  int from_host, to_host;
  std::int64_t start, posted, done, bytes;
  std::int64_t pending;
  int from_rank = -1, to_rank = -1;  // world ranks: the sender's, the receiver's
};
struct JoinedMessages {
  std::vector<JoinedMessage> between_hosts;
  std::uint64_t joined = 0;  // every joined message, shared memory included
};
bool join_messages(const Job& job, const HealthOptions& options, JoinedMessages& out,
                   std::string& error);
// Per host, the correction of its clock that makes the job's messages (or the link probes) read
// the same one-way time both ways on healthy links, and the probes' one-way times on the
// corrected clocks (clock_alignment.cpp).
bool align_host_clocks(const Job& job, const HealthOptions& options,
                       const std::vector<JoinedMessage>& messages, ClockAlignment& out,
                       std::string& error);

}  // namespace commtap::analyzer
