// collectives::start: the context agreed at MPI_Init from the settings: the algorithm, the
// avoid list (COMMTAP_AVOID_HOSTS: written out, or a findings store's), the cost model (a model
// file, a measurement now, or the built-in one) and the library's all-reduce threshold.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>

#include "avoid_list/avoid_list.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/topology.hpp"
#include "monitor/clock.hpp"
#include "settings/settings.hpp"
#include "world/world.hpp"

namespace commtap::collectives {
namespace {

// COMMTAP_AVOID_HOSTS written out: comma-separated host names and links (FROM->TO, or A<->B for
// both directions, costs unmeasured); an entry that is neither is reported and skipped.
avoid_list::AvoidList parse_avoid_setting(const std::string& setting) {
  avoid_list::AvoidList list;
  std::size_t begin = 0;
  while (begin <= setting.size()) {
    const std::size_t comma = std::min(setting.find(',', begin), setting.size());
    const std::string item = setting.substr(begin, comma - begin);
    begin = comma + 1;
    const std::size_t both = item.find("<->"), one = item.find("->");
    if (item.empty() || item.find('>') == std::string::npos) {
      if (!item.empty()) list.hosts.push_back(item);
    } else if (both != std::string::npos && both > 0 && both + 3 < item.size()) {
      list.links.push_back({item.substr(0, both), item.substr(both + 3), 0, 0});
      list.links.push_back({item.substr(both + 3), item.substr(0, both), 0, 0});
    } else if (both == std::string::npos && one != std::string::npos && one > 0 &&
               one + 2 < item.size()) {
      list.links.push_back({item.substr(0, one), item.substr(one + 2), 0, 0});
    } else {
      std::fprintf(stderr,
                   "commtap: COMMTAP_AVOID_HOSTS: '%s' is neither a host nor a link "
                   "(FROM->TO, A<->B); ignored\n",
                   shown_value(item).c_str());
    }
  }
  return list;
}

// COMMTAP_AVOID_HOSTS, read by rank 0 and sent to all: the list written out, or @FILE, a findings
// store of `commtap analyze --store` whose avoid list of the last day is read.
avoid_list::AvoidList avoid_from_setting(const std::string& setting, MPI_Comm comm, int rank) {
  avoid_list::AvoidList list;
  if (rank == 0 && !setting.empty()) {
    if (setting[0] == '@') {
      std::string error;
      const std::uint64_t since_ns = monitor::wall_ns() - 86'400'000'000'000ull;
      bool read = false;
      try {
        read = avoid_list::read_recent(setting.substr(1), since_ns, list, error);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (!read) {
        std::fprintf(stderr,
                     "commtap: COMMTAP_AVOID_HOSTS: cannot read findings from %s (%s); nothing "
                     "is avoided\n",
                     shown_value(setting.substr(1)).c_str(), error.c_str());
        list = {};
      }
    } else {
      list = parse_avoid_setting(setting);
    }
  }
  return avoid_list::decode(world::broadcast_string(avoid_list::encode(list), comm, rank));
}

// COMMTAP_MODEL's text into `text`, or why not: opened without blocking (a FIFO), a regular
// file only (not a directory or a device such as /dev/zero), at most kMaxModelBytes (a model
// `commtap calibrate` writes is about a kilobyte).
constexpr std::size_t kMaxModelBytes = 64 * 1024;
std::string read_model_file(const std::string& path, std::string& text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::string("cannot read it: ") + std::strerror(errno);
  struct stat info {};
  std::string error;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))
    error = "not a regular file";
  else if (static_cast<std::uint64_t>(info.st_size) > kMaxModelBytes)
    error = "larger than " + std::to_string(kMaxModelBytes / 1024) + " KiB, not a cost model";
  char buffer[4096];
  while (error.empty()) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      error = std::string("cannot read it: ") + std::strerror(errno);
    else if (text.size() + static_cast<std::size_t>(n) > kMaxModelBytes)
      error = "larger than " + std::to_string(kMaxModelBytes / 1024) + " KiB, not a cost model";
    else
      text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return error;
}

// The model's source, decided by rank 0 (ranks of an MPMD launch may see other files): a model
// file if COMMTAP_MODEL names one; else a measurement now, with COMMTAP_CALIBRATE=1 (the
// default), if the algorithm asks the model anything (auto, and the forms it tunes); else the
// built-in values.
CostModel agree_on_cost_model(const CollectivesSettings& settings, const Context& context,
                              const avoid_list::AvoidList& avoid, MPI_Comm comm, int rank) {
  enum Source : int { built_in, file, measured };
  int source = !settings.model.empty()                                   ? file
               : settings.calibrate && asks_the_model(context.allreduce) ? measured
                                                                         : built_in;
  MPI_Request request;
  PMPI_Ibcast(&source, 1, MPI_INT, 0, comm, &request);
  world::wait_all(1, &request, context.yield);
  CostModel model;
  if (source == measured) {
    const Topology* topology = topology_of(MPI_COMM_WORLD, context.test_nodes, avoid);
    return measure_cost_model(*topology, model);
  }
  if (source == built_in) return model;
  if (rank == 0) {
    std::string text, error = read_model_file(settings.model, text);
    try {
      if (error.empty() && !parse_cost_model(text, model, error) && error.empty())
        error = "not a cost model";
    } catch (const std::exception& e) {
      error = std::string("not a cost model (") + e.what() + ")";
    }
    if (!error.empty()) {
      model = CostModel{};
      std::fprintf(stderr, "commtap: COMMTAP_MODEL=%s: %s; using the built-in cost model\n",
                   shown_value(settings.model).c_str(), error.c_str());
    }
  }
  broadcast_cost_model(model, comm, context.yield);
  return model;
}

// MPICH's all-reduce threshold (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE, 2048 bytes unless set): up
// to it recursive doubling, above it a reduce-scatter and an all-gather, blocking or not. 0
// (unknown) for another library, or where the user chose MPICH's algorithm (a CVAR naming one,
// or a selection file): the model then assumes nothing of it. Rank 0's answer, sent to all.
std::int64_t library_short_bytes(MPI_Comm comm, int rank, bool yield) {
  long long threshold = 0;
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    PMPI_Get_library_version(version, &length);
    auto chosen = [](const char* name) {
      const char* value = std::getenv(name);
      return value != nullptr && *value != '\0' && std::strcmp(value, "auto") != 0;
    };
    if (std::strncmp(version, "MPICH Version:", 14) == 0 &&
        !chosen("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM") &&
        !chosen("MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM") &&
        !chosen("MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE") &&
        !chosen("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE")) {
      threshold = 2048;
      if (const char* value = std::getenv("MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE");
          value != nullptr && *value != '\0') {
        char* end = nullptr;
        const long long set = std::strtoll(value, &end, 10);
        threshold = *end == '\0' && set >= 0 ? std::max(1LL, set) : 0;
      }
    }
  }
  MPI_Request request;
  PMPI_Ibcast(&threshold, 1, MPI_LONG_LONG, 0, comm, &request);
  world::wait_all(1, &request, yield);
  return threshold;
}

}  // namespace

const Agreement& agreement_of(const Context& context) noexcept {
  static const Agreement built_in;
  return context.agreed != nullptr ? *context.agreed : built_in;
}

Context start(const CollectivesSettings& settings, bool yield, MPI_Comm comm, int nodes,
              std::vector<std::string>& problems) {
  Context context;
  context.test_nodes = static_cast<int>(settings.test_nodes);
  context.knomial_radix = static_cast<int>(settings.knomial_radix);
  context.trial_rounds = static_cast<int>(settings.allreduce_trials);
  context.yield = yield;
  context.one_node = nodes <= 1;
  if (!parse_algorithm(settings.allreduce, context.allreduce)) {
    problems.push_back("commtap: COMMTAP_ALLREDUCE=" + settings.allreduce + " is not one of " +
                       algorithm_names() + "; using native");
    context.allreduce = Algorithm::native;
  }
  // Only what a commtap algorithm needs: a native job, or auto on one node (the library's
  // everywhere), reads no file and measures nothing.
  if (leaves_allreduce_to_library(context)) return context;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  reverse_folds_for_tests(settings.test_reversed_fold == rank);
  auto agreed = std::make_shared<Agreement>();
  agreed->avoid = avoid_from_setting(settings.avoid_hosts, comm, rank);
  agreed->cost_model = agree_on_cost_model(settings, context, agreed->avoid, comm, rank);
  agreed->cost_model.library_short_bytes = library_short_bytes(comm, rank, context.yield);
  context.agreed = std::move(agreed);
  return context;
}

}  // namespace commtap::collectives
