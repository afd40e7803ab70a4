#include "model/workload/flops.h"

#include <cmath>

#include "model/workload/num.h"

namespace moeperf {

namespace {

// The layer whose kind (sliding, chunked, NoPE) a layer index has: an MTP module's layer
// (index >= layers) is of the last layer's kind, as its FLOP count (mtp_forward_flops) takes it.
size_t kind_layer(const ModelSpec& m, int layer) {
  return static_cast<size_t>(layer >= m.layers && m.layers > 0 ? m.layers - 1 : layer);
}

}  // namespace

bool is_sliding(const ModelSpec& m, int layer) {
  const auto& s = m.attention.sliding_layers;
  return m.attention.sliding_window > 0 && layer >= 0 && kind_layer(m, layer) < s.size() && s[kind_layer(m, layer)];
}

bool is_chunked(const ModelSpec& m, int layer) {
  const auto& c = m.attention.chunked_layers;
  return m.attention.chunk_size > 0 && layer >= 0 && kind_layer(m, layer) < c.size() && c[kind_layer(m, layer)];
}

double layer_attended_keys(const ModelSpec& m, int layer, int64_t seq_len) {
  return attended_keys(seq_len, is_sliding(m, layer) ? m.attention.sliding_window : 0,
                       is_chunked(m, layer) ? m.attention.chunk_size : 0);
}

bool uses_rope(const ModelSpec& m, int layer) {
  const auto& n = m.attention.nope_layers;
  return !(layer >= 0 && kind_layer(m, layer) < n.size() && n[kind_layer(m, layer)]);
}

using detail::d;

namespace {

// Weights (not FLOPs) of one layer's attention projections, per part.
struct AttentionWeights {
  double q = 0, kv = 0, out = 0, norms = 0;
};

AttentionWeights attention_weights(const ModelSpec& m) {
  const AttentionSpec& a = m.attention;
  const double h = d(m.hidden), heads = a.heads;
  AttentionWeights w;
  if (a.kind == AttentionKind::mla) {
    const double ql = mla_latent_width(a, false), kvl = mla_latent_width(a, true);
    w.q = ql > 0 ? h * ql + ql * mla_up_width(a, false) : h * mla_up_width(a, false);
    w.kv = h * kvl + d(a.kv_lora_rank) * mla_up_width(a, true);
    w.out = heads * a.v_head_dim * h;
    w.norms = (a.q_lora_rank > 0 ? a.q_lora_rank : 0) + a.kv_lora_rank;
  } else {
    w.q = h * heads * a.head_dim;
    w.kv = 2 * h * a.kv_heads * a.head_dim;
    w.out = heads * a.head_dim * h;
    w.norms = a.qk_norm ? 2.0 * a.head_dim : 0.0;
  }
  w.norms += 2 * h;  // input and post-attention RMSNorm
  return w;
}

double expert_weights(const ModelSpec& m) { return 3.0 * d(m.hidden) * d(m.expert_ffn); }  // gate, up, down

}  // namespace

double attended_keys(int64_t seq_len, int window, int64_t chunk) {
  const double s = d(seq_len);
  if (chunk > 0 && chunk < seq_len) {
    const double c = d(chunk), full = std::floor(s / c), r = s - full * c;
    return (full * c * c + r * r) / (2.0 * s);  // the loaders refuse a window and a chunk on one layer
  }
  if (window <= 0 || window >= seq_len) return s / 2.0;
  const double w = window;
  return (w * (w + 1) / 2.0 + (s - w) * w) / s;
}

LayerForwardFlops layer_forward_flops(const ModelSpec& m, int layer, int64_t seq_len) {
  const AttentionSpec& a = m.attention;
  const AttentionWeights w = attention_weights(m);
  LayerForwardFlops f;
  f.q_proj = 2 * w.q;
  f.kv_proj = 2 * w.kv;
  f.out_proj = 2 * w.out;
  // Scores Q K^T and values P V: 2 x keys x heads x (qk_dim + v_dim) per query.
  const double qk = a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const double v = a.kind == AttentionKind::mla ? a.v_head_dim : a.head_dim;
  const double keys = layer_attended_keys(m, layer, seq_len);
  f.core = 2 * keys * a.heads * (qk + v);
  if (!m.is_moe_layer(layer)) {
    f.dense_ffn = 2 * 3 * d(m.hidden) * d(m.dense_ffn);
  } else {
    f.router = 2 * d(m.hidden) * m.experts;
    f.routed_experts = 2 * expert_weights(m) * m.top_k;
    f.shared_experts = 2 * expert_weights(m) * m.shared_experts;
  }
  return f;
}

LayerParams layer_params(const ModelSpec& m, int layer) {
  const LayerForwardFlops f = layer_forward_flops(m, layer, 1);
  LayerParams p;
  const AttentionWeights w = attention_weights(m);
  p.dense = (f.q_proj + f.kv_proj + f.out_proj + f.router + f.shared_experts + f.dense_ffn) / 2.0 + w.norms;
  if (f.router > 0 && m.router.bias) p.dense += m.experts;
  if (f.routed_experts > 0) p.routed_experts = expert_weights(m) * m.experts;
  // Layers past the last are the MTP modules' (step lowering numbers them so): their transformer
  // layer plus eh_proj (2H x H) and three norms (two inputs, one output), as count_params counts them.
  if (layer >= m.layers) p.dense += 2 * d(m.hidden) * d(m.hidden) + 3 * d(m.hidden);
  return p;
}

double kv_share(const AttentionSpec& a, int64_t tp) {
  if (a.kind == AttentionKind::mla || a.kv_heads <= 0 || a.kv_heads % tp == 0) return 1.0 / d(tp);
  return std::max(1.0, d(a.kv_heads) / d(tp)) / d(a.kv_heads);
}

double dense_params_per_rank(const ModelSpec& m, int layer, int64_t tp) {
  const double split = layer_params(m, layer).dense / d(tp);
  const double share = kv_share(m.attention, tp);
  if (share == 1.0 / d(tp)) return split;  // nothing replicated (the lowering asks this per gather)
  return split + layer_forward_flops(m, layer, 1).kv_proj / 2.0 * (share - 1.0 / d(tp));
}

double lm_head_forward_flops(const ModelSpec& m) { return 2 * d(m.hidden) * d(m.vocab); }

double mtp_forward_flops(const ModelSpec& m, int64_t seq_len) {
  // eh_proj: [h; emb] (2H) -> H, then one transformer layer of the last layer's kind, then the head.
  const double proj = 2 * 2 * d(m.hidden) * d(m.hidden);
  return proj + layer_forward_flops(m, m.layers - 1, seq_len).total() + lm_head_forward_flops(m);
}

FlopsPerToken model_flops_per_token(const ModelSpec& m, int64_t seq_len, bool include_mtp) {
  FlopsPerToken f;
  for (int l = 0; l < m.layers; ++l) {
    const LayerForwardFlops x = layer_forward_flops(m, l, seq_len);
    f.attention_proj += x.q_proj + x.kv_proj + x.out_proj;
    f.attention_core += x.core;
    f.moe += x.router + x.routed_experts + x.shared_experts;
    f.dense_ffn += x.dense_ffn;
  }
  f.lm_head = lm_head_forward_flops(m);
  if (include_mtp) f.mtp = m.mtp_layers * mtp_forward_flops(m, seq_len);
  // Forward + backward: the backward pass does two matmuls (data and weight gradient) per forward one.
  constexpr double kFwdBwd = 3.0;
  f.attention_proj *= kFwdBwd;
  f.attention_core *= kFwdBwd;
  f.moe *= kFwdBwd;
  f.dense_ffn *= kFwdBwd;
  f.lm_head *= kFwdBwd;
  f.mtp *= kFwdBwd;
  f.total = f.attention_proj + f.attention_core + f.moe + f.dense_ffn + f.lm_head + f.mtp;
  return f;
}

ParamCounts count_params(const ModelSpec& m) {
  ParamCounts p;
  const AttentionWeights w = attention_weights(m);
  p.attention_per_layer = w.q + w.kv + w.out + w.norms;
  p.expert = expert_weights(m);
  p.embedding = d(m.vocab) * d(m.hidden);
  p.lm_head = m.tie_embeddings ? 0.0 : p.embedding;
  const double final_norm = d(m.hidden);
  double total = p.embedding + p.lm_head + final_norm, active = total;
  for (int l = 0; l < m.layers; ++l) {
    total += p.attention_per_layer;
    active += p.attention_per_layer;
    if (!m.is_moe_layer(l)) {
      const double ffn = 3.0 * d(m.hidden) * d(m.dense_ffn);
      total += ffn;
      active += ffn;
    } else {
      const double router = d(m.hidden) * m.experts + (m.router.bias ? m.experts : 0);
      const double shared = p.expert * m.shared_experts;
      total += router + shared + p.expert * m.experts;
      active += router + shared + p.expert * m.top_k;
      p.routed_experts += p.expert * m.experts;
    }
  }
  p.total = total;
  p.active = active;
  p.active_no_embedding = active - p.embedding;
  p.non_expert = total - p.routed_experts;
  if (m.mtp_layers > 0) {
    // eh_proj (2H x H), two input norms, and one transformer layer of the last layer's kind.
    const double layer = p.attention_per_layer +
                         (m.is_moe_layer(m.layers)
                              ? d(m.hidden) * m.experts + (m.router.bias ? m.experts : 0) + p.expert * (m.experts + m.shared_experts)
                              : 3.0 * d(m.hidden) * d(m.dense_ffn));
    p.mtp = m.mtp_layers * (2 * d(m.hidden) * d(m.hidden) + 3 * d(m.hidden) + layer);
  }
  return p;
}

}  // namespace moeperf
