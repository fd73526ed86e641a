// Offsets to rank 0's clock along a tree: every edge measured at once, then summed from rank 0
// down. One event loop per rank drives its own edge (as a child) and its children's (as their
// parent), so no rank waits for another's turn and none exchanges with more than five others.
#include <sched.h>

#include <array>
#include <cstdint>
#include <vector>

#include "monitor/clock.hpp"
#include "world/world.hpp"

namespace commtap::world {

namespace {

constexpr int kRequestTag = 7;   // child -> parent: "read your clock"
constexpr int kReplyTag = 8;     // parent -> child: the parent's clock
constexpr int kComposedTag = 9;  // parent -> child: the parent's offset to rank 0 and its error

// A binary tree over the ranks of a communicator, rooted at its rank 0.
int parent_in_tree(int rank) {
  return rank == 0 ? -1 : (rank - 1) / 2;
}

// The other end of an edge: a rank of `comm`.
struct Peer {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = -1;
};

// One estimate's state on one rank.
class Estimate {
 public:
  Estimate(const NodeLayout& layout, int exchanges) : exchanges_(exchanges) {
    // A node's ranks hang off their leader; the leaders off rank 0's node's leader (rank 0).
    if (layout.local_rank > 0)
      parent_ = {layout.node, parent_in_tree(layout.local_rank)};
    else if (layout.node_index > 0)
      parent_ = {layout.leaders, parent_in_tree(layout.node_index)};
    for (int child : {2 * layout.local_rank + 1, 2 * layout.local_rank + 2})
      if (child < layout.local_size) children_.push_back({layout.node, child});
    if (layout.leaders != MPI_COMM_NULL)
      for (int child : {2 * layout.node_index + 1, 2 * layout.node_index + 2})
        if (child < layout.nodes) children_.push_back({layout.leaders, child});
    const std::size_t n = children_.size();
    requests_.assign(kFirstChild + 3 * n, MPI_REQUEST_NULL);
    child_request_.resize(n);
    reply_.resize(n);
    served_.assign(n, 0);
  }

  monitor::ClockOffset run(bool yield) {
    if (parent_.rank < 0) {
      composed_ = {0, 0};
      have_composed_ = true;
      send_composed();
    } else {
      PMPI_Irecv(parent_composed_.data(), 2, MPI_INT64_T, parent_.rank, kComposedTag, parent_.comm,
                 &requests_[kParentComposed]);
      start_exchange();
    }
    for (std::size_t j = 0; j < children_.size(); ++j) receive_request(j);

    std::vector<int> completed(requests_.size());
    for (;;) {
      int count = 0;
      const int size = static_cast<int>(requests_.size());
      if (yield) {
        PMPI_Testsome(size, requests_.data(), &count, completed.data(), MPI_STATUSES_IGNORE);
        if (count == 0) sched_yield();
      } else {
        PMPI_Waitsome(size, requests_.data(), &count, completed.data(), MPI_STATUSES_IGNORE);
      }
      if (count == MPI_UNDEFINED) break;  // every request is done and none was started again
      const std::uint64_t now = monitor::now_ns();
      for (int k = 0; k < count; ++k) completed_one(static_cast<std::size_t>(completed[k]), now);
    }
    return composed_;
  }

 private:
  // requests_: the child's side first, then per child its request, its reply and its composed
  // offset.
  enum : std::size_t { kParentReply, kParentRequest, kParentComposed, kFirstChild };
  std::size_t child_request_slot(std::size_t j) const { return kFirstChild + j; }
  std::size_t child_reply_slot(std::size_t j) const { return kFirstChild + children_.size() + j; }
  std::size_t child_composed_slot(std::size_t j) const {
    return kFirstChild + 2 * children_.size() + j;
  }

  void start_exchange() {
    sample_ = {};
    sample_.sent_ns = monitor::now_ns();
    PMPI_Irecv(&sample_.reference_ns, 1, MPI_UINT64_T, parent_.rank, kReplyTag, parent_.comm,
               &requests_[kParentReply]);
    PMPI_Isend(&sample_.sent_ns, 1, MPI_UINT64_T, parent_.rank, kRequestTag, parent_.comm,
               &requests_[kParentRequest]);
  }

  void receive_request(std::size_t j) {
    PMPI_Irecv(&child_request_[j], 1, MPI_UINT64_T, children_[j].rank, kRequestTag,
               children_[j].comm, &requests_[child_request_slot(j)]);
  }

  void completed_one(std::size_t slot, std::uint64_t now) {
    if (slot == kParentReply) {
      sample_.received_ns = now;
      reply_arrived_ = true;
    } else if (slot == kParentComposed) {
      composed_arrived_ = true;
    } else if (slot >= kFirstChild && slot < kFirstChild + children_.size()) {
      const std::size_t j = slot - kFirstChild;
      // The child sends its next request only after our last reply reached it, but our side of
      // that send may not have completed yet.
      PMPI_Wait(&requests_[child_reply_slot(j)], MPI_STATUS_IGNORE);
      reply_[j] = monitor::now_ns();  // as late as possible before it leaves
      PMPI_Isend(&reply_[j], 1, MPI_UINT64_T, children_[j].rank, kReplyTag, children_[j].comm,
                 &requests_[child_reply_slot(j)]);
      if (++served_[j] < exchanges_) receive_request(j);
    }
    // The own exchange is over when both its halves are (the send buffer is reused).
    if (parent_.rank >= 0 && reply_arrived_ && requests_[kParentRequest] == MPI_REQUEST_NULL &&
        requests_[kParentReply] == MPI_REQUEST_NULL) {
      reply_arrived_ = false;
      samples_.push_back(sample_);
      if (static_cast<int>(samples_.size()) < exchanges_) start_exchange();
    }
    if (!have_composed_ && composed_arrived_ && static_cast<int>(samples_.size()) == exchanges_) {
      const monitor::ClockOffset edge = monitor::estimate_offset(samples_);
      if (edge.error_ns >= 0 && parent_composed_[1] >= 0)
        composed_ = {edge.offset_ns + parent_composed_[0], edge.error_ns + parent_composed_[1]};
      have_composed_ = true;  // an unusable edge leaves {0, -1}: the subtree gets no estimate
      send_composed();
    }
  }

  void send_composed() {
    outgoing_ = {composed_.offset_ns, composed_.error_ns};
    for (std::size_t j = 0; j < children_.size(); ++j)
      PMPI_Isend(outgoing_.data(), 2, MPI_INT64_T, children_[j].rank, kComposedTag,
                 children_[j].comm, &requests_[child_composed_slot(j)]);
  }

  const int exchanges_;
  Peer parent_;
  std::vector<Peer> children_;
  std::vector<MPI_Request> requests_;

  monitor::ClockSample sample_;
  bool reply_arrived_ = false;
  std::vector<monitor::ClockSample> samples_;

  std::vector<std::uint64_t> child_request_, reply_;
  std::vector<int> served_;

  std::array<std::int64_t, 2> parent_composed_{0, -1};
  bool composed_arrived_ = false;
  bool have_composed_ = false;
  monitor::ClockOffset composed_;  // {0, -1} until known
  std::array<std::int64_t, 2> outgoing_{0, -1};
};

}  // namespace

monitor::ClockOffset ClockTree::estimate(int exchanges) const {
  if (layout_.node == MPI_COMM_NULL) return {};
  Estimate estimate(layout_, exchanges < 1 ? 1 : exchanges);
  return estimate.run(yield_);
}

}  // namespace commtap::world
