// One all-reduce by a given form: the call's constants and step recorder, the copy of the send
// buffer into the receive buffer (every form works in place), and the form's family.
#include "collectives/algorithms.hpp"

#include <cstring>
#include <optional>

#include "collectives/point_to_point.hpp"

namespace commtap::collectives {

void reverse_folds_for_tests(bool on) {
  reversed_fold_for_tests = on;
}

int allreduce(Algorithm algorithm, const void* sendbuf, void* recvbuf, MPI_Count count,
              MPI_Datatype type, MPI_Op op, Topology& t, bool yield, std::vector<Step>* steps) {
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  std::optional<StepRecorder> recorder;
  if (steps != nullptr) recorder.emplace(*steps, t);
  const Call c{type, op, extent, yield, recorder ? &*recorder : nullptr};
  if (sendbuf != MPI_IN_PLACE)
    std::memcpy(recvbuf, sendbuf, static_cast<std::size_t>(count * extent));
  switch (algorithm) {
    case Algorithm::star:
    case Algorithm::ring:
    case Algorithm::rd:
    case Algorithm::rabenseifner:
    case Algorithm::direct:
    case Algorithm::knomial:
      return flat(algorithm, c, t.flat, recvbuf, count, t.scratch, t.star_root, t.ring_order,
                  t.tuning.flat_radix);
    default:
      return hierarchical(algorithm, c, t, recvbuf, count);
  }
}

}  // namespace commtap::collectives
