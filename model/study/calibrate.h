// Fitting the cost model's efficiency parameters to measurements of parts: published
// microbenchmarks (calibration/published/) and the executor's own op timings (moeperf run --out),
// read as the same kind of record (model/io/parts.h).
//
// Every record is priced by the very functions the Pricer uses (model/pricing/efficiency.h for
// GEMMs, attention and memory kernels; the topology's collective algorithms for NCCL collectives;
// the fused EP kernel's fractions for dispatch/combine) and compared in log space,
// r = sqrt(w) x ln(predicted / measured), w the record's confidence weight (high 1, medium 0.6,
// low 0.3). Each op class is fitted on its own, in the order memory, host copies, GEMM, attention,
// collectives, EP kernels (a later class reads the earlier ones' values, e.g. the GEMM roofline
// the fitted hbm_fraction): projected Levenberg-Marquardt on the class's parameters normalised to
// their bounds (a parameter the descent pushes out of its bounds is held there), a weak pull toward
// the starting value so that a parameter the records cannot see stays put. Per (class, GPU
// generation) a quarter of the records, those whose ids hash lowest, is held back, unless the
// others would identify fewer parameters without one or it alone shows how a parameter's term
// varies (calibrate.cpp); records marked "check" are priced and shown,
// never fitted (another kernel than the profile's, a figure read as an upper bound).
// Deterministic: no randomness, records in id order.
//
//   std::vector<PartRecord> recs = io::load_parts("calibration/published/gemm.json");
//   FitReport f = fit_parts(recs, Calibration{}, "hopper");
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/hardware/topology.h"
#include "model/params.h"
#include "model/pricing/efficiency.h"
#include "model/specs.h"
#include "model/workload/step.h"

namespace moeperf {

enum class PartClass { memory, host_copy, gemm, attention, collective, ep, kCount };
const char* to_string(PartClass c);
// The parameters `calibrate` fits for a class.
std::vector<Param> class_params(PartClass c);

enum class PartMetric { seconds, flop_rate, byte_rate, bus_bandwidth, algorithm_bandwidth };

struct PartRecord {
  std::string id, file;       // file: where it was read, for messages
  std::string op;             // as the model names it: gemm, grouped_gemm, attention.fwd, collective.all_reduce, ...
  PartClass cls = PartClass::gemm;
  std::string gpu_key;        // the file's name for the GPU or system
  GpuSpec gpu;
  std::string generation;     // "hopper", "blackwell", "blackwell-ultra" (compute capability), or the GPU's name
  std::shared_ptr<const SystemSpec> system;    // collectives, host copies, EP kernels
  std::shared_ptr<const Topology> topology;    // collectives: the job's GPUs on the system
  int64_t gpus = 0;
  // GEMM
  GemmShape gemm;
  Dtype dtype = Dtype::bf16;
  double flops = 0;           // attention and executor GEMMs: the FLOPs the rate counts
  double exec_flops = 0;      // attention: the FLOPs the kernel executes, priced (0: flops)
  // Attention
  AttentionShape attention;
  // Memory, host copies, collectives
  double bytes = 0;
  double rows = 0;            // memory: the rows of a row gather (shape "rows"), 0 for a plain copy
  Collective collective = Collective::none;
  std::string algorithm;      // a collective's algorithm when the record names one ("ring", "nvls", "tree")
  // EP kernels
  double ep = 0, sms = 0;
  bool rdma = false;
  double in_flight = 0;       // ep.one_shot_a2a: bytes a peer's thread blocks keep in flight
  bool deepep = false;        // DeepEP's kernels (shape "kernel": "deepep"), else HybridEP
  bool torch_api = false;     // measured through the kernel's PyTorch API (shape "api": "torch"), else the kernel alone
  double row_bytes = 0;       // EP kernels: bytes per token row as the benchmark counts them (hidden x the dtype's bytes)
  // What was measured, in SI units (s, FLOP/s, B/s)
  PartMetric metric = PartMetric::seconds;
  double value = 0;
  double weight = 1;          // from confidence
  std::string confidence, library, source, why;
  bool check_only = false;    // "use": "check"
};

// The record's metric as the model predicts it with `cal`.
double predict_part(const PartRecord& r, const Calibration& cal);

struct RecordFit {
  const PartRecord* record = nullptr;
  double before = 0, after = 0;   // predicted / measured - 1
  bool held_back = false;
};

struct ParamFit {
  Param param;
  double before = 0, after = 0;
  std::vector<std::string> fitted_on;  // record ids (empty: not fitted, kept from the start)
  std::string borrowed;             // non-empty: set from the generation's other fitted parameters (how)
  int movers = 0;  // fitted records that move it; > 0 with fitted_on empty: they cannot tell it from the terms before it
};

struct ClassFit {
  PartClass cls;
  std::string generation;
  int fitted = 0, held_back = 0, checked = 0;
  std::vector<ParamFit> params;
  std::vector<RecordFit> records;   // every record of the group, fitted, held back and checked
  double rms_log_after = 0;         // over fitted and held-back records
  double spread = 0;                // sqrt(sum of squared log errors / (records - fitted parameters)): the class's band
  int iterations = 0;
};

struct FitReport {
  Calibration fitted;
  std::vector<ClassFit> classes;
  std::vector<std::string> notes;
};

// Fits every class with records of `generation` (empty: the records must all be of one
// generation). Throws InputError when no record is of that generation.
FitReport fit_parts(const std::vector<PartRecord>& records, const Calibration& start, const std::string& generation);

// The generation name of a GPU: hopper (9.x), blackwell (10.0), blackwell-ultra (10.3), or its name.
std::string gpu_generation(const GpuSpec& g);

struct ErrorStats {
  int n = 0;
  double median = 0, worst = 0;  // of |predicted / measured - 1|
};
ErrorStats error_stats(const std::vector<RecordFit>& v, bool after, int which);  // which: 0 fitted, 1 held back, 2 checked

}  // namespace moeperf
