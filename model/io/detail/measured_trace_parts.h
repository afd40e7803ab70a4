// Internal to model/io: the pieces the trace readers share (measured_trace*.cpp).
#pragma once

#include <string>
#include <vector>

#include "model/io/measured_trace.h"

namespace moeperf::io::detail {

struct TraceKernelEvent {
  std::string name;
  double start = 0, dur = 0;  // seconds
  int device = 0;
  int64_t process = -1;       // the process that launched it, where the trace says (nsys: globalPid)
  std::string cls;            // set by the reader when it knows better than the name (memcpy kinds, collectives); else by the patterns
  bool counted = false;       // on the counted device, inside the counted steps (set by finish_trace)
};

struct TraceRange {
  std::string name;
  double start = 0, end = 0;  // seconds
  bool gpu = false;           // a GPU-side range (Kineto's gpu_user_annotation)
  int device = -1;            // a GPU-side range's device (-1: not known, or a CPU-side range)
  int64_t process = -1;       // a CPU-side range's process, where the trace says (nsys: globalTid)
};

double median_of(std::vector<double> v);
// Picks the device and the steps, classifies the kernels (those without a class yet), sums the
// classes per step and lists the unmapped. `where_kernels` names the JSON path or table in errors.
void finish_trace(MeasuredTrace& t, std::vector<TraceKernelEvent>& kernels, std::vector<TraceRange>& steps,
                  const KernelPatterns& patterns, const TraceOptions& opt, const std::string& where_kernels);

MeasuredTrace read_kineto(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt);
MeasuredTrace read_nsys_sqlite(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt);

}  // namespace moeperf::io::detail
