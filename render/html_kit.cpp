// render/html_kit: the drawing pieces of the HTML report (html_kit.hpp).
#include "render/html_kit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace commtap::render {

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

std::string number(double v, int decimals) {
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
std::vector<double> ticks(double lo, double hi, int most, double* step_out) {
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

std::string hue(int index) {
  return "hsl(" + std::to_string((index * 67) % 360) + ",70%,40%)";
}

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

}  // namespace commtap::render
