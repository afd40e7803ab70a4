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

}  // namespace moeperf::cli
