#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "collectives/collectives.hpp"
#include "monitor/clock.hpp"
#include "world/world.hpp"

namespace commtap::collectives {
namespace {

// One entry of COMMTAP_AVOID_HOSTS as rank 0 sends it on: a host name, or a directed link
// "FROM>TO>EXTRA_ALPHA>EXTRA_BETA" (host names hold neither ',' nor '>').
std::string link_entry(const std::string& from, const std::string& to, double alpha, double beta) {
  char figures[64];
  std::snprintf(figures, sizeof figures, ">%.9g>%.9g", alpha, beta);
  return from + ">" + to + figures;
}

// A findings store's active findings of the last day, as entries: the hosts of slow_host and
// slow_host_network, and each slow_link with what crossing it costs by its evidence (the link
// probes' latency is half a round trip, so a link they found slow both ways may hide its whole
// delay in one direction: twice the excess is charged; messages give one-way times).
bool read_findings_store(const std::string& path, std::vector<std::string>& entries,
                         std::string& error) {
  sqlite3* db = nullptr;
  const std::string since = std::to_string(monitor::wall_ns() - 86'400'000'000'000ull);
  const std::string sql =
      "SELECT kind, substr(subject, 6), json_extract(evidence, '$.from'), "
      "json_extract(evidence, '$.to'), coalesce(json_extract(evidence, '$.both_directions'), 0), "
      "coalesce(json_extract(evidence, '$.latency_ns') - "
      "json_extract(evidence, '$.baseline_latency_ns'), json_extract(evidence, "
      "'$.median_latency_ns') - json_extract(evidence, '$.baseline_ns'), 0), "
      "json_extract(evidence, '$.source') = 'probes', json_extract(evidence, '$.mb_per_s'), "
      "json_extract(evidence, '$.baseline_mb_per_s') FROM findings WHERE active = 1 AND "
      "last_seen_ns > " +
      since +
      " AND (kind IN ('slow_host', 'slow_host_network') AND subject LIKE 'host %' OR "
      "kind = 'slow_link') ORDER BY kind, subject";
  auto add = [](void* out, int, char** v, char**) {
    auto& list = *static_cast<std::vector<std::string>*>(out);
    const std::string kind = v[0] != nullptr ? v[0] : "";
    if (kind != "slow_link") {
      if (v[1] != nullptr) list.emplace_back(v[1]);
      return 0;
    }
    if (v[2] == nullptr || v[3] == nullptr) return 0;
    const bool both = v[4] != nullptr && std::atoi(v[4]) != 0;
    const bool probes = v[6] != nullptr && std::atoi(v[6]) != 0;
    const double excess_ns = v[5] != nullptr ? std::max(0.0, std::atof(v[5])) : 0.0;
    const double alpha = excess_ns * 1e-9 * (probes && both ? 2 : 1);
    double beta = 0;
    if (v[7] != nullptr && v[8] != nullptr) {
      const double slow = std::atof(v[7]), healthy = std::atof(v[8]);
      if (slow > 0 && healthy > slow) beta = (1 / slow - 1 / healthy) * 1e-6;
    }
    list.push_back(link_entry(v[2], v[3], alpha, beta));
    if (both) list.push_back(link_entry(v[3], v[2], alpha, beta));
    return 0;
  };
  bool ok = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK;
  if (ok) ok = sqlite3_exec(db, sql.c_str(), add, &entries, nullptr) == SQLITE_OK;
  if (!ok) error = db != nullptr ? sqlite3_errmsg(db) : "cannot open";
  sqlite3_close(db);
  return ok;
}

// COMMTAP_AVOID_HOSTS, read by rank 0 and sent to all: comma-separated host names and links
// (FROM->TO, or A<->B for both directions, costs unmeasured), or @FILE, a findings store.
Avoid avoid_from_setting(const std::string& setting, MPI_Comm comm, int rank) {
  std::vector<std::string> entries;
  if (rank == 0 && !setting.empty()) {
    if (setting[0] == '@') {
      std::string error;
      if (!read_findings_store(setting.substr(1), entries, error)) {
        std::fprintf(stderr,
                     "commtap: COMMTAP_AVOID_HOSTS: cannot read findings from %s (%s); nothing "
                     "is avoided\n",
                     setting.c_str() + 1, error.c_str());
        entries.clear();
      }
    } else {
      std::size_t begin = 0;
      while (begin <= setting.size()) {
        const std::size_t comma = std::min(setting.find(',', begin), setting.size());
        const std::string item = setting.substr(begin, comma - begin);
        begin = comma + 1;
        const std::size_t both = item.find("<->"), one = item.find("->");
        if (item.empty() || item.find('>') == std::string::npos) {
          if (!item.empty()) entries.push_back(item);
        } else if (both != std::string::npos && both > 0 && both + 3 < item.size()) {
          entries.push_back(link_entry(item.substr(0, both), item.substr(both + 3), 0, 0));
          entries.push_back(link_entry(item.substr(both + 3), item.substr(0, both), 0, 0));
        } else if (both == std::string::npos && one != std::string::npos && one > 0 &&
                   one + 2 < item.size()) {
          entries.push_back(link_entry(item.substr(0, one), item.substr(one + 2), 0, 0));
        } else {
          std::fprintf(stderr,
                       "commtap: COMMTAP_AVOID_HOSTS: '%s' is neither a host nor a link "
                       "(FROM->TO, A<->B); ignored\n",
                       item.c_str());
        }
      }
    }
  }
  std::string list;
  for (const std::string& entry : entries) list += (list.empty() ? "" : ",") + entry;
  list = world::broadcast_string(list, comm, rank);
  Avoid avoid;
  std::size_t begin = 0;
  while (begin < list.size()) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string entry = list.substr(begin, comma - begin);
    begin = comma + 1;
    const std::size_t a = entry.find('>');
    if (a == std::string::npos) {
      avoid.hosts.push_back(entry);
      continue;
    }
    const std::size_t b = entry.find('>', a + 1), c = entry.find('>', b + 1);
    if (b == std::string::npos || c == std::string::npos) continue;
    avoid.links.push_back({entry.substr(0, a), entry.substr(a + 1, b - a - 1),
                           std::atof(entry.substr(b + 1, c - b - 1).c_str()),
                           std::atof(entry.substr(c + 1).c_str())});
  }
  return avoid;
}

// The model's source, decided by rank 0 (ranks of an MPMD launch may see other files): a model
// file if COMMTAP_MODEL names one; else a measurement now, with COMMTAP_CALIBRATE=1 (the
// default), if the algorithm asks the model anything (auto, and the forms it tunes); else the
// built-in values.
CostModel agree_on_cost_model(const Settings& settings, const Context& context, MPI_Comm comm,
                              int rank) {
  enum Source : int { built_in, file, measured };
  int source = !settings.model.empty()                                   ? file
               : settings.calibrate && asks_the_model(context.allreduce) ? measured
                                                                         : built_in;
  MPI_Request request;
  PMPI_Ibcast(&source, 1, MPI_INT, 0, comm, &request);
  world::wait_all(1, &request, context.yield);
  CostModel model;
  if (source == measured) {
    const Topology* topology = topology_of(MPI_COMM_WORLD, context.test_nodes, context.avoid);
    return measure_cost_model(*topology, model);
  }
  if (source == built_in) return model;
  if (rank == 0) {
    std::ifstream file(settings.model);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    std::string error = file ? "" : std::string("cannot read it: ") + std::strerror(errno);
    if (!error.empty() || !parse_cost_model(text, model, error))
      std::fprintf(stderr, "commtap: COMMTAP_MODEL=%s: %s; using the built-in cost model\n",
                   settings.model.c_str(), error.c_str());
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

Context start(const Settings& settings, MPI_Comm comm, std::vector<std::string>& problems) {
  Context context;
  context.test_nodes = static_cast<int>(settings.test_nodes);
  context.knomial_radix = static_cast<int>(settings.knomial_radix);
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
  reverse_folds_for_tests(settings.test_reversed_fold == rank);
  context.avoid = avoid_from_setting(settings.avoid_hosts, comm, rank);
  context.cost_model = agree_on_cost_model(settings, context, comm, rank);
  context.cost_model.library_short_bytes = library_short_bytes(comm, rank, context.yield);
  return context;
}

}  // namespace commtap::collectives
