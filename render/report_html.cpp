// render/report_html: `commtap report`'s page: one self-contained HTML page per job (inline SVG and
// CSS, no scripts, no network), so that a person sees the slow link, the late rank and the findings
// at a glance. The drawn elements carry ids and classes (time-axis, heat-cell, link-cell,
// site-line, point) so that tests/mpi/report.sh can count them in the page as a browser renders it.
#include "render/report_html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/findings/statistics.hpp"
#include "render/html_kit.hpp"

namespace commtap::render {

using namespace commtap::analyzer;

namespace {

std::string link_matrix(const JobEvidence& evidence) {
  if (evidence.messages.links.empty())
    return "<p>No joined point-to-point messages between different hosts.</p>";
  std::map<std::pair<std::string, std::string>, const MessageLink*> cells;
  double fastest = 1e300;
  for (const MessageLink& cell : evidence.messages.links) {
    cells[{cell.from, cell.to}] = &cell;
    fastest = std::min(fastest, cell.median_us);
  }
  const std::string svg =
      host_matrix("link-messages", evidence.hosts, "latency / the fastest pair's",
                  [&](const std::string& from, const std::string& to) {
                    MatrixCell c;
                    auto found = cells.find({from, to});
                    if (found == cells.end()) return c;
                    const double us = found->second->median_us;
                    c.measured = true;
                    c.fill = ramp(ratio_position(us / std::max(1e-3, fastest)));
                    c.line1 = number(us, us < 100 ? 1 : 0) + " us";
                    c.title = from + " -> " + to + ": median " + c.line1 + " over " +
                              std::to_string(found->second->messages) + " messages" +
                              (found->second->slow ? " (slow)" : "");
                    return c;
                  });
  return svg +
         "<p class='caption'>The job's own messages: median one-way latency (us, send to "
         "receive on rank 0's clock) of the sampled messages, sender row to receiver column. "
         "Colour: times the fastest pair's latency.</p>";
}

// The link probes: latency and throughput of every directed host pair, each in its own matrix
// coloured by how far it is from the best pair (a delayed link and a rate-limited one both show).
std::string probe_matrices(const JobEvidence& evidence) {
  if (evidence.probes.links.empty())
    return "<p>No link probes (one host, or COMMTAP_PROBE_INTERVAL=0).</p>";
  std::map<std::pair<std::string, std::string>, const ProbedLink*> cells;
  std::vector<std::string> hosts;
  double best_us = 1e300, best_mb = 0;
  for (const ProbedLink& cell : evidence.probes.links) {
    cells[{cell.from, cell.to}] = &cell;
    for (const std::string& host : {cell.from, cell.to})
      if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
    best_us = std::min(best_us, cell.latency_us);
    best_mb = std::max(best_mb, cell.mb_per_s);
  }
  std::sort(hosts.begin(), hosts.end());
  auto describe = [&](const std::string& from, const std::string& to, const ProbedLink& p) {
    const double us = p.latency_us, mb = p.mb_per_s;
    return from + " -> " + to + ": median of " + std::to_string(p.rounds) + " probe rounds, " +
           number(us, us < 100 ? 1 : 0) + " us latency, " + number(mb, mb < 100 ? 1 : 0) + " MB/s" +
           (p.slow ? " (slow)" : "");
  };
  // One matrix of one measure: `worse` is how many times worse than the best pair a value is.
  auto matrix = [&](const char* id, const char* legend, double ProbedLink::*measure,
                    const char* unit, auto worse) {
    return host_matrix(id, hosts, legend, [&](const std::string& from, const std::string& to) {
      MatrixCell c;
      auto found = cells.find({from, to});
      if (found == cells.end()) return c;
      const double value = found->second->*measure;
      c.measured = true;
      c.fill = ramp(ratio_position(worse(value)));
      c.line1 = number(value, value < 100 ? 1 : 0) + " " + unit;
      c.title = describe(from, to, *found->second);
      return c;
    });
  };
  const std::string latency =
      matrix("link-probe-latency", "latency / the best pair's", &ProbedLink::latency_us, "us",
             [&](double us) { return us / std::max(1e-3, best_us); });
  const std::string throughput = matrix(
      "link-probe-throughput", "the best pair's throughput / this one's", &ProbedLink::mb_per_s,
      "MB/s", [&](double mb) { return best_mb / std::max(1e-3, mb); });
  return "<div class='row'><div><h4>Latency (us)</h4>" + latency +
         "</div><div><h4>Throughput (MB/s)</h4>" + throughput +
         "</div></div><p class='caption'>Link probes of the newest rounds, sender row to receiver "
         "column: median latency (us, half a round trip of a small message) and throughput "
         "(MB/s, of the probe's large transfer). Colour: how many times worse than the best "
         "pair.</p>";
}

// The kernel's TCP counters (detect_lost_packets' tcp_links): per directed host pair the
// data it carried and the share of segments lost, coloured by that share (0.1% is already many
// times what a healthy link loses), and in its title the rate detect_link_rates measured. A job
// of collectives only shows its traffic here too.
std::string tcp_matrix(const JobEvidence& evidence) {
  if (evidence.tcp_links.empty())
    return "<p>No TCP traffic between hosts in the analyzed span (one host, an MPI that does not "
           "run over TCP, COMMTAP_TCP_INTERVAL=0, or files before version 10).</p>";
  std::map<std::pair<std::string, std::string>, const TcpLink*> cells;
  for (const TcpLink& cell : evidence.tcp_links) cells[{cell.from, cell.to}] = &cell;
  const std::string svg = host_matrix(
      "link-tcp", evidence.hosts, "1 + lost per mille",
      [&](const std::string& from, const std::string& to) {
        MatrixCell c;
        auto found = cells.find({from, to});
        if (found == cells.end()) return c;
        const std::uint64_t segments = found->second->segments;
        const std::uint64_t lost = found->second->lost;
        const double share = segments ? static_cast<double>(lost) / segments : 0.0;
        const double mb = static_cast<double>(found->second->bytes) / 1e6;
        c.measured = true;
        c.fill = ramp(ratio_position(1 + 1000 * share));
        c.line1 = number(100 * share, 2) + "% lost";
        c.line2 = number(mb, mb < 100 ? 1 : 0) + " MB";
        c.title = from + " -> " + to + ": " + std::to_string(lost) + " of " +
                  std::to_string(segments) + " segments lost (" +
                  std::to_string(found->second->resent) + " resent), " + c.line2 + " acknowledged";
        if (found->second->paced_ns > 0)
          c.title += ", " + number(found->second->mb_per_s, 1) +
                     " MB/s of bulk data while the network paced it (" +
                     number(found->second->paced_ns / 1e6, 0) + " ms)";
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

std::optional<Lateness> read_lateness(const std::optional<LatenessTable>& table, double job_end_s) {
  if (!table) return std::nullopt;
  const LatenessTable& l = *table;
  Lateness out;
  out.window_s = l.window_s;
  out.first_s = l.first_s;
  out.end_s = std::max(job_end_s, l.last_s);
  out.ranks = l.ranks;
  for (const auto& values : l.ms) {
    for (const auto& v : values)
      if (v) out.top = std::max(out.top, *v);
    out.windows = std::max(out.windows, values.size());
    out.ms.push_back(values);
  }
  if (out.ranks.empty() || out.windows == 0 || out.ms.size() != out.ranks.size())
    return std::nullopt;
  for (auto& row : out.ms) row.resize(out.windows);
  return out;
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

std::string lateness_section(const std::optional<LatenessTable>& table, double job_end_s) {
  const auto l = read_lateness(table, job_end_s);
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

// The slowest call sites as a table, one column per field read.
std::string slowest_sites_table(const QueryResult& sites) {
  if (sites.rows.empty()) return "<p>No aggregates.</p>";
  std::string table = "<table id='slowest-sites'><tr>";
  for (const std::string& c : sites.columns) table += "<th>" + c + "</th>";
  table += "</tr>";
  for (const auto& row : sites.rows) {
    table += "<tr>";
    for (const auto& cell : row) table += "<td>" + escape(cell.value_or("")) + "</td>";
    table += "</tr>";
  }
  return table + "</table>";
}

}  // namespace

std::string health_html(const JobHealth& job, const ReportInputs& inputs) {
  const auto start_ns = static_cast<double>(job.evidence.start_ns);
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
  html += "<h2>Links: host by host</h2><h3>Messages</h3>" + link_matrix(job.evidence);
  html += "<h3>Link probes</h3>" + probe_matrices(job.evidence);
  html += "<h3>TCP connections</h3>" + tcp_matrix(job.evidence);
  html += "<h2>Lateness at collectives</h2>" + lateness_section(job.evidence.lateness, job_end_s);
  html += "<h2>Call sites over time</h2>" + site_chart(inputs, job_end_s);
  html += "<h2>Slowest call sites</h2>" + slowest_sites_table(inputs.slowest_sites);
  html += "<p style='color:#777'>Made by commtap report; thresholds in docs/analyzer.md.</p>";
  return html + "</body></html>\n";
}

}  // namespace commtap::render
