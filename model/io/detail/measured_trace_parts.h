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
  bool copy = false;          // a memory copy (a memcpy activity), not a kernel: a record of its bytes at most
};

struct TraceRange {
  std::string name;
  double start = 0, end = 0;  // seconds
  bool gpu = false;           // a GPU-side range (Kineto's gpu_user_annotation)
  int device = -1;            // a GPU-side range's device (-1: not known, or a CPU-side range)
  int64_t process = -1;       // a CPU-side range's process, where the trace says (nsys: globalTid)
};

double median_of(std::vector<double> v);
// A memory copy's class from its CUPTI kind (CUpti_ActivityMemcpyKind's short name: "HtoD", "DtoH",
// "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"; Kineto names a copy "Memcpy
// <kind> (...)", nsys stores the enum): host to device (incl. to an array) host.h2d, device to host
// host.d2h, within one device memory.copy, between two GPUs collective.send_recv (a transfer over
// NVLink or PCIe, not the device's HBM alone), and "" for a host-to-host or unknown copy, which
// touches no GPU memory the model prices (the report lists it unmapped, by name).
std::string memcpy_class(const std::string& kind);
// CUPTI's short name of a CUpti_ActivityMemcpyKind value ("kind N" for one it does not define).
std::string memcpy_kind_name(int64_t kind);
// Whether a copy of this class becomes a measurement record (with the bytes it moved).
inline bool memcpy_class_has_record(const std::string& cls) {
  return cls == "host.h2d" || cls == "host.d2h" || cls == "memory.copy";
}
// Picks the device and the steps, classifies the kernels (those without a class yet), sums the
// classes per step and lists the unmapped. `where_kernels` names the JSON path or table in errors.
void finish_trace(MeasuredTrace& t, std::vector<TraceKernelEvent>& kernels, std::vector<TraceRange>& steps,
                  const KernelPatterns& patterns, const TraceOptions& opt, const std::string& where_kernels);

MeasuredTrace read_kineto(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt);
MeasuredTrace read_nsys_sqlite(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt);

}  // namespace moeperf::io::detail
