// The attention block of a transformer layer as `moeperf run` executes it before the MoE block, on
// host memory (the CPU backend): RMSNorm, the Q and K/V projections, the attention core (causal,
// optionally windowed: executor/attention_ref.h), the output projection and the residual, then the
// backward of each. GQA/MHA, or DeepSeek's MLA: Q through its low-rank down projection, norm and up
// projection; K/V from one down projection (the compressed KV and a rope part shared by the heads),
// a norm and an up projection into each head's K (nope) and V. Every op is timed under the name the
// cost model prices (attn.norm, attn.q_proj, attn.kv_proj, attn.rope, attn.core, attn.out_proj and their
// .dgrad / .wgrad / .bwd; an MLA projection is its down and up GEMMs with the norm between them, as
// the model counts it). With FSDP the block's weights are sharded over the ranks: gathered before
// the forward (fsdp.all_gather), their gradients reduce-scattered after the backward
// (fsdp.reduce_scatter). With QK-norm (GQA/MHA models that have it) each head of Q and K is
// RMS-normalized after the projections (attn.qk_norm, attn.qk_norm.bwd). RoPE (rotate-half, theta 10000) turns Q and K after the projections
// (attn.rope; for MLA the pass that also assembles each head's K and V) and their gradients back
// after the core's backward (attn.rope.bwd), as the model prices them.
#pragma once

#include <string>
#include <vector>

#include "executor/attention_ref.h"
#include "executor/comm.h"
#include "executor/run.h"
#include "executor/run_parts.h"

namespace moeperf::exec::detail {

class AttentionBlock {
 public:
  // Weights from fixed seeds, the same on every rank; with FSDP each rank keeps its shard only.
  AttentionBlock(const Dims& d, int rank, int ranks);

  // x = x0 + out_proj(attention(q, k, v)) of n = rmsnorm(x0): T x H, host memory.
  void forward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, float* x);
  // dx: the gradient at the block's output -> dx0 (through the block and the residual).
  void backward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, const float* dx, float* dx0);

  // Gates (after a forward and a backward): the forward output against a naive double-precision
  // reference of the block; its input gradient against a central difference of that reference; the
  // FSDP gather against the full weights and the gradient shards against the ranks' summed
  // gradients. Each returns "" when it holds, else what failed.
  std::string check_forward(const float* x0, const float* x) const;
  std::string check_backward(const float* x0, const float* dx, const float* dx0) const;
  std::string check_fsdp(Communicator& comm) const;
  // The words of the passed gates, for the measurements file.
  std::vector<std::string> gates() const;

  // Where each weight sits in the flat buffer (the unit FSDP shards), and its size.
  struct Layout {
    int64_t qa = 0, qb = 0, kva = 0, kvb = 0, o = 0, total = 0;  // GQA: qb = Wq, kva = Wkv; no qa, kvb
  };

 private:
  void gather(Communicator& comm, Recorder& rec);
  // RoPE on this block's Q and K layouts (q: tokens x qd_; k: K rows as the core reads them), or back.
  void rotate_qk(float* q, float* k, bool inverse) const;
  int64_t shard() const { return (lay_.total + ranks_ - 1) / ranks_; }
  const float* w(int64_t off) const { return full_.data() + off; }
  static std::vector<float> full_weights(const Dims& d, const Layout& l);

  Dims d_;
  Layout lay_;
  int ranks_ = 1;
  int64_t qd_ = 0, kd_ = 0, vd_ = 0;               // per token: all heads' Q, K and V widths
  BlockedAttention at_;                              // the core, one head of one sequence at a time
  int64_t group_ = 1;                               // Q heads per K/V head
  double keys_ = 0, core_flops_ = 0;                // mean keys per query; the core's FLOPs as the model counts them
  int64_t rope_ = 0;                                // RoPE's rotated dims per head (even)
  std::vector<float> rope_cos_, rope_sin_;          // its angles' cosines and sines, seq x rope_ / 2
  int edges_ = 1;                                    // masked edges per query: 1 causal, 2 with a window
  std::vector<float> gamma_, gq_, gkv_;             // the block's RMSNorm, MLA's q and kv norms (not sharded)
  std::vector<float> gqn_, gkn_;                    // QK-norm's per-head weights (head_dim each; not sharded)
  std::vector<float> qpre_, kpre_, qnr_, knr_;      // QK-norm's inputs and their 1 / rms, per token and head
  std::vector<float> own_, full_;                   // own_: this rank's shard (FSDP); full_: the weights in use
  // Saved for the backward: the block norm, MLA's down projections before and after their norms.
  std::vector<float> norm_, rstd_, qa_, qan_, qrstd_, ckv_, cn_, crstd_, kvb_, q_, k_, v_, ctx_;
  std::vector<float> grad_, grad_shard_;            // weight gradients (flat, as the weights) and this rank's shard
  double shard_sum_ = 0, grad_sum_ = 0;             // for the FSDP gate
  double fwd_err_ = -1, bwd_err_ = -1;
};

}  // namespace moeperf::exec::detail
