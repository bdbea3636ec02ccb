#include "bench/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hz::bench {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  if (!(span > 0)) return 1;
  double raw = span / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string tick_label(double v) {
  double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}K", v / 1e3);
  return fmt::format("{:g}", v);
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

constexpr double kWidth = 760, kPanelHeight = 460;

// One chart whose top edge is at `top`.
std::string render_panel(const PlotSpec& spec, double top) {
  const double W = kWidth, H = kPanelHeight, L = 80, R = 180, T = top + 60, B = 60;
  const double pw = W - L - R, ph = H - 60 - B;
  double x0 = 0, x1 = 1, y1 = 1;
  bool any = false;
  for (const auto& s : spec.series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!any) x0 = x1 = x;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y1 = std::max(y1, y);
      any = true;
    }
  }
  // A margin on both sides keeps the first and last points (and a lone point) off the frame.
  const double pad = x1 > x0 ? (x1 - x0) * 0.04 : std::max(std::fabs(x0) * 0.5, 1.0);
  x0 -= pad;
  x1 += pad;
  y1 *= 1.1;  // head room; the y axis starts at 0 so that ratios read true
  const double xs = tick_step(x1 - x0, 6), ys = tick_step(y1, 5);
  y1 = std::ceil(y1 / ys) * ys;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return T + ph - y / y1 * ph; };

  std::string o;
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"16\" font-weight=\"bold\">{}</text>\n", L, top + 24,
                   escape(spec.title));
  o += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#555\">{}</text>\n", L, top + 42, escape(spec.subtitle));
  // Grid and ticks.
  for (double y = 0; y <= y1 + ys / 2; y += ys) {
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", L, py(y),
                     L + pw, py(y));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", L - 6, py(y) + 4,
                     tick_label(y));
  }
  for (double x = std::ceil(x0 / xs) * xs; x <= x1 + xs / 1e6; x += xs) {
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", px(x), T,
                     px(x), T + ph);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", px(x), T + ph + 18,
                     tick_label(x));
  }
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", L, T, pw,
                   ph);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", L + pw / 2, top + H - 14,
                   escape(spec.x_label));
  o += fmt::format(
      "<text x=\"18\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {:.1f})\">{}</text>\n",
      T + ph / 2, T + ph / 2, escape(spec.y_label));
  // Series with a legend on the right.
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const auto& s = spec.series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string pts;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}: {:g} at {:g}</title></circle>\n",
                       px(x), py(y), color, escape(s.name), y, x);
    }
    o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, color);
    const double ly = T + 10 + 20.0 * static_cast<double>(i);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                     L + pw + 12, ly, L + pw + 32, ly, color);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", L + pw + 38, ly + 4, escape(s.name));
  }
  return o;
}

std::string svg_open(double height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, height);
}

}  // namespace

std::string render_svg(const PlotSpec& spec) { return svg_open(kPanelHeight) + render_panel(spec, 0) + "</svg>\n"; }

std::string render_svg(const std::string& title, const std::vector<PlotSpec>& panels) {
  const double head = 40;
  std::string o = svg_open(head + kPanelHeight * static_cast<double>(panels.size()));
  o += fmt::format("<text x=\"20\" y=\"28\" font-size=\"18\" font-weight=\"bold\">{}</text>\n", escape(title));
  for (size_t i = 0; i < panels.size(); ++i) o += render_panel(panels[i], head + kPanelHeight * static_cast<double>(i));
  o += "</svg>\n";
  return o;
}

}  // namespace hz::bench
