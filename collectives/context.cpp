#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "collectives/collectives.hpp"
#include "monitor/clock.hpp"
#include "world/world.hpp"

namespace commtap::collectives {
namespace {

// COMMTAP_AVOID_HOSTS, read by rank 0: host names, or @FILE, a findings store whose active
// slow_host/slow_host_network findings of the last day name the hosts ("host NAME").
std::vector<std::string> hosts_to_avoid(const std::string& setting, MPI_Comm comm, int rank) {
  std::string list;
  if (rank == 0 && !setting.empty()) {
    if (setting[0] != '@') {
      list = setting;
    } else {
      sqlite3* db = nullptr;
      const std::string path = setting.substr(1);
      const std::string since = std::to_string(monitor::wall_ns() - 86'400'000'000'000ull);
      const std::string sql =
          "SELECT DISTINCT substr(subject, 6) FROM findings WHERE active = 1 AND kind IN "
          "('slow_host', 'slow_host_network') AND subject LIKE 'host %' AND last_seen_ns > " +
          since;
      auto add = [](void* out, int, char** values, char**) {
        auto* text = static_cast<std::string*>(out);
        if (values[0] != nullptr) *text += (text->empty() ? "" : ",") + std::string(values[0]);
        return 0;
      };
      if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK ||
          sqlite3_exec(db, sql.c_str(), add, &list, nullptr) != SQLITE_OK)
        std::fprintf(stderr,
                     "commtap: COMMTAP_AVOID_HOSTS: cannot read findings from %s (%s); no host "
                     "is avoided\n",
                     path.c_str(), db != nullptr ? sqlite3_errmsg(db) : "cannot open");
      sqlite3_close(db);
    }
  }
  list = world::broadcast_string(list, comm, rank);
  std::vector<std::string> hosts;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    if (comma > begin) hosts.push_back(list.substr(begin, comma - begin));
    begin = comma + 1;
  }
  return hosts;
}

CostModel agree_on_cost_model(const Settings& settings, const Context& context, MPI_Comm comm,
                              int rank) {
  CostModel model;
  if (settings.calibrate) {
    const Topology* topology = topology_of(MPI_COMM_WORLD, context.test_nodes, context.avoid_hosts);
    return measure_cost_model(*topology, model);
  }
  if (settings.model.empty()) return model;
  if (rank == 0) {
    std::ifstream file(settings.model);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::string error = file ? "" : std::string("cannot read it: ") + std::strerror(errno);
    if (!error.empty() || !parse_cost_model(text, model, error))
      std::fprintf(stderr, "commtap: COMMTAP_MODEL=%s: %s; using the built-in cost model\n",
                   settings.model.c_str(), error.c_str());
  }
  broadcast_cost_model(model, comm);
  return model;
}

}  // namespace

Context start(const Settings& settings, MPI_Comm comm, std::vector<std::string>& problems) {
  Context context;
  context.test_nodes = static_cast<int>(settings.test_nodes);
  context.yield = settings.yield;
  if (!parse_algorithm(settings.allreduce, context.allreduce)) {
    problems.push_back("commtap: COMMTAP_ALLREDUCE=" + settings.allreduce + " is not one of " +
                       algorithm_names() + "; using native");
    context.allreduce = Algorithm::native;
  }
  // Only what a commtap algorithm needs: a native job reads no file and measures nothing.
  if (context.allreduce == Algorithm::native) return context;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  context.avoid_hosts = hosts_to_avoid(settings.avoid_hosts, comm, rank);
  context.cost_model = agree_on_cost_model(settings, context, comm, rank);
  return context;
}

}  // namespace commtap::collectives
