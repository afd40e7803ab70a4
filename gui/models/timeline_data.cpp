#include "gui/models/timeline_data.h"

#include <algorithm>
#include <map>

namespace moeperf::gui {

double TimelineData::exposed_seconds(int rank_class) const {
  double s = 0;
  for (auto [a, b] : exposed.at(static_cast<size_t>(rank_class))) s += b - a;
  return s;
}

namespace {

// Splits a communication op [a, b] at the exposed intervals (sorted) into overlapped/exposed pieces.
void split_comm(const Span& base, const std::vector<Interval>& exposed, std::vector<Span>& out) {
  double cur = base.start;
  bool added = false;
  auto it = std::lower_bound(exposed.begin(), exposed.end(), Interval{base.start, base.start},
                             [](const Interval& x, const Interval& y) { return x.second < y.first; });
  for (; it != exposed.end() && it->first < base.end; ++it) {
    const double a = std::max(it->first, base.start), b = std::min(it->second, base.end);
    if (b <= a) continue;
    if (a > cur) {
      Span s = base;
      s.start = cur, s.end = a, s.exposed = false;
      out.push_back(s);
    }
    Span s = base;
    s.start = a, s.end = b, s.exposed = true;
    out.push_back(s);
    cur = b;
    added = true;
  }
  if (cur < base.end || !added) {
    Span s = base;
    s.start = cur, s.exposed = false;
    out.push_back(s);
  }
}

}  // namespace

TimelineData build_timeline(const StepReport& r) {
  TimelineData d;
  if (!r.graph || !r.sim) return d;
  d.step_time = r.sim->step_time.value();
  const StepGraph& g = *r.graph;
  const SimResult& sim = *r.sim;
  for (size_t c = 0; c < g.classes.size() && c < sim.classes.size(); ++c) {
    const RankClass& rc = g.classes[c];
    const SimClass& sc = sim.classes[c];
    d.exposed.push_back(exposed_intervals(rc, sc));
    std::map<int, std::vector<Span>> by_queue;
    for (size_t i = 0; i < rc.ops.size() && i < sc.ops.size(); ++i) {
      Span s{sc.ops[i].start.value(), sc.ops[i].end.value(), rc.ops[i].category, false, static_cast<int>(i), 1};
      auto& v = by_queue[sc.ops[i].queue];
      if (is_communication(s.category)) split_comm(s, d.exposed.back(), v);
      else v.push_back(s);
    }
    for (auto& [q, spans] : by_queue) {
      std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
      Lane l;
      l.rank_class = static_cast<int>(c);
      l.queue = q;
      l.stream = q >= 0 && static_cast<size_t>(q) < sc.queues.size() ? sc.queues[static_cast<size_t>(q)] : Stream::compute;
      l.label = rc.name + " · " + queue_name(sc, static_cast<size_t>(q));
      l.spans = std::move(spans);
      d.lanes.push_back(std::move(l));
    }
  }
  return d;
}

}  // namespace moeperf::gui
