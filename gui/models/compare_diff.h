// What differs between the two scenarios of the Compare tab, as numbers: the fields that differ
// (study's differing_fields), then rows of (upper, lower) seconds: the step and its terms
// (step_terms: compute, exposed communication per kind, idle, ...), the kernel seconds per
// category of each busiest rank class, and the ops whose kernel seconds moved most. Qt-free, so
// the view only lays it out.
//
//   const CompareDiff d = compare_diff(optimized, baseline, 10);
//   for (const DiffRow& r : d.rows) ... r.lower - r.upper ...
#pragma once

#include <string>
#include <vector>

#include "model/study/predict.h"

namespace moeperf::gui {

struct DiffRow {
  std::string group;  // "step", "step terms", "kernel seconds", "ops"
  std::string name;   // "step", "ep comm", "gemm", "moe.dispatch"
  double upper = 0, lower = 0;  // seconds per step
  double delta() const { return lower - upper; }
};

struct CompareDiff {
  std::vector<std::string> fields;  // "parallelism.ep", "model" (empty when the scenarios agree)
  std::vector<DiffRow> rows;
};

// `top_ops`: the ops (by name, of each side's busiest rank class) with the largest |lower - upper|
// kernel seconds, largest first; an op one side does not run counts 0 there. Step terms and
// categories with 0 on both sides are left out.
CompareDiff compare_diff(const StepReport& upper, const StepReport& lower, int top_ops = 10);

}  // namespace moeperf::gui
