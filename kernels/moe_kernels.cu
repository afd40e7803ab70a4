#include "kernels/moe_kernels.h"

#include "kernels/cuda_check.h"
#include "kernels/moe_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace moeperf::kernels {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;

void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string("moeperf::kernels::") + fn + ": " + what);
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// ---------------------------------------------------------------------------------------------
// Router: one warp per token, the token's scores in shared memory.
constexpr int kRouterWarps = 4;

__device__ uint64_t warp_max_u64(uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t w = __shfl_xor_sync(kFull, v, o);
    v = w > v ? w : v;
  }
  return v;
}

__global__ void __launch_bounds__(kRouterWarps * 32)
    router_topk_kernel(const float* __restrict__ logits, const float* __restrict__ bias, RouterParams p,
                       int32_t* __restrict__ topk_idx, float* __restrict__ topk_w) {
  __shared__ double s_exp[kRouterWarps][kMaxRouterExperts];  // softmax terms; then group scores
  __shared__ float s_score[kRouterWarps][kMaxRouterExperts];
  __shared__ float s_biased[kRouterWarps][kMaxRouterExperts];
  __shared__ uint8_t s_kept[kRouterWarps][kMaxRouterExperts];   // group kept
  __shared__ uint8_t s_taken[kRouterWarps][kMaxRouterExperts];  // expert already selected
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int E = static_cast<int>(p.experts), G = p.groups, gs = E / G, k = p.top_k;
  double* dexp = s_exp[warp];
  float* score = s_score[warp];
  float* biased = s_biased[warp];
  float* gscore = reinterpret_cast<float*>(s_exp[warp]);
  uint8_t* kept = s_kept[warp];
  uint8_t* taken = s_taken[warp];

  for (int64_t t = int64_t{blockIdx.x} * kRouterWarps + warp; t < p.tokens; t += int64_t{gridDim.x} * kRouterWarps) {
    const float* l = logits + t * p.experts;
    if (p.score == Score::softmax) {
      float mx = -INFINITY;
      for (int e = lane; e < E; e += 32) mx = fmaxf(mx, l[e]);  // fmaxf ignores NaN, as std::max(mx, NaN)
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
      double part = 0.0;
      for (int e = lane; e < E; e += 32) {
        const double d = exp(static_cast<double>(l[e]) - static_cast<double>(mx));
        dexp[e] = d;
        part += d;
      }
      for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(kFull, part, o);
      for (int e = lane; e < E; e += 32) score[e] = static_cast<float>(dexp[e] / part);
    } else {
      for (int e = lane; e < E; e += 32)
        score[e] = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(l[e]))));
    }
    for (int e = lane; e < E; e += 32) {
      biased[e] = bias ? __fadd_rn(score[e], bias[e]) : score[e];
      taken[e] = 0;
    }
    __syncwarp();

    if (G > 1) {
      for (int g = lane; g < G; g += 32) {
        uint64_t k1 = 0, k2 = 0;
        for (int e = g * gs; e < (g + 1) * gs; ++e) {
          const uint64_t ke = detail::rank_key(biased[e], e);
          if (ke > k1) {
            k2 = k1;
            k1 = ke;
          } else if (ke > k2) {
            k2 = ke;
          }
        }
        const float b1 = biased[detail::rank_key_id(k1)];
        gscore[g] = k2 == 0 ? b1 : __fadd_rn(b1, biased[detail::rank_key_id(k2)]);
        kept[g] = 0;
      }
      __syncwarp();
      for (int i = 0; i < p.topk_groups; ++i) {
        uint64_t best = 0;
        for (int g = lane; g < G; g += 32)
          if (!kept[g]) best = max(best, detail::rank_key(gscore[g], g));
        best = warp_max_u64(best);
        if (lane == 0) kept[detail::rank_key_id(best)] = 1;
        __syncwarp();
      }
    }

    int32_t* idx = topk_idx + t * k;
    float* w = topk_w + t * k;
    for (int j = 0; j < k; ++j) {
      uint64_t best = 0;
      for (int e = lane; e < E; e += 32)
        if (!taken[e] && (G == 1 || kept[e / gs])) best = max(best, detail::rank_key(biased[e], e));
      best = warp_max_u64(best);
      if (lane == 0) {
        const int e = detail::rank_key_id(best);
        taken[e] = 1;
        idx[j] = e;
        w[j] = score[e];
      }
      __syncwarp();
    }
    if (lane == 0 && p.normalize) {
      double sum = 0.0;
      for (int j = 0; j < k; ++j) sum += w[j];
      if (sum > 0.0)
        for (int j = 0; j < k; ++j) w[j] = static_cast<float>(w[j] / sum);
    }
    __syncwarp();
  }
}

// ---------------------------------------------------------------------------------------------
// Counts, offsets and the stable map. Slots are cut into contiguous chunks, one block each.
constexpr int kMapThreads = 256;

struct Chunking {
  int64_t blocks = 0, chunk = 0;
};
Chunking chunking(int64_t slots) {
  Chunking c;
  if (slots <= 0) return c;
  c.blocks = std::min<int64_t>((slots + 1023) / 1024, 256);
  c.chunk = (slots + c.blocks - 1) / c.blocks;
  c.chunk = (c.chunk + kMapThreads - 1) / kMapThreads * kMapThreads;
  c.blocks = (slots + c.chunk - 1) / c.chunk;
  return c;
}

__global__ void __launch_bounds__(kMapThreads)
    block_histogram_kernel(const int32_t* __restrict__ idx, int64_t slots, int experts, int64_t chunk,
                           int64_t* __restrict__ block_counts) {
  __shared__ int hist[kMaxRouterExperts];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int64_t begin = blockIdx.x * chunk, end = min(begin + chunk, slots);
  for (int64_t s = begin + threadIdx.x; s < end; s += blockDim.x) {
    const int e = idx[s];
    if (e >= 0 && e < experts) atomicAdd(&hist[e], 1);  // integer: exact in any order
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x) block_counts[blockIdx.x * int64_t{experts} + e] = hist[e];
}

// One block of kMaxRouterExperts threads, thread e owns expert e. count mode: column sums ->
// counts, exclusive scan -> offsets. base mode: block_counts[b][e] becomes the first row of expert
// e for chunk b (offsets[e] + counts of e in earlier chunks).
__global__ void __launch_bounds__(kMaxRouterExperts)
    scan_kernel(int64_t* __restrict__ block_counts, int64_t blocks, int experts, int64_t* __restrict__ counts,
                const int64_t* __restrict__ offsets_in, int64_t* __restrict__ offsets, bool base_mode) {
  __shared__ int64_t buf[kMaxRouterExperts];
  const int e = threadIdx.x;
  if (base_mode) {
    if (e >= experts) return;
    int64_t run = offsets_in[e];
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c = block_counts[b * experts + e];
      block_counts[b * experts + e] = run;
      run += c;
    }
    return;
  }
  int64_t total = 0;
  if (e < experts)
    for (int64_t b = 0; b < blocks; ++b) total += block_counts[b * experts + e];
  buf[e] = total;
  __syncthreads();
  for (int o = 1; o < kMaxRouterExperts; o <<= 1) {  // inclusive Hillis-Steele scan: exact integers
    const int64_t add = e >= o ? buf[e - o] : 0;
    __syncthreads();
    buf[e] += add;
    __syncthreads();
  }
  if (e < experts) {
    counts[e] = total;
    offsets[e] = buf[e] - total;
  }
  if (e == 0) offsets[experts] = buf[kMaxRouterExperts - 1];
}

__global__ void __launch_bounds__(kMapThreads)
    map_kernel(const int32_t* __restrict__ idx, int64_t slots, int experts, int64_t chunk,
               const int64_t* __restrict__ bases, int64_t* __restrict__ row_of_slot, int64_t* __restrict__ slot_of_row) {
  __shared__ int64_t cursor[kMaxRouterExperts];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) cursor[e] = bases[blockIdx.x * int64_t{experts} + e];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned lower = (1u << lane) - 1u;
  const int64_t begin = blockIdx.x * chunk, end = min(begin + chunk, slots);
  for (int64_t base = begin; base < end; base += kMapThreads) {  // block-uniform loop
    const int64_t s = base + threadIdx.x;
    const int e = s < end ? idx[s] : -1;
    const bool ok = e >= 0 && e < experts;
    const unsigned peers = __match_any_sync(kFull, ok ? e : -1);
    // Warps in order, so rows follow slot order inside the chunk: the stable sort.
    for (int w = 0; w < kMapThreads / 32; ++w) {
      if (warp == w) {
        int64_t row = -1;
        if (ok) row = cursor[e] + __popc(peers & lower);
        __syncwarp();
        if (ok && (peers & lower) == 0) cursor[e] += __popc(peers);
        if (s < end) {
          row_of_slot[s] = row;
          if (ok) slot_of_row[row] = s;
        }
      }
      __syncthreads();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Permute / un-permute: one block per row (token), grid-stride, float4 when possible.
constexpr int kRowThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20;

template <bool Vec>
__global__ void __launch_bounds__(kRowThreads)
    permute_kernel(const float* __restrict__ x, int64_t rows, int64_t hidden, int top_k,
                   const int64_t* __restrict__ slot_of_row, float* __restrict__ out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = slot_of_row[r] / top_k;
    if constexpr (Vec) {
      const float4* src = reinterpret_cast<const float4*>(x + t * hidden);
      float4* dst = reinterpret_cast<float4*>(out + r * hidden);
      for (int64_t c = threadIdx.x; c < hidden / 4; c += kRowThreads) dst[c] = __ldg(src + c);
    } else {
      const float* src = x + t * hidden;
      float* dst = out + r * hidden;
      for (int64_t c = threadIdx.x; c < hidden; c += kRowThreads) dst[c] = src[c];
    }
  }
}

__device__ __forceinline__ float4 madd(float4 acc, float w, float4 v, bool first) {
  // Product and sum rounded separately: the reference's operation sequence (no FMA).
  const float4 p = make_float4(__fmul_rn(w, v.x), __fmul_rn(w, v.y), __fmul_rn(w, v.z), __fmul_rn(w, v.w));
  if (first) return p;
  return make_float4(__fadd_rn(acc.x, p.x), __fadd_rn(acc.y, p.y), __fadd_rn(acc.z, p.z), __fadd_rn(acc.w, p.w));
}

template <bool Vec>
__global__ void __launch_bounds__(kRowThreads)
    unpermute_kernel(const float* __restrict__ rows, int64_t tokens, int64_t hidden, int top_k,
                     const int64_t* __restrict__ row_of_slot, const float* __restrict__ topk_w,
                     float* __restrict__ out) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t s0 = t * top_k;
    if constexpr (Vec) {
      float4* o = reinterpret_cast<float4*>(out + t * hidden);
      for (int64_t c = threadIdx.x; c < hidden / 4; c += kRowThreads) {
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int j = 0; j < top_k; ++j) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(rows + __ldg(row_of_slot + s0 + j) * hidden) + c);
          acc = madd(acc, __ldg(topk_w + s0 + j), v, j == 0);
        }
        o[c] = acc;
      }
    } else {
      float* o = out + t * hidden;
      for (int64_t c = threadIdx.x; c < hidden; c += kRowThreads) {
        float acc = 0.f;
        for (int j = 0; j < top_k; ++j) {
          const float p = __fmul_rn(topk_w[s0 + j], rows[row_of_slot[s0 + j] * hidden + c]);
          acc = j == 0 ? p : __fadd_rn(acc, p);
        }
        o[c] = acc;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: blockIdx.y strides over rows, x over columns (no 64-bit division per element).
constexpr int kEltThreads = 256;

__global__ void __launch_bounds__(kEltThreads)
    swiglu_fwd_kernel(const float* __restrict__ gate_up, int64_t rows, int64_t inter, float* __restrict__ out) {
  const int64_t c = blockIdx.x * int64_t{kEltThreads} + threadIdx.x;
  if (c >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const double g = gate_up[r * 2 * inter + c], u = gate_up[r * 2 * inter + inter + c];
    out[r * inter + c] = static_cast<float>(__dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), u));
  }
}

__global__ void __launch_bounds__(kEltThreads)
    swiglu_bwd_kernel(const float* __restrict__ gate_up, const float* __restrict__ dout, int64_t rows,
                      int64_t inter, float* __restrict__ dgate_up) {
  const int64_t c = blockIdx.x * int64_t{kEltThreads} + threadIdx.x;
  if (c >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const double g = gate_up[r * 2 * inter + c], u = gate_up[r * 2 * inter + inter + c], dy = dout[r * inter + c];
    const double s = __ddiv_rn(1.0, __dadd_rn(1.0, exp(-g)));
    // The reference's expression order, every operation rounded on its own (no FMA).
    const double dg = __dmul_rn(__dmul_rn(__dmul_rn(dy, u), s), __dadd_rn(1.0, __dmul_rn(g, __dadd_rn(1.0, -s))));
    const double du = __dmul_rn(__dmul_rn(dy, g), s);
    dgate_up[r * 2 * inter + c] = static_cast<float>(dg);
    dgate_up[r * 2 * inter + inter + c] = static_cast<float>(du);
  }
}

// ---------------------------------------------------------------------------------------------
// MXFP8: each thread owns 4 consecutive elements, 8 lanes one 32-element block.
__global__ void __launch_bounds__(kEltThreads)
    mxfp8_quantize_kernel(const float4* __restrict__ x, int64_t n4, uint32_t* __restrict__ q, uint8_t* __restrict__ scale) {
  const int64_t i = blockIdx.x * int64_t{kEltThreads} + threadIdx.x;
  const unsigned mask = __ballot_sync(kFull, i < n4);  // whole 8-lane groups are in or out
  if (i >= n4) return;
  const float4 v = x[i];
  const float xs[4] = {v.x, v.y, v.z, v.w};
  const detail::Fp8Block4 blk = detail::quantize_block4<8>(xs, mask);
  q[i] = blk.word;
  if (i % 8 == 0) scale[i / 8] = blk.any_finite ? static_cast<uint8_t>(blk.exponent + 127) : detail::kE8m0NaN;
}

__global__ void __launch_bounds__(kEltThreads)
    mxfp8_dequantize_kernel(const uint32_t* __restrict__ q, const uint8_t* __restrict__ scale, int64_t n4,
                            float4* __restrict__ x) {
  const int64_t i = blockIdx.x * int64_t{kEltThreads} + threadIdx.x;
  if (i >= n4) return;
  const uint32_t w = q[i];
  const uint8_t s = scale[i / 8];
  x[i] = make_float4(detail::e4m3_decode_scaled(static_cast<uint8_t>(w), s),
                     detail::e4m3_decode_scaled(static_cast<uint8_t>(w >> 8), s),
                     detail::e4m3_decode_scaled(static_cast<uint8_t>(w >> 16), s),
                     detail::e4m3_decode_scaled(static_cast<uint8_t>(w >> 24), s));
}

unsigned grid_for(int64_t items, int64_t per_block) {
  return static_cast<unsigned>(std::clamp<int64_t>((items + per_block - 1) / per_block, 1, kMaxGrid));
}

void check_routing(const char* fn, int64_t tokens, int top_k, int64_t experts, size_t ws_bytes) {
  require(tokens >= 0 && top_k >= 1, fn, "need tokens >= 0 and top_k >= 1");
  require(experts >= 1 && experts <= kMaxRouterExperts, fn,
          "experts must be in [1, " + std::to_string(kMaxRouterExperts) + "], got " + std::to_string(experts));
  require(ws_bytes >= routing_workspace_bytes(tokens * top_k, experts), fn,
          "workspace smaller than routing_workspace_bytes()");
}

}  // namespace

void router_topk(const float* logits, const float* bias, const RouterParams& p, int32_t* topk_idx,
                 float* topk_w, cudaStream_t stream) {
  const char* fn = "router_topk";
  require(p.tokens >= 0, fn, "tokens must be >= 0");
  require(p.experts >= 1 && p.experts <= kMaxRouterExperts, fn,
          "experts must be in [1, " + std::to_string(kMaxRouterExperts) + "]");
  require(p.top_k >= 1 && p.top_k <= kMaxRouterTopK, fn, "top_k must be in [1, 16]");
  require(p.groups >= 1 && p.experts % p.groups == 0, fn, "groups must divide experts");
  require(p.topk_groups >= 1 && p.topk_groups <= p.groups, fn, "need 1 <= topk_groups <= groups");
  require(p.top_k <= p.topk_groups * (p.experts / p.groups), fn, "top_k exceeds the experts in the kept groups");
  if (p.tokens == 0) return;
  router_topk_kernel<<<grid_for(p.tokens, kRouterWarps), kRouterWarps * 32, 0, stream>>>(logits, bias, p, topk_idx,
                                                                                          topk_w);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

size_t routing_workspace_bytes(int64_t slots, int64_t experts) {
  return static_cast<size_t>(chunking(slots).blocks * experts) * sizeof(int64_t);
}

void expert_counts_offsets(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                           int64_t* counts, int64_t* offsets, void* workspace, size_t workspace_bytes,
                           cudaStream_t stream) {
  check_routing("expert_counts_offsets", tokens, top_k, experts, workspace_bytes);
  const int64_t slots = tokens * top_k;
  const Chunking c = chunking(slots);
  auto* block_counts = static_cast<int64_t*>(workspace);
  const int E = static_cast<int>(experts);
  if (c.blocks > 0) {
    block_histogram_kernel<<<static_cast<unsigned>(c.blocks), kMapThreads, 0, stream>>>(topk_idx, slots, E, c.chunk,
                                                                                      block_counts);
    MOEPERF_CUDA_CHECK(cudaGetLastError());
  }
  scan_kernel<<<1, kMaxRouterExperts, 0, stream>>>(block_counts, c.blocks, E, counts, nullptr, offsets, false);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void permute_map(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts, const int64_t* offsets,
                 int64_t* row_of_slot, int64_t* slot_of_row, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream) {
  check_routing("permute_map", tokens, top_k, experts, workspace_bytes);
  const int64_t slots = tokens * top_k;
  const Chunking c = chunking(slots);
  if (c.blocks == 0) return;
  auto* block_counts = static_cast<int64_t*>(workspace);
  const int E = static_cast<int>(experts);
  const auto blocks = static_cast<unsigned>(c.blocks);
  block_histogram_kernel<<<blocks, kMapThreads, 0, stream>>>(topk_idx, slots, E, c.chunk, block_counts);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
  scan_kernel<<<1, kMaxRouterExperts, 0, stream>>>(block_counts, c.blocks, E, nullptr, offsets, nullptr, true);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
  map_kernel<<<blocks, kMapThreads, 0, stream>>>(topk_idx, slots, E, c.chunk, block_counts, row_of_slot, slot_of_row);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void permute(const float* x, int64_t tokens, int64_t hidden, int top_k, const int64_t* slot_of_row, float* out,
             cudaStream_t stream) {
  require(tokens >= 0 && hidden >= 0 && top_k >= 1, "permute", "need tokens, hidden >= 0 and top_k >= 1");
  const int64_t rows = tokens * top_k;
  if (rows == 0 || hidden == 0) return;
  const unsigned grid = grid_for(rows, 1);
  if (hidden % 4 == 0 && aligned(x, 16) && aligned(out, 16))
    permute_kernel<true><<<grid, kRowThreads, 0, stream>>>(x, rows, hidden, top_k, slot_of_row, out);
  else
    permute_kernel<false><<<grid, kRowThreads, 0, stream>>>(x, rows, hidden, top_k, slot_of_row, out);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void unpermute(const float* rows, int64_t tokens, int64_t hidden, int top_k, const int64_t* row_of_slot,
               const float* topk_w, float* out, cudaStream_t stream) {
  require(tokens >= 0 && hidden >= 0 && top_k >= 1, "unpermute", "need tokens, hidden >= 0 and top_k >= 1");
  if (tokens == 0 || hidden == 0) return;
  const unsigned grid = grid_for(tokens, 1);
  if (hidden % 4 == 0 && aligned(rows, 16) && aligned(out, 16))
    unpermute_kernel<true><<<grid, kRowThreads, 0, stream>>>(rows, tokens, hidden, top_k, row_of_slot, topk_w, out);
  else
    unpermute_kernel<false><<<grid, kRowThreads, 0, stream>>>(rows, tokens, hidden, top_k, row_of_slot, topk_w, out);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

namespace {
dim3 swiglu_grid(int64_t rows, int64_t inter) {
  return dim3(static_cast<unsigned>((inter + kEltThreads - 1) / kEltThreads),
              static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
}
}  // namespace

void swiglu_fwd(const float* gate_up, int64_t rows, int64_t inter, float* out, cudaStream_t stream) {
  require(rows >= 0 && inter >= 0 && inter <= int64_t{65535} * kEltThreads, "swiglu_fwd", "bad rows / inter");
  if (rows == 0 || inter == 0) return;
  swiglu_fwd_kernel<<<swiglu_grid(rows, inter), kEltThreads, 0, stream>>>(gate_up, rows, inter, out);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void swiglu_bwd(const float* gate_up, const float* dout, int64_t rows, int64_t inter, float* dgate_up,
                cudaStream_t stream) {
  require(rows >= 0 && inter >= 0 && inter <= int64_t{65535} * kEltThreads, "swiglu_bwd", "bad rows / inter");
  if (rows == 0 || inter == 0) return;
  swiglu_bwd_kernel<<<swiglu_grid(rows, inter), kEltThreads, 0, stream>>>(gate_up, dout, rows, inter, dgate_up);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void mxfp8_quantize(const float* x, int64_t n, uint8_t* e4m3, uint8_t* scale_e8m0, cudaStream_t stream) {
  require(n >= 0 && n % 32 == 0, "mxfp8_quantize", "n must be a non-negative multiple of 32");
  require(aligned(x, 16) && aligned(e4m3, 4), "mxfp8_quantize", "x must be 16-byte and e4m3 4-byte aligned");
  if (n == 0) return;
  const int64_t n4 = n / 4;
  mxfp8_quantize_kernel<<<static_cast<unsigned>((n4 + kEltThreads - 1) / kEltThreads), kEltThreads, 0, stream>>>(
      reinterpret_cast<const float4*>(x), n4, reinterpret_cast<uint32_t*>(e4m3), scale_e8m0);
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

void mxfp8_dequantize(const uint8_t* e4m3, const uint8_t* scale_e8m0, int64_t n, float* x, cudaStream_t stream) {
  require(n >= 0 && n % 32 == 0, "mxfp8_dequantize", "n must be a non-negative multiple of 32");
  require(aligned(x, 16) && aligned(e4m3, 4), "mxfp8_dequantize", "x must be 16-byte and e4m3 4-byte aligned");
  if (n == 0) return;
  const int64_t n4 = n / 4;
  mxfp8_dequantize_kernel<<<static_cast<unsigned>((n4 + kEltThreads - 1) / kEltThreads), kEltThreads, 0, stream>>>(
      reinterpret_cast<const uint32_t*>(e4m3), scale_e8m0, n4, reinterpret_cast<float4*>(x));
  MOEPERF_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moeperf::kernels
