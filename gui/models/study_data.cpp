#include "gui/models/study_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/error.h"
#include "model/io/stacks.h"

namespace moeperf::gui {

std::vector<WaterfallBar> waterfall_bars(const std::vector<WaterfallStep>& steps) {
  std::vector<WaterfallBar> out;
  out.reserve(steps.size());
  for (const WaterfallStep& s : steps)
    out.push_back({s.name, s.changes, s.report.model_tflops_per_gpu, s.report.step_time.value(), s.report.memory.fits});
  return out;
}

std::vector<ScalingPoint> scaling_points(const std::vector<ScalePoint>& points) {
  std::vector<ScalingPoint> out;
  out.reserve(points.size());
  for (const ScalePoint& p : points) {
    ScalingPoint sp{p.gpus, p.report.tokens_per_s_per_gpu, p.report.model_tflops_per_gpu, p.efficiency,
                    p.report.memory.fits, {}};
    const double step = p.report.step_time.value();
    for (const auto& [k, v] : p.lost)
      if (step > 0 && std::abs(v) >= 0.001 * step) sp.lost_share.emplace_back(k, v / step);
    std::sort(sp.lost_share.begin(), sp.lost_share.end(),
              [](const auto& a, const auto& b) { return std::abs(a.second) > std::abs(b.second); });
    out.push_back(std::move(sp));
  }
  return out;
}

std::string lost_text(const ScalingPoint& p, size_t n) {
  std::string out;
  for (size_t i = 0; i < p.lost_share.size() && i < n; ++i) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "%s%s %+.1f %%", out.empty() ? "" : ", ", p.lost_share[i].first.c_str(),
                  100 * p.lost_share[i].second);
    out += buf;
  }
  return out;
}

Studies build_studies(const StepReport& r, const std::vector<int64_t>& gpus, GrowAxis axis) {
  Studies st;
  st.name = r.name;
  st.axis = axis;
  if (!r.scenario) {
    st.waterfall_error = st.scaling_error = "the report carries no scenario";
    return st;
  }
  const Scenario& s = *r.scenario;
  try {
    const std::vector<NamedState> states = io::ablation_states(s);
    st.waterfall = waterfall_bars(states.empty() ? waterfall(baseline_of(s), s) : walk(states, s.calibration));
    st.waterfall_kind = states.empty() ? "the post's stack options switched on one by one"
                                       : "the ablation of stack " + s.stack.name + ", step by step";
  } catch (const std::exception& e) {  // bad input, or the CLI's "failed: ..." (never out of a worker thread)
    st.waterfall_error = dynamic_cast<const InputError*>(&e) ? e.what() : std::string("failed: ") + e.what();
  }
  try {
    st.scaling = scaling_points(scale(s, gpus, axis, s.calibration));
  } catch (const std::exception& e) {
    st.scaling_error = dynamic_cast<const InputError*>(&e) ? e.what() : std::string("failed: ") + e.what();
  }
  return st;
}

const char* to_string(GrowAxis a) {
  switch (a) {
    case GrowAxis::fsdp: return "fsdp";
    case GrowAxis::dp: return "dp";
    case GrowAxis::ep: return "ep";
  }
  return "?";
}

}  // namespace moeperf::gui
