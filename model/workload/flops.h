// Parameter and FLOP counts of a transformer (dense or MoE, MLA or GQA attention).
//
// Model FLOPs follow MaxText's convention (calculate_tflops_training_per_device): every matmul
// counts 2 x m x n x k forward and 3x that for forward + backward; causal attention counts half
// of the S x S score and value products; the LM head counts, the embedding lookup does not;
// recomputation and padding never count. DeepSeek-V3 at S = 4096 without MTP: 250.45 GFLOP/token.
//
//   ParamCounts p = count_params(model);                // p.total ~ 671e9 for DeepSeek-V3
//   FlopsPerToken f = model_flops_per_token(model, 4096, /*include_mtp=*/false);
//   double tflops_per_gpu = f.total * tokens_per_s_per_gpu / 1e12;
//
// The per-layer forward pieces are exported so the step lowering prices exactly what is counted.
#pragma once

#include <cstdint>

#include "model/specs.h"

namespace moeperf {

// Forward matmul FLOPs per token of one layer's parts (2 x weights touched per token).
struct LayerForwardFlops {
  double q_proj = 0;      // MLA: q_a + q_b (or plain q); GQA: q
  double kv_proj = 0;     // MLA: kv_a + kv_b; GQA: k + v
  double out_proj = 0;
  double core = 0;        // scores + values, causal (or sliding window) average keys per query
  double router = 0;
  double routed_experts = 0;  // top_k experts' FC1 (gate + up) and FC2
  double shared_experts = 0;
  double dense_ffn = 0;
  double total() const { return q_proj + kv_proj + out_proj + core + router + routed_experts + shared_experts + dense_ffn; }
};

// Average number of keys a query attends to: (S + 1) / 2 for causal attention is written S / 2
// in MaxText's count; with a sliding window W < S the exact average is (W(W+1)/2 + (S-W)W) / S.
// With chunked attention of chunk C < S (Llama 4) each chunk is causal on its own, counted the same
// way: (floor(S/C) C^2 + r^2) / (2 S), r = S mod C; a window or a chunk >= S changes nothing.
double attended_keys(int64_t seq_len, int window, int64_t chunk = 0);

// Masked edges of a query's key range, each costing a kernel about half a query tile of scores
// computed and masked (attention_tile_rows): the causal diagonal, a sliding window's far edge. A
// window at least as long as the sequence masks no key at a far edge (it is full causal attention).
inline int masked_edges(bool causal, int64_t window, int64_t seq) {
  return (causal ? 1 : 0) + (window > 0 && window < seq ? 1 : 0);
}

// FlashAttention's backward executes 2.5 x its forward's matmul FLOPs with equal head dims (QK^T
// recomputed, then dV, dP, dQ, dK) and moves about 2.5 x its bytes; FlashAttention's benchmarks
// count its FLOPs so (the convention published rates are read in).
inline constexpr double kAttentionBwdWork = 2.5;
// The backward's matmuls per score, exactly: QK^T again, dQ = dS K and dK = dS^T Q over the
// query/key head dim, dV = P^T dO and dP = dO V^T over the value head dim, against the forward's
// QK^T and PV: (3 qk + 2 vd) / (qk + vd) x the forward's FLOPs (2.5 at qk = vd; 2.6 for MLA's
// 192 / 128).
inline double attention_bwd_work(double qk, double vd) { return qk + vd > 0 ? (3.0 * qk + 2.0 * vd) / (qk + vd) : kAttentionBwdWork; }

// MLA's projections (DeepSeek-V2/V3): the down projection's output width, the latent (q: q_lora,
// 0 without a q latent; kv: kv_lora + the shared rope part), and the up projection's output width
// over all heads (q: heads x (nope + rope); kv: heads x (nope + v)). 0 for any other attention.
inline double mla_latent_width(const AttentionSpec& a, bool kv) {
  if (a.kind != AttentionKind::mla) return 0.0;
  return kv ? static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) : static_cast<double>(a.q_lora_rank);
}
inline double mla_up_width(const AttentionSpec& a, bool kv) {
  if (a.kind != AttentionKind::mla) return 0.0;
  return static_cast<double>(a.heads) * static_cast<double>(kv ? a.qk_nope_head_dim + a.v_head_dim : a.qk_nope_head_dim + a.qk_rope_head_dim);
}

// Whether `layer` attends through the model's sliding window (false for full-attention layers).
// These three take an MTP module's layer (index >= layers) to be of the last layer's kind, as
// mtp_forward_flops does.
bool is_sliding(const ModelSpec& m, int layer);
// Whether `layer` attends within its chunk (Llama 4's chunked local attention).
bool is_chunked(const ModelSpec& m, int layer);
// The keys a query of `layer` attends to on average at `seq_len` (its window or chunk applied).
double layer_attended_keys(const ModelSpec& m, int layer, int64_t seq_len);
// Whether the layer rotates Q and K (false on Llama 4's NoPE layers).
bool uses_rope(const ModelSpec& m, int layer);

LayerForwardFlops layer_forward_flops(const ModelSpec& m, int layer, int64_t seq_len);

// LM head forward FLOPs per token: 2 x hidden x vocab.
double lm_head_forward_flops(const ModelSpec& m);

// One MTP module (DeepSeek-V3): projection of [h; emb] (2H -> H), one MoE layer and a shared LM head.
double mtp_forward_flops(const ModelSpec& m, int64_t seq_len);

struct FlopsPerToken {
  double attention_proj = 0, attention_core = 0, moe = 0, dense_ffn = 0, lm_head = 0, mtp = 0;
  double total = 0;  // forward + backward (3 x forward)
};
FlopsPerToken model_flops_per_token(const ModelSpec& m, int64_t seq_len, bool include_mtp);

// Weights of one layer: everything but routed experts (attention, norms, router and its bias,
// shared experts, dense FFN), and all routed experts together. Sums to count_params().total with
// the embeddings and the final norm.
struct LayerParams {
  double dense = 0;
  double routed_experts = 0;
};
// Parameters of layer `layer`; layers >= m.layers are MTP modules (their layer, eh_proj and norms).
LayerParams layer_params(const ModelSpec& m, int layer);

// The share of a layer's K/V projection one of `tp` tensor-parallel ranks holds and computes: 1/tp
// (MLA, and GQA with tp dividing the KV heads), or one whole KV head of kv_heads when tp exceeds
// them (each KV head replicated on tp / kv_heads ranks, as the loader allows).
double kv_share(const AttentionSpec& a, int64_t tp);
// Non-routed-expert weights of layer `layer` on one of `tp` ranks: split by tp, the K/V projection
// by kv_share.
double dense_params_per_rank(const ModelSpec& m, int layer, int64_t tp);

struct ParamCounts {
  double total = 0;          // every weight of the main model (no MTP module)
  double active = 0;         // weights a token uses: non-expert + top_k routed experts, both embeddings
  double active_no_embedding = 0;  // the same without the input embedding table (a lookup, no matmul)
  double routed_experts = 0; // all routed experts of all layers
  double non_expert = 0;     // total - routed_experts: attention, norms, dense FFNs, shared experts, router, embeddings
  double embedding = 0, lm_head = 0;
  double mtp = 0;            // the MTP modules (not in total), sharing embedding and head
  double attention_per_layer = 0, expert = 0;  // one routed expert (gate, up, down)
};
ParamCounts count_params(const ModelSpec& m);

}  // namespace moeperf
