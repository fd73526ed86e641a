// analyzer/model/message_links: the job's point-to-point messages, each send joined with its
// receive by (communicator, tag, message number, sender, receiver), times aligned to rank 0's
// clock.
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyzer/model/messages.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

struct MessageKey {
  std::int64_t comm_id;
  std::int64_t tag;
  std::int64_t msg;
  int sender, receiver;
  bool operator==(const MessageKey&) const = default;
};
struct MessageKeyHash {
  std::size_t operator()(const MessageKey& k) const {
    std::size_t h = std::hash<std::int64_t>()(k.comm_id);
    h = h * 1000003 ^ std::hash<std::int64_t>()(k.tag);
    h = h * 1000003 ^ std::hash<std::int64_t>()(k.msg);
    h = h * 1000003 ^ static_cast<std::size_t>(k.sender) * 65599 ^
        static_cast<std::size_t>(k.receiver);
    return h;
  }
};

}  // namespace

bool join_messages(const Job& job, const HealthOptions& options, JoinedMessages& out,
                   std::string& error) {
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  struct Sent {
    std::int64_t start;
    std::int64_t bytes;
  };
  std::unordered_map<MessageKey, Sent, MessageKeyHash> sends;
  if (!each_send(
          job,
          [&](const TransferRow& t) {
            auto r = job.ranks.find(t.rank);
            if (r == job.ranks.end()) return;
            const std::int64_t start = r->second.aligned(t.start_ns);
            if (start < since_aligned || start > until_aligned) return;
            sends[{t.comm_id, t.tag, t.msg, t.rank, t.peer}] = {start, t.bytes};
          },
          error))
    return false;
  // Receives of commtap's own all-reduce algorithms (tag -1: every message of a recorded
  // instance) end where the wait that completed them returned. Where one wait completed several
  // receives of a rank (a direct or star all-reduce: one MPI_Waitall for every peer), each
  // message arrived somewhere between its post and that end, which the latest arrival set: such
  // a receive is bounded above only (arrival unknown since its post), else the peers that came
  // first read as slow as the last.
  std::map<std::pair<int, std::uint64_t>, int> step_receives_ending;  // (rank, end_ns)
  std::vector<std::pair<std::size_t, std::pair<int, std::uint64_t>>> step_messages;
  if (!each_receive(
          job,
          [&](const TransferRow& t) {
            if (t.tag == monitor::kAlgorithmStepTag) ++step_receives_ending[{t.rank, t.end_ns}];
            auto found = sends.find({t.comm_id, t.tag, t.msg, t.peer, t.rank});
            auto r = job.ranks.find(t.rank);
            auto p = job.ranks.find(t.peer);
            if (found == sends.end() || r == job.ranks.end() || p == job.ranks.end()) return;
            const std::int64_t posted = r->second.aligned(t.start_ns);
            const std::int64_t done = r->second.aligned(t.end_ns);
            if (done > until_aligned) return;
            ++out.joined;
            if (r->second.host == p->second.host) return;  // shared memory: not a link
            // A moment outside the receive's life (a damaged file) is taken as not known.
            const bool pending_known =
                t.seen_pending_ns >= t.start_ns && t.seen_pending_ns <= t.end_ns;
            const std::int64_t pending =
                pending_known ? r->second.aligned(t.seen_pending_ns) : done;
            if (t.tag == monitor::kAlgorithmStepTag)
              step_messages.push_back({out.between_hosts.size(), {t.rank, t.end_ns}});
            out.between_hosts.push_back({p->second.host, r->second.host, found->second.start,
                                         posted, done, found->second.bytes, pending, t.peer,
                                         t.rank});
          },
          error))
    return false;
  for (const auto& [index, wait] : step_messages)
    if (step_receives_ending[wait] > 1) {
      JoinedMessage& m = out.between_hosts[index];
      m.pending = m.posted;
    }
  return true;
}

}  // namespace commtap::analyzer
