// `commtap report`: one self-contained HTML page per job (inline SVG and CSS, no scripts, no
// network), so that a person sees the slow link, the late rank and the findings at a glance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
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

// White (the fastest cell) to dark red (10x slower or more), on a log scale.
std::string heat(double ratio) {
  const double t = std::clamp(std::log10(std::max(1.0, ratio)), 0.0, 1.0);
  const int g = static_cast<int>(255 * (1 - t)), b = static_cast<int>(235 * (1 - t));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "rgb(%d,%d,%d)", 255 - static_cast<int>(80 * t), g, b);
  return buffer;
}

// One cell of a host-by-host matrix: its colour, up to two lines of text, and a tooltip.
struct MatrixCell {
  std::string fill = "#eee";
  std::string line1 = "-", line2;
  std::string title;
};

// Sender hosts as rows, receivers as columns; `cell` is asked for every pair of two hosts.
template <typename CellOf>
std::string host_matrix(const std::vector<std::string>& hosts, CellOf cell) {
  const int size = 64, left = 120, top = 40;
  const int width = left + size * static_cast<int>(hosts.size()) + 20;
  const int height = top + size * static_cast<int>(hosts.size()) + 20;
  std::string svg = "<svg width='" + std::to_string(width) + "' height='" + std::to_string(height) +
                    "' font-size='11'>";
  svg += "<text x='" + std::to_string(left) + "' y='14'>receiver &#8594;</text>";
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const int x = left + size * static_cast<int>(i), y = top + size * static_cast<int>(i);
    svg += "<text x='" + std::to_string(x + 4) + "' y='" + std::to_string(top - 6) + "'>" +
           escape(hosts[i]) + "</text>";
    svg += "<text x='4' y='" + std::to_string(y + size / 2) + "'>" + escape(hosts[i]) +
           " &#8594;</text>";
  }
  for (std::size_t i = 0; i < hosts.size(); ++i)
    for (std::size_t j = 0; j < hosts.size(); ++j) {
      const int x = left + size * static_cast<int>(j), y = top + size * static_cast<int>(i);
      MatrixCell c;
      if (i == j)
        c.line1.clear();
      else
        c = cell(hosts[i], hosts[j]);
      if (c.title.empty()) c.title = hosts[i] + " -> " + hosts[j];
      svg += "<g><title>" + escape(c.title) + "</title><rect x='" + std::to_string(x) + "' y='" +
             std::to_string(y) + "' width='" + std::to_string(size - 2) + "' height='" +
             std::to_string(size - 2) + "' fill='" + c.fill + "' stroke='#999'/>";
      svg += "<text x='" + std::to_string(x + 6) + "' y='" + std::to_string(y + size / 2 - 4) +
             "'>" + escape(c.line1) + "</text>";
      if (!c.line2.empty())
        svg += "<text x='" + std::to_string(x + 6) + "' y='" + std::to_string(y + size / 2 + 10) +
               "'>" + escape(c.line2) + "</text>";
      svg += "</g>";
    }
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
      details["hosts"].get<std::vector<std::string>>(),
      [&](const std::string& from, const std::string& to) {
        MatrixCell c;
        auto found = cells.find({from, to});
        if (found == cells.end()) return c;
        const double us = found->second["median_us"].get<double>();
        c.fill = heat(us / std::max(1e-3, fastest));
        c.line1 = number(us, us < 100 ? 1 : 0);
        c.title = from + " -> " + to + ": median " + c.line1 + " us over " +
                  std::to_string(found->second["messages"].get<std::uint64_t>()) + " messages";
        return c;
      });
  return svg + "<p>Median latency of sampled messages (us), sender row to receiver column.</p>";
}

// The link probes: latency and throughput of every directed host pair, coloured by whichever
// is further from the best pair (a delayed link and a rate-limited one both show).
std::string probe_matrix(const nlohmann::json& details) {
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
  const std::string svg = host_matrix(hosts, [&](const std::string& from, const std::string& to) {
    MatrixCell c;
    auto found = cells.find({from, to});
    if (found == cells.end()) return c;
    const double us = found->second["latency_us"].get<double>();
    const double mb = found->second["mb_per_s"].get<double>();
    c.fill = heat(std::max(us / std::max(1e-3, best_us), best_mb / std::max(1e-3, mb)));
    c.line1 = number(us, us < 100 ? 1 : 0) + " us";
    c.line2 = number(mb, mb < 100 ? 1 : 0) + " MB/s";
    c.title = from + " -> " + to + ": median of " +
              std::to_string(found->second["rounds"].get<int>()) + " probe rounds, " + c.line1 +
              " latency, " + c.line2 + (found->second.value("slow", false) ? " (slow)" : "");
    return c;
  });
  return svg +
         "<p>Link probes: median latency (us, half a round trip) and throughput (MB/s) of the "
         "newest probe rounds, sender row to receiver column.</p>";
}

std::string lateness_chart(const nlohmann::json& details) {
  if (!details.contains("lateness_ms") || details["lateness_ms"].empty())
    return "<p>No aligned collective instances.</p>";
  const auto& series = details["lateness_ms"];
  double top_value = 0.001;
  std::size_t points = 1;
  for (const auto& [rank, values] : series.items()) {
    points = std::max(points, values.size());
    for (const auto& v : values) top_value = std::max(top_value, v.get<double>());
  }
  const int width = 640, height = 220, left = 50, bottom = 30;
  std::string svg = "<svg width='" + std::to_string(width + 120) + "' height='" +
                    std::to_string(height + bottom) + "' font-size='11'>";
  svg += "<line x1='" + std::to_string(left) + "' y1='" + std::to_string(height) + "' x2='" +
         std::to_string(width) + "' y2='" + std::to_string(height) + "' stroke='#333'/>";
  svg += "<text x='2' y='12'>" + number(top_value, 2) + " ms</text>";
  svg += "<text x='" + std::to_string(left) + "' y='" + std::to_string(height + 20) +
         "'>window &#8594; (median lateness per rank)</text>";
  int index = 0;
  for (const auto& [rank, values] : series.items()) {
    const int hue = (index * 67) % 360;
    std::string path;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x =
          left + (width - left) * (points == 1 ? 0.5 : static_cast<double>(i) / (points - 1));
      const double y = height - (height - 20) * values[i].get<double>() / top_value;
      path += (i == 0 ? "M" : "L") + number(x) + "," + number(y) + " ";
    }
    svg += "<path d='" + path + "' fill='none' stroke='hsl(" + std::to_string(hue) +
           ",70%,40%)' stroke-width='2'><title>rank " + escape(rank) + "</title></path>";
    svg += "<text x='" + std::to_string(width + 8) + "' y='" + std::to_string(20 + 14 * index) +
           "' fill='hsl(" + std::to_string(hue) + ",70%,40%)'>rank " + escape(rank) + "</text>";
    ++index;
  }
  return svg + "</svg>";
}

}  // namespace

std::string health_html(const JobHealth& job, const std::string& slowest_sites_table) {
  std::string html =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>commtap report: " +
      escape(job.job_id) +
      "</title><style>body{font-family:sans-serif;margin:2em;max-width:70em}"
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
      ".critical{background:#f8c8c8}.error{background:#fbe0c8}.warning{background:#fff4c0}"
      "</style></head><body>";
  html += "<h1>commtap report: job " + escape(job.job_id) + "</h1>";
  html += "<p>" + escape(job.path) + ": " + count_text(job.ranks, "rank") + " on " +
          count_text(job.hosts, "host") + ", " + (job.running ? "running" : "ended") + "; " +
          std::to_string(job.instances) + " collective instances and " +
          std::to_string(job.messages) + " messages compared.</p>";
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
  html += "<h2>Links: host by host</h2>" + link_matrix(job.details);
  html += "<h3>Link probes</h3>" + probe_matrix(job.details);
  html += "<h2>Lateness per rank over time</h2>" + lateness_chart(job.details);
  html += "<h2>Slowest call sites</h2>" + slowest_sites_table;
  html += "<p style='color:#777'>Made by commtap analyze; thresholds in docs/analyzer.md.</p>";
  return html + "</body></html>\n";
}

}  // namespace commtap::analyzer
