// The timeline as plain data, built once per StepReport: one lane per (rank class, hardware queue)
// holding its ops as spans in time order, communication split into the part that overlaps compute
// and the exposed part (communication running while no compute runs in the class: the same sweep
// as model/study/predict.cpp's exposed_comm, per class).
//
//   TimelineData d = build_timeline(report);
//   for (const Lane& l : d.lanes) paint(l.spans);
//   double exposed = d.exposed_seconds(report.busiest_class);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gui/models/timeline_geometry.h"
#include "model/study/predict.h"

namespace moeperf::gui {

struct Lane {
  int rank_class = 0;
  int queue = 0;
  Stream stream = Stream::compute;  // the first logical stream mapped to the queue
  std::string label;                // "stage 0 · compute"
  std::vector<Span> spans;          // sorted by start
};

using Interval = std::pair<double, double>;  // seconds

using moeperf::exposed_intervals;  // model/sim/sim.h: exposed communication intervals of a class

struct TimelineData {
  std::vector<Lane> lanes;
  std::vector<std::vector<Interval>> exposed;  // per rank class
  double step_time = 0;                        // seconds
  double exposed_seconds(int rank_class) const;
};

TimelineData build_timeline(const StepReport& r);

}  // namespace moeperf::gui
