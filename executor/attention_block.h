// The attention block of a transformer layer as `moeperf run` executes it before the MoE block, on
// host memory (the CPU backend): RMSNorm, the Q and K/V projections, the attention core (GQA or
// MHA, causal, optionally windowed: executor/attention_ref.h), the output projection and the
// residual, then the backward of each. Every op is timed under the name the cost model prices
// (attn.norm, attn.q_proj, attn.kv_proj, attn.core, attn.out_proj and their .dgrad / .wgrad /
// .bwd). With FSDP the block's weights are sharded over the ranks: gathered before the forward
// (fsdp.all_gather) and their gradients reduce-scattered after the backward (fsdp.reduce_scatter).
#pragma once

#include <string>
#include <vector>

#include "executor/comm.h"
#include "executor/run.h"
#include "executor/run_parts.h"

namespace moeperf::exec::detail {

class AttentionBlock {
 public:
  // Weights from fixed seeds, the same on every rank; with FSDP each rank keeps its shard only.
  AttentionBlock(const Dims& d, int rank, int ranks);

  // x = x0 + out_proj(attention(q_proj(n), kv_proj(n))), n = rmsnorm(x0): T x H, host memory.
  void forward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, float* x);
  // dx: the gradient at the block's output -> dx0 (through the block and the residual).
  void backward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, const float* dx, float* dx0);

  // Gates (after a forward and a backward): the forward output against a naive double-precision
  // reference of the block; the FSDP gather against the full weights; the gradient shards against
  // the ranks' summed gradients. Each returns "" when it holds, else what failed.
  std::string check_forward(const float* x0, const float* x) const;
  std::string check_backward(const float* x0, const float* dx, const float* dx0) const;
  std::string check_fsdp(Communicator& comm) const;
  // The words of the passed gates, for the measurements file.
  std::vector<std::string> gates() const;

  int64_t q_dim() const { return d_.heads * d_.head_dim; }
  int64_t kv_dim() const { return 2 * d_.kv_heads * d_.head_dim; }

 private:
  void gather(Communicator& comm, Recorder& rec);
  int64_t weights() const { return 2 * d_.hidden * q_dim() + d_.hidden * kv_dim(); }  // Wq, Wkv, Wo
  int64_t shard() const { return (weights() + ranks_ - 1) / ranks_; }
  const float* wq() const { return full_.data(); }
  const float* wkv() const { return full_.data() + d_.hidden * q_dim(); }
  const float* wo() const { return full_.data() + d_.hidden * q_dim() + d_.hidden * kv_dim(); }
  static void full_weights(const Dims& d, std::vector<float>& w);

  Dims d_;
  int ranks_ = 1;
  std::vector<float> gamma_, own_, full_;      // own_: this rank's shard (FSDP) or nothing; full_: in use
  std::vector<float> norm_, rstd_, q_, kv_, ctx_;  // saved for the backward
  std::vector<float> grad_, grad_shard_;       // dWq | dWkv | dWo, and this rank's reduce-scattered shard
  double shard_sum_ = 0, grad_sum_ = 0;        // for the FSDP gate
  double fwd_err_ = -1, bwd_err_ = -1;
};

}  // namespace moeperf::exec::detail
