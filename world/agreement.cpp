// How the ranks of a job come to agree: rank 0's text on every rank, and which rank is the
// lowest where something holds (the one that explains a problem several ranks share).
#include <string>

#include "world/world.hpp"

namespace commtap::world {

std::string broadcast_string(std::string text, MPI_Comm comm, int rank) {
  int length = rank == 0 ? static_cast<int>(text.size()) : 0;
  PMPI_Bcast(&length, 1, MPI_INT, 0, comm);
  text.resize(static_cast<std::size_t>(length));
  if (length > 0) PMPI_Bcast(text.data(), length, MPI_CHAR, 0, comm);
  return text;
}

int lowest_rank_where(bool condition, MPI_Comm comm) {
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  // Ranks where it does not hold offer `size`, which no rank is.
  int candidate = condition ? rank : size, lowest = size;
  PMPI_Allreduce(&candidate, &lowest, 1, MPI_INT, MPI_MIN, comm);
  return lowest == size ? -1 : lowest;
}

}  // namespace commtap::world
