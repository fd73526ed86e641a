// render/html_kit: the pieces the HTML report is drawn with: the one HTML escape, number text,
// a colour ramp, ticks, charts' axes and legends, host-by-host matrices and line charts (inline
// SVG, no scripts).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace commtap::render {

// Text as HTML element content or a quoted attribute value: < > & " ' escaped.
std::string escape(const std::string& text);

std::string number(double v, int decimals = 1);
// A value with as many decimals as a tick step of `step` needs (0.25 -> 2, 5 -> 0).
std::string tick_text(double v, double step);
// A coordinate as an SVG attribute value.
std::string attr(double v);

// Sequential colour scale (ColorBrewer's YlOrRd) for t in [0, 1]: pale yellow to dark red.
std::string ramp(double t);
// Ratio to the best cell (1x..10x and more) on a log scale, for the link matrices.
double ratio_position(double ratio);
// The colour of line `index` of a chart.
std::string hue(int index);

// Tick values 1, 2 or 5 x 10^k apart from lo to hi, at most `most` of them.
std::vector<double> ticks(double lo, double hi, int most, double* step_out = nullptr);
// The top of a value axis: the first tick at or above `top`.
double nice_top(double top);

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
std::string time_axis(const Plot& p);
// A value axis on the left: ticks, labels and light grid lines across the plot.
std::string value_axis(const Plot& p, const std::string& unit);

// A legend of a colour scale: a gradient bar from 0 to 1 and labelled ticks at `marks`
// (position in [0, 1], label).
std::string colour_legend(const std::string& id, double x, double y, const std::string& title,
                          const std::vector<std::pair<double, std::string>>& marks);
// The legend of the link matrices: the ratio to the best pair, 1x to 10x.
std::string ratio_legend(const std::string& id, double x, double y, const std::string& what);

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

// Lines over windows (one per series, broken where a value is missing) with a marker at every
// value, so that a job of one window or two shows its data as points.
struct Series {
  std::string label;
  std::vector<std::optional<double>> values;
};

// `series` as lines over `centers` (s), with `unit` on the value axis.
std::string line_chart(const std::string& id, const std::string& line_class, const Plot& plot,
                       const std::string& unit, const std::vector<Series>& series,
                       const std::vector<double>& centers);

}  // namespace commtap::render
