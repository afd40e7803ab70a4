// CPU reference implementations of the dropless-MoE kernels: router top-k, expert counts and
// offsets, permute / un-permute (and their backward), SwiGLU, grouped GEMM and its weight gradient.
//
// They are the executor's CPU backend and the oracle every CUDA kernel is tested against, so they
// favour being obviously right and bit-reproducible over speed: single-threaded, no atomics, every
// index computed in int64_t (rows x hidden passes 2^31 at DeepSeek-V3 sizes), every reduction
// accumulated in a fixed order in FP32 or double (each function says which). All tensors are
// row-major float32 host arrays; all sizes are element counts. Bad arguments throw
// std::invalid_argument; nothing here exits or aborts.
//
//   router_topk(logits, bias, p, idx, w);                         // [T x E] -> [T x k] ids, weights
//   expert_counts(idx, T, k, E, counts, offsets);                 // offsets[E] == T * k
//   permute_map(idx, T, k, E, offsets, row_of_slot, slot_of_row);
//   permute(x, T, H, k, slot_of_row, rows);                       // [T x H] -> [T*k x H], grouped by expert
//   grouped_gemm(rows, w1, offsets, E, H, 2 * I, gate_up);        // per expert: rows_e x w1_e
//   swiglu_fwd(gate_up, T * k, I, act);  grouped_gemm(act, w2, offsets, E, I, H, y);
//   unpermute(y, T, H, k, row_of_slot, w, out);                   // [T*k x H] -> [T x H], weighted
#pragma once

#include <cstdint>

namespace moeperf::ref {

enum class Score { softmax, sigmoid };

struct RouterParams {
  int64_t tokens = 0, experts = 0;
  int top_k = 1;
  // Group-limited routing (DeepSeek-V3): experts are split into `groups` consecutive groups of
  // experts / groups; a group's score is the sum of its two highest biased scores (its one score
  // when a group holds one expert); the topk_groups best groups (ties: lower group id) are kept and
  // top_k experts are picked inside them. groups == 1: plain top-k.
  int groups = 1, topk_groups = 1;
  Score score = Score::softmax;
  // Renormalize the k selected weights to sum to 1 (sigmoid routers do; softmax: the weights are
  // the softmax probabilities over all experts of the selected experts, renormalized if true).
  bool normalize = true;
};

// logits [tokens x experts]; bias [experts] or nullptr: added to the scores for SELECTION only
// (aux-loss-free bias), the weights use the unbiased scores.
// topk_idx [tokens x k] sorted by descending biased score, ties broken by lower expert id (a NaN
// score ranks below every number); topk_w [tokens x k] in the same order.
// Scores: softmax = exp(l - max) / sum in double (sum in expert order), sigmoid = 1 / (1 + exp(-l))
// in double, each rounded once to float; biased score = float(score) + bias (float add).
// Normalization divides by the double sum of the k float weights in slot order; a zero sum (every
// selected score underflowed) leaves the weights unnormalized rather than producing NaN.
// Throws std::invalid_argument unless 1 <= top_k, groups divides experts, 1 <= topk_groups <=
// groups and top_k <= topk_groups * (experts / groups).
void router_topk(const float* logits, const float* bias, const RouterParams& p, int32_t* topk_idx,
                 float* topk_w);

// counts[e] = number of (token, slot) pairs routed to e; offsets[e] = exclusive prefix sum,
// offsets[experts] = tokens*k. counts [experts], offsets [experts + 1].
// Throws std::invalid_argument on an expert id outside [0, experts).
void expert_counts(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                   int64_t* counts, int64_t* offsets);

// Stable counting sort: rows of expert e occupy [offsets[e], offsets[e+1]) ordered by (token, slot).
// row_of_slot[t*k + j] = destination row of slot j of token t; slot_of_row[r] = the slot (t*k + j)
// stored at row r. Both [tokens * k]. offsets must come from expert_counts on the same topk_idx.
void permute_map(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                 const int64_t* offsets, int64_t* row_of_slot, int64_t* slot_of_row);

// out[r, :] = x[slot_of_row[r] / top_k, :] for r in [0, tokens*top_k). A copy: bit-exact.
void permute(const float* x, int64_t tokens, int64_t hidden, int top_k, const int64_t* slot_of_row,
             float* out);

// out[t, :] = sum_j topk_w[t*k + j] * rows[row_of_slot[t*k + j], :], FP32 accumulation in slot
// order j = 0..k-1, starting from the j = 0 product (so k = 1, w = 1 returns the row bit for bit,
// -0 included).
void unpermute(const float* rows, int64_t tokens, int64_t hidden, int top_k,
               const int64_t* row_of_slot, const float* topk_w, float* out);

// Backward of unpermute: drows[row_of_slot[t*k+j], :] = topk_w[t*k+j] * dout[t, :];
// dw[t*k+j] = dot(dout[t,:], rows[row_of_slot[t*k+j],:]) accumulated in double over h = 0..H-1.
void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int top_k,
                   const int64_t* row_of_slot, const float* topk_w, float* drows, float* dw);

// Backward of permute: dx[t, :] = sum_j drows[row_of_slot[t*k + j], :] (FP32, j order, starting
// from the j = 0 row).
void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int top_k,
                 const int64_t* row_of_slot, float* dx);

// gate_up [rows x 2I]: columns [0, I) gate g, [I, 2I) up u; out [rows x I] = silu(g) * u,
// silu(g) = g / (1 + exp(-g)); evaluated in double, rounded once to float.
void swiglu_fwd(const float* gate_up, int64_t rows, int64_t inter, float* out);

// dgate_up [rows x 2I] from dout [rows x I]: dg = dout * u * s(g) * (1 + g * (1 - s(g))),
// du = dout * silu(g), s = sigmoid; evaluated in double, rounded once to float.
void swiglu_bwd(const float* gate_up, const float* dout, int64_t rows, int64_t inter,
                float* dgate_up);

// Grouped GEMM over ragged groups: for expert e, rows [offsets[e], offsets[e+1]) of a [rows x K]
// times w_e [K x N] (w = experts consecutive K x N matrices) into c [rows x N]. Experts with zero
// rows write nothing and read nothing. Each c element is accumulated in double over k = 0..K-1
// and rounded once to float. offsets [experts + 1], non-decreasing (else std::invalid_argument).
void grouped_gemm(const float* a, const float* w, const int64_t* offsets, int64_t experts,
                  int64_t k, int64_t n, float* c);

// Weight gradient: dw_e [K x N] = a_e^T [K x rows_e] * dc_e [rows_e x N], accumulated in double
// over the expert's rows in order; experts with zero rows get exact (+0) zeros. dw is
// [experts x K x N].
void grouped_gemm_wgrad(const float* a, const float* dc, const int64_t* offsets, int64_t experts,
                        int64_t k, int64_t n, float* dw);

// 64-bit index check: the byte offset of row r of a [rows x hidden] tensor, computed in int64
// (a dry run for rows*hidden >= 2^31).
constexpr int64_t row_offset_bytes(int64_t row, int64_t hidden, int64_t elem_bytes) {
  return row * hidden * elem_bytes;
}

}  // namespace moeperf::ref
