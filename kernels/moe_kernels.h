// CUDA launchers of the dropless-MoE kernels: router top-k, expert counts / offsets, the stable
// permute map, permute / un-permute (weighted combine), SwiGLU forward / backward and MXFP8
// quantize / dequantize. Each one matches its CPU reference in kernels/reference (same arguments,
// same semantics, same layouts) and says how closely.
//
// Launchers are free functions over raw device pointers and a stream (DeepEP style): they enqueue
// work and return; every CUDA call is checked and a failure throws CudaError, an allocation CudaOutOfMemory (kernels/cuda_check.h);
// bad arguments throw std::invalid_argument before anything is enqueued. Every index is int64_t
// (rows x hidden passes 2^31 at DeepSeek-V3 sizes); every reduction accumulates in FP32 or wider in
// a fixed order; no float atomics, so two runs give the same bits.
//
//   std::vector<...> ws(routing_workspace_bytes(T * k, E));          // a device buffer of that size
//   router_topk(logits, bias, p, idx, w, stream);                     // [T x E] -> [T x k]
//   expert_counts_offsets(idx, T, k, E, counts, offsets, ws, ws_bytes, stream);
//   permute_map(idx, T, k, E, offsets, row_of_slot, slot_of_row, ws, ws_bytes, stream);
//   permute(x, T, H, k, slot_of_row, rows, stream);                   // [T x H] -> [T*k x H]
//   unpermute(rows, T, H, k, row_of_slot, w, out, stream);            // [T*k x H] -> [T x H]
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace moeperf::kernels {

enum class Score { softmax, sigmoid };

// Same fields and meaning as ref::RouterParams (kernels/reference/moe_ref.h).
struct RouterParams {
  int64_t tokens = 0, experts = 0;  // experts <= kMaxRouterExperts
  int top_k = 1;                    // top_k <= kMaxRouterTopK
  int groups = 1, topk_groups = 1;
  Score score = Score::softmax;
  bool normalize = true;
};
inline constexpr int64_t kMaxRouterExperts = 512;
inline constexpr int kMaxRouterTopK = 16;

// One warp per token. Selected ids equal ref::router_topk's (descending biased score, ties to the
// lower id, NaN last); weights agree within 1e-6: the scores are evaluated in double as in the
// reference, but CUDA's double exp and the warp-tree softmax sum may differ from glibc's and the
// sequential sum in the last double bit, which can move a float score by one ulp.
// logits [tokens x experts], bias [experts] or nullptr, topk_idx / topk_w [tokens x top_k].
void router_topk(const float* logits, const float* bias, const RouterParams& p, int32_t* topk_idx,
                 float* topk_w, cudaStream_t stream);

// Device scratch needed by expert_counts_offsets and permute_map for `slots` = tokens * top_k.
size_t routing_workspace_bytes(int64_t slots, int64_t experts);

// counts [experts], offsets [experts + 1] (int64, exclusive prefix, offsets[experts] = slots).
// Per-block histograms (integer shared-memory atomics: exact), then a column sum and a scan in one
// block: equal to ref::expert_counts. Expert ids must lie in [0, experts); ids outside are ignored
// (they are counted nowhere, so offsets[experts] < slots reveals them).
void expert_counts_offsets(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                           int64_t* counts, int64_t* offsets, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream);

// Stable counting sort, equal to ref::permute_map: rows of expert e are [offsets[e], offsets[e+1])
// ordered by slot (token, then slot). row_of_slot, slot_of_row [tokens * top_k]. offsets must come
// from expert_counts_offsets on the same topk_idx. Slots with an id outside [0, experts) get
// row_of_slot = -1 and write no slot_of_row entry.
void permute_map(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                 const int64_t* offsets, int64_t* row_of_slot, int64_t* slot_of_row,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream);

// out[r, :] = x[slot_of_row[r] / top_k, :] for r in [0, tokens * top_k): a copy, bit-exact with
// ref::permute. 16-byte vector loads when hidden % 4 == 0 and both pointers are 16-byte aligned.
void permute(const float* x, int64_t tokens, int64_t hidden, int top_k, const int64_t* slot_of_row,
             float* out, cudaStream_t stream);

// out[t, :] = sum_j topk_w[t*k+j] * rows[row_of_slot[t*k+j], :], FP32, slot order, starting from
// the j = 0 product, each product and sum rounded separately (no FMA contraction): the operation
// sequence of ref::unpermute, so equal to it whenever the reference is compiled without FMA.
void unpermute(const float* rows, int64_t tokens, int64_t hidden, int top_k,
               const int64_t* row_of_slot, const float* topk_w, float* out, cudaStream_t stream);

// gate_up [rows x 2I] (gate | up), out [rows x I] = silu(g) * u, in double, rounded once to float
// (ref::swiglu_fwd; within one float ulp: CUDA's double exp vs glibc's).
void swiglu_fwd(const float* gate_up, int64_t rows, int64_t inter, float* out, cudaStream_t stream);

// dgate_up [rows x 2I] from dout [rows x I] (ref::swiglu_bwd, within one float ulp).
void swiglu_bwd(const float* gate_up, const float* dout, int64_t rows, int64_t inter,
                float* dgate_up, cudaStream_t stream);

// MXFP8 with the rule of kernels/reference/mxfp8_ref.h, bit-exact with ref::mxfp8_quantize /
// ref::mxfp8_dequantize, NaN and Inf included. n a multiple of 32; x (and the dequantized output)
// 16-byte aligned, e4m3 4-byte aligned (cudaMalloc pointers are).
// x [n] -> e4m3 [n], scale_e8m0 [n / 32].
void mxfp8_quantize(const float* x, int64_t n, uint8_t* e4m3, uint8_t* scale_e8m0,
                    cudaStream_t stream);
// e4m3 [n], scale_e8m0 [n / 32] -> x [n].
void mxfp8_dequantize(const uint8_t* e4m3, const uint8_t* scale_e8m0, int64_t n, float* x,
                      cudaStream_t stream);

}  // namespace moeperf::kernels
