// CUDA launchers of the backward MoE ops the executor's CUDA backend needs beside
// kernels/moe_kernels.h: un-permute backward, permute backward, the router's score backward, and a
// float fill. Same arguments and layouts as their CPU references (ref::unpermute_bwd,
// ref::permute_bwd; the router backward of executor/backend_cpu.cpp). Enqueue on `stream` and
// return; CUDA errors throw CudaError (an allocation CudaOutOfMemory), bad arguments std::invalid_argument. 64-bit indices; no
// atomics (fixed-order reductions: two runs give the same bits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moeperf::kernels {

// drows[row_of_slot[s], :] = topk_w[s] * dout[t, :]; dw[s] = <dout[t, :], rows[row_of_slot[s], :]>
// (double accumulation, tree order: within a few float ulps of the reference's sequential sum).
// drows equals the reference bit for bit.
void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int top_k,
                   const int64_t* row_of_slot, const float* topk_w, float* drows, float* dw, cudaStream_t stream);

// dx[t, :] = sum_j drows[row_of_slot[t*k + j], :] in slot order: equal to ref::permute_bwd.
void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int top_k, const int64_t* row_of_slot,
                 float* dx, cudaStream_t stream);

// dlogits [tokens x experts] from dw [tokens x top_k] through the score function (sigmoid when
// `sigmoid`, else softmax over all experts), the top-k renormalization treated as constant; in
// double (softmax sums in tree order: within float ulps of the CPU backend).
void router_bwd(const float* logits, const int32_t* topk_idx, const float* dw, int64_t tokens, int64_t experts,
                int top_k, bool sigmoid, float* dlogits, cudaStream_t stream);

// p[i] = value for i < n (NaN included).
void fill_f32(float* p, int64_t n, float value, cudaStream_t stream);

}  // namespace moeperf::kernels
