// The expert GEMMs of expert_gemm.h, every way (cuBLAS grouped, cuBLASLt over streams, padded loop,
// dense reference, FP8 block-128 and MXFP8 with their scale layouts): one concern, kept whole in one
// file (about 640 lines) because the ways share the heuristic cache, the stream set and the checks.
#include "kernels/expert_gemm.h"

#include "kernels/cuda_check.h"
#include "kernels/moe_kernels.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

namespace moeperf::kernels {
namespace {

void cublas_check(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + cublasGetStatusString(s));
}
#define MOEPERF_CUBLAS_CHECK(expr) cublas_check((expr), #expr, __FILE__, __LINE__)

void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string("moeperf::kernels::") + fn + ": " + what);
}

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;  // per stream (cuBLASLt's advice for Hopper)

using Bf16 = __nv_bfloat16;

// SplitMix64 of (seed, i): 53 uniform bits as a float in [0, 1].
__device__ float uniform01(uint64_t seed, int64_t i) {
  uint64_t x = seed ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53);
}

__global__ void fill_random_f32_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = lo + (hi - lo) * uniform01(seed, i);
}

__global__ void fill_bf16_kernel(Bf16* p, int64_t n, uint64_t seed, float lo, float hi, bool integers) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float u = uniform01(seed, i);
    const float v = integers ? fminf(floorf(lo + (hi - lo + 1.0f) * u), hi) : lo + (hi - lo) * u;
    p[i] = __float2bfloat16_rn(v);
  }
}

// ---- FP8 scale layouts (see expert_gemm.h) ----
__host__ __device__ inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

template <GemmPrecision P>
__host__ __device__ inline int64_t scale_offset(int64_t r, int64_t c, int64_t outer, int64_t k) {
  if constexpr (P == GemmPrecision::mxfp8) {
    (void)outer;
    const int64_t kb4 = round_up(k / 32, 4);
    return ((r / 128) * (kb4 / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
  } else {
    return c * round_up(outer, 4) + r;
  }
}

template <GemmPrecision P>
__host__ __device__ inline int64_t scale_elements(int64_t outer, int64_t k) {
  if constexpr (P == GemmPrecision::mxfp8)
    return round_up(outer, 128) * round_up(k / 32, 4);
  else
    return (k / 128) * round_up(outer, 4);
}

template <GemmPrecision P>
using ScaleT = std::conditional_t<P == GemmPrecision::mxfp8, uint8_t, float>;

// A's scales [rows x kb] (row-major) -> one cuBLASLt scale tensor per expert. tab: row offsets
// [experts + 1], then each expert's first element in `out` [experts].
template <GemmPrecision P>
__global__ void swizzle_a_scales(const ScaleT<P>* in, int64_t rows, int64_t k, const int64_t* tab, int64_t experts, ScaleT<P>* out) {
  const int64_t kb = k / (P == GemmPrecision::mxfp8 ? 32 : 128), total = rows * kb;
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = t / kb, c = t % kb;
    int64_t lo = 0, hi = experts;  // the expert e with tab[e] <= r < tab[e + 1]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (tab[mid] <= r) lo = mid; else hi = mid;
    }
    const int64_t m = tab[lo + 1] - tab[lo];
    out[tab[experts + 1 + lo] + scale_offset<P>(r - tab[lo], c, m, k)] = in[t];
  }
}

// W's scales [experts x n x kb] -> experts tensors of scale_elements(n, k) each.
template <GemmPrecision P>
__global__ void swizzle_w_scales(const ScaleT<P>* in, int64_t experts, int64_t n, int64_t k, ScaleT<P>* out) {
  const int64_t kb = k / (P == GemmPrecision::mxfp8 ? 32 : 128), per_in = n * kb, total = experts * per_in;
  const int64_t per_out = scale_elements<P>(n, k);
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = t / per_in, rem = t % per_in;
    out[e * per_out + scale_offset<P>(rem / kb, rem % kb, n, k)] = in[t];
  }
}

// FP8 128-element blocks: each thread owns 4 consecutive elements, a warp one block.
__global__ void fp8_block128_quantize_kernel(const float4* __restrict__ x, int64_t n4, uint32_t* __restrict__ q,
                                             float* __restrict__ scale) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const unsigned mask = __ballot_sync(0xFFFFFFFFu, i < n4);  // whole warps are in or out (n4 % 32 == 0)
  if (i >= n4) return;
  const float4 v = x[i];
  const float xs[4] = {v.x, v.y, v.z, v.w};
  const detail::Fp8Block4 blk = detail::quantize_block4<32>(xs, mask);
  q[i] = blk.word;
  // 2^e as a float: e >= -126 normal, e = -127 the subnormal 2^-127.
  const int e = blk.exponent;
  if (i % 32 == 0)
    scale[i / 32] = !blk.any_finite ? detail::bits_float(0x7FC00000u)
                                : e >= -126 ? detail::bits_float(static_cast<uint32_t>(e + 127) << 23) : detail::bits_float(0x00400000u);
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 65536))); }

}  // namespace

const char* to_string(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::bf16: return "bf16";
    case GemmPrecision::fp8_block128: return "fp8_block128";
    case GemmPrecision::mxfp8: return "mxfp8";
  }
  return "?";
}

int64_t scale_block(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::bf16: return 1;
    case GemmPrecision::fp8_block128: return 128;
    case GemmPrecision::mxfp8: return 32;
  }
  return 1;
}

bool precision_supported(GemmPrecision p, int cc_major, int cc_minor, std::string* why) {
  const std::string cc = std::to_string(cc_major) + "." + std::to_string(cc_minor);
  std::string reason;
  switch (p) {
    case GemmPrecision::bf16:
      if (cc_major < 8) reason = "BF16 tensor-core GEMMs need compute capability >= 8.0; this device is " + cc;
      break;
    case GemmPrecision::fp8_block128:
      if (cc_major != 9)
        reason = "FP8 with 128-element FP32 block scales (cuBLASLt CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) is used on compute "
                 "capability 9.x (Hopper) only; this device is " + cc + (cc_major >= 10 ? " (use mxfp8)" : "");
      break;
    case GemmPrecision::mxfp8:
      if (cc_major < 10)
        reason = "MXFP8 (cuBLASLt CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 block scales) needs compute capability >= 10.0 "
                 "(Blackwell); this device is " + cc;
      break;
  }
  if (why) *why = reason;
  return reason.empty();
}

int64_t cublaslt_scale_offset(GemmPrecision p, int64_t r, int64_t c, int64_t outer, int64_t k) {
  require(p != GemmPrecision::bf16 && k > 0 && k % 128 == 0 && r >= 0 && r < outer && c >= 0 && c < k / scale_block(p),
          "cublaslt_scale_offset", "an FP8 precision, k a positive multiple of 128, 0 <= r < outer, 0 <= c < k / block");
  return p == GemmPrecision::mxfp8 ? scale_offset<GemmPrecision::mxfp8>(r, c, outer, k)
                                   : scale_offset<GemmPrecision::fp8_block128>(r, c, outer, k);
}

int64_t cublaslt_scale_elements(GemmPrecision p, int64_t outer, int64_t k) {
  require(p != GemmPrecision::bf16 && k > 0 && k % 128 == 0 && outer >= 0, "cublaslt_scale_elements",
          "an FP8 precision, k a positive multiple of 128, outer >= 0");
  return p == GemmPrecision::mxfp8 ? scale_elements<GemmPrecision::mxfp8>(outer, k)
                                   : scale_elements<GemmPrecision::fp8_block128>(outer, k);
}

void fill_f32_random(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  require(n >= 0, "fill_f32_random", "n < 0");
  if (n == 0) return;
  fill_random_f32_kernel<<<grid_for(n), 256, 0, stream>>>(p, n, seed, lo, hi);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void fp8_block128_quantize(const float* x, int64_t n, uint8_t* e4m3, float* scale, cudaStream_t stream) {
  require(n >= 0 && n % 128 == 0, "fp8_block128_quantize", "n must be a non-negative multiple of 128");
  require(reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(e4m3) % 4 == 0, "fp8_block128_quantize",
          "x must be 16-byte and e4m3 4-byte aligned");
  if (n == 0) return;
  const int64_t n4 = n / 4;
  fp8_block128_quantize_kernel<<<static_cast<unsigned>((n4 + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(x), n4, reinterpret_cast<uint32_t*>(e4m3), scale);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

const char* to_string(ExpertGemmWay way) {
  switch (way) {
    case ExpertGemmWay::cublas_grouped: return "cublas_grouped";
    case ExpertGemmWay::lt_multistream: return "lt_multistream";
    case ExpertGemmWay::padded_loop: return "padded_loop";
  }
  return "?";
}

double tile_waste(const std::vector<int64_t>& counts, int64_t tile) {
  int64_t sum = 0, padded = 0;
  for (int64_t m : counts)
    if (m > 0) sum += m, padded += (m + tile - 1) / tile * tile;
  return sum > 0 ? static_cast<double>(padded) / static_cast<double>(sum) : 1.0;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN stays quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void fill_bf16(void* p, int64_t n, uint64_t seed, float lo, float hi, bool integers, cudaStream_t stream) {
  require(n >= 0, "fill_bf16", "n < 0");
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65536);
  fill_bf16_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<Bf16*>(p), n, seed, lo, hi, integers);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// Row-major C [m x n] = A [m x k] W [k x n] is column-major C^T (n x m) = W^T (n x k) A^T (k x m):
// cuBLAS sees m' = n, n' = m, k' = k, A' = W (ld n), B' = A (ld k), C' = C (ld n), no transposes.
struct ExpertGemm::Impl {
  // A cuBLASLt shape (m rows of A/C, n, k) with its layouts and cached algorithm.
  struct Plan {
    cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };

  cudaStream_t stream;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::vector<cudaStream_t> side;
  std::vector<cudaEvent_t> join;
  cudaEvent_t fork = nullptr, ptrs_free = nullptr;
  std::vector<void*> workspace;  // one per side stream, [0] also serves `stream`
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, Plan> plans;  // (precision, m, n, k)
  // FP8: one descriptor per precision (E4M3 x E4M3 -> BF16, A' = W transposed, its scale mode),
  // the per-expert cuBLASLt scale tensors, and the expert table the A-scale kernel reads.
  cublasLtMatmulDesc_t desc_fp8[3] = {nullptr, nullptr, nullptr};
  void* scale_a = nullptr;
  void* scale_w = nullptr;
  size_t scale_a_bytes = 0, scale_w_bytes = 0;
  int64_t* h_tab = nullptr;
  int64_t* d_tab = nullptr;
  size_t tab_capacity = 0;
  cudaEvent_t tab_free = nullptr;
  // Grouped call: device pointer arrays uploaded from pinned host memory.
  void** h_ptrs = nullptr;
  void** d_ptrs = nullptr;
  size_t ptr_capacity = 0;  // pointers
  int64_t* h_counts = nullptr;
  size_t counts_capacity = 0;
  // Padded loop buffers.
  void* pad_a = nullptr;
  void* pad_c = nullptr;
  size_t pad_a_bytes = 0, pad_c_bytes = 0;

  Impl(cudaStream_t s, int streams) : stream(s) {
    require(streams >= 1, "ExpertGemm", "streams < 1");
    MOEPERF_CUBLAS_CHECK(cublasCreate(&blas));
    MOEPERF_CUBLAS_CHECK(cublasLtCreate(&lt));
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = kLtWorkspaceBytes;
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // Expert blocks start at offsets[e] * k elements: 16-byte aligned when k, n are multiples of 8.
    const uint32_t align = 16;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      MOEPERF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align));
    side.resize(static_cast<size_t>(streams));
    join.resize(static_cast<size_t>(streams));
    workspace.resize(static_cast<size_t>(streams));
    for (int i = 0; i < streams; ++i) {
      MOEPERF_CUDA_CHECK(cudaStreamCreateWithFlags(&side[static_cast<size_t>(i)], cudaStreamNonBlocking));
      MOEPERF_CUDA_CHECK(cudaEventCreateWithFlags(&join[static_cast<size_t>(i)], cudaEventDisableTiming));
      MOEPERF_CUDA_CHECK(cudaMalloc(&workspace[static_cast<size_t>(i)], kLtWorkspaceBytes));
    }
    MOEPERF_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    MOEPERF_CUDA_CHECK(cudaEventCreateWithFlags(&ptrs_free, cudaEventDisableTiming));
    MOEPERF_CUDA_CHECK(cudaEventCreateWithFlags(&tab_free, cudaEventDisableTiming));
  }

  ~Impl() {
    // Destructors do not throw: results ignored, but the device is drained first.
    cudaStreamSynchronize(stream);
    for (size_t i = 0; i < side.size(); ++i) {
      if (side[i]) cudaStreamSynchronize(side[i]), cudaStreamDestroy(side[i]);
      if (join[i]) cudaEventDestroy(join[i]);
      cudaFree(workspace[i]);
    }
    if (fork) cudaEventDestroy(fork);
    if (ptrs_free) cudaEventDestroy(ptrs_free);
    if (tab_free) cudaEventDestroy(tab_free);
    for (auto d : desc_fp8)
      if (d) cublasLtMatmulDescDestroy(d);
    cudaFree(scale_a);
    cudaFree(scale_w);
    cudaFreeHost(h_tab);
    cudaFree(d_tab);
    for (auto& [key, p] : plans) cublasLtMatrixLayoutDestroy(p.w), cublasLtMatrixLayoutDestroy(p.a), cublasLtMatrixLayoutDestroy(p.c);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (lt) cublasLtDestroy(lt);
    if (blas) cublasDestroy(blas);
    cudaFreeHost(h_ptrs);
    cudaFree(d_ptrs);
    cudaFreeHost(h_counts);
    cudaFree(pad_a);
    cudaFree(pad_c);
  }

  // The FP8 descriptor of precision p, made on first use: FP32 compute and scale type, A' (= W,
  // stored k x n, K-major) transposed, both operands' scale mode.
  cublasLtMatmulDesc_t fp8_desc(GemmPrecision p) {
    cublasLtMatmulDesc_t& d = desc_fp8[static_cast<int>(p)];
    if (d) return d;
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T;
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    const int32_t mode = p == GemmPrecision::mxfp8 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
    MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
    return d;
  }

  const Plan& plan(int64_t m, int64_t n, int64_t k, GemmPrecision prec = GemmPrecision::bf16) {
    const auto key = std::make_tuple(static_cast<int>(prec), m, n, k);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan p;
    const bool fp8 = prec != GemmPrecision::bf16;
    if (fp8) {
      // A' = W_e stored k x n (ld k, transposed by the descriptor), B' = A_e stored k x m (ld k).
      MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
      MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
    } else {
      MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(k), n));
      MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
    }
    MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, fp8 ? fp8_desc(prec) : desc, p.w, p.a, p.c, p.c, pref, 1, &r, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatrixLayoutDestroy(p.w), cublasLtMatrixLayoutDestroy(p.a), cublasLtMatrixLayoutDestroy(p.c);
      throw CudaError(std::string("cublasLtMatmulAlgoGetHeuristic: no ") + to_string(prec) + " algorithm for m=" + std::to_string(m) +
                      " n=" + std::to_string(n) + " k=" + std::to_string(k) + " (" + cublasLtGetStatusString(st) + ")");
    }
    p.algo = r.algo;
    return plans.emplace(key, p).first->second;
  }

  void matmul(const Plan& p, const void* a, const void* w, void* c, void* ws, cudaStream_t s) {
    const float alpha = 1.0f, beta = 0.0f;
    MOEPERF_CUBLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, w, p.w, a, p.a, &beta, c, p.c, c, p.c, &p.algo, ws, kLtWorkspaceBytes, s));
  }

  void grouped(const std::vector<int64_t>& counts, const Bf16* a, const Bf16* w, int64_t n, int64_t k, Bf16* c) {
    std::vector<int64_t> ms, off;
    std::vector<int64_t> experts;
    int64_t row = 0;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (counts[e] > 0) ms.push_back(counts[e]), off.push_back(row), experts.push_back(static_cast<int64_t>(e));
      row += counts[e];
    }
    const size_t g = ms.size();
    if (g == 0) return;
    if (3 * g > ptr_capacity) {
      MOEPERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaFreeHost(h_ptrs);
      cudaFree(d_ptrs);
      h_ptrs = nullptr, d_ptrs = nullptr;
      MOEPERF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_ptrs), 3 * g * sizeof(void*)));
      MOEPERF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_ptrs), 3 * g * sizeof(void*)));
      ptr_capacity = 3 * g;
    } else {
      MOEPERF_CUDA_CHECK(cudaEventSynchronize(ptrs_free));  // the previous upload has left the pinned buffer
    }
    for (size_t i = 0; i < g; ++i) {
      h_ptrs[i] = const_cast<Bf16*>(w + experts[i] * k * n);  // A' = W_e
      h_ptrs[g + i] = const_cast<Bf16*>(a + off[i] * k);      // B' = A_e
      h_ptrs[2 * g + i] = c + off[i] * n;                      // C' = C_e
    }
    MOEPERF_CUDA_CHECK(cudaMemcpyAsync(d_ptrs, h_ptrs, 3 * g * sizeof(void*), cudaMemcpyHostToDevice, stream));
    MOEPERF_CUDA_CHECK(cudaEventRecord(ptrs_free, stream));
    const std::vector<cublasOperation_t> op(g, CUBLAS_OP_N);
    const std::vector<int64_t> ns(g, n), ks(g, k), ones(g, 1);
    const std::vector<float> alpha(g, 1.0f), beta(g, 0.0f);
    MOEPERF_CUBLAS_CHECK(cublasSetStream(blas, stream));
    MOEPERF_CUBLAS_CHECK(cublasGemmGroupedBatchedEx_64(
        blas, op.data(), op.data(), ns.data(), ms.data(), ks.data(), alpha.data(), const_cast<const void* const*>(d_ptrs),
        CUDA_R_16BF, ns.data(), const_cast<const void* const*>(d_ptrs + g), CUDA_R_16BF, ks.data(), beta.data(),
        d_ptrs + 2 * g, CUDA_R_16BF, ns.data(), static_cast<int64_t>(g), ones.data(), CUBLAS_COMPUTE_32F));
  }

  void multistream(const std::vector<int64_t>& counts, const Bf16* a, const Bf16* w, int64_t n, int64_t k, Bf16* c) {
    int64_t row = 0, launched = 0;
    const auto ns = static_cast<int64_t>(side.size());
    bool forked = false;
    for (size_t e = 0; e < counts.size(); ++e) {
      const int64_t m = counts[e];
      if (m > 0) {
        if (!forked) {
          MOEPERF_CUDA_CHECK(cudaEventRecord(fork, stream));
          for (auto s : side) MOEPERF_CUDA_CHECK(cudaStreamWaitEvent(s, fork, 0));
          forked = true;
        }
        const size_t si = static_cast<size_t>(launched % ns);
        matmul(plan(m, n, k), a + row * k, w + static_cast<int64_t>(e) * k * n, c + row * n, workspace[si], side[si]);
        ++launched;
      }
      row += m;
    }
    if (!forked) return;
    for (size_t i = 0; i < side.size(); ++i) {
      MOEPERF_CUDA_CHECK(cudaEventRecord(join[i], side[i]));
      MOEPERF_CUDA_CHECK(cudaStreamWaitEvent(stream, join[i], 0));
    }
  }

  void padded(const std::vector<int64_t>& counts, const Bf16* a, const Bf16* w, int64_t n, int64_t k, Bf16* c) {
    const int64_t max_m = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
    if (max_m == 0) return;
    const auto experts = static_cast<int64_t>(counts.size());
    const size_t need_a = static_cast<size_t>(experts * max_m * k) * sizeof(Bf16);
    const size_t need_c = static_cast<size_t>(experts * max_m * n) * sizeof(Bf16);
    if (need_a > pad_a_bytes || need_c > pad_c_bytes) {
      MOEPERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (need_a > pad_a_bytes) {
        cudaFree(pad_a);
        pad_a = nullptr;
        MOEPERF_CUDA_CHECK(cudaMalloc(&pad_a, need_a));
        pad_a_bytes = need_a;
      }
      if (need_c > pad_c_bytes) {
        cudaFree(pad_c);
        pad_c = nullptr;
        MOEPERF_CUDA_CHECK(cudaMalloc(&pad_c, need_c));
        pad_c_bytes = need_c;
      }
    }
    auto* pa = static_cast<Bf16*>(pad_a);
    auto* pc = static_cast<Bf16*>(pad_c);
    int64_t row = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t m = counts[static_cast<size_t>(e)];
      Bf16* dst = pa + e * max_m * k;
      if (m > 0)
        MOEPERF_CUDA_CHECK(cudaMemcpyAsync(dst, a + row * k, static_cast<size_t>(m * k) * sizeof(Bf16), cudaMemcpyDeviceToDevice, stream));
      if (m < max_m) MOEPERF_CUDA_CHECK(cudaMemsetAsync(dst + m * k, 0, static_cast<size_t>((max_m - m) * k) * sizeof(Bf16), stream));
      row += m;
    }
    const Plan& p = plan(max_m, n, k);
    for (int64_t e = 0; e < experts; ++e) matmul(p, pa + e * max_m * k, w + e * k * n, pc + e * max_m * n, workspace[0], stream);
    row = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t m = counts[static_cast<size_t>(e)];
      if (m > 0)
        MOEPERF_CUDA_CHECK(cudaMemcpyAsync(c + row * n, pc + e * max_m * n, static_cast<size_t>(m * n) * sizeof(Bf16),
                                           cudaMemcpyDeviceToDevice, stream));
      row += m;
    }
  }

  void check_device(GemmPrecision p) {
    int dev = 0, major = 0, minor = 0;
    MOEPERF_CUDA_CHECK(cudaGetDevice(&dev));
    MOEPERF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    MOEPERF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    std::string why;
    if (!precision_supported(p, major, minor, &why)) throw PrecisionUnavailable(std::string(to_string(p)) + " expert GEMMs: " + why);
  }

  static void grow(void*& buf, size_t& have, size_t need, cudaStream_t s) {
    if (need <= have) return;
    MOEPERF_CUDA_CHECK(cudaStreamSynchronize(s));
    cudaFree(buf);
    buf = nullptr;
    MOEPERF_CUDA_CHECK(cudaMalloc(&buf, need));
    have = need;
  }

  template <GemmPrecision P>
  void fp8(const std::vector<int64_t>& counts, const Fp8Operands& in, int64_t n, int64_t k, Bf16* c) {
    using S = ScaleT<P>;
    const auto experts = static_cast<int64_t>(counts.size());
    const int64_t rows = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    if (rows == 0) return;
    // Expert table: row offsets [experts + 1], then each expert's first scale element [experts].
    const size_t tab_n = static_cast<size_t>(2 * experts + 1);
    if (tab_n > tab_capacity) {
      MOEPERF_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaFreeHost(h_tab);
      cudaFree(d_tab);
      h_tab = nullptr, d_tab = nullptr;
      MOEPERF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_tab), tab_n * sizeof(int64_t)));
      MOEPERF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_tab), tab_n * sizeof(int64_t)));
      tab_capacity = tab_n;
    } else {
      MOEPERF_CUDA_CHECK(cudaEventSynchronize(tab_free));  // the previous upload has left the pinned table
    }
    std::vector<int64_t> base(static_cast<size_t>(experts));
    int64_t row = 0, elems = 0;
    for (int64_t e = 0; e < experts; ++e) {
      h_tab[e] = row;
      h_tab[experts + 1 + e] = base[static_cast<size_t>(e)] = elems;
      row += counts[static_cast<size_t>(e)];
      if (counts[static_cast<size_t>(e)] > 0) elems += scale_elements<P>(counts[static_cast<size_t>(e)], k);
    }
    h_tab[experts] = row;
    const int64_t w_per = scale_elements<P>(n, k);
    grow(scale_a, scale_a_bytes, static_cast<size_t>(elems) * sizeof(S), stream);
    grow(scale_w, scale_w_bytes, static_cast<size_t>(experts * w_per) * sizeof(S), stream);
    auto* sa = static_cast<S*>(scale_a);
    auto* sw = static_cast<S*>(scale_w);
    MOEPERF_CUDA_CHECK(cudaMemcpyAsync(d_tab, h_tab, tab_n * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    MOEPERF_CUDA_CHECK(cudaEventRecord(tab_free, stream));
    MOEPERF_CUDA_CHECK(cudaMemsetAsync(sa, 0, static_cast<size_t>(elems) * sizeof(S), stream));
    MOEPERF_CUDA_CHECK(cudaMemsetAsync(sw, 0, static_cast<size_t>(experts * w_per) * sizeof(S), stream));
    const int64_t kb = k / scale_block(P);
    swizzle_a_scales<P><<<grid_for(rows * kb), 256, 0, stream>>>(static_cast<const S*>(in.a_scale), rows, k, d_tab, experts, sa);
    MOEPERF_CUDA_CHECK(cudaGetLastError());
    swizzle_w_scales<P><<<grid_for(experts * n * kb), 256, 0, stream>>>(static_cast<const S*>(in.w_scale), experts, n, k, sw);
    MOEPERF_CUDA_CHECK(cudaGetLastError());

    const cublasLtMatmulDesc_t d = fp8_desc(P);
    MOEPERF_CUDA_CHECK(cudaEventRecord(fork, stream));
    for (auto sd : side) MOEPERF_CUDA_CHECK(cudaStreamWaitEvent(sd, fork, 0));
    const auto ns = static_cast<int64_t>(side.size());
    const float alpha = 1.0f, beta = 0.0f;
    int64_t launched = 0;
    row = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t m = counts[static_cast<size_t>(e)];
      if (m > 0) {
        const Plan& p = plan(m, n, k, P);
        // cuBLAS's A is W_e (its outer dimension n), its B is A_e (outer dimension m). The
        // descriptor is read when cublasLtMatmul is called, so it can change between calls.
        const void* a_scale = sw + e * w_per;
        const void* b_scale = sa + base[static_cast<size_t>(e)];
        MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
        MOEPERF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
        const size_t si = static_cast<size_t>(launched % ns);
        MOEPERF_CUBLAS_CHECK(cublasLtMatmul(lt, d, &alpha, in.w + e * n * k, p.w, in.a + row * k, p.a, &beta, c + row * n, p.c,
                                            c + row * n, p.c, &p.algo, workspace[si], kLtWorkspaceBytes, side[si]));
        ++launched;
      }
      row += m;
    }
    for (size_t i = 0; i < side.size(); ++i) {
      MOEPERF_CUDA_CHECK(cudaEventRecord(join[i], side[i]));
      MOEPERF_CUDA_CHECK(cudaStreamWaitEvent(stream, join[i], 0));
    }
  }
};

ExpertGemm::ExpertGemm(cudaStream_t stream, int streams) : impl_(std::make_unique<Impl>(stream, streams)) {}
ExpertGemm::~ExpertGemm() = default;

std::vector<int64_t> ExpertGemm::sync_counts(const int64_t* d_counts, int64_t experts) {
  require(experts >= 0, "ExpertGemm::sync_counts", "experts < 0");
  Impl& s = *impl_;
  if (static_cast<size_t>(experts) > s.counts_capacity) {
    MOEPERF_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    cudaFreeHost(s.h_counts);
    s.h_counts = nullptr;
    MOEPERF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.h_counts), static_cast<size_t>(experts) * sizeof(int64_t)));
    s.counts_capacity = static_cast<size_t>(experts);
  }
  if (experts > 0)
    MOEPERF_CUDA_CHECK(cudaMemcpyAsync(s.h_counts, d_counts, static_cast<size_t>(experts) * sizeof(int64_t), cudaMemcpyDeviceToHost, s.stream));
  MOEPERF_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return std::vector<int64_t>(s.h_counts, s.h_counts + experts);
}

void ExpertGemm::run(ExpertGemmWay way, const std::vector<int64_t>& counts, const void* a, const void* w, int64_t n, int64_t k,
                     void* c) {
  require(n > 0 && k > 0 && n % 8 == 0 && k % 8 == 0, "ExpertGemm::run", "n and k must be positive multiples of 8");
  for (int64_t m : counts) require(m >= 0, "ExpertGemm::run", "negative count");
  const auto* A = static_cast<const Bf16*>(a);
  const auto* W = static_cast<const Bf16*>(w);
  auto* C = static_cast<Bf16*>(c);
  switch (way) {
    case ExpertGemmWay::cublas_grouped: impl_->grouped(counts, A, W, n, k, C); break;
    case ExpertGemmWay::lt_multistream: impl_->multistream(counts, A, W, n, k, C); break;
    case ExpertGemmWay::padded_loop: impl_->padded(counts, A, W, n, k, C); break;
  }
}

void ExpertGemm::run_fp8(GemmPrecision p, const std::vector<int64_t>& counts, const Fp8Operands& in, int64_t n, int64_t k,
                         void* c) {
  require(p != GemmPrecision::bf16, "ExpertGemm::run_fp8", "bf16 expert GEMMs go through run()");
  require(n > 0 && k > 0 && n % 16 == 0 && k % 128 == 0, "ExpertGemm::run_fp8", "n must be a positive multiple of 16, k of 128");
  for (int64_t m : counts) require(m >= 0, "ExpertGemm::run_fp8", "negative count");
  impl_->check_device(p);
  auto* C = static_cast<Bf16*>(c);
  if (p == GemmPrecision::mxfp8)
    impl_->fp8<GemmPrecision::mxfp8>(counts, in, n, k, C);
  else
    impl_->fp8<GemmPrecision::fp8_block128>(counts, in, n, k, C);
}

void ExpertGemm::dense(const void* a, const void* w, int64_t m, int64_t n, int64_t k, void* c) {
  require(m >= 0 && n > 0 && k > 0 && n % 8 == 0 && k % 8 == 0, "ExpertGemm::dense", "m >= 0; n, k positive multiples of 8");
  if (m == 0) return;
  impl_->matmul(impl_->plan(m, n, k), a, w, c, impl_->workspace[0], impl_->stream);
}

size_t ExpertGemm::cached_shapes() const { return impl_->plans.size(); }

}  // namespace moeperf::kernels
