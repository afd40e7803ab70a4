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
// is told as the minimum alignment). Every cuBLAS/CUDA result is checked; failures throw CudaError (CudaOutOfMemory for a device allocation)
// (kernels/cuda_check.h) naming the call.
//
// Counts: all three ways launch from the host, so they need the per-expert counts there.
// sync_counts() copies them device-to-host (pinned) and waits: the op "moe.count_sync".
//
//   ExpertGemm g(stream);
//   std::vector<int64_t> counts = g.sync_counts(d_counts, experts);   // moe.count_sync
//   g.run(ExpertGemmWay::lt_multistream, counts, a, w, n, k, c);     // enqueued on `stream`
//
// Low precision (run_fp8): E4M3 inputs with block scales, FP32 accumulate, BF16 output, through
// the cuBLASLt loop (lt_multistream: each expert its own cublasLtMatmul on a side stream):
//   fp8_block128  Hopper (compute capability 9.x): one FP32 scale per 128 consecutive elements
//                 along K for both operands (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, DeepSeek-V3's
//                 1x128 activation tiles; its 128x128 weight tiles, BLK128x128_32F, are not used);
//   mxfp8         compute capability >= 10 (Blackwell): one E8M0 scale per 32 elements along K
//                 (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, OCP MX).
// FP8 operands are K-major, which cuBLASLt's FP8 kernels require ("TN"): A [rows x k] row-major as
// for BF16, but each expert's weight stored transposed, W [experts x n x k] (nn.Linear's
// [out x in]). Scales come in the plain row-major layout the quantizers write (mxfp8_quantize of
// kernels/moe_kernels.h, fp8_block128_quantize below): A's [rows x k/B], W's [experts x n x k/B];
// run_fp8 rearranges them on the stream, every call, into the layouts cuBLASLt reads, one tensor
// per expert (two small kernels; their time is part of the call):
//   VEC128_32F: scales [k/128][roundup(outer, 4)] floats, the outer dimension (rows of A, n of W)
//     contiguous. cublasLt.h only says "see documentation for layout information"; this is the
//     cuBLAS documentation's and TransformerEngine's GEMM-ready layout as we read them:
//     UNVERIFIED ON HARDWARE until the GPU test passes on a Hopper.
//   VEC32_UE8M0: 128 x 4 tiles of 512 bytes (the cuBLAS documentation's "1D block scaling factors
//     layout", the tcgen05 scale-factor layout): outer index r, K-block c (of kb = k/32, padded to
//     a multiple of 4), offset = ((r/128)*(kb/4) + c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4, the
//     outer dimension padded to 128. Also UNVERIFIED ON HARDWARE (no Blackwell run yet).
// Padding entries are zero. run_fp8 checks the device's compute capability first and throws
// PrecisionUnavailable with the reason (precision_supported says it without a device).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace moeperf::kernels {

enum class ExpertGemmWay { cublas_grouped, lt_multistream, padded_loop };
inline constexpr ExpertGemmWay kExpertGemmWays[] = {ExpertGemmWay::cublas_grouped, ExpertGemmWay::lt_multistream,
                                                    ExpertGemmWay::padded_loop};
const char* to_string(ExpertGemmWay way);

// sum(ceil(m/tile)*tile) / sum(m) over experts with rows (1 when there are none).
double tile_waste(const std::vector<int64_t>& counts, int64_t tile = 128);

// Expert-GEMM input precisions. bf16 is run(); the FP8 ones are run_fp8().
enum class GemmPrecision { bf16, fp8_block128, mxfp8 };
inline constexpr GemmPrecision kGemmPrecisions[] = {GemmPrecision::bf16, GemmPrecision::fp8_block128, GemmPrecision::mxfp8};
const char* to_string(GemmPrecision p);
// Elements per scale along K (1 for bf16: no scales).
int64_t scale_block(GemmPrecision p);
// Whether `p` runs on a device of compute capability cc_major.cc_minor; when not, *why (if given)
// says why in words: bf16 needs >= 8.0, fp8_block128 9.x, mxfp8 >= 10.0.
bool precision_supported(GemmPrecision p, int cc_major, int cc_minor, std::string* why = nullptr);

class PrecisionUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where scale (outer r, K-block c) of one operand lands in cuBLASLt's layout (see above), and the
// size of that operand's scale tensor in elements (bytes for mxfp8, floats for fp8_block128);
// outer = the operand's rows (m of A, n of W), k a multiple of 128.
int64_t cublaslt_scale_offset(GemmPrecision p, int64_t r, int64_t c, int64_t outer, int64_t k);
int64_t cublaslt_scale_elements(GemmPrecision p, int64_t outer, int64_t k);

// FP8 operands of run_fp8 (device pointers; layouts above).
struct Fp8Operands {
  const uint8_t* a = nullptr;  // [rows x k] E4M3
  const void* a_scale = nullptr;  // [rows x k/B]: uint8 E8M0 (mxfp8) or float (fp8_block128)
  const uint8_t* w = nullptr;  // [experts x n x k] E4M3, K-major
  const void* w_scale = nullptr;  // [experts x n x k/B]
};

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

  // The expert GEMMs in FP8 (precision fp8_block128 or mxfp8), BF16 C [rows x n]: a cuBLASLt
  // matmul per expert with rows, on the side streams as lt_multistream. n a positive multiple of
  // 16, k of 128. One expert with all the rows is the dense FP8 GEMM. Throws PrecisionUnavailable
  // when the device cannot run `p`.
  void run_fp8(GemmPrecision p, const std::vector<int64_t>& counts, const Fp8Operands& in, int64_t n, int64_t k, void* c);

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

// Seeded pseudo-random float fill on the device: lo + (hi - lo) * u(seed, i), the draw of fill_bf16.
void fill_f32_random(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);

// FP8 with 128-element blocks, bit-exact with ref::fp8_block128_quantize (kernels/reference/
// mxfp8_ref.h): x [n] -> e4m3 [n], scale [n / 128] (FP32 powers of two). n a multiple of 128; x
// 16-byte and e4m3 4-byte aligned. For a row-major [rows x k] matrix with k % 128 == 0 the blocks
// run along K: the layout run_fp8 takes.
void fp8_block128_quantize(const float* x, int64_t n, uint8_t* e4m3, float* scale, cudaStream_t stream);

// BF16 bits <-> float on the host (round to nearest even; NaN kept quiet).
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

}  // namespace moeperf::kernels
