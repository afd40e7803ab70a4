// The what-if studies of a scenario as plain data for the charts: the `compare --ablate`
// waterfall (waterfall(baseline_of(s), s)) and the scaling sweep (scale(s, gpus, axis, cal)),
// each value copied from the model's StepReports, nothing recomputed here. A sweep the model
// rejects (a GPU count the other axes do not divide) keeps the model's message instead of points.
//
//   Studies st = build_studies(*report);                 // the 10 predictions, off the GUI thread
//   for (const WaterfallBar& b : st.waterfall) bar(b.name, b.tflops_per_gpu);
//   for (const ScalingPoint& p : st.scaling) point(p.gpus, p.tokens_per_s_per_gpu, p.fits);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/study/predict.h"
#include "model/study/study.h"

namespace moeperf::gui {

struct WaterfallBar {
  std::string name;     // "start", "grouped GEMM", ...
  std::string changes;  // the scenario paths the step switched
  double tflops_per_gpu = 0;
  double step_time_s = 0;
  bool fits = true;     // memory.fits of the step's prediction
};

struct ScalingPoint {
  int64_t gpus = 0;
  double tokens_per_s_per_gpu = 0;
  double tflops_per_gpu = 0;
  double efficiency = 0;  // tokens/s/GPU over the first point's (ScalePoint::efficiency)
  bool fits = true;
  // What the step lost against the first point, per mechanism, as a share of this point's step
  // (ScalePoint::lost / step), largest first, those of at least 0.1 %.
  std::vector<std::pair<std::string, double>> lost_share;
};

// "idle +10.8 %, dp/fsdp comm +10.5 %" (at most `n` terms), or "" when none moved.
std::string lost_text(const ScalingPoint& p, size_t n = 3);

inline const std::vector<int64_t> kDefaultScaleGpus = {128, 256, 512, 1024};

struct Studies {
  std::string name;  // the scenario's
  std::string waterfall_kind;  // what the waterfall walks: a stack's ablation, or the post's options
  std::vector<WaterfallBar> waterfall;
  std::string waterfall_error;
  std::vector<ScalingPoint> scaling;
  GrowAxis axis = GrowAxis::fsdp;
  std::string scaling_error;
};

std::vector<WaterfallBar> waterfall_bars(const std::vector<WaterfallStep>& steps);
std::vector<ScalingPoint> scaling_points(const std::vector<ScalePoint>& points);

// Both studies of the report's scenario with its calibration; InputErrors become the *_error texts.
Studies build_studies(const StepReport& r, const std::vector<int64_t>& gpus = kDefaultScaleGpus,
                      GrowAxis axis = GrowAxis::fsdp);

const char* to_string(GrowAxis a);

}  // namespace moeperf::gui
