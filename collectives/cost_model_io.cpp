// The cost model outside one process: the JSON of a model file (written by `commtap calibrate`,
// read with COMMTAP_MODEL, checked for plausibility) and the array a rank broadcasts to the
// others.
#include <mpi.h>

#include <cmath>
#include <ctime>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/cost_model.hpp"
#include "world/world.hpp"

namespace commtap::collectives {

namespace {

// Measured points are positive sizes and times, sizes ascending.
bool plausible_points(const std::vector<std::pair<double, double>>& points) {
  double previous = 0;
  for (const auto& [bytes, seconds] : points) {
    if (!std::isfinite(bytes) || !std::isfinite(seconds) || bytes <= previous || seconds <= 0 ||
        seconds > 10)
      return false;
    previous = bytes;
  }
  return true;
}

bool plausible(double value, double low, double high) {
  return std::isfinite(value) && value >= low && value <= high;
}

}  // namespace

void broadcast_cost_model(CostModel& m, MPI_Comm comm, bool yield, int root) {
  // One array: the seven parameters, the shape, the number of each level's points, the points
  // (two numbers each), then four numbers per choice.
  std::vector<double> values = {m.intra_alpha,
                                m.intra_beta,
                                m.inter_alpha,
                                m.inter_beta,
                                m.gamma,
                                m.intra_overhead,
                                m.inter_overhead,
                                static_cast<double>(m.measured_ranks),
                                static_cast<double>(m.measured_nodes),
                                static_cast<double>(m.measured_largest_node),
                                static_cast<double>(m.intra_points.size()),
                                static_cast<double>(m.inter_points.size())};
  for (const auto* points : {&m.intra_points, &m.inter_points})
    for (const auto& [bytes, seconds] : *points) values.insert(values.end(), {bytes, seconds});
  for (const MeasuredChoice& c : m.choices)
    values.insert(values.end(), {static_cast<double>(c.up_to_bytes),
                                 static_cast<double>(static_cast<int>(c.algorithm)), c.native_us,
                                 c.algorithm_us});
  int length = static_cast<int>(values.size());
  MPI_Request request;
  PMPI_Ibcast(&length, 1, MPI_INT, root, comm, &request);
  world::wait_all(1, &request, yield);
  values.resize(static_cast<std::size_t>(length));
  PMPI_Ibcast(values.data(), length, MPI_DOUBLE, root, comm, &request);
  world::wait_all(1, &request, yield);
  m.intra_alpha = values[0];
  m.intra_beta = values[1];
  m.inter_alpha = values[2];
  m.inter_beta = values[3];
  m.gamma = values[4];
  m.intra_overhead = values[5];
  m.inter_overhead = values[6];
  m.measured_ranks = static_cast<int>(values[7]);
  m.measured_nodes = static_cast<int>(values[8]);
  m.measured_largest_node = static_cast<int>(values[9]);
  std::size_t i = 12;
  for (auto [points, n] : {std::pair{&m.intra_points, values[10]}, {&m.inter_points, values[11]}}) {
    points->clear();
    for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k, i += 2)
      points->emplace_back(values[i], values[i + 1]);
  }
  m.choices.clear();
  for (; i + 3 < values.size(); i += 4)
    m.choices.push_back({static_cast<std::int64_t>(values[i]),
                         static_cast<Algorithm>(static_cast<int>(values[i + 1])), values[i + 2],
                         values[i + 3]});
}

std::string cost_model_json(const CostModel& m, int ranks, int nodes) {
  char date[32] = {};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  nlohmann::json json = {{"format", "commtap-cost-model"},
                         {"version", 1},
                         {"intra",
                          {{"alpha_s", m.intra_alpha},
                           {"beta_s_per_byte", m.intra_beta},
                           {"overhead_s", m.intra_overhead}}},
                         {"inter",
                          {{"alpha_s", m.inter_alpha},
                           {"beta_s_per_byte", m.inter_beta},
                           {"overhead_s", m.inter_overhead}}},
                         {"gamma_s_per_byte", m.gamma},
                         {"measured", {{"ranks", ranks}, {"nodes", nodes}, {"date", date}}}};
  // [[bytes, one-way seconds], ...] where measured.
  if (!m.intra_points.empty()) json["intra"]["one_way_s"] = m.intra_points;
  if (!m.inter_points.empty()) json["inter"]["one_way_s"] = m.inter_points;
  if (!m.choices.empty()) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const MeasuredChoice& c : m.choices)
      sizes.push_back({{"up_to_bytes", c.up_to_bytes},
                       {"algorithm", algorithm_name(c.algorithm)},
                       {"native_us", c.native_us},
                       {"best_other_us", c.algorithm_us}});
    json["choices"] = {{"ranks", m.measured_ranks},
                       {"nodes", m.measured_nodes},
                       {"largest_node", m.measured_largest_node},
                       {"sizes", sizes}};
  }
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
    // Files written before the per-message cost was measured keep the built-in one.
    m.intra_overhead = json.at("intra").value("overhead_s", m.intra_overhead);
    m.inter_overhead = json.at("inter").value("overhead_s", m.inter_overhead);
    // And before the one-way times were: the line alone.
    if (json.at("intra").contains("one_way_s"))
      m.intra_points =
          json.at("intra").at("one_way_s").get<std::vector<std::pair<double, double>>>();
    if (json.at("inter").contains("one_way_s"))
      m.inter_points =
          json.at("inter").at("one_way_s").get<std::vector<std::pair<double, double>>>();
    if (json.contains("choices")) {
      const nlohmann::json& choices = json.at("choices");
      m.measured_ranks = choices.at("ranks").get<int>();
      m.measured_nodes = choices.at("nodes").get<int>();
      m.measured_largest_node = choices.at("largest_node").get<int>();
      std::int64_t previous = 0;
      for (const nlohmann::json& size : choices.at("sizes")) {
        MeasuredChoice c;
        c.up_to_bytes = size.at("up_to_bytes").get<std::int64_t>();
        const std::string name = size.at("algorithm").get<std::string>();
        if (!parse_algorithm(name, c.algorithm) || c.algorithm == Algorithm::automatic) {
          error = "choices: '" + name + "' is not an algorithm";
          return false;
        }
        if (c.up_to_bytes <= previous) {
          error = "choices: sizes must be positive and ascending";
          return false;
        }
        previous = c.up_to_bytes;
        c.native_us = size.value("native_us", 0.0);
        c.algorithm_us = size.value("best_other_us", 0.0);
        m.choices.push_back(c);
      }
      if (m.measured_ranks < 1 || m.measured_nodes < 1 || m.measured_largest_node < 1) {
        error = "choices: the shape must be positive";
        return false;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    error = std::string("missing or wrong field: ") + e.what();
    return false;
  }
  // Latencies between 10 ns and 1 s, per-byte times between 0 and 1 us (1 MB/s), per-message
  // costs between 0 and 0.1 s, one-way times positive and below 10 s, at ascending sizes.
  if (!plausible(m.intra_alpha, 1e-8, 1) || !plausible(m.inter_alpha, 1e-8, 1) ||
      !plausible(m.intra_beta, 0, 1e-6) || !plausible(m.inter_beta, 0, 1e-6) ||
      !plausible(m.gamma, 0, 1e-6) || !plausible(m.intra_overhead, 0, 0.1) ||
      !plausible(m.inter_overhead, 0, 0.1) || !plausible_points(m.intra_points) ||
      !plausible_points(m.inter_points)) {
    error = "a parameter is outside the plausible range";
    return false;
  }
  model = m;
  return true;
}

}  // namespace commtap::collectives
