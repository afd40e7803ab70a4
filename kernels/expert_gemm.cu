#include "kernels/expert_gemm.h"

#include "kernels/cuda_check.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

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

__global__ void fill_bf16_kernel(Bf16* p, int64_t n, uint64_t seed, float lo, float hi, bool integers) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    // SplitMix64 of (seed, i): 53 uniform bits.
    uint64_t x = seed ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const float u = static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53);
    const float v = integers ? fminf(floorf(lo + (hi - lo + 1.0f) * u), hi) : lo + (hi - lo) * u;
    p[i] = __float2bfloat16_rn(v);
  }
}

}  // namespace

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
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> plans;
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

  const Plan& plan(int64_t m, int64_t n, int64_t k) {
    const auto key = std::make_tuple(m, n, k);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan p;
    MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(k), n));
    MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
    MOEPERF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, p.w, p.a, p.c, p.c, pref, 1, &r, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      cublasLtMatrixLayoutDestroy(p.w), cublasLtMatrixLayoutDestroy(p.a), cublasLtMatrixLayoutDestroy(p.c);
      throw CudaError("cublasLtMatmulAlgoGetHeuristic: no BF16 algorithm for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                      " k=" + std::to_string(k) + " (" + cublasLtGetStatusString(st) + ")");
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

void ExpertGemm::dense(const void* a, const void* w, int64_t m, int64_t n, int64_t k, void* c) {
  require(m >= 0 && n > 0 && k > 0 && n % 8 == 0 && k % 8 == 0, "ExpertGemm::dense", "m >= 0; n, k positive multiples of 8");
  if (m == 0) return;
  impl_->matmul(impl_->plan(m, n, k), a, w, c, impl_->workspace[0], impl_->stream);
}

size_t ExpertGemm::cached_shapes() const { return impl_->plans.size(); }

}  // namespace moeperf::kernels
