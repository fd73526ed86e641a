// Offsets to rank 0's clock along a tree: every edge measured at once, then summed from rank 0
// down. One event loop per rank drives its own edge (as a child) and its children's (as their
// parent), so no rank waits for another's turn and none exchanges with more than five others.
// Mid-job the sum goes on in the background: a rank forwards its offset to its children when its
// parent's arrives, found at its next world collectives (or the next estimate).
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

}  // namespace

// One estimate's state on one rank.
class ClockTree::Estimate {
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

  // Starts the exchanges and runs them until this rank's edge and its children's are measured
  // and, with `until_summed`, until its offset is known and sent on.
  void run(bool until_summed) {
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
    while (!measured() || (until_summed && !summed())) drive(true);
    measured_ns_ = monitor::now_ns();
  }

  // What arrived, without waiting.
  void poll() { drive(false); }
  // Until the offset is known and sent on.
  void finish() {
    while (!summed()) drive(true);
  }
  bool summed() const {
    if (!have_composed_) return false;
    for (std::size_t j = 0; j < children_.size(); ++j)
      if (requests_[child_composed_slot(j)] != MPI_REQUEST_NULL) return false;
    return true;
  }
  monitor::ClockEstimate result() const { return {measured_ns_, composed_}; }

 private:
  // Completes what it can, testing once; `wait`: yields the processor if nothing completed
  // (the caller tests again). Always yielding rather than blocking: a rank that busy-polls an
  // oversubscribed node starves the one it waits for, and every round trip then measures the
  // scheduler (milliseconds); on a core of its own sched_yield returns at once.
  void drive(bool wait) {
    completed_.resize(requests_.size());
    int count = 0;
    PMPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, completed_.data(),
                  MPI_STATUSES_IGNORE);
    if (count == MPI_UNDEFINED) return;  // nothing outstanding
    if (count == 0 && wait) sched_yield();
    const std::uint64_t now = monitor::now_ns();
    for (int k = 0; k < count; ++k) completed_one(static_cast<std::size_t>(completed_[k]), now);
  }

  // This rank's edge and its children's are measured (their last replies sent).
  bool measured() const {
    if (parent_.rank >= 0 && static_cast<int>(samples_.size()) < exchanges_) return false;
    for (std::size_t j = 0; j < children_.size(); ++j)
      if (served_[j] < exchanges_ || requests_[child_reply_slot(j)] != MPI_REQUEST_NULL)
        return false;
    return true;
  }

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
  std::uint64_t measured_ns_ = 0;  // when this rank's edge was measured: the estimate's time
  std::vector<int> completed_;
};

ClockTree::ClockTree(const NodeLayout& layout) : layout_(layout) {}

ClockTree::~ClockTree() = default;

std::vector<monitor::ClockEstimate> ClockTree::finish_background() {
  std::vector<monitor::ClockEstimate> finished;
  if (background_ == nullptr) return finished;
  background_->finish();
  finished.push_back(background_->result());
  background_.reset();
  pending_.store(false, std::memory_order_relaxed);
  return finished;
}

std::vector<monitor::ClockEstimate> ClockTree::estimate(int exchanges) {
  std::vector<monitor::ClockEstimate> finished = finish_background();
  if (layout_.node == MPI_COMM_NULL) return finished;
  Estimate estimate(layout_, exchanges < 1 ? 1 : exchanges);
  estimate.run(true);
  finished.push_back(estimate.result());
  return finished;
}

std::vector<monitor::ClockEstimate> ClockTree::estimate_in_background(int exchanges) {
  std::vector<monitor::ClockEstimate> finished = finish_background();
  if (layout_.node == MPI_COMM_NULL) return finished;
  background_ = std::make_unique<Estimate>(layout_, exchanges < 1 ? 1 : exchanges);
  background_->run(false);
  if (background_->summed()) {
    finished.push_back(background_->result());
    background_.reset();
  } else {
    pending_.store(true, std::memory_order_relaxed);
  }
  return finished;
}

std::vector<monitor::ClockEstimate> ClockTree::progress() {
  if (background_ == nullptr) return {};
  background_->poll();
  if (!background_->summed()) return {};
  return finish_background();
}

}  // namespace commtap::world
