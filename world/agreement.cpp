// How the ranks of a job come to agree: rank 0's text on every rank, and which rank is the
// lowest where something holds (the one that explains a problem several ranks share). Both are
// nonblocking collectives completed with yielding waits: at MPI_Init every rank runs them, and
// on an oversubscribed node a blocking MPICH collective busy-polls the cores the others need.
#include <string>

#include "world/world.hpp"

namespace commtap::world {

std::string broadcast_string(std::string text, MPI_Comm comm, int rank) {
  int length = rank == 0 ? static_cast<int>(text.size()) : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  PMPI_Ibcast(&length, 1, MPI_INT, 0, comm, &request);
  wait_all(1, &request, true);
  text.resize(static_cast<std::size_t>(length));
  if (length > 0) {
    PMPI_Ibcast(text.data(), length, MPI_CHAR, 0, comm, &request);
    wait_all(1, &request, true);
  }
  return text;
}

int lowest_rank_where(bool condition, MPI_Comm comm) {
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  // Ranks where it does not hold offer `size`, which no rank is.
  int candidate = condition ? rank : size, lowest = size;
  MPI_Request request = MPI_REQUEST_NULL;
  PMPI_Iallreduce(&candidate, &lowest, 1, MPI_INT, MPI_MIN, comm, &request);
  wait_all(1, &request, true);
  return lowest == size ? -1 : lowest;
}

}  // namespace commtap::world
