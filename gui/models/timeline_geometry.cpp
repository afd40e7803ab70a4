#include "gui/models/timeline_geometry.h"

#include <algorithm>

namespace moeperf::gui {

void TimelineGeometry::zoom_at(double x, double factor) {
  if (factor <= 0) return;
  const double t = x_to_time(x);
  const double len = (t1 - t0) / factor;
  // t must stay at x: t0' = t - x/width * len.
  t0 = t - x / width * len;
  t1 = t0 + len;
}

void TimelineGeometry::pan(double dx) {
  const double dt = dx / width * (t1 - t0);
  t0 -= dt;
  t1 -= dt;
}

std::vector<Span> merge_lod(const std::vector<Span>& spans, const TimelineGeometry& g, double min_px) {
  std::vector<Span> out;
  out.reserve(spans.size());
  const double min_s = min_px * g.seconds_per_pixel();
  size_t i = 0;
  while (i < spans.size()) {
    const Span& s = spans[i];
    if (s.end - s.start >= min_s) {
      out.push_back(s);
      ++i;
      continue;
    }
    // A run of narrow spans: merge until the run is min_px wide or a wide span comes.
    Span merged = s;
    double longest = s.end - s.start;
    int count = s.count;
    int prev_op = s.op;  // the exposed and overlapped pieces of one op are adjacent: count the op once
    size_t j = i + 1;
    while (j < spans.size() && spans[j].end - spans[j].start < min_s && merged.end - merged.start < min_s &&
           spans[j].start - merged.end < min_s) {
      const Span& n = spans[j];
      const double len = n.end - n.start;
      if (len > longest) {
        longest = len;
        merged.category = n.category;
        merged.exposed = n.exposed;
        merged.op = n.op;
      }
      merged.end = std::max(merged.end, n.end);
      if (n.op < 0 || n.op != prev_op) count += n.count;
      prev_op = n.op;
      ++j;
    }
    merged.count = count;
    out.push_back(merged);
    i = j;
  }
  return out;
}

}  // namespace moeperf::gui
