// `commtap report`: one self-contained HTML page per job (inline SVG and CSS, no scripts, no
// network), so that a person sees the slow link, the late rank and the findings at a glance.
// The drawn elements carry ids and classes (time-axis, heat-cell, link-cell, site-line, point)
// so that tests/mpi/report.sh can count them in the page as a browser renders it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/health.hpp"
#include "analyzer/statistics.hpp"

namespace commtap::analyzer {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double v, int decimals = 1) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

// A value with as many decimals as a tick step of `step` needs (0.25 -> 2, 5 -> 0).
std::string tick_text(double v, double step) {
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 6);
  return number(v, decimals);
}

std::string attr(double v) {
  return number(v, 1);
}

// Sequential colour scale (ColorBrewer's YlOrRd) for t in [0, 1]: pale yellow to dark red.
std::string ramp(double t) {
  static const int stops[][3] = {
      {255, 255, 204}, {254, 217, 118}, {253, 141, 60}, {227, 26, 28}, {128, 0, 38}};
  constexpr int kLast = static_cast<int>(sizeof stops / sizeof stops[0]) - 1;
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * kLast;
  const int i = std::min(kLast - 1, static_cast<int>(t));
  const double f = t - i;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "rgb(%d,%d,%d)",
                static_cast<int>(stops[i][0] + f * (stops[i + 1][0] - stops[i][0])),
                static_cast<int>(stops[i][1] + f * (stops[i + 1][1] - stops[i][1])),
                static_cast<int>(stops[i][2] + f * (stops[i + 1][2] - stops[i][2])));
  return buffer;
}

// Ratio to the best cell (1x..10x and more) on a log scale, for the link matrices.
double ratio_position(double ratio) {
  return std::clamp(std::log10(std::max(1.0, ratio)), 0.0, 1.0);
}

// Tick values 1, 2 or 5 x 10^k apart from lo to hi, at most `most` of them.
std::vector<double> ticks(double lo, double hi, int most, double* step_out = nullptr) {
  const double span = std::max(hi - lo, 1e-12);
  const double rough = span / std::max(1, most - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 5.0})
    if (magnitude * m >= rough) {
      step = magnitude * m;
      break;
    }
  if (step_out != nullptr) *step_out = step;
  std::vector<double> out;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

// The top of a value axis: the first tick at or above `top`.
double nice_top(double top) {
  double step = 1;
  ticks(0, std::max(top, 1e-6), 6, &step);
  return std::max(step, std::ceil(top / step - 1e-9) * step);
}

// The area of a chart in pixels and the ranges it shows: time in seconds since the job's start
// across, a value up.
struct Plot {
  double left = 60, right = 700, top = 24, bottom = 244;
  double t0 = 0, t1 = 1;
  double v1 = 1;  // the value at the top (the bottom is 0)
  double x(double t) const { return left + (right - left) * (t - t0) / std::max(1e-9, t1 - t0); }
  double y(double v) const { return bottom - (bottom - top) * v / std::max(1e-12, v1); }
};

// A time axis under the plot: ticks and labels in seconds.
std::string time_axis(const Plot& p) {
  std::string svg = "<g class='time-axis'><line x1='" + attr(p.left) + "' y1='" + attr(p.bottom) +
                    "' x2='" + attr(p.right) + "' y2='" + attr(p.bottom) + "' stroke='#333'/>";
  double step = 1;
  for (double t : ticks(p.t0, p.t1, 9, &step)) {
    const std::string x = attr(p.x(t));
    svg += "<line class='tick' x1='" + x + "' y1='" + attr(p.bottom) + "' x2='" + x + "' y2='" +
           attr(p.bottom + 5) + "' stroke='#333'/><text class='tick-label' x='" + x + "' y='" +
           attr(p.bottom + 17) + "' text-anchor='middle'>" + tick_text(t, step) + "</text>";
  }
  return svg + "<text x='" + attr(p.right) + "' y='" + attr(p.bottom + 31) +
         "' text-anchor='end'>time since the job's start (s)</text></g>";
}

// A value axis on the left: ticks, labels and light grid lines across the plot.
std::string value_axis(const Plot& p, const std::string& unit) {
  std::string svg = "<g class='value-axis'><line x1='" + attr(p.left) + "' y1='" + attr(p.top) +
                    "' x2='" + attr(p.left) + "' y2='" + attr(p.bottom) + "' stroke='#333'/>";
  double step = 1;
  for (double v : ticks(0, p.v1, 6, &step)) {
    const std::string y = attr(p.y(v));
    svg += "<line class='grid' x1='" + attr(p.left) + "' y1='" + y + "' x2='" + attr(p.right) +
           "' y2='" + y + "' stroke='#e4e4e4'/><line class='tick' x1='" + attr(p.left - 5) +
           "' y1='" + y + "' x2='" + attr(p.left) + "' y2='" + y +
           "' stroke='#333'/><text class='tick-label' x='" + attr(p.left - 8) + "' y='" +
           attr(p.y(v) + 4) + "' text-anchor='end'>" + tick_text(v, step) + "</text>";
  }
  return svg + "<text x='4' y='" + attr(p.top - 12) + "'>" + escape(unit) + "</text></g>";
}

// A legend of a colour scale: a gradient bar from 0 to 1 and labelled ticks at `marks`
// (position in [0, 1], label).
std::string colour_legend(const std::string& id, double x, double y, const std::string& title,
                          const std::vector<std::pair<double, std::string>>& marks) {
  const double width = 200, height = 10;
  std::string svg = "<g class='legend'><defs><linearGradient id='" + id + "'>";
  for (int i = 0; i <= 8; ++i)
    svg += "<stop offset='" + number(i / 8.0, 3) + "' stop-color='" + ramp(i / 8.0) + "'/>";
  svg += "</linearGradient></defs><text x='" + attr(x) + "' y='" + attr(y - 4) + "'>" +
         escape(title) + "</text><rect x='" + attr(x) + "' y='" + attr(y) + "' width='" +
         attr(width) + "' height='" + attr(height) + "' fill='url(#" + id + ")' stroke='#999'/>";
  for (const auto& [at, label] : marks) {
    const std::string mx = attr(x + width * at);
    svg += "<line x1='" + mx + "' y1='" + attr(y + height) + "' x2='" + mx + "' y2='" +
           attr(y + height + 4) + "' stroke='#333'/><text x='" + mx + "' y='" +
           attr(y + height + 15) + "' text-anchor='middle'>" + escape(label) + "</text>";
  }
  return svg + "</g>";
}

// The legend of the link matrices: the ratio to the best pair, 1x to 10x.
std::string ratio_legend(const std::string& id, double x, double y, const std::string& what) {
  return colour_legend(
      id, x, y, what,
      {{0, "1x"}, {ratio_position(2), "2x"}, {ratio_position(5), "5x"}, {1, "10x+"}});
}

// One cell of a host-by-host matrix: its colour, up to two lines of text, and a tooltip.
struct MatrixCell {
  std::string fill = "#eee";
  std::string line1 = "-", line2;
  std::string title;
  bool measured = false;
};

// Sender hosts as rows, receivers as columns; `cell` is asked for every pair of two hosts.
template <typename CellOf>
std::string host_matrix(const std::string& id, const std::vector<std::string>& hosts,
                        const std::string& legend_title, CellOf cell) {
  const int size = 70, left = 120, top = 40;
  const int n = static_cast<int>(hosts.size());
  const int width = std::max(left + size * n + 20, left + 240);
  const int height = top + size * n + 60;
  std::string svg = "<svg id='" + id + "' class='link-matrix' width='" + std::to_string(width) +
                    "' height='" + std::to_string(height) + "' font-size='11'>";
  svg += "<text x='" + std::to_string(left) + "' y='14'>receiver &#8594;</text>";
  for (int i = 0; i < n; ++i) {
    const int x = left + size * i, y = top + size * i;
    svg += "<text x='" + std::to_string(x + 4) + "' y='" + std::to_string(top - 6) + "'>" +
           escape(hosts[static_cast<std::size_t>(i)]) + "</text>";
    svg += "<text x='4' y='" + std::to_string(y + size / 2) + "'>" +
           escape(hosts[static_cast<std::size_t>(i)]) + " &#8594;</text>";
  }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const int x = left + size * j, y = top + size * i;
      const std::string& from = hosts[static_cast<std::size_t>(i)];
      const std::string& to = hosts[static_cast<std::size_t>(j)];
      MatrixCell c;
      if (i == j)
        c.line1.clear();
      else
        c = cell(from, to);
      if (c.title.empty()) c.title = from + " -> " + to + (i == j ? " (same host)" : ": no data");
      svg += std::string("<g class='") + (c.measured ? "link-cell" : "link-empty") + "'><title>" +
             escape(c.title) + "</title><rect x='" + std::to_string(x) + "' y='" +
             std::to_string(y) + "' width='" + std::to_string(size - 2) + "' height='" +
             std::to_string(size - 2) + "' fill='" + c.fill + "' stroke='#999'/>";
      svg += "<text x='" + std::to_string(x + 5) + "' y='" + std::to_string(y + size / 2 - 4) +
             "'>" + escape(c.line1) + "</text>";
      if (!c.line2.empty())
        svg += "<text x='" + std::to_string(x + 5) + "' y='" + std::to_string(y + size / 2 + 10) +
               "'>" + escape(c.line2) + "</text>";
      svg += "</g>";
    }
  svg += ratio_legend(id + "-scale", left, top + size * n + 24, legend_title);
  return svg + "</svg>";
}

std::string link_matrix(const nlohmann::json& details) {
  if (!details.contains("links") || details["links"].empty())
    return "<p>No joined point-to-point messages between different hosts.</p>";
  std::map<std::pair<std::string, std::string>, nlohmann::json> cells;
  double fastest = 1e300;
  for (const auto& cell : details["links"]) {
    cells[{cell["from"], cell["to"]}] = cell;
    fastest = std::min(fastest, cell["median_us"].get<double>());
  }
  const std::string svg = host_matrix(
      "link-messages", details["hosts"].get<std::vector<std::string>>(),
      "latency / the fastest pair's", [&](const std::string& from, const std::string& to) {
        MatrixCell c;
        auto found = cells.find({from, to});
        if (found == cells.end()) return c;
        const double us = found->second["median_us"].get<double>();
        c.measured = true;
        c.fill = ramp(ratio_position(us / std::max(1e-3, fastest)));
        c.line1 = number(us, us < 100 ? 1 : 0) + " us";
        c.title = from + " -> " + to + ": median " + c.line1 + " over " +
                  std::to_string(found->second["messages"].get<std::uint64_t>()) + " messages" +
                  (found->second.value("slow", false) ? " (slow)" : "");
        return c;
      });
  return svg +
         "<p class='caption'>The job's own messages: median one-way latency (us, send to "
         "receive on rank 0's clock) of the sampled messages, sender row to receiver column. "
         "Colour: times the fastest pair's latency.</p>";
}

// The link probes: latency and throughput of every directed host pair, each in its own matrix
// coloured by how far it is from the best pair (a delayed link and a rate-limited one both show).
std::string probe_matrices(const nlohmann::json& details) {
  if (!details.contains("probed_links") || details["probed_links"].empty())
    return "<p>No link probes (one host, or COMMTAP_PROBE_INTERVAL=0).</p>";
  std::map<std::pair<std::string, std::string>, nlohmann::json> cells;
  std::vector<std::string> hosts;
  double best_us = 1e300, best_mb = 0;
  for (const auto& cell : details["probed_links"]) {
    const std::string from = cell["from"], to = cell["to"];
    cells[{from, to}] = cell;
    for (const std::string& host : {from, to})
      if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
    best_us = std::min(best_us, cell["latency_us"].get<double>());
    best_mb = std::max(best_mb, cell["mb_per_s"].get<double>());
  }
  std::sort(hosts.begin(), hosts.end());
  auto describe = [&](const std::string& from, const std::string& to, const nlohmann::json& p) {
    const double us = p["latency_us"].get<double>(), mb = p["mb_per_s"].get<double>();
    return from + " -> " + to + ": median of " + std::to_string(p["rounds"].get<int>()) +
           " probe rounds, " + number(us, us < 100 ? 1 : 0) + " us latency, " +
           number(mb, mb < 100 ? 1 : 0) + " MB/s" + (p.value("slow", false) ? " (slow)" : "");
  };
  // One matrix of one measure: `worse` is how many times worse than the best pair a value is.
  auto matrix = [&](const char* id, const char* legend, const char* key, const char* unit,
                    auto worse) {
    return host_matrix(id, hosts, legend, [&](const std::string& from, const std::string& to) {
      MatrixCell c;
      auto found = cells.find({from, to});
      if (found == cells.end()) return c;
      const double value = found->second[key].get<double>();
      c.measured = true;
      c.fill = ramp(ratio_position(worse(value)));
      c.line1 = number(value, value < 100 ? 1 : 0) + " " + unit;
      c.title = describe(from, to, found->second);
      return c;
    });
  };
  const std::string latency =
      matrix("link-probe-latency", "latency / the best pair's", "latency_us", "us",
             [&](double us) { return us / std::max(1e-3, best_us); });
  const std::string throughput =
      matrix("link-probe-throughput", "the best pair's throughput / this one's", "mb_per_s", "MB/s",
             [&](double mb) { return best_mb / std::max(1e-3, mb); });
  return "<div class='row'><div><h4>Latency (us)</h4>" + latency +
         "</div><div><h4>Throughput (MB/s)</h4>" + throughput +
         "</div></div><p class='caption'>Link probes of the newest rounds, sender row to receiver "
         "column: median latency (us, half a round trip of a small message) and throughput "
         "(MB/s, of the probe's large transfer). Colour: how many times worse than the best "
         "pair.</p>";
}

// The kernel's TCP counters (detect_lost_packets' details.tcp_links): per directed host pair the
// data it carried and the share of segments lost, coloured by that share (0.1% is already many
// times what a healthy link loses). A job of collectives only shows its traffic here too.
std::string tcp_matrix(const nlohmann::json& details) {
  if (!details.contains("tcp_links") || details["tcp_links"].empty())
    return "<p>No TCP traffic between hosts in the analyzed span (one host, an MPI that does not "
           "run over TCP, COMMTAP_TCP_INTERVAL=0, or files before version 10).</p>";
  std::map<std::pair<std::string, std::string>, nlohmann::json> cells;
  for (const auto& cell : details["tcp_links"]) cells[{cell["from"], cell["to"]}] = cell;
  const std::string svg =
      host_matrix("link-tcp", details["hosts"].get<std::vector<std::string>>(),
                  "1 + lost per mille", [&](const std::string& from, const std::string& to) {
                    MatrixCell c;
                    auto found = cells.find({from, to});
                    if (found == cells.end()) return c;
                    const auto segments = found->second["segments"].get<std::uint64_t>();
                    const auto lost = found->second["lost"].get<std::uint64_t>();
                    const double share = segments ? static_cast<double>(lost) / segments : 0.0;
                    const double mb = found->second.value("bytes", 0.0) / 1e6;
                    c.measured = true;
                    c.fill = ramp(ratio_position(1 + 1000 * share));
                    c.line1 = number(100 * share, 2) + "% lost";
                    c.line2 = number(mb, mb < 100 ? 1 : 0) + " MB";
                    c.title = from + " -> " + to + ": " + std::to_string(lost) + " of " +
                              std::to_string(segments) + " segments lost (" +
                              std::to_string(found->second["resent"].get<std::uint64_t>()) +
                              " resent), " + c.line2 + " acknowledged";
                    return c;
                  });
  return svg +
         "<p class='caption'>The kernel's counters of the ranks' TCP connections over the last 6 "
         "analysis windows (--window), sender row to receiver column: segments lost (resent, less "
         "the resends the "
         "receiver already had) as a share of those sent, and the data acknowledged.</p>";
}

// The lateness table of detect_slow_nodes: per rank (in `ranks` order) its median lateness in
// each window, null where it had too few instances.
struct Lateness {
  double window_s = 10, first_s = 0, end_s = 1;
  std::vector<int> ranks;
  std::vector<std::vector<std::optional<double>>> ms;  // [rank index][window]
  std::size_t windows = 0;
  double top = 0;  // the largest value

  // The time a window covers on the job's clock: its own span, cut at the job's end.
  double start(std::size_t w) const { return first_s + static_cast<double>(w) * window_s; }
  double end(std::size_t w) const {
    return std::max(start(w), std::min(start(w) + window_s, end_s));
  }
};

std::optional<Lateness> read_lateness(const nlohmann::json& details, double job_end_s) {
  if (!details.contains("lateness")) return std::nullopt;
  const auto& l = details["lateness"];
  Lateness out;
  out.window_s = l.value("window_s", 10.0);
  out.first_s = l.value("first_s", 0.0);
  out.end_s = std::max(job_end_s, l.value("last_s", 0.0));
  out.ranks = l["ranks"].get<std::vector<int>>();
  for (const auto& row : l["ms"]) {
    std::vector<std::optional<double>> values;
    for (const auto& v : row) {
      if (v.is_null()) {
        values.emplace_back();
      } else {
        values.emplace_back(v.get<double>());
        out.top = std::max(out.top, v.get<double>());
      }
    }
    out.windows = std::max(out.windows, values.size());
    out.ms.push_back(std::move(values));
  }
  if (out.ranks.empty() || out.windows == 0 || out.ms.size() != out.ranks.size())
    return std::nullopt;
  for (auto& row : out.ms) row.resize(out.windows);
  return out;
}

std::string hue(int index) {
  return "hsl(" + std::to_string((index * 67) % 360) + ",70%,40%)";
}

// Lines over windows (one per series, broken where a value is missing) with a marker at every
// value, so that a job of one window or two shows its data as points.
struct Series {
  std::string label;
  std::vector<std::optional<double>> values;
};

// Markers on every value when there are at most this many per line (a long job's line would
// be hidden under them), else only on values without a neighbour (no line shows them).
constexpr std::size_t kMostPoints = 60;

std::string line_chart(const std::string& id, const std::string& line_class, const Plot& plot,
                       const std::string& unit, const std::vector<Series>& series,
                       const std::vector<double>& centers) {
  const int height = static_cast<int>(plot.bottom) + 40;
  const int legend_lines = static_cast<int>(series.size());
  std::string svg = "<svg id='" + id + "' width='" + attr(plot.right + 330) + "' height='" +
                    std::to_string(std::max(height, 24 + 15 * legend_lines)) + "' font-size='11'>" +
                    value_axis(plot, unit) + time_axis(plot);
  for (std::size_t s = 0; s < series.size(); ++s) {
    const std::string colour = hue(static_cast<int>(s));
    std::string path, points;
    bool pen_down = false;
    for (std::size_t i = 0; i < series[s].values.size() && i < centers.size(); ++i) {
      if (!series[s].values[i]) {
        pen_down = false;
        continue;
      }
      const double x = plot.x(centers[i]), y = plot.y(*series[s].values[i]);
      path += (pen_down ? "L" : "M") + attr(x) + "," + attr(y) + " ";
      pen_down = true;
      const auto& v = series[s].values;
      const bool alone = (i == 0 || !v[i - 1]) && (i + 1 == v.size() || !v[i + 1]);
      if (v.size() > kMostPoints && !alone) continue;
      points += "<circle class='point' cx='" + attr(x) + "' cy='" + attr(y) + "' r='3' fill='" +
                colour + "'><title>" + escape(series[s].label) + " at " + number(centers[i], 2) +
                " s: " + number(*series[s].values[i], 2) + " " + escape(unit) + "</title></circle>";
    }
    svg += "<g class='series'><path class='" + line_class + "' d='" + path +
           "' fill='none' stroke='" + colour + "' stroke-width='2'><title>" +
           escape(series[s].label) + "</title></path>" + points + "</g>";
    std::string label = series[s].label;
    if (label.size() > 52) label = label.substr(0, 50) + "...";
    svg += "<text x='" + attr(plot.right + 12) + "' y='" + std::to_string(20 + 15 * s) +
           "' fill='" + colour + "'><title>" + escape(series[s].label) + "</title>" +
           escape(label) + "</text>";
  }
  return svg + "</svg>";
}

// The median lateness of every rank per window as lines, for a few ranks; with many, lines
// cannot be told apart, so the highest and the median rank per window stand for them (the heat
// map below shows every rank).
constexpr std::size_t kMostRankLines = 16;

std::string lateness_lines(const Lateness& l) {
  Plot plot;
  plot.t0 = 0;
  plot.t1 = l.end_s;
  plot.v1 = nice_top(std::max(l.top, 0.001));
  std::vector<double> centers;
  for (std::size_t w = 0; w < l.windows; ++w) centers.push_back((l.start(w) + l.end(w)) / 2);
  std::vector<Series> series;
  if (l.ranks.size() <= kMostRankLines) {
    for (std::size_t r = 0; r < l.ranks.size(); ++r)
      series.push_back({"rank " + std::to_string(l.ranks[r]), l.ms[r]});
  } else {
    Series highest{"highest rank", {}}, median{"median rank", {}};
    for (std::size_t w = 0; w < l.windows; ++w) {
      std::vector<double> values;
      for (const auto& row : l.ms)
        if (row[w]) values.push_back(*row[w]);
      highest.values.push_back(
          values.empty() ? std::nullopt
                         : std::optional<double>(*std::max_element(values.begin(), values.end())));
      median.values.push_back(values.empty() ? std::nullopt
                                             : std::optional<double>(median_of(values)));
    }
    series = {highest, median};
  }
  return line_chart("lateness-chart", "lateness-line", plot, "ms", series, centers) +
         "<p class='caption'>Median lateness (ms: arrival at a collective after the earliest "
         "rank's, on rank 0's clock) per analysis window of " +
         number(l.window_s, l.window_s < 1 ? 2 : 0) +
         " s (--window), at the window's middle; a window where a rank had fewer than "
         "--min-instances aligned collectives has no value." +
         (l.ranks.size() > kMostRankLines
              ? " With " + with_commas(l.ranks.size()) +
                    " ranks, the highest and the median rank of each window are drawn."
              : std::string()) +
         "</p>";
}

// Ranks x windows as coloured cells: at 1,000 ranks, where lines are a blur, the late rank is a
// dark row. More ranks than fit at two pixels a row are binned (each row the highest of its
// ranks, so a late rank is never averaged away).
constexpr std::size_t kMostHeatRows = 200;

std::string lateness_heat_map(const Lateness& l) {
  const std::size_t ranks = l.ranks.size();
  const std::size_t per_row = (ranks + kMostHeatRows - 1) / kMostHeatRows;
  const std::size_t rows = (ranks + per_row - 1) / per_row;
  const double row_height = std::clamp(440.0 / static_cast<double>(rows), 2.0, 22.0);
  Plot plot;
  plot.left = 90;
  plot.top = 10;
  plot.bottom = plot.top + row_height * static_cast<double>(rows);
  plot.t0 = 0;
  plot.t1 = l.end_s;
  const double top = std::max(l.top, 0.001);
  std::string svg = "<svg id='lateness-heatmap' data-rows='" + std::to_string(rows) +
                    "' data-windows='" + std::to_string(l.windows) + "' data-ranks-per-row='" +
                    std::to_string(per_row) + "' width='" + attr(plot.right + 30) + "' height='" +
                    attr(plot.bottom + 90) + "' font-size='11'>";
  auto row_name = [&](std::size_t row) {
    const std::size_t first = row * per_row, last = std::min(ranks, first + per_row) - 1;
    return per_row == 1
               ? "rank " + std::to_string(l.ranks[first])
               : "ranks " + std::to_string(l.ranks[first]) + "-" + std::to_string(l.ranks[last]);
  };
  svg += "<g class='heat-cells'>";
  for (std::size_t row = 0; row < rows; ++row) {
    const double y = plot.top + row_height * static_cast<double>(row);
    for (std::size_t w = 0; w < l.windows; ++w) {
      std::optional<double> value;
      for (std::size_t r = row * per_row; r < std::min(ranks, (row + 1) * per_row); ++r)
        if (l.ms[r][w]) value = std::max(value.value_or(0.0), *l.ms[r][w]);
      const double x0 = plot.x(l.start(w)), x1 = std::max(plot.x(l.end(w)), x0 + 2);
      svg += "<rect class='heat-cell' x='" + attr(x0) + "' y='" + attr(y) + "' width='" +
             attr(x1 - x0) + "' height='" + attr(row_height) + "' fill='" +
             (value ? ramp(*value / top) : std::string("#ddd")) + "'><title>" + row_name(row) +
             ", " + number(l.start(w), 2) + "-" + number(l.end(w), 2) +
             " s: " + (value ? number(*value, 3) + " ms" : std::string("too few collectives")) +
             "</title></rect>";
    }
  }
  svg += "</g>";
  // Row labels no closer than 12 px.
  const std::size_t label_every =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(12.0 / row_height)));
  for (std::size_t row = 0; row < rows; row += label_every)
    svg += "<text x='" + attr(plot.left - 6) + "' y='" +
           attr(plot.top + row_height * (static_cast<double>(row) + 0.5) + 4) +
           "' text-anchor='end'>" + row_name(row) + "</text>";
  svg += time_axis(plot);
  std::vector<std::pair<double, std::string>> marks;
  double step = 1;
  for (double v : ticks(0, top, 5, &step)) marks.emplace_back(v / top, tick_text(v, step));
  svg += colour_legend("lateness-scale", plot.left, plot.bottom + 60,
                       "median lateness (ms); grey: too few collectives", marks);
  std::string caption = "Median lateness (ms) of every rank (row) in every analysis window of " +
                        number(l.window_s, l.window_s < 1 ? 2 : 0) + " s (column).";
  if (per_row > 1)
    caption += " " + with_commas(ranks) + " ranks do not fit: each row is " +
               std::to_string(per_row) + " consecutive ranks, coloured by the latest of them.";
  return svg + "</svg><p class='caption'>" + caption + "</p>";
}

std::string lateness_section(const nlohmann::json& details, double job_end_s) {
  const auto l = read_lateness(details, job_end_s);
  if (!l) return "<p>No aligned collective instances.</p>";
  return "<h3>Per rank</h3>" + lateness_lines(*l) + "<h3>Ranks x windows</h3>" +
         lateness_heat_map(*l);
}

// The call sites with the most MPI time: their share of all ranks' time per window.
std::string site_chart(const ReportInputs& inputs, double job_end_s) {
  if (inputs.sites.empty()) return "<p>No aggregates.</p>";
  std::size_t buckets = 0;
  for (const CallSiteSeries& s : inputs.sites) buckets = std::max(buckets, s.share.size());
  const double bucket_s = std::max(1e-3, inputs.bucket_s);
  const double end_s = std::max(job_end_s, 1e-3);
  std::vector<double> centers;
  for (std::size_t b = 0; b < buckets; ++b) {
    const double start = static_cast<double>(b) * bucket_s;
    centers.push_back((start + std::max(start, std::min(start + bucket_s, end_s))) / 2);
  }
  std::vector<Series> series;
  double top = 0;
  for (const CallSiteSeries& s : inputs.sites) {
    Series out{s.label, {}};
    for (std::size_t b = 0; b < buckets; ++b) {
      if (b >= s.share.size() || s.share[b] < 0) {
        out.values.emplace_back();
        continue;
      }
      out.values.emplace_back(100 * s.share[b]);
      top = std::max(top, 100 * s.share[b]);
    }
    series.push_back(std::move(out));
  }
  Plot plot;
  plot.t0 = 0;
  plot.t1 = end_s;
  plot.v1 = nice_top(std::max(top, 0.01));
  return line_chart("site-chart", "site-line", plot, "% of the ranks' time", series, centers) +
         "<p class='caption'>Time inside MPI of the " + std::to_string(inputs.sites.size()) +
         " call sites (function and calling function) with the most, as a share of all ranks' "
         "time, per window of " +
         number(bucket_s, bucket_s < 1 ? 2 : 0) +
         " s (the trace's COMMTAP_INTERVAL, or wider in a long job). A call counts in the "
         "window it completed in, and a nonblocking operation from its post to its completion, "
         "so calls in flight together can add up to more than 100%.</p>";
}

}  // namespace

std::string health_html(const JobHealth& job, const ReportInputs& inputs) {
  const double start_ns = job.details.value("start_ns", 0.0);
  // Both time charts span the same range: the job's start to its newest row.
  const double job_end_s = std::max(
      inputs.end_s,
      start_ns > 0 ? std::max(0.0, (static_cast<double>(job.now_ns) - start_ns) / 1e9) : 0.0);
  std::string html =
      "<!DOCTYPE html><html><head><meta charset='utf-8'>"
      // Nothing on the page may be fetched: a browser refuses any request even if one slipped in.
      "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src "
      "'unsafe-inline'; img-src data:\"><title>commtap report: " +
      escape(job.job_id) +
      "</title><style>body{font-family:sans-serif;margin:2em;max-width:80em}"
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
      ".critical{background:#f8c8c8}.error{background:#fbe0c8}.warning{background:#fff4c0}"
      ".caption{color:#555;max-width:60em}.row{display:flex;flex-wrap:wrap;gap:2em}"
      "h4{margin:0.3em 0}</style></head><body>";
  html += "<h1>commtap report: job " + escape(job.job_id) + "</h1>";
  html += "<p>" + escape(job.path) + ": " + count_text(job.ranks, "rank") + " on " +
          count_text(job.hosts, "host") + ", " + (job.running ? "running" : "ended") + "; " +
          count_text(job.instances, "collective instance") + " and " +
          count_text(job.messages, "message") + " compared.</p>";
  html += "<h2>Findings</h2>";
  if (job.findings.empty()) {
    html += "<p>Healthy: no findings.</p>";
  } else {
    html += "<table><tr><th>severity</th><th>kind</th><th>subject</th><th>evidence</th></tr>";
    for (const Finding& f : job.findings)
      html += std::string("<tr class='") + severity_name(f.severity) + "'><td>" +
              severity_name(f.severity) + "</td><td>" + escape(f.kind) + "</td><td>" +
              escape(f.subject) + "</td><td>" + escape(f.summary) + "</td></tr>";
    html += "</table>";
  }
  html += "<h2>Links: host by host</h2><h3>Messages</h3>" + link_matrix(job.details);
  html += "<h3>Link probes</h3>" + probe_matrices(job.details);
  html += "<h3>TCP connections</h3>" + tcp_matrix(job.details);
  html += "<h2>Lateness at collectives</h2>" + lateness_section(job.details, job_end_s);
  html += "<h2>Call sites over time</h2>" + site_chart(inputs, job_end_s);
  html += "<h2>Slowest call sites</h2>" + inputs.slowest_sites_table;
  html += "<p style='color:#777'>Made by commtap report; thresholds in docs/analyzer.md.</p>";
  return html + "</body></html>\n";
}

}  // namespace commtap::analyzer
