// Shared by `moeperf compare-trace` and `moeperf calibrate --trace` (cli/trace.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/io/measured_trace.h"

namespace moeperf::cli {

struct TraceFlags {
  std::string file, patterns, step_marker;
  int device = -1;
};
// --patterns, --device, --step-marker.
void add_trace_flags(CLI::App* sub, TraceFlags& f);
io::MeasuredTrace read_trace(const TraceFlags& f);
// The trace's kernels per class, the unmapped ones (the longest `unmapped_shown`), records, notes.
void print_trace_summary(const io::MeasuredTrace& t, int unmapped_shown);

// A launch call longer than this: the launch queue was full (the host far ahead of its GPU).
inline constexpr double kQueueFullCall = 50e-6;

// The host's issue time per step, predicted (the busiest rank class's, SimClass::host_busy) and
// traced (launches x their mean gap; 0 when the trace has none), and the stack.host_op_s at which
// the prediction's framework ops would take the traced time, its other host terms kept (0: none).
struct HostComparison {
  double predicted_s = 0, framework_ops = 0, graph_launches = 0, traced_s = 0, matching_host_op_s = 0;
  bool gpu_paced = false;  // the trace's launch calls were long: its gaps are the GPU's pace
};
HostComparison compare_host(const StepReport& r, const StackOptions& st, const io::MeasuredTrace& t);

}  // namespace moeperf::cli
