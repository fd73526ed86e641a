// The cost model's parameters: measured on a topology (at MPI_Init with COMMTAP_CALIBRATE=init,
// or by `commtap calibrate`), written to and read from a small JSON file.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/collectives.hpp"

namespace commtap::collectives {

namespace {

constexpr int kTag = 0x7ca1;  // commtap's private communicators carry no other traffic now

// One-way time of `bytes` between `me` and `peer` on `comm` (the fastest of `repeats` round
// trips, halved); `me` < `peer` starts. Both ranks call it.
double one_way_s(MPI_Comm comm, int me, int peer, std::size_t bytes, int repeats) {
  std::vector<char> buffer(std::max<std::size_t>(1, bytes));
  const int count = static_cast<int>(bytes);
  double best = 1e30;
  for (int i = 0; i < repeats + 1; ++i) {  // the first round trip warms the path up
    const double start = PMPI_Wtime();
    if (me < peer) {
      PMPI_Send(buffer.data(), count, MPI_BYTE, peer, kTag, comm);
      PMPI_Recv(buffer.data(), count, MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE);
    } else {
      PMPI_Recv(buffer.data(), count, MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE);
      PMPI_Send(buffer.data(), count, MPI_BYTE, peer, kTag, comm);
    }
    if (i > 0) best = std::min(best, (PMPI_Wtime() - start) / 2);
  }
  return best;
}

// Latency and time per byte of one level from two message sizes.
void fit(MPI_Comm comm, int me, int peer, double& alpha, double& beta) {
  constexpr std::size_t kSmall = 8, kLarge = 256 * 1024;
  const double small = one_way_s(comm, me, peer, kSmall, 20);
  const double large = one_way_s(comm, me, peer, kLarge, 5);
  alpha = small;
  beta = std::max(0.0, (large - small) / static_cast<double>(kLarge - kSmall));
}

bool plausible(double value, double low, double high) {
  return std::isfinite(value) && value >= low && value <= high;
}

}  // namespace

CostModel measure_cost_model(const Topology& t, const CostModel& defaults) {
  // Every measurement involves flat rank 0 (local rank 0 of node 0, and leader 0), which then
  // tells everyone.
  CostModel model = defaults;
  if (t.local_size > 1 && t.node_index == 0 && t.local_rank <= 1)
    fit(t.node, t.local_rank, 1 - t.local_rank, model.intra_alpha, model.intra_beta);
  if (t.leaders != MPI_COMM_NULL && t.nodes > 1 && t.node_index <= 1)
    fit(t.leaders, t.node_index, 1 - t.node_index, model.inter_alpha, model.inter_beta);
  if (t.rank == 0) {
    std::vector<double> in(128 * 1024, 1.0), inout(in.size(), 2.0);
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      const double start = PMPI_Wtime();
      PMPI_Reduce_local(in.data(), inout.data(), static_cast<int>(in.size()), MPI_DOUBLE, MPI_SUM);
      best = std::min(best, PMPI_Wtime() - start);
    }
    model.gamma = best / static_cast<double>(in.size() * sizeof(double));
  }
  broadcast_cost_model(model, t.flat);
  return model;
}

void broadcast_cost_model(CostModel& m, MPI_Comm comm) {
  double values[5] = {m.intra_alpha, m.intra_beta, m.inter_alpha, m.inter_beta, m.gamma};
  PMPI_Bcast(values, 5, MPI_DOUBLE, 0, comm);
  m = {values[0], values[1], values[2], values[3], values[4]};
}

std::string cost_model_json(const CostModel& m, int ranks, int nodes) {
  char date[32] = {};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const nlohmann::json json = {
      {"format", "commtap-cost-model"},
      {"version", 1},
      {"intra", {{"alpha_s", m.intra_alpha}, {"beta_s_per_byte", m.intra_beta}}},
      {"inter", {{"alpha_s", m.inter_alpha}, {"beta_s_per_byte", m.inter_beta}}},
      {"gamma_s_per_byte", m.gamma},
      {"measured", {{"ranks", ranks}, {"nodes", nodes}, {"date", date}}}};
  return json.dump(2) + "\n";
}

bool parse_cost_model(const std::string& text, CostModel& model, std::string& error) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    error = "not JSON";
    return false;
  }
  if (json.value("format", "") != "commtap-cost-model" || json.value("version", 0) != 1) {
    error = "not a commtap cost model of version 1";
    return false;
  }
  CostModel m;
  try {
    m.intra_alpha = json.at("intra").at("alpha_s").get<double>();
    m.intra_beta = json.at("intra").at("beta_s_per_byte").get<double>();
    m.inter_alpha = json.at("inter").at("alpha_s").get<double>();
    m.inter_beta = json.at("inter").at("beta_s_per_byte").get<double>();
    m.gamma = json.at("gamma_s_per_byte").get<double>();
  } catch (const nlohmann::json::exception& e) {
    error = std::string("missing or wrong field: ") + e.what();
    return false;
  }
  // Latencies between 10 ns and 1 s, per-byte times between 0 and 1 us (1 MB/s).
  if (!plausible(m.intra_alpha, 1e-8, 1) || !plausible(m.inter_alpha, 1e-8, 1) ||
      !plausible(m.intra_beta, 0, 1e-6) || !plausible(m.inter_beta, 0, 1e-6) ||
      !plausible(m.gamma, 0, 1e-6)) {
    error = "a parameter is outside the plausible range";
    return false;
  }
  model = m;
  return true;
}

}  // namespace commtap::collectives
