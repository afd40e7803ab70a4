// What-if studies built on predict(): the waterfall between two scenarios (each stack option of
// NVIDIA's post switched on in the order the post added them) and scaling over GPU counts.
//
//   auto steps = waterfall(baseline_of(s), s);   // compare S --ablate
//   auto points = scale(s, {128, 256, 512, 1024}, GrowAxis::fsdp, cal);
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/params.h"
#include "model/study/predict.h"
#include "model/specs.h"

namespace moeperf {

struct WaterfallStep {
  std::string name;      // "baseline", "grouped GEMM", "multistream collectives", ...
  std::string changes;   // what this step switched
  StepReport report;
};

// The scenario with every optimization of the post off: per-expert loop, one collective stream
// without prefetch, BF16 everywhere, offloaded tensors recomputed instead, plain all-to-all.
Scenario baseline_of(const Scenario& s);

// From `from` to `to` in the post's order: grouped GEMM, multistream collectives (with the
// latency-hiding prefetch), MXFP8/FP8 precision, host offload, fused de-duplicated dispatch; a last
// step carries any other difference (model, system, layout, batch, routing).
// A step that would switch nothing (the option is equal in both) is left out; each step's
// `changes` lists the dotted fields (as in --set) that differ before and after it. Each state is
// priced with its own calibration: the start is `from` as predict prices it, and a different
// calibration (another GPU's profile, a scenario's own) is switched by the last step.
std::vector<WaterfallStep> waterfall(const Scenario& from, const Scenario& to);

// A waterfall through given states (the first is the start): each step's `changes` are the fields
// that differ from the state before it, or `note` when none do (a step moeperf cannot express).
struct NamedState {
  std::string name, note;
  Scenario scenario;
};
// `run` maps the states' predictions, independent jobs, onto threads (serial when not given).
std::vector<WaterfallStep> walk(const std::vector<NamedState>& states, const Calibration& cal,
                                const std::function<void(std::vector<std::function<void()>>&)>& run = {});

// The scenario fields (dotted, as in --set; "model", "system" and "calibration" as a whole) whose
// values differ between a and b. Names and descriptions are not compared.
std::vector<std::string> differing_fields(const Scenario& a, const Scenario& b);

// What a reader of `compare A B` must know: different models or GPU counts, or no difference.
std::vector<std::string> comparison_notes(const Scenario& from, const Scenario& to);

enum class GrowAxis { fsdp, dp, ep };

// Where a step's time goes for an average GPU (every rank class's timeline to the end of the step,
// weighted by its GPUs): "compute" (some compute kernel runs), "optimizer" (its step), "slowest of
// N" (the part of those stretched by fleet speed variation), exposed communication per kind ("ep
// comm", "dp/fsdp comm", "tp/cp comm", "pp comm", "host copy", "other comm"), and "idle" (nothing
// runs: the pipeline bubble, host waits, waiting for a slower stage). They add up to the step.
std::vector<std::pair<std::string, double>> step_terms(const StepReport& r);

struct ScalePoint {
  int64_t gpus = 0;
  StepReport report;
  double efficiency = 0;  // tokens/s/GPU over the first point's
  // The waterfall of scale: the step's terms (step_terms), and per term what it lost against the
  // first point: its seconds minus the first point's scaled to this point's work per GPU
  // (x first tokens per GPU / these tokens per GPU). The losses add up to step - ideal step.
  std::vector<std::pair<std::string, double>> terms, lost;
  double ideal_step_s = 0;  // the first point's step scaled to this point's work per GPU
};

// How the batch follows the GPU count: fixed per GPU (weak scaling, the global batch grows) or a
// fixed global batch (strong scaling, each data-parallel rank's share shrinks).
enum class ScaleBatch { per_gpu, global };

// Grows one mesh axis to reach each GPU count. Throws InputError when a count is not a multiple of
// the other axes, or (fixed global batch) leaves a data-parallel rank no whole micro-batch; `check`
// (the loader's rules, io::check_scenario) runs on every point before it is predicted.
std::vector<ScalePoint> scale(const Scenario& s, const std::vector<int64_t>& gpus, GrowAxis axis, const Calibration& cal,
                              ScaleBatch batch = ScaleBatch::per_gpu,
                              const std::function<void(const Scenario&)>& check = {});

}  // namespace moeperf
