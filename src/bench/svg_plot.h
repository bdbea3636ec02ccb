// A minimal SVG line chart (one or more series of (x, y) points, linear axes with ticks) that a
// browser opens directly: the plot of a benchmark sweep. Several charts stack as panels of one file.
#pragma once

#include <string>
#include <vector>

namespace hz::bench {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
};

struct PlotSpec {
  std::string title;
  std::string subtitle;  // e.g. the conditions in one line
  std::string x_label, y_label;
  std::vector<PlotSeries> series;
};

std::string render_svg(const PlotSpec& spec);
// Panels one under another, under a common title (each panel's title heads the panel).
std::string render_svg(const std::string& title, const std::vector<PlotSpec>& panels);

}  // namespace hz::bench
