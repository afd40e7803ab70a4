// Time <-> pixel mapping of the timeline, apart from painting so that it is tested without a
// window (hotspot's rule). Times are seconds from the start of the step; x is pixels from the left
// edge of the plot area, [0, width].
//
//   TimelineGeometry g{0.0, report.step_time.value(), 1400};
//   double x = g.time_to_x(op_start);
//   g.zoom_at(x, 2.0);   // twice the detail, the time under x stays under x
#pragma once

#include <cstdint>
#include <vector>

#include "model/workload/step.h"

namespace moeperf::gui {

struct TimelineGeometry {
  double t0 = 0;      // seconds at x = 0
  double t1 = 1;      // seconds at x = width
  double width = 1;   // pixels

  double seconds_per_pixel() const { return (t1 - t0) / width; }
  double time_to_x(double t) const { return (t - t0) / (t1 - t0) * width; }
  double x_to_time(double x) const { return t0 + x / width * (t1 - t0); }
  // Magnifies by `factor` (> 1 zooms in) keeping the time under pixel x at x.
  void zoom_at(double x, double factor);
  // Moves the content dx pixels to the right: the visible range shifts by -dx/width of its length.
  void pan(double dx);
};

// One painted piece of a lane: an op, the exposed or overlapped part of a communication op, or
// (after merge_lod) several pieces narrower than a pixel drawn as one.
struct Span {
  double start = 0, end = 0;  // seconds
  Category category = Category::memory;
  bool exposed = false;       // communication running while no compute runs in its rank class
  int op = -1;                // index in the rank class's ops (the longest piece's, once merged)
  int count = 1;              // ops merged into this span (an op's pieces count once)
};

// Level of detail for one lane (spans sorted by start): runs of adjacent spans (gaps under min_px)
// each narrower than min_px pixels become one span from the first start to the last end, carrying the category (and
// exposed flag and op) of its longest piece and the number of ops merged. Wider spans stay as they
// are. A run is cut once it reaches min_px, so a merged span is about one pixel wide.
std::vector<Span> merge_lod(const std::vector<Span>& spans, const TimelineGeometry& g, double min_px = 1.0);

}  // namespace moeperf::gui
