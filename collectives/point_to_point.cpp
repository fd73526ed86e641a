// The step recorder of the point-to-point layer: the messages of a recorded all-reduce call,
// with their peers' MPI_COMM_WORLD ranks and the times they were posted and completed.
#include "collectives/point_to_point.hpp"

#include <algorithm>

#include "monitor/clock.hpp"

namespace commtap::collectives {

void StepRecorder::posted(bool send, MPI_Comm comm, int peer, MPI_Count bytes,
                          const MPI_Request* slot) {
  steps_.push_back(
      {send, world_rank(comm, peer), static_cast<std::uint64_t>(bytes), monitor::now_ns(), 0});
  slots_.push_back(slot);
}

void StepRecorder::completed(const MPI_Request* requests, int n) {
  const std::uint64_t now = monitor::now_ns();
  for (std::size_t i = open_; i < steps_.size(); ++i)
    if (steps_[i].end_ns == 0 && slots_[i] >= requests && slots_[i] < requests + n)
      steps_[i].end_ns = std::max(now, steps_[i].start_ns);
  while (open_ < steps_.size() && steps_[open_].end_ns != 0) ++open_;
}

int StepRecorder::world_rank(MPI_Comm comm, int peer) {
  auto known = std::find_if(t_.world_ranks.begin(), t_.world_ranks.end(),
                            [&](const auto& entry) { return entry.first == comm; });
  if (known == t_.world_ranks.end()) {
    MPI_Group group = MPI_GROUP_NULL;
    PMPI_Comm_group(comm, &group);
    known = t_.world_ranks.insert(t_.world_ranks.end(), {comm, world::world_ranks_of(group)});
    PMPI_Group_free(&group);
  }
  const std::vector<int>& ranks = known->second;
  return peer >= 0 && static_cast<std::size_t>(peer) < ranks.size()
             ? ranks[static_cast<std::size_t>(peer)]
             : -1;
}

}  // namespace commtap::collectives
