// The MoE block of a layer, forward and backward: router, permute, dispatch, expert GEMMs (grouped or
// a padded per-expert loop), combine, un-permute and the shared expert.
#include "model/workload/lowering.h"

namespace moeperf::detail {

Lowering::ExpertGemms Lowering::expert_gemms(int l, std::vector<int32_t> after, bool forward) {
  ExpertGemms g{std::move(after), 1, load_.max_rank_tile_rows, load_.max_rows, true};
  if (s_.stack.expert_gemm == ExpertGemm::grouped) {
    // A multi-stream grouped GEMM launches each group's GEMM with its row count from the host:
    // Transformer Engine's GroupedLinear takes m_splits as a list of ints, and Megatron's
    // TEGroupedMLP.forward reads tokens_per_expert with .tolist(), a host wait unless the dispatch's
    // wait (dispatch_host_syncs) brought the counts to the host already. The backward keeps the list
    // (a recomputed FC1 would read them again: not modelled).
    if (forward && s_.stack.grouped_kernel == GroupedKernel::multi_stream && !counts_on_host_)
      g.after = {host_wait("moe.count_sync", l, g.after)};
    return g;
  }
  if (s_.stack.expert_gemm == ExpertGemm::masked_dense) {
    // jax.lax.ragged_dot lowered by XLA's RaggedDotRewriter: every local expert's weights against
    // every row of the ragged buffer, the rows of other experts masked to zero.
    const double e_local = d(m_.experts) / d(p_.ep);
    g.rows_exec = g.rows_gemm = e_local * buffer_rows();
    g.rows_padded = false;
    return g;
  }
  g.after = {host_wait("moe.count_sync", l, g.after)};
  g.launches = static_cast<int>(d(m_.experts) / d(p_.ep));
  g.rows_exec = g.rows_gemm = padded_rows();
  g.rows_padded = false;
  return g;
}

void Lowering::moe_forward(int l, const LayerForwardFlops& f) {
  const double h = d(m_.hidden), ffn = d(m_.expert_ffn), e_local = d(m_.experts) / d(p_.ep), etp = d(p_.etp);
  const Dtype de = s_.precision.expert_gemm, dd = s_.precision.dense_gemm;
  const double r = d(p_.ep);
  const double bd = bytes_per_element(s_.precision.dispatch), bc = bytes_per_element(s_.precision.combine);
  gemm("moe.router", Category::gemm, l, t_sp_ * f.router, t_sp_ * f.router, Dtype::bf16, t_sp_, d(m_.experts), h);
  memory("moe.topk", l, t_sp_ * d(m_.experts) * 4.0 * 2.0);
  moe_dispatch(l, "moe.permute", "moe.dispatch", bd);
  const int32_t dispatched = last();
  const bool overlap_shared = s_.stack.a2a_with_shared_expert;
  if (overlap_shared) shared_expert(l, f, dd);
  // Expert GEMMs on the busiest rank: ragged grouped GEMM pads each expert's rows to the tile;
  // a per-expert loop needs the counts on the host first and launches one GEMM per expert.
  const ExpertGemms eg = expert_gemms(l, {dispatched}, true);
  std::vector<int32_t> after = eg.after;
  const int launches = eg.launches;
  const double rows_exec = eg.rows_exec, rows_gemm = eg.rows_gemm;
  const double rows_mean = load_.mean_rows, rows_max = load_.max_rows;
  const double fc1_w = 2.0 * h * 2.0 * ffn, fc2_w = 2.0 * ffn * h;  // FLOPs per row
  padded_rows_ = eg.rows_padded;
  const int32_t fc1 = gemm("moe.expert_fc1", Category::gemm, l, rows_exec * fc1_w, rows_mean * fc1_w, de,
                           rows_gemm / e_local * etp, 2 * ffn / etp, h, static_cast<int64_t>(e_local), launches, after);
  (void)fc1;
  memory("moe.act", l, rows_max * (2 * ffn * 2.0 + ffn * bytes_per_element(de == Dtype::bf16 ? Dtype::bf16 : de)));
  gemm("moe.expert_fc2", Category::gemm, l, rows_exec * fc2_w, rows_mean * fc2_w, de, rows_gemm / e_local * etp, h, ffn / etp,
       static_cast<int64_t>(e_local), launches);
  padded_rows_ = false;
  etp_collective(l, "moe.combine.etp_reduce_scatter", Collective::reduce_scatter, bc);
  const double fan = dispatch_fanout();
  local_sort(l, "moe.unsort", bc, {last()});
  // The flex dispatcher's un-permute runs before the combine: each local expert's output row,
  // weighted, summed into its token's row for this rank; the combine kernel sums the ranks' rows.
  const bool post = permute_after_dispatch();
  if (post)
    flex_permute("moe.unpermute", l, bc);
  if (!ep_exchanges()) {
    // No expert parallelism: the rows never left this GPU, nothing to exchange.
  } else if (s_.stack.dispatcher == Dispatcher::allgather) {
    comm("moe.combine", Category::ep_comm, Stream::ep_comm, l, Collective::reduce_scatter, Group::ep,
         r * t_sp_ * h * bc, {last()});
  } else {
    const double send = t_sp_ * fan * h * bc * (r - 1) / r;
    a2a_zero_fill(l, "moe.combine", t_sp_ * fan, bc);  // back into the rank's own rows
    Op& o = op(comm("moe.combine", Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep,
                    send * exchange_imbalance(), {last()}, send, fan));
    o.combine = true;
    o.row_bytes = h * bc;
  }
  if (post) {
    // The combined rows are the block's output: what computes next waits for them (as the
    // un-permute after the combine did).
    wait_before_next_compute(last());
    if (overlap_shared)  // the shared expert's reduce-scattered output, added to the combined rows next
      for (int32_t x : take_tp_outputs()) wait_before_next_compute(x);
  } else {
    std::vector<int32_t> unpermute_deps{last()};
    if (overlap_shared)  // the shared expert's reduce-scattered output is added here
      for (int32_t x : take_tp_outputs()) unpermute_deps.push_back(x);
    op(memory("moe.unpermute", l, t_sp_ * (fan * h * bc + h * 4.0 + h * 2.0), Category::memory, std::move(unpermute_deps))).rows =
        t_sp_ * fan;
  }
  if (!overlap_shared) {
    shared_expert(l, f, dd);
    for (int32_t x : take_tp_outputs()) wait_before_next_compute(x);
  }
  // Unfused (Megatron's MoELayer.combine): the shared expert's output is added to the routed
  // output in a kernel of its own, reading both and writing the sum.
  if (!s_.stack.residual_fusion && m_.shared_experts > 0) memory("moe.output_add", l, 3.0 * t_sp_ * h * 2.0);
}

void Lowering::moe_dispatch(int l, const std::string& permute, const std::string& dispatch, double bd) {
  const double h = d(m_.hidden), r = d(p_.ep);
  const double fan = dispatch_fanout();
  counts_on_host_ = false;
  if (s_.stack.dispatcher == Dispatcher::allgather && ep_exchanges()) {
    // Every rank gathers every token of its EP group, then keeps the rows for its own experts.
    const int32_t g = comm(dispatch, Category::ep_comm, Stream::ep_comm, l, Collective::all_gather, Group::ep,
                           r * t_sp_ * h * bd, {last()});
    op(memory(permute, l, r * t_sp_ * h * bd + load_.max_rows * h * bd, Category::memory, {g})).rows = load_.max_rows;
    return;
  }
  // Permute: read the tokens, write one row per destination (quantized to the dispatch dtype).
  // A kernel that reads the tokens itself and leaves the expert order to the framework has no
  // permute before it: the received rows are permuted after it (below).
  const bool post = permute_after_dispatch();
  const int32_t routed = last();
  if (!post) op(memory(permute, l, t_sp_ * h * 2.0 + t_sp_ * fan * h * bd)).rows = t_sp_ * fan;
  // A PyTorch dispatcher copies the split sizes to the host before the exchange. Megatron's
  // AlltoAll dispatcher first gathers every EP rank's tokens per expert (MoEAlltoAllTokenDispatcher
  // .preprocess: gather_from_sequence_parallel_region over the TP x EP group, one int64 per expert
  // from each rank), from which it takes the exchange's output splits; the fused kernels (DeepEP's
  // notify step) count inside their own kernels.
  std::vector<int32_t> before{last()};
  // (preprocess runs before the permute, from the routing map: the gather overlaps the permute).
  if (s_.stack.dispatcher == Dispatcher::alltoall && s_.stack.dispatch_host_syncs > 0 && ep_exchanges())
    before.push_back(comm(dispatch + ".counts", Category::ep_comm, Stream::ep_comm, l, Collective::all_gather, Group::ep,
                          r * d(m_.experts) * 8.0, {routed}));
  for (int w = 0; w < s_.stack.dispatch_host_syncs; ++w) before = {host_wait(dispatch + ".host_sync", l, before)};
  counts_on_host_ = s_.stack.dispatch_host_syncs > 0;
  const double send = t_sp_ * fan * h * bd * (r - 1) / r;
  // The received rows land in the zeroed buffer.
  if (const int32_t fill = a2a_zero_fill(l, dispatch, buffer_rows(), bd); fill >= 0) before.push_back(fill);
  if (ep_exchanges())  // without expert parallelism the permuted rows are the experts' input as they are
    op(comm(dispatch, Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep, send, before,
            send * exchange_imbalance(), fan))
        .row_bytes = h * bd;
  // Megatron's flex dispatcher (_DeepepManager / HybridEP's get_permuted_hidden_states_by_experts):
  // the received rows, one per token and rank, are permuted into one row per local expert chosen,
  // with their routing weights.
  if (post)
    flex_permute(permute, l, bd);
  local_sort(l, permute == "moe.permute" ? "moe.sort" : "moe.sort.recompute", bd, {last()});
  etp_collective(l, dispatch + ".etp_all_gather", Collective::all_gather, bd);
}

void Lowering::etp_collective(int l, const std::string& name, Collective c, double bytes_per_elem) {
  // Expert tensor parallelism (Megatron, etp > 1): the rows an EP rank received are gathered over
  // the etp GPUs that each hold a slice of its experts, and the slices' outputs reduce-scattered
  // back before the combine; each moves etp x the busiest rank's rows.
  if (p_.etp <= 1) return;
  comm(name, Category::ep_comm, Stream::ep_comm, l, c, Group::etp,
       load_.max_rows * d(p_.etp) * d(m_.hidden) * bytes_per_elem, {last()});
}

void Lowering::local_sort(int l, const std::string& name, double bytes_per_elem, std::vector<int32_t> deps) {
  // After a ragged all-to-all the received rows are grouped by source rank; they are sorted by
  // local expert (and back before the combine), a gather over every row of the receive buffer.
  // Rows from a single source (no expert parallelism) are in expert order after the permute already.
  if (s_.stack.dispatcher != Dispatcher::alltoall || m_.experts <= p_.ep || !ep_exchanges()) return;
  op(memory(name, l, buffer_rows() * d(m_.hidden) * bytes_per_elem * 2.0, Category::memory, std::move(deps))).rows = buffer_rows();
}

void Lowering::shared_expert(int l, const LayerForwardFlops& f, Dtype dd) {
  if (m_.shared_experts == 0) return;
  const double h = d(m_.hidden), ffn = d(m_.expert_ffn) * m_.shared_experts;
  tp_collective(l, "tp.all_gather", Collective::all_gather, true);
  gemm("moe.shared_fc1", Category::gemm, l, t_ * f.shared_experts * 2 / 3 / tp_, t_ * f.shared_experts * 2 / 3 / tp_, dd,
       t_, 2 * ffn / tp_, h);
  memory("moe.shared_act", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
  gemm("moe.shared_fc2", Category::gemm, l, t_ * f.shared_experts / 3 / tp_, t_ * f.shared_experts / 3 / tp_, dd, t_,
       h, ffn / tp_);
  if (const int32_t rs = tp_collective(l, "tp.reduce_scatter", Collective::reduce_scatter, false); rs >= 0)
    tp_outputs_.push_back(rs);
}

void Lowering::shared_expert_backward(int l, const LayerForwardFlops& f, Dtype dd) {
  if (m_.shared_experts == 0) return;
  const double h = d(m_.hidden), ffn = d(m_.expert_ffn) * m_.shared_experts;
  tp_collective(l, "tp.all_gather.bwd", Collective::all_gather, true);
  const int32_t input = sp_input_gather(l, false);
  const bool fc1_recomputed = has(s_.memory.recompute, TensorClass::moe_mlpwi);
  // moe_mlpwi's saved bytes hold the shared FC1 output beside the routed rows' (step.cpp): recomputing
  // the class runs the shared FC1 again, from the gathered input, before the activation's backward
  // needs it.
  if (fc1_recomputed) {
    if (input >= 0) wait_before_next_compute(input);
    phase_ = Phase::recompute;
    gemm("moe.shared_fc1.recompute", Category::gemm, l, t_ * f.shared_experts * 2 / 3 / tp_, 0, dd, t_, 2 * ffn / tp_, h);
    phase_ = Phase::backward;
  }
  // Its activation output, which FC2's weight gradient reads, is rebuilt as the routed experts' is
  // (step.cpp counts it in moe_act's bytes otherwise).
  if (moe_act_rebuilt()) {
    phase_ = Phase::recompute;
    memory("moe.shared_act.recompute", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
    phase_ = Phase::backward;
  }
  gemm_bwd("moe.shared_fc2", Category::gemm, l, t_ * f.shared_experts / 3 / tp_, t_ * f.shared_experts / 3 / tp_, dd,
           t_, h, ffn / tp_);
  // SwiGLU's backward: reads the saved gate and up outputs and the output gradient, writes both
  // inputs' gradients (as moe.act.bwd for the routed rows).
  memory("moe.shared_act.bwd", l, t_ * (2 * ffn / tp_ * 2.0 * 2 + ffn / tp_ * 2.0));
  if (input >= 0 && !fc1_recomputed) wait_before_next_compute(input);
  gemm_bwd("moe.shared_fc1", Category::gemm, l, t_ * f.shared_experts * 2 / 3 / tp_,
           t_ * f.shared_experts * 2 / 3 / tp_, dd, t_, 2 * ffn / tp_, h);
  if (const int32_t rs = tp_collective(l, "tp.reduce_scatter.bwd", Collective::reduce_scatter, false); rs >= 0)
    tp_outputs_.push_back(rs);
}

void Lowering::moe_backward(int l, const LayerForwardFlops& f) {
  const double h = d(m_.hidden), ffn = d(m_.expert_ffn), e_local = d(m_.experts) / d(p_.ep), r = d(p_.ep);
  const double etp = d(p_.etp);
  const Dtype de = s_.precision.expert_gemm, dd = s_.precision.dense_gemm;
  const double bg = 2.0;  // gradients travel in BF16
  // but the combine's backward, the output gradients on their way to the experts' down-projections,
  // in precision.combine_bwd (FP8 in DeepSeek-V3's recipe; their quantization kernel, priced on the
  // expert side as FC2's dgrad input, then runs before the send over as many rows).
  const double bcb = bytes_per_element(s_.precision.combine_bwd);
  if (!s_.stack.a2a_with_shared_expert) {
    shared_expert_backward(l, f, dd);
  }
  // The expert input rows are not a checkpoint: rebuild them (permute + dispatch) as JAX's remat
  // does; a stack whose autograd keeps them (stack.remat_dispatch false) reads them from HBM.
  std::vector<int32_t> rows_ready;
  if (s_.stack.remat_dispatch) {
    phase_ = Phase::recompute;
    moe_dispatch(l, "moe.permute.recompute", "moe.dispatch.recompute", bytes_per_element(s_.precision.dispatch));
    rows_ready.push_back(last());
    phase_ = Phase::backward;
  }
  const double fan = dispatch_fanout();
  const bool post = permute_after_dispatch();
  if (!post) op(memory("moe.unpermute.bwd", l, t_sp_ * (h * 2.0 + fan * h * bg))).rows = t_sp_ * fan;
  int32_t cb;
  if (!ep_exchanges()) {
    cb = last();
  } else if (s_.stack.dispatcher == Dispatcher::allgather) {
    cb = comm("moe.combine.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::all_gather, Group::ep,
              r * t_sp_ * h * bcb, {last()});
  } else {
    const double send = t_sp_ * fan * h * bcb * (r - 1) / r;
    // Under the flex layout the exchange is the block's first op: it also waits for what the
    // layer's backward waits for before its first compute op (the gradient received from the next
    // stage, FSDP gathers, offloaded activations), which stay queued for that compute op too.
    a2a_zero_fill(l, "moe.combine.bwd", buffer_rows(), bcb);  // the combine's transpose: into the buffer
    std::vector<int32_t> cb_deps{last()};
    if (post) cb_deps.insert(cb_deps.end(), pending_.begin(), pending_.end());
    cb = comm("moe.combine.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep, send,
              std::move(cb_deps), send * exchange_imbalance(), fan);
    op(cb).row_bytes = h * bcb;
    if (s_.stack.dispatcher == Dispatcher::alltoall && m_.experts > p_.ep) {
      local_sort(l, "moe.sort.bwd", bcb, {cb});
      cb = last();
    }
    // The flex dispatcher: the output gradients arrive one row per token and rank and are spread
    // over the local experts' rows (the un-permute's backward), after the exchange.
    if (post) {
      cb = flex_permute("moe.unpermute.bwd", l, bcb, false);
    }
  }
  if (p_.etp > 1) {
    etp_collective(l, "moe.combine.bwd.etp_all_gather", Collective::all_gather, bcb);
    cb = last();
  }
  rows_ready.push_back(cb);
  const ExpertGemms eg = expert_gemms(l, rows_ready, false);
  std::vector<int32_t> after = eg.after;
  const int launches = eg.launches;
  const double rows_exec = eg.rows_exec, rows_gemm = eg.rows_gemm;
  const double rows_mean = load_.mean_rows, rows_max = load_.max_rows;
  const double fc1_w = 2.0 * h * 2.0 * ffn, fc2_w = 2.0 * ffn * h;
  padded_rows_ = eg.rows_padded;
  if (has(s_.memory.recompute, TensorClass::moe_mlpwi)) {
    phase_ = Phase::recompute;
    after = {gemm("moe.expert_fc1.recompute", Category::gemm, l, rows_exec * fc1_w, 0, de, rows_gemm / e_local * etp,
                  2 * ffn / etp, h, static_cast<int64_t>(e_local), launches, after)};
    phase_ = Phase::backward;
  }
  // The FC2 input (activation output) is rebuilt from the saved FC1 outputs by the act kernel:
  // always under JAX's remat (it has no checkpoint name); under autograd only when it is in the
  // recompute list (Megatron's moe_act), else autograd kept it.
  // `after` (the rows and gradients the expert GEMMs need) goes to the first of these ops that runs;
  // the rest follow it on the stream.
  if (moe_act_rebuilt())
    memory("moe.act.recompute", l, rows_max * (2 * ffn * 2.0 + ffn * 2.0), Category::memory, std::exchange(after, {}));
  if (has(s_.memory.recompute, TensorClass::moe_mlpwo)) {
    phase_ = Phase::recompute;
    gemm("moe.expert_fc2.recompute", Category::gemm, l, rows_exec * fc2_w, 0, de, rows_gemm / e_local * etp, h, ffn / etp,
         static_cast<int64_t>(e_local), launches, std::exchange(after, {}));
    phase_ = Phase::backward;
  }
  gemm_bwd("moe.expert_fc2", Category::gemm, l, rows_exec * fc2_w, rows_mean * fc2_w, de, rows_gemm / e_local * etp, h, ffn / etp,
           static_cast<int64_t>(e_local), launches, std::exchange(after, {}));
  memory("moe.act.bwd", l, rows_max * (2 * ffn * 2.0 * 2 + ffn * 2.0));
  gemm_bwd("moe.expert_fc1", Category::gemm, l, rows_exec * fc1_w, rows_mean * fc1_w, de, rows_gemm / e_local * etp,
           2 * ffn / etp, h, static_cast<int64_t>(e_local), launches);
  padded_rows_ = false;
  const double bd = bg;
  etp_collective(l, "moe.dispatch.bwd.etp_reduce_scatter", Collective::reduce_scatter, bd);
  local_sort(l, "moe.unsort.bwd", bd, {last()});
  // The flex dispatcher: the experts' input gradients, one row per local expert chosen, are summed
  // into one row per token and rank (the permute's backward, with the routing weights' gradients)
  // before the exchange; the kernel sums the ranks' rows into the token's.
  if (post)
    flex_permute("moe.permute.bwd", l, bd);
  if (!ep_exchanges()) {
    // nothing to exchange
  } else if (s_.stack.dispatcher == Dispatcher::allgather) {
    comm("moe.dispatch.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::reduce_scatter, Group::ep,
         r * t_sp_ * h * bd, {last()});
  } else {
    const double send = t_sp_ * fan * h * bd * (r - 1) / r;
    a2a_zero_fill(l, "moe.dispatch.bwd", t_sp_ * fan, bd);  // the dispatch's transpose: the own rows
    Op& o = op(comm("moe.dispatch.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep,
                    send * exchange_imbalance(), {last()}, send, fan));
    o.combine = true;
    o.row_bytes = h * bd;
  }
  if (post) {
    // The exchanged gradients are the block's input gradient: what computes next waits for them.
    if (ep_exchanges()) wait_before_next_compute(last());
    if (!s_.stack.a2a_with_shared_expert)  // the shared expert's input gradient, summed in next
      for (int32_t x : take_tp_outputs()) wait_before_next_compute(x);
  } else {
    std::vector<int32_t> permute_bwd_deps{last()};
    if (!s_.stack.a2a_with_shared_expert)  // the shared expert's input gradient is added here
      for (int32_t x : take_tp_outputs()) permute_bwd_deps.push_back(x);
    op(memory("moe.permute.bwd", l, t_sp_ * (fan * h * bd + h * 4.0), Category::memory, std::move(permute_bwd_deps))).rows = t_sp_ * fan;
  }
  // The score function's backward (softmax or sigmoid, the bias-free normalization of the top-k):
  // the gates' gradient (from the un-permute's backward) into the router logits' gradient, reading
  // the saved FP32 scores and writing the [tokens, experts] gradient; unfused, one kernel per op of
  // the router's forward (host_cost), as autograd replays them.
  memory("moe.topk.bwd", l, t_sp_ * (d(m_.experts) * 4.0 * 2.0 + d(m_.top_k) * 4.0));
  gemm_bwd("moe.router", Category::gemm, l, t_sp_ * f.router, t_sp_ * f.router, Dtype::bf16, t_sp_, d(m_.experts), h);
  if (s_.stack.a2a_with_shared_expert) {
    shared_expert_backward(l, f, dd);
    for (int32_t x : take_tp_outputs()) wait_before_next_compute(x);  // summed into the block's input gradient
  }
  // Unfused (PyTorch autograd): the block's input gradient has a contribution per consumer of the
  // normalized input - the permute's backward (which reads the routed rows' gradients), the
  // router's dgrad and the shared expert's FC1 dgrad - and each one after the first is summed in
  // a kernel of its own (3 passes). Fused stacks sum them inside the permute's backward.
  if (!s_.stack.residual_fusion) {
    const int sums = 1 + (m_.shared_experts > 0 ? 1 : 0);
    for (int i = 0; i < sums; ++i) memory("moe.grad_sum.bwd", l, 3.0 * t_sp_ * h * 2.0);
  }
}

}  // namespace moeperf::detail
