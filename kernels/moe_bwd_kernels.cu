#include "kernels/moe_bwd_kernels.h"

#include "kernels/cuda_check.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace moeperf::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20;

void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string("moeperf::kernels::") + fn + ": " + what);
}

unsigned grid_for(int64_t items) { return static_cast<unsigned>(std::max<int64_t>(1, std::min(items, kMaxGrid))); }

// Sum over the block in a fixed tree order; every thread gets the result.
__device__ double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}

__device__ double block_max(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads)
    unpermute_bwd_kernel(const float* __restrict__ rows, const float* __restrict__ dout, int64_t tokens, int64_t hidden,
                         int top_k, const int64_t* __restrict__ row_of_slot, const float* __restrict__ topk_w,
                         float* __restrict__ drows, float* __restrict__ dw) {
  __shared__ double sh[kThreads];
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float* g = dout + t * hidden;
    for (int j = 0; j < top_k; ++j) {
      const int64_t s = t * top_k + j, r = row_of_slot[s];
      const float w = topk_w[s];
      const float* src = rows + r * hidden;
      float* d = drows + r * hidden;
      double dot = 0.0;
      for (int64_t h = threadIdx.x; h < hidden; h += kThreads) {
        d[h] = __fmul_rn(w, g[h]);
        dot += static_cast<double>(g[h]) * static_cast<double>(src[h]);
      }
      dot = block_sum(dot, sh);
      if (threadIdx.x == 0) dw[s] = static_cast<float>(dot);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    permute_bwd_kernel(const float* __restrict__ drows, int64_t tokens, int64_t hidden, int top_k,
                       const int64_t* __restrict__ row_of_slot, float* __restrict__ dx) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x)
    for (int64_t h = threadIdx.x; h < hidden; h += kThreads) {
      float acc = drows[row_of_slot[t * top_k] * hidden + h];
      for (int j = 1; j < top_k; ++j) acc = __fadd_rn(acc, drows[row_of_slot[t * top_k + j] * hidden + h]);
      dx[t * hidden + h] = acc;
    }
}

__global__ void __launch_bounds__(kThreads)
    router_bwd_kernel(const float* __restrict__ logits, const int32_t* __restrict__ idx, const float* __restrict__ dw,
                      int64_t tokens, int64_t experts, int top_k, bool sigmoid, float* __restrict__ dl) {
  __shared__ double sh[kThreads];
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float* l = logits + t * experts;
    float* d = dl + t * experts;
    if (sigmoid) {
      for (int64_t x = threadIdx.x; x < experts; x += kThreads) d[x] = 0.0f;
      __syncthreads();
      if (threadIdx.x == 0)
        for (int j = 0; j < top_k; ++j) {
          const int32_t x = idx[t * top_k + j];
          const double s = 1.0 / (1.0 + exp(-static_cast<double>(l[x])));
          d[x] = static_cast<float>(dw[t * top_k + j] * s * (1 - s));
        }
      __syncthreads();
      continue;
    }
    // softmax: dl_x = p_x (g_x - sum_j p_j g_j), g the weight gradient on the selected experts.
    double mx = -INFINITY;
    for (int64_t x = threadIdx.x; x < experts; x += kThreads) mx = fmax(mx, static_cast<double>(l[x]));
    mx = block_max(mx, sh);
    double z = 0;
    for (int64_t x = threadIdx.x; x < experts; x += kThreads) z += exp(static_cast<double>(l[x]) - mx);
    z = block_sum(z, sh);
    double dot = 0;
    for (int j = 0; j < top_k; ++j) {
      const int32_t x = idx[t * top_k + j];
      dot += exp(static_cast<double>(l[x]) - mx) / z * dw[t * top_k + j];
    }
    for (int64_t x = threadIdx.x; x < experts; x += kThreads) d[x] = static_cast<float>(-exp(static_cast<double>(l[x]) - mx) / z * dot);
    __syncthreads();
    if (threadIdx.x == 0)
      for (int j = 0; j < top_k; ++j) {
        const int32_t x = idx[t * top_k + j];
        d[x] += static_cast<float>(exp(static_cast<double>(l[x]) - mx) / z * dw[t * top_k + j]);
      }
    __syncthreads();
  }
}

__global__ void fill_kernel(float* p, int64_t n, float v) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) p[i] = v;
}

}  // namespace

void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int top_k, const int64_t* row_of_slot,
                   const float* topk_w, float* drows, float* dw, cudaStream_t stream) {
  require(tokens >= 0 && hidden >= 0 && top_k >= 1, "unpermute_bwd", "need tokens, hidden >= 0 and top_k >= 1");
  if (tokens == 0) return;
  unpermute_bwd_kernel<<<grid_for(tokens), kThreads, 0, stream>>>(rows, dout, tokens, hidden, top_k, row_of_slot, topk_w, drows, dw);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int top_k, const int64_t* row_of_slot, float* dx,
                 cudaStream_t stream) {
  require(tokens >= 0 && hidden >= 0 && top_k >= 1, "permute_bwd", "need tokens, hidden >= 0 and top_k >= 1");
  if (tokens == 0 || hidden == 0) return;
  permute_bwd_kernel<<<grid_for(tokens), kThreads, 0, stream>>>(drows, tokens, hidden, top_k, row_of_slot, dx);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void router_bwd(const float* logits, const int32_t* topk_idx, const float* dw, int64_t tokens, int64_t experts, int top_k,
                bool sigmoid, float* dlogits, cudaStream_t stream) {
  require(tokens >= 0 && experts >= 1 && top_k >= 1, "router_bwd", "need tokens >= 0, experts >= 1 and top_k >= 1");
  if (tokens == 0) return;
  router_bwd_kernel<<<grid_for(tokens), kThreads, 0, stream>>>(logits, topk_idx, dw, tokens, experts, top_k, sigmoid, dlogits);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void fill_f32(float* p, int64_t n, float value, cudaStream_t stream) {
  require(n >= 0, "fill_f32", "n < 0");
  if (n == 0) return;
  fill_kernel<<<grid_for((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p, n, value);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moeperf::kernels
