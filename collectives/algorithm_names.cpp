// The names of the all-reduce algorithms (COMMTAP_ALLREDUCE), from collectives/algorithm_list.hpp.
#include <string>

#include "collectives/collectives.hpp"

namespace commtap::collectives {

const char* algorithm_name(Algorithm algorithm) noexcept {
  switch (algorithm) {
#define COMMTAP_ALGORITHM_CASE(identifier, name, what) \
  case Algorithm::identifier:                          \
    return name;
    COMMTAP_ALLREDUCE_ALGORITHMS(COMMTAP_ALGORITHM_CASE)
#undef COMMTAP_ALGORITHM_CASE
  }
  return "?";
}

std::string algorithm_names() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(kLastAlgorithm); ++i)
    names += (i == 0 ? "" : ", ") + std::string(algorithm_name(static_cast<Algorithm>(i)));
  return names;
}

bool parse_algorithm(const std::string& text, Algorithm& algorithm) noexcept {
  for (int i = 0; i <= static_cast<int>(kLastAlgorithm); ++i)
    if (const auto a = static_cast<Algorithm>(i); text == algorithm_name(a)) {
      algorithm = a;
      return true;
    }
  return false;
}

}  // namespace commtap::collectives
