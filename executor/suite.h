// `moeperf run --suite calibrate`: measures the op classes the cost model prices, on this
// machine's backend and communicator, and writes them as measurement records (the format of
// calibration/published/, model/io/parts.h) under the model's op names, with the machine they ran
// on as a system file (inline in the records; `--write-system` writes it alone for `predict`):
//
//   gemm            dense GEMMs: square and skinny, and the expert/projection shapes of the shipped
//                   models (scaled to the budget), in the backend's dtype
//   grouped_gemm    ragged grouped GEMMs: uniform, skewed (Zipf) and with zero-row experts
//   attention.fwd/.bwd  blocked reference attention (CPU): head dims, sequence lengths, causal,
//                   sliding window; on CUDA not yet (cuDNN's fused attention is issue 20's to run)
//   memory.copy     copies and read-modify-write kernels over sizes past the caches
//   collective.*    all-to-all (even and ragged), all-gather, reduce-scatter, all-reduce over
//                   message sizes on all ranks (the group size is the job's rank count: run the
//                   suite under -np 2 and -np 4 for two group sizes)
//
// Compute is measured on rank 0 alone (the others wait): under MPI on a shared host the ranks
// would otherwise measure each other. Bounded by a time budget; progress on stderr.
#pragma once

#include <string>

#include "executor/backend.h"
#include "executor/comm.h"

namespace moeperf::exec {

struct SuiteOptions {
  std::string backend = "cpu";
  double budget_s = 120;      // wall time for the whole suite (each class gets a share)
  std::string out;            // measurements JSON (rank 0)
  std::string write_system;   // the machine as a system file (rank 0)
  bool progress = true;
};

struct SuiteResult {
  int records = 0;
  std::string summary;        // per class: records, skipped shapes, in words
};

// Every rank calls it; rank 0 writes the files.
SuiteResult run_suite(const SuiteOptions& o, Communicator& comm, Backend& be);

}  // namespace moeperf::exec
