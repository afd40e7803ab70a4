// The ops of one layer outside the MoE block: attention (projections, core, TP and CP collectives),
// the dense FFN, FSDP gathers and gradient reduce-scatters, and the embedding, LM head and MTP input.
#include "model/workload/lowering.h"

namespace moeperf::detail {

namespace {

// The K/V projection's output width per rank: K and V of the KV heads; for MLA the up projection's,
// each head's no-rope part of K and its V (the rope part of K comes from the down projection,
// shared by the heads, and is joined to them by the RoPE pass).
double kv_proj_width(const AttentionSpec& a, double heads, double kvh, double qk, double vd) {
  return a.kind == AttentionKind::mla ? heads * (a.qk_nope_head_dim + a.v_head_dim) : kvh * (qk + vd);
}

}  // namespace

void Lowering::forward_layer(int l) {
  issue_gathers(l);
  wait_param_gathers(l);
  const LayerForwardFlops f = layer_forward_flops(m_, l, s_.batch.seq_len);
  const AttentionSpec& a = m_.attention;
  const Dtype dd = s_.precision.dense_gemm;
  const double h = d(m_.hidden);
  const double heads = a.heads / tp_;
  const double qk = a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const double vd = a.kind == AttentionKind::mla ? a.v_head_dim : a.head_dim;
  const double kvh = a.kind == AttentionKind::mla ? heads : std::max(1.0, a.kv_heads / tp_);
  auto first = memory("attn.norm", l, norm_passes() * t_sp_ * h * 2.0, Category::memory, gather_deps(l));
  last_norm_ = first;
  layer_start_.record(l, phase_, first);
  tp_collective(l, "tp.all_gather", Collective::all_gather, true);
  if (fused_qkv()) {
    gemm("attn.qkv_proj", Category::gemm, l, t_ * (f.q_proj / tp_ + f.kv_proj * kv_share(a, p_.tp)), t_ * (f.q_proj + f.kv_proj) / tp_, dd,
         t_, heads * qk + kv_proj_width(a, heads, kvh, qk, vd), h);
  } else {
    gemm("attn.q_proj", Category::gemm, l, t_ * f.q_proj / tp_, t_ * f.q_proj / tp_, dd, t_, heads * qk,
         a.kind == AttentionKind::mla && a.q_lora_rank > 0 ? a.q_lora_rank : h);
    gemm("attn.kv_proj", Category::gemm, l, t_ * f.kv_proj * kv_share(a, p_.tp), t_ * f.kv_proj / tp_, dd, t_,
         kv_proj_width(a, heads, kvh, qk, vd), a.kind == AttentionKind::mla ? a.kv_lora_rank : h);
  }
  qk_norm(l, heads, kvh, qk, true, true);
  rope(l, heads, kvh, qk, vd, true, true);
  if (p_.cp > 1)  // the attention core reads every rank's K and V
    wait_before_next_compute(comm("cp.all_gather", Category::tp_comm, Stream::tp_comm, l, Collective::all_gather,
                                  Group::cp, t_ * d(p_.cp) * kvh * (qk + vd) * 2.0, {last()}));
  attention_core(l, f.core, heads, kvh, qk, vd, false);
  gemm("attn.out_proj", Category::gemm, l, t_ * f.out_proj / tp_, t_ * f.out_proj / tp_, dd, t_, h, heads * vd);
  tp_collective(l, "tp.reduce_scatter", Collective::reduce_scatter, true);
  residual_add(l, "attn.residual");
  last_norm_ = memory("mlp.norm", l, norm_passes() * t_sp_ * h * 2.0);
  if (!is_moe_layer(l)) {
    const double ffn = d(m_.dense_ffn);
    tp_collective(l, "tp.all_gather", Collective::all_gather, true);
    gemm("mlp.fc1", Category::gemm, l, t_ * f.dense_ffn * 2 / 3 / tp_, t_ * f.dense_ffn * 2 / 3 / tp_, dd, t_, 2 * ffn / tp_, h);
    memory("mlp.act", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
    gemm("mlp.fc2", Category::gemm, l, t_ * f.dense_ffn / 3 / tp_, t_ * f.dense_ffn / 3 / tp_, dd, t_, h, ffn / tp_);
    tp_collective(l, "tp.reduce_scatter", Collective::reduce_scatter, true);
  } else {
    moe_forward(l, f);
  }
  residual_add(l, "mlp.residual");
  last_compute_[lane_] = last_on(Stream::compute);
  // Offload: the layer's offloaded activations go to host memory once the layer is done.
  if (const double b = offloaded_bytes(l); b > 0)
    comm("offload.d2h", Category::offload, Stream::offload, l, Collective::d2h, Group::none, b, {last_compute_[lane_]});
}

void Lowering::attention_core(int l, double core_per_token, double heads, double kvh, double qk, double vd, bool backward) {
  const double fwd = t_ * core_per_token / tp_;
  // Flash attention reads Q, K, V and writes O (+ LSE); the backward also reads O, dO and writes dQ, dK, dV,
  // and recomputes the scores (attention_bwd_work x the forward matmul work executed: 2.5 at equal
  // head dims, 2.6 for MLA; 2 x counted). Under context parallelism K and V are every CP rank's,
  // gathered (cp.all_gather): the core reads them all.
  const double io = t_ * (heads * qk + d(p_.cp) * kvh * (qk + vd) + heads * vd) * 2.0;
  Op op;
  const bool recompute = phase_ == Phase::recompute;
  op.name = backward ? "attn.core.bwd" : phased("attn.core");
  op.category = Category::attention;
  op.layer = l;
  op.flops = Flops(backward ? attention_bwd_work(qk, vd) * fwd : fwd);
  op.model_flops = Flops(recompute ? 0.0 : backward ? 2.0 * fwd : fwd);
  op.hbm_bytes = Bytes(backward ? kAttentionBwdWork * io : io);
  op.dtype = Dtype::bf16;
  // The kernel's shape for its efficiency curve: n the mean head dim, k the mean keys per query
  // (fwd = tokens x 2 x keys x heads x (qk + vd)).
  op.m = static_cast<int64_t>(t_);
  op.n = static_cast<int64_t>(std::lround((qk + vd) / 2.0));
  op.k = static_cast<int64_t>(std::max(1.0, std::round(fwd / (t_ * 2.0 * heads * (qk + vd)))));
  op.mask_edges = static_cast<uint8_t>(masked_edges(true, is_sliding(m_, l) ? m_.attention.sliding_window : 0, s_.batch.seq_len));  // training attention is causal
  emit(std::move(op));
}

void Lowering::rope(int l, double heads, double kvh, double qk, double vd, bool q_part, bool k_part) {
  // Fused RoPE kernels (Transformer Engine's fused_rope, XLA's fusion around the concatenation)
  // read each tensor and write it rotated, whole, in BF16; the backward rotates the gradients back
  // the same way. For MLA the pass also assembles the heads: Q whole (a kernel that rotates only
  // Q's rope part in place would move less); K from the up projection's nope part and the rope part
  // shared by the heads, V split off beside it (the backward sums the rope part's gradient over the
  // heads). A recompute rotates again what it recomputed.
  const AttentionSpec& a = m_.attention;
  if (!uses_rope(m_, l)) return;  // a NoPE layer (Llama 4): nothing to rotate
  double per_token = 0;
  if (a.kind == AttentionKind::mla) {
    const double nope = a.qk_nope_head_dim, rp = a.qk_rope_head_dim;
    if (q_part) per_token += 2.0 * heads * qk;
    if (k_part) per_token += heads * (nope + vd) + rp + heads * (qk + vd);
  } else {
    if (q_part) per_token += 2.0 * heads * qk;
    if (k_part) per_token += 2.0 * kvh * qk;
  }
  if (per_token <= 0) return;
  memory(phased("attn.rope"), l, t_ * per_token * 2.0);
}

void Lowering::qk_norm(int l, double heads, double kvh, double qk, bool q_part, bool k_part) {
  // Llama 4 normalizes Q and K only in the layers that rotate them.
  if (!m_.attention.qk_norm || m_.attention.kind == AttentionKind::mla || !uses_rope(m_, l)) return;
  const double per_token = ((q_part ? heads : 0.0) + (k_part ? kvh : 0.0)) * qk;
  if (per_token <= 0) return;
  memory(phased("attn.qk_norm"), l, t_ * per_token * 2.0 * (phase_ == Phase::backward ? 3.0 : 2.0));
}

// The residual stream around a normalization, in passes over the [tokens, hidden] BF16 state.
// Fused (XLA): the norm's kernel reads the stream and the branch's output and writes the normalized
// input (3), and its backward reads the input, the output gradient and the skip gradient and
// writes the input gradient (4). Unfused (Megatron): the residual add is a kernel of its own (reads
// two, writes one: 3) before a norm of 2, and backward a norm of 3 then autograd's sum of the skip
// gradient into the input gradient (3).
double Lowering::norm_passes() const { return s_.stack.residual_fusion ? 3.0 : 2.0; }
double Lowering::norm_bwd_passes() const { return s_.stack.residual_fusion ? 4.0 : 3.0; }

void Lowering::residual_add(int l, const char* name) {
  if (!s_.stack.residual_fusion) memory(name, l, 3.0 * t_sp_ * d(m_.hidden) * 2.0);
}

// Under PyTorch autograd a recomputed normalization (Megatron's "layernorm" recompute module,
// DeepSeek-V3's RMSNorm recompute) runs its forward again before the projections' backward need
// its output: one read of the input, one write. JAX's remat always recomputes a norm's output (it
// is no checkpoint name), inside the projections' recomputation.
void Lowering::norm_recompute(int l, const char* block, double norms) {
  if (s_.stack.remat_dispatch || !has(s_.memory.recompute, TensorClass::norm)) return;
  const Phase was = phase_;
  phase_ = Phase::recompute;
  memory(std::string(block) + ".norm.recompute", l, norms * 2.0 * t_sp_ * d(m_.hidden) * 2.0);
  phase_ = was;
}

void Lowering::norm_backward(int l, const std::string& block) {
  const double x = t_sp_ * d(m_.hidden) * 2.0;
  memory(block + ".norm.bwd", l, norm_bwd_passes() * x);
  if (!s_.stack.residual_fusion) memory(block + ".residual.bwd", l, 3.0 * x);
}

void Lowering::backward_layer(int l) {
  issue_gathers(l);
  const LayerForwardFlops f = layer_forward_flops(m_, l, s_.batch.seq_len);
  const AttentionSpec& a = m_.attention;
  const Dtype dd = s_.precision.dense_gemm;
  const double h = d(m_.hidden), heads = a.heads / tp_;
  const double qk = a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const double vd = a.kind == AttentionKind::mla ? a.v_head_dim : a.head_dim;
  const double kvh = a.kind == AttentionKind::mla ? heads : std::max(1.0, a.kv_heads / tp_);
  std::vector<int32_t> first_deps = gather_deps(l);
  if (const double b = offloaded_bytes(l); b > 0) {
    // Prefetched one layer ahead: the copy back may start when the previous layer's backward starts.
    const int32_t prev = layer_start_.find_at(l, 1, Phase::backward);
    std::vector<int32_t> deps;
    if (prev >= 0) deps.push_back(prev);
    first_deps.push_back(comm("offload.h2d", Category::offload, Stream::offload, l, Collective::h2d, Group::none, b, deps));
  }
  // The layer's backward starts with its MLP's (the normalization's backward needs the MLP's input
  // gradient): the weights' gathers and the activations' copy back gate its first compute op.
  for (int32_t x : first_deps) wait_before_next_compute(x);
  layer_start_.record(l, phase_, static_cast<int32_t>(rc_.ops.size()));
  norm_recompute(l, "mlp");
  if (!is_moe_layer(l)) {
    const double ffn = d(m_.dense_ffn);
    const bool again = has(s_.memory.recompute, TensorClass::mlp);
    int32_t input = sp_input_gather(l, again);
    if (again) {
      // FC1 and the activation rebuild FC2's input; PyTorch's checkpoint of the MLP module
      // (Megatron's "mlp" recompute) runs the module's whole forward again, FC2 included, where
      // JAX's remat drops the FC2 output nothing in the backward reads.
      phase_ = Phase::recompute;
      gemm("mlp.fc1.recompute", Category::gemm, l, t_ * f.dense_ffn * 2 / 3 / tp_, 0, dd, t_, 2 * ffn / tp_, h);
      memory("mlp.act.recompute", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
      if (!s_.stack.remat_dispatch)
        gemm("mlp.fc2.recompute", Category::gemm, l, t_ * f.dense_ffn / 3 / tp_, 0, dd, t_, h, ffn / tp_);
      phase_ = Phase::backward;
      input = sp_input_gather(l, false);  // the recomputed FC1 kept its shard again
    } else if (s_.stack.remat_dispatch) {
      // JAX's remat keeps FC1's output (mlpwi) and rebuilds the activation's output, FC2's input,
      // which has no checkpoint name (step.cpp's mlp class holds FC1's output alone).
      phase_ = Phase::recompute;
      memory("mlp.act.recompute", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
      phase_ = Phase::backward;
    }
    tp_collective(l, "tp.all_gather.bwd", Collective::all_gather, true);
    gemm_bwd("mlp.fc2", Category::gemm, l, t_ * f.dense_ffn / 3 / tp_, t_ * f.dense_ffn / 3 / tp_, dd, t_, h, ffn / tp_);
    memory("mlp.act.bwd", l, t_ * (2 * ffn / tp_ * 2.0 * 2 + ffn / tp_ * 2.0));
    if (input >= 0) wait_before_next_compute(input);
    gemm_bwd("mlp.fc1", Category::gemm, l, t_ * f.dense_ffn * 2 / 3 / tp_, t_ * f.dense_ffn * 2 / 3 / tp_, dd, t_,
             2 * ffn / tp_, h);
    tp_collective(l, "tp.reduce_scatter.bwd", Collective::reduce_scatter, true);
  } else {
    if (has(s_.memory.recompute, TensorClass::router)) {
      // The router's scores were not kept: its GEMM and top-k run again (the combine's backward
      // needs the routing weights, the router's own backward its scores).
      phase_ = Phase::recompute;
      gemm("moe.router.recompute", Category::gemm, l, t_sp_ * f.router, 0, Dtype::bf16, t_sp_, d(m_.experts), d(m_.hidden));
      memory("moe.topk.recompute", l, t_sp_ * d(m_.experts) * 4.0 * 2.0);
      phase_ = Phase::backward;
    }
    moe_backward(l, f);
  }
  norm_backward(l, "mlp");
  // The attention block's output gradient, gathered while the projections are recomputed.
  const int32_t attn_grad = tp_collective(l, "tp.all_gather.bwd", Collective::all_gather, false);
  // Attention: recompute the projections the policy did not keep, then the backward.
  norm_recompute(l, "attn");
  // A fused projection is one GEMM: recomputing either part reruns it whole, Q and K/V (recomputes()).
  const bool q_again = recomputes(s_, TensorClass::q_proj), kv_again = recomputes(s_, TensorClass::kv_proj);
  const bool proj_again = q_again || kv_again;
  int32_t input = sp_input_gather(l, proj_again);
  phase_ = Phase::recompute;
  if (fused_qkv() && proj_again)  // q_again == kv_again
    gemm("attn.qkv_proj.recompute", Category::gemm, l, t_ * (f.q_proj / tp_ + f.kv_proj * kv_share(a, p_.tp)), 0, dd, t_,
         heads * qk + kv_proj_width(a, heads, kvh, qk, vd), h);
  if (!fused_qkv() && q_again)
    gemm("attn.q_proj.recompute", Category::gemm, l, t_ * f.q_proj / tp_ * mla_recompute_share(false), 0, dd, t_, heads * qk,
         a.kind == AttentionKind::mla && a.q_lora_rank > 0 ? a.q_lora_rank : h);
  if (!fused_qkv() && kv_again)
    gemm("attn.kv_proj.recompute", Category::gemm, l, t_ * f.kv_proj * kv_share(a, p_.tp) * mla_recompute_share(true), 0,
         dd, t_, kv_proj_width(a, heads, kvh, qk, vd),
         a.kind == AttentionKind::mla ? a.kv_lora_rank : h);
  qk_norm(l, heads, kvh, qk, q_again, kv_again);
  rope(l, heads, kvh, qk, vd, q_again, kv_again);
  // Context parallelism: the forward's gathered K and V were not kept (only this rank's are), so the
  // backward gathers them again (TE's all-gather CP re-gathers; its ring passes them round again),
  // while the output projection's backward runs, or before a recomputed attention core.
  int32_t kv_gather = -1;
  if (p_.cp > 1)
    kv_gather = comm("cp.all_gather.bwd", Category::tp_comm, Stream::tp_comm, l, Collective::all_gather, Group::cp,
                     t_ * d(p_.cp) * kvh * (qk + vd) * 2.0, {last()});
  if (has(s_.memory.recompute, TensorClass::attn_out)) {
    if (kv_gather >= 0) wait_before_next_compute(std::exchange(kv_gather, -1));
    attention_core(l, f.core, heads, kvh, qk, vd, false);
  }
  if (has(s_.memory.recompute, TensorClass::out_proj))
    gemm("attn.out_proj.recompute", Category::gemm, l, t_ * f.out_proj / tp_, 0, dd, t_, h, heads * vd);
  phase_ = Phase::backward;
  if (proj_again) input = sp_input_gather(l, false);  // the recomputed projections kept their shard again
  if (attn_grad >= 0) wait_before_next_compute(attn_grad);
  gemm_bwd("attn.out_proj", Category::gemm, l, t_ * f.out_proj / tp_, t_ * f.out_proj / tp_, dd, t_, h, heads * vd);
  if (kv_gather >= 0) wait_before_next_compute(kv_gather);
  attention_core(l, f.core, heads, kvh, qk, vd, true);
  if (p_.cp > 1)  // the K/V projections' backward needs the gradients of this rank's K and V, summed
    wait_before_next_compute(comm("cp.reduce_scatter", Category::tp_comm, Stream::tp_comm, l,
                                  Collective::reduce_scatter, Group::cp, t_ * d(p_.cp) * kvh * (qk + vd) * 2.0,
                                  {last()}));
  rope(l, heads, kvh, qk, vd, true, true);
  qk_norm(l, heads, kvh, qk, true, true);
  if (input >= 0) wait_before_next_compute(input);
  if (fused_qkv()) {
    gemm_bwd("attn.qkv_proj", Category::gemm, l, t_ * (f.q_proj / tp_ + f.kv_proj * kv_share(a, p_.tp)), t_ * (f.q_proj + f.kv_proj) / tp_,
             dd, t_, heads * qk + kv_proj_width(a, heads, kvh, qk, vd), h);
  } else {
    gemm_bwd("attn.kv_proj", Category::gemm, l, t_ * f.kv_proj * kv_share(a, p_.tp), t_ * f.kv_proj / tp_, dd, t_,
             kv_proj_width(a, heads, kvh, qk, vd), a.kind == AttentionKind::mla ? a.kv_lora_rank : h);
    gemm_bwd("attn.q_proj", Category::gemm, l, t_ * f.q_proj / tp_, t_ * f.q_proj / tp_, dd, t_, heads * qk,
             a.kind == AttentionKind::mla && a.q_lora_rank > 0 ? a.q_lora_rank : h);
  }
  tp_collective(l, "tp.reduce_scatter.bwd", Collective::reduce_scatter, true);
  norm_backward(l, "attn");
  // An MTP module's layer also holds eh_proj, whose weight gradient mtp_input's backward makes
  // after this: the layer's reductions follow it there.
  if (l < m_.layers) reduce_layer_grads(l);
  else last_compute_[lane_] = last_on(Stream::compute);
}

void Lowering::reduce_layer_grads(int l) {
  const int32_t wgrads_done = last();
  // The layer's data-parallel gradient reduction waits for its weight gradients and nothing waits
  // for it but the optimizer: it is emitted at the end of the unit (flush_grad_reduces), after the
  // hand-off to the previous stage, so that the hand-off does not take it for its input. It starts
  // when its weight gradients are done all the same (its queue carries nothing else).
  if (reduce_grads()) held_reduces_.emplace_back(l, wgrads_done);
  if (fsdp()) {
    comm("fsdp.reduce_scatter", Category::fsdp_comm, Stream::fsdp_comm, l, Collective::reduce_scatter,
         Group::dense_shard, dense_params(l) * bg_, {wgrads_done});
    if (is_moe_layer(l))
      comm("fsdp.reduce_scatter_experts", Category::fsdp_comm, Stream::fsdp_comm, l, Collective::reduce_scatter,
           Group::fsdp, local_expert_params(l) * bg_, {wgrads_done});
  }
  last_compute_[lane_] = last_on(Stream::compute);
}

void Lowering::flush_grad_reduces() {
  for (const auto& [l, after] : std::exchange(held_reduces_, {})) grad_reduce(l, after);
}

// ---------------------------------------------------------------- embedding, head, optimizer
void Lowering::embedding(bool backward) {
  const double h = d(m_.hidden);
  // Under FSDP the table is sharded like every dense weight: gathered before the lookup, its
  // gradient reduce-scattered after the lookup's backward.
  const double table = count_params(m_).embedding / tp_;
  if (!backward && fsdp())
    wait_before_next_compute(comm("fsdp.all_gather.embed", Category::fsdp_comm, Stream::fsdp_comm, -1,
                                  Collective::all_gather, Group::dense_shard, table * bw_edges_, {}));
  if (!backward) wait_param_gathers(kEmbedKey);
  // Under TP the table is split by vocabulary (Megatron's VocabParallelEmbedding): every TP rank
  // looks up the whole sequence in its shard and writes the full [tokens, hidden] partial sums, which
  // a reduce-scatter sums into each rank's sequence shard; the backward gathers the gradient of
  // the whole sequence back before the table's gradient.
  if (backward) tp_collective(-1, "tp.all_gather.embed.bwd", Collective::all_gather, true);
  memory(backward ? "embed.lookup.bwd" : "embed.lookup", -1, t_ * h * 2.0 * 2.0 + (backward ? table_grad_bytes() : 0.0));
  if (!backward) tp_collective(-1, "tp.reduce_scatter.embed", Collective::reduce_scatter, true);
  if (backward && fsdp())
    comm("fsdp.reduce_scatter.embed", Category::fsdp_comm, Stream::fsdp_comm, -1, Collective::reduce_scatter,
         Group::dense_shard, table * bg_, {last()});
}

// The table's gradient from one lookup's backward: dense over this rank's [vocab / tp, hidden]
// shard (PyTorch's embedding_dense_backward and XLA's scatter both fill a zeroed table, then add
// the looked-up rows' gradients in, already counted with the lookup), in the gradients' dtype, and
// accumulated over micro-batches as a weight gradient is (gemm: written by the first, read and
// written after it, not read back under FSDP). The main model's lookup and an MTP module's on the
// same rank add into the same table.
double Lowering::table_grad_bytes() {
  const double elements = count_params(m_).embedding / tp_;
  static const OpName table("embed.table");
  const bool again = !wgrad_seen_.emplace(&table.str(), -1).second;
  // Under FSDP a micro-batch's gradient is reduce-scattered once made, but within the micro-batch
  // a second lookup (the MTP module's beside the main one, same unit) still adds into the first's.
  const bool same_micro_batch = !table_grad_mbs_.insert(mb_).second;
  return elements * bg_ * (1.0 + ((again && !fsdp()) || same_micro_batch ? 2.0 : 1.0));
}

// The output head (final norm, vocabulary projection, loss); an MTP module's head ("mtp.head")
// shares the weights and does the same work.
void Lowering::head(bool backward, const std::string& name, int layer, bool table_here) {
  const double h = d(m_.hidden), v = d(m_.vocab);
  const double f = t_ * lm_head_forward_flops(m_) / tp_;
  // Under FSDP the head's weights (and the final norm) are gathered before the projection and
  // their gradients reduce-scattered after it; an MTP head shares the main head's gathered weights.
  // A head tied to the embedding projects with the table: the one the lookup gathered when the same
  // unit ran it, else this stage's copy (holds_embedding), gathered here.
  const ParamCounts pc = count_params(m_);
  const double table = m_.tie_embeddings && !table_here ? pc.embedding : pc.lm_head;
  const double weights = (table + h) / tp_;
  const bool gather = fsdp() && name == "head";
  if (!backward) {
    if (gather)
      wait_before_next_compute(comm("fsdp.all_gather.head", Category::fsdp_comm, Stream::fsdp_comm, -1,
                                    Collective::all_gather, Group::dense_shard, weights * bw_edges_, {}));
    if (name == "head") wait_param_gathers(kHeadKey);
    if (name == "head" && m_.tie_embeddings) wait_param_gathers(kEmbedKey);  // ZeRO-1: the stage's table (copy)
    memory(name + ".norm", -1, norm_passes() * t_sp_ * h * 2.0);
    // Under TP (sequence parallel) the projection is column-parallel over the vocabulary: the
    // normalized sequence shards are gathered first, and the loss (Megatron's
    // vocab_parallel_cross_entropy) all-reduces over the vocabulary shards each token's maximum
    // logit, its sum of exponentials and its target's logit, FP32 each.
    tp_collective(-1, ("tp.all_gather." + name).c_str(), Collective::all_gather, true);
    gemm(name + ".proj", Category::gemm, -1, f, f, Dtype::bf16, t_, v / tp_, h);
    memory(name + ".loss", -1, t_ * v / tp_ * (2.0 + 4.0));  // logits in, FP32 softmax statistics
    if (p_.tp > 1)
      for (int i = 0; i < 3; ++i)
        wait_before_next_compute(comm("tp.all_reduce." + name + ".loss", Category::tp_comm, Stream::tp_comm, -1,
                                      Collective::all_reduce, Group::tp, t_ * 4.0, {last()}));
  } else {
    // The projection kept its input as this rank's sequence shard: gathered again for the weight
    // gradient, as every column-parallel block's (sp_input_gather), beside the loss's backward.
    memory(name + ".loss.bwd", -1, t_ * v / tp_ * (4.0 + 2.0));  // the FP32 statistics in, the logits' gradient out
    sp_input_gather(-1, true);
    gemm_bwd(name + ".proj", Category::gemm, -1, f, f, Dtype::bf16, t_, v / tp_, h);
    // The input gradient of the whole sequence, partial over the vocabulary shards: summed into
    // the sequence shards.
    tp_collective(-1, ("tp.reduce_scatter." + name + ".bwd").c_str(), Collective::reduce_scatter, true);
    // The norm's backward reads its input and the output gradient and writes the input gradient
    // (3). Its input, the last layer's output, has a second reader when an MTP module follows (the
    // main model's for the first module, module k's for module k + 1): that module's gradient is
    // summed in, in the norm's kernel when fused (4), by autograd's add kernel otherwise (3).
    const bool feeds_mtp = s_.train_mtp && m_.mtp_layers > 0 && (name == "head" || layer + 1 < m_.layers + m_.mtp_layers);
    const double x = t_sp_ * h * 2.0;
    memory(name + ".norm.bwd", -1, (feeds_mtp && s_.stack.residual_fusion ? 4.0 : 3.0) * x);
    if (feeds_mtp && !s_.stack.residual_fusion) memory(name + ".grad_sum.bwd", -1, 3.0 * x);
    if (gather)
      comm("fsdp.reduce_scatter.head", Category::fsdp_comm, Stream::fsdp_comm, -1, Collective::reduce_scatter,
           Group::dense_shard, weights * bg_, {last()});
  }
}

// An MTP module's input (DeepSeek-V3): RMSNorm of the previous depth's hidden state and of the
// next token's embedding, concatenated and projected 2H -> H (eh_proj); its layer and head follow.
// Under TP (sequence parallel) Megatron's MultiTokenPredictionLayer looks the next tokens up in the
// vocabulary-parallel embedding, as the main model does (the whole sequence on each rank's shard,
// then a reduce-scatter into sequence shards); eh_proj is column-parallel, so the concatenated
// [t, 2h] shards are gathered before it, and its [t, h/tp] output is gathered along the hidden
// dimension (gather_from_tensor_model_parallel_region) and split into sequence shards again
// (scatter_to_sequence_parallel_region, no traffic). The backward mirrors them: the split's
// gradient is gathered along the sequence, the projection's input re-gathered for its weight
// gradient, its [t, 2h] partial input gradient reduce-scattered, the embedding's gradient gathered.
//
// Under FSDP the module's lookup needs the table gathered: the embedding's gather when the same
// unit looked the tokens up (`table_here`: one virtual stage holds both ends), its own otherwise
// (the module's stage holds a copy of the table), whose gradient it then reduce-scatters. The
// projection waits for its layer's gathered weights (eh_proj is the layer's), and the layer's
// gradient reductions follow eh_proj's weight gradient (reduce_layer_grads).
void Lowering::mtp_input(int l, bool backward, bool table_here) {
  const double h = d(m_.hidden);
  const double f = t_ * 2.0 * 2.0 * h * h / tp_;
  const double table = count_params(m_).embedding / tp_;
  // A head tied to the table gathered it already (the main head runs in this unit before the
  // modules, and reduce-scatters its gradient after their backward): one tensor, gathered once.
  const bool own_table = fsdp() && !table_here && !m_.tie_embeddings;
  if (!backward) {
    issue_gathers(l);
    if (own_table)
      wait_before_next_compute(comm("fsdp.all_gather.embed", Category::fsdp_comm, Stream::fsdp_comm, l,
                                    Collective::all_gather, Group::dense_shard, table * bw_edges_, {}));
    wait_param_gathers(kEmbedKey);  // the module's stage's copy of the table (ZeRO-1)
    wait_param_gathers(l);          // eh_proj is the layer's
    memory("mtp.embed.lookup", l, t_ * h * 2.0 * 2.0);  // the next tokens' embeddings
    tp_collective(l, "tp.reduce_scatter.mtp.embed", Collective::reduce_scatter, true);
    // Two RMSNorms (the previous depth's hidden state, the next token's embedding), each reading its
    // input and writing the normalized copy: a residual add before the first, fused or not, is the
    // head's that reads the same state.
    memory("mtp.norm", l, 2.0 * 2.0 * t_sp_ * h * 2.0);
    tp_collective(l, "tp.all_gather.mtp.input", Collective::all_gather, true, 2.0);
    for (int32_t x : gather_deps(l)) wait_before_next_compute(x);
    gemm("mtp.proj", Category::gemm, l, f, f, s_.precision.dense_gemm, t_, h / tp_, 2.0 * h);
    tp_collective(l, "tp.all_gather.mtp.output", Collective::all_gather, true);
  } else {
    // The output gradient's gather runs beside the norms' recompute, which does not read it.
    const int32_t grad = tp_collective(l, "tp.all_gather.mtp.bwd", Collective::all_gather, false);
    // eh_proj's input, the two norms' outputs, is not kept where the norms are recomputed under
    // autograd (DeepSeek-V3 recomputes every RMSNorm): the two norms run again from their inputs
    // (the next tokens' embedding, kept by saved_tensor_bytes; the previous depth's hidden state)
    // before the projection's backward, as a layer's do. JAX's remat rebuilds it inside the
    // module's recomputation, unpriced as a layer's norms are there.
    norm_recompute(l, "mtp", 2.0);
    tp_collective(l, "tp.all_gather.mtp.input.bwd", Collective::all_gather, true, 2.0);
    if (grad >= 0) wait_before_next_compute(grad);
    gemm_bwd("mtp.proj", Category::gemm, l, f, f, s_.precision.dense_gemm, t_, h / tp_, 2.0 * h);
    reduce_layer_grads(l);  // eh_proj's weight gradient is the layer's last
    tp_collective(l, "tp.reduce_scatter.mtp.bwd", Collective::reduce_scatter, true, 2.0);
    memory("mtp.norm.bwd", l, 2.0 * 3.0 * t_sp_ * h * 2.0);  // the hidden state's second gradient is summed at its head
    tp_collective(l, "tp.all_gather.mtp.embed.bwd", Collective::all_gather, true);
    memory("mtp.embed.lookup.bwd", l, t_ * h * 2.0 * 2.0 + table_grad_bytes());
    last_compute_[lane_] = last_on(Stream::compute);
    if (own_table)
      comm("fsdp.reduce_scatter.embed", Category::fsdp_comm, Stream::fsdp_comm, l, Collective::reduce_scatter,
           Group::dense_shard, table * bg_, {last()});
  }
}

}  // namespace moeperf::detail
