// The expert GEMMs of a dropless MoE layer three ways, plus one dense GEMM as the reference rate:
// BF16 inputs, FP32 accumulate (CUBLAS_COMPUTE_32F), BF16 output, row-major.
//
//   C[offsets[e] .. offsets[e+1]) = A[offsets[e] .. offsets[e+1]) x W[e]      for every expert e
//
// A [rows x k], W [experts x k x n] (expert e's k x n block at w + e*k*n), C [rows x n], all BF16
// (raw bits: __nv_bfloat16 or uint16_t), rows = offsets[experts]. Every index is int64_t.
//
// Ways (ExpertGemmWay):
//   cublas_grouped  one cublasGemmGroupedBatchedEx_64 call, one group per expert that has rows
//                   (m/n/k/ld are host arrays, so the counts must be on the host first);
//   lt_multistream  a loop of cuBLASLt matmuls, expert i on stream i % streams, forked from and
//                   joined back into the caller's stream with events; the algorithm of each shape
//                   (m, n, k) comes from cublasLtMatmulAlgoGetHeuristic once and is cached;
//   padded_loop     the baseline the model prices: every expert padded to the busiest expert's
//                   rows (max m): A gathered into a padded [experts x max_m x k] buffer, one
//                   cuBLASLt matmul of max_m rows per expert (all experts, idle ones included:
//                   that is the padding's cost), the real rows copied back into C. Padding rows
//                   are zero.
// and dense(): one cuBLASLt matmul [rows x k] x [k x n], the same FLOPs as the expert GEMMs.
//
// Zero-row experts: no launch is made with m = 0 (they own no rows of C, so nothing of C is
// written for them); with rows = 0 nothing at all is launched. Rows of C at or past
// offsets[experts] are never touched. n and k must be multiples of 8 (16-byte rows, which cuBLASLt
// is told as the minimum alignment). Every cuBLAS/CUDA result is checked; failures throw CudaError
// (kernels/cuda_check.h) naming the call.
//
// Counts: all three ways launch from the host, so they need the per-expert counts there.
// sync_counts() copies them device-to-host (pinned) and waits: the op "moe.count_sync".
//
//   ExpertGemm g(stream);
//   std::vector<int64_t> counts = g.sync_counts(d_counts, experts);   // moe.count_sync
//   g.run(ExpertGemmWay::lt_multistream, counts, a, w, n, k, c);     // enqueued on `stream`
//
// FP8 (Hopper block scales, MXFP8 on compute capability >= 10) is not implemented here: BF16 only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moeperf::kernels {

enum class ExpertGemmWay { cublas_grouped, lt_multistream, padded_loop };
inline constexpr ExpertGemmWay kExpertGemmWays[] = {ExpertGemmWay::cublas_grouped, ExpertGemmWay::lt_multistream,
                                                    ExpertGemmWay::padded_loop};
const char* to_string(ExpertGemmWay way);

// sum(ceil(m/tile)*tile) / sum(m) over experts with rows (1 when there are none).
double tile_waste(const std::vector<int64_t>& counts, int64_t tile = 128);

class ExpertGemm {
 public:
  // All work is enqueued on `stream` (side streams join back into it). `streams` side streams for
  // lt_multistream (>= 1).
  explicit ExpertGemm(cudaStream_t stream, int streams = 4);
  ~ExpertGemm();
  ExpertGemm(const ExpertGemm&) = delete;
  ExpertGemm& operator=(const ExpertGemm&) = delete;

  // Copies counts [experts] (int64, device) to the host and waits for them: moe.count_sync.
  std::vector<int64_t> sync_counts(const int64_t* d_counts, int64_t experts);

  // The expert GEMMs as described above; counts on the host (counts.size() = experts).
  void run(ExpertGemmWay way, const std::vector<int64_t>& counts, const void* a, const void* w, int64_t n, int64_t k,
           void* c);

  // C [m x n] = A [m x k] x W [k x n] in one cuBLASLt matmul (nothing launched when m = 0).
  void dense(const void* a, const void* w, int64_t m, int64_t n, int64_t k, void* c);

  // Number of distinct (m, n, k) shapes whose cuBLASLt heuristic is cached.
  size_t cached_shapes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Seeded pseudo-random BF16 fill on the device (for tests and benchmarks): element i gets
// lo + (hi - lo) * u(seed, i) rounded to BF16; with integers = true it gets
// round-to-integer of that instead, so small-integer data make exact GEMMs.
void fill_bf16(void* p, int64_t n, uint64_t seed, float lo, float hi, bool integers, cudaStream_t stream);

// BF16 bits <-> float on the host (round to nearest even; NaN kept quiet).
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

}  // namespace moeperf::kernels
