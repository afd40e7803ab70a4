// Profiles of real training steps read as measurements of the model's op classes: a PyTorch
// profiler (Kineto) Chrome-trace JSON, or an Nsight Systems SQLite export (nsys export --type
// sqlite). Kernels are mapped to op classes by name patterns kept as data
// (calibration/kernels/patterns.json, built in; --patterns for another file); shapes come from the
// trace where it records them, so that GEMMs, attention, collectives and copies with a shape become
// measurement records for `moeperf calibrate` (model/io/parts.h) and every mapped kernel counts in
// the per-class totals that `moeperf compare-trace` sets beside a prediction.
//
// What is read (docs/traces.md says it in full):
// - Kineto: "traceEvents" (ph "X", ts and dur in microseconds as Chrome's trace format has them),
//   cat "kernel" (GPU kernels: args.device, args.stream, args.correlation, args["External id"]),
//   "gpu_memcpy"/"gpu_memset" (args.bytes), "cuda_runtime"/"cuda_driver" (the launches, by
//   args.correlation), "cpu_op" (args["Input Dims"], args["Input type"], args["Concrete Inputs"]),
//   "user_annotation"/"gpu_user_annotation" ("ProfilerStep#N": the steps); "deviceProperties"
//   (GPU name, SMs); optional "displayTimeUnit" ("ms" or "ns": display only, never a scale).
//   A kernel's shape is that of the innermost CPU op around its launch that records one (aten::mm,
//   addmm, bmm, linear, _scaled_mm, _grouped_mm, flash/cuDNN/efficient attention forward and
//   backward, record_param_comms for collectives, elementwise ops), or the kernel's own args when
//   they carry the collective (newer PyTorch copies record_param_comms' fields onto the kernel).
// - Nsight Systems SQLite: CUPTI_ACTIVITY_KIND_KERNEL (start, end in ns, deviceId, streamId,
//   demangledName/shortName into StringIds), CUPTI_ACTIVITY_KIND_MEMCPY (bytes, copyKind),
//   NVTX_EVENTS (steps by the same marker), TARGET_INFO_GPU (name). No shapes: its kernels count in
//   the class totals, its host copies become records.
//
//   KernelPatterns p = builtin_kernel_patterns();
//   MeasuredTrace t = read_measured_trace("rank0.json", p, {});
//   for (auto& [cls, c] : t.classes) ...   // kernels and seconds per op class, per step
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "model/study/predict.h"

namespace moeperf::io {

struct KernelPattern {
  std::string cls;       // an op class: gemm, grouped_gemm, attention.fwd, collective.all_gather, ep.dispatch, memory, ...
  std::string match;     // ECMAScript regular expression, searched in the kernel's name
  std::string library;
  std::regex re;
};

struct KernelPatterns {
  std::string file;      // where they were read ("built-in" for the shipped file)
  std::vector<KernelPattern> patterns;
  // The class of a kernel name (its first kClassifiedChars characters), or "" when no pattern matches.
  static constexpr size_t kClassifiedChars = 4096;
  std::string classify(const std::string& kernel) const;
  // The first pattern that matches, or null: its class and library.
  const KernelPattern* match(const std::string& kernel) const;
};

// The shipped calibration/kernels/patterns.json, built into the binary.
const KernelPatterns& builtin_kernel_patterns();
// A patterns file of the same form; errors name the file and JSON path (SpecError).
KernelPatterns load_kernel_patterns(const std::string& path);
// The op classes a pattern may name.
const std::vector<std::string>& trace_classes();

struct TraceClass {
  int64_t kernels = 0;
  double seconds = 0;    // summed kernel time in the counted steps
};

struct UnmappedKernel {
  std::string name;
  int64_t count = 0;
  double seconds = 0;
};

struct TraceOptions {
  int device = -1;                           // the GPU whose kernels count (-1: the one with the most kernel time)
  std::string step_marker = "^ProfilerStep#[0-9]+$";  // annotation/NVTX ranges that are steps
};

// The host thread that issued the traced kernels (Kineto's cuda_runtime / cuda_driver calls): its
// launches per step and the host's time from one launch to the next where no host wait (a
// synchronize, a blocking copy) lies between them: what issuing one kernel costs the framework
// (Python, the dispatcher, the launch call). The figure to set beside a stack's host_op_s.
struct HostIssue {
  // The threads that issued the step's launches: each with at least 5 % of the busiest one's (PyTorch's
  // Python thread and autograd's device thread take turns), sorted; their launches and gaps add up.
  std::vector<int64_t> tids;
  int steps = 0;               // steps it was measured over (CPU-side ranges; else the whole trace over the GPU-side
                               // steps' number; 0: the whole trace as one)
  double launches = 0;         // per step: kernel launches (cudaLaunchKernel, cuLaunchKernel, their Ex forms, ...)
  double graph_launches = 0;   // per step: CUDA graph launches
  double waits = 0, wait_s = 0;  // per step: blocking calls (synchronize, blocking copy, cudaFree) and their time
  int64_t gaps = 0;            // launch-to-launch intervals measured (none with a wait inside)
  double median_gap_s = 0, mean_gap_s = 0;
  double median_call_s = 0;    // a launch call's own duration (long: the launch queue was full, the host far ahead)
};

struct MeasuredTrace {
  std::string file, format;                  // format: "kineto" or "nsys-sqlite"
  std::string gpu_name;                      // from the trace ("" when it does not say)
  int gpu_sms = 0;
  int device = 0;
  std::vector<int> devices;                  // every device with kernels
  int steps = 0;                             // step ranges found (0: the whole trace is one step)
  double step_s = 0;                         // median step (or the kernels' span when no step is marked)
  std::string step_source;                   // how step_s was found, in words
  int64_t kernels = 0;                       // kernels counted (in the counted steps, on the device)
  double kernel_seconds = 0;
  std::map<std::string, TraceClass> classes; // per op class, summed over the counted steps
  std::vector<UnmappedKernel> unmapped;      // by total time, longest first
  // Records in the measurement format (model/io/parts.h) for the kernels whose shape the trace
  // gives: {"id", "op", "shape", "dtype", "measured", ...} without "gpu"/"system", which the caller
  // adds (trace_records_document).
  std::vector<nlohmann::json> records;
  int64_t shapeless = 0;                     // mapped kernels with no shape (timed, not records)
  std::optional<HostIssue> host;             // Kineto traces with launch calls; none for nsys exports
  std::vector<std::string> notes;
};

// Reads either format (an SQLite file by its header, else JSON). Throws SpecError naming the file
// and JSON path (or table) for a trace it cannot use: malformed or truncated JSON, no GPU kernels,
// a time unit it does not know, a field of the wrong type.
MeasuredTrace read_measured_trace(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt);

// A measurements document of the trace's records ("kind": "measurements"), on `gpu_file` (compute
// records) and `system_file` (collectives and host copies; "" leaves them out with a note).
nlohmann::json trace_records_document(const MeasuredTrace& t, const std::string& gpu_file, const std::string& system_file,
                                      std::vector<std::string>* notes);

bool built_with_sqlite();

// A trace beside a prediction: per row (GEMMs, attention, memory-bound kernels, each collective,
// fused EP kernels, host copies) the simulated kernel time of the busiest rank class per step and
// the trace's; and each of the model's ops' row, so that a view can show a class's measured total
// over its ops (each op's share of the class's predicted time).
struct TraceRow {
  std::string name;
  std::vector<std::string> trace_classes;
  double predicted_s = 0, measured_s = 0;
};
struct TraceComparison {
  std::vector<TraceRow> rows;
  double unmapped_s = 0;                      // per step
  std::map<std::string, int> row_of_op;       // the busiest class's op names -> row (-1: none)
};
TraceComparison compare_with_trace(const StepReport& r, const MeasuredTrace& t);
// Measured seconds per op name from a trace: each op of a row gets the row's measured time in
// proportion to its predicted time (ops of rows the trace has nothing for are left out).
std::map<std::string, double> trace_seconds_per_op(const StepReport& r, const MeasuredTrace& t);

}  // namespace moeperf::io
