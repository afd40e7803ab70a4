// Internal to model/workload: Lowering builds one rank class's op list in program order. Its
// emitters and bookkeeping are here; the layers (attention, dense FFN, embedding, head, MTP input)
// are in layers.cpp, the MoE block (router, dispatch, expert GEMMs, combine, shared expert) in
// moe_block.cpp, and the pipeline schedules that call them per micro-batch in schedule.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "model/workload/flops.h"
#include "model/workload/num.h"
#include "model/workload/step.h"

namespace moeperf::detail {

// Builds one rank class's op list in program order.
class Lowering {
 public:
  Lowering(const Scenario& s, const ExpertLoad& load, RankClass& rc)
      : s_(s), m_(s.model), p_(s.parallelism), load_(load), rc_(rc) {
    t_ = d(s.batch.micro_batch * s.batch.seq_len) / d(p_.cp);
    tp_ = d(p_.tp);
    t_sp_ = t_ / tp_;
    bw_ = bytes_per_element(s.precision.weights);
    bw_edges_ = end_weight_bytes(s);  // the embedding and head stay BF16 under FP8 primary weights
    bg_ = bytes_per_element(s.precision.grads);
  }

  // ---------------------------------------------------------------- emitters
  int32_t emit(Op&& op) {
    op.micro_batch = mb_;
    if (op.stream == Stream::compute && !pending_.empty()) {
      op.deps.insert(op.deps.end(), pending_.begin(), pending_.end());
      pending_.clear();
    }
    op.phase = op.phase == Phase::forward ? phase_ : op.phase;
    op.lane = lane_;
    host_cost(op);
    // The first op of each stream in a gated unit waits for the gate (see begin_unit).
    if (!gate_.empty() && !(gated_streams_ & (1u << static_cast<unsigned>(op.stream)))) {
      op.deps.insert(op.deps.end(), gate_.begin(), gate_.end());
      gated_streams_ |= 1u << static_cast<unsigned>(op.stream);
    }
    rc_.ops.push_back(std::move(op));
    return static_cast<int32_t>(rc_.ops.size() - 1);
  }

  // An op's name less a suffix it ends with (interned: the key of recomputed_).
  template <size_t N>
  static OpName stem(const std::string& name, const char (&)[N]) {
    return OpName(std::string_view(name).substr(0, name.size() - (N - 1)));
  }
  // Expert rows that arrive in the GEMM's format (an MXFP8 dispatch) are quantized row-wise already.
  bool input_arrives_quantized(const std::string& name, Dtype dt) const {
    return (name == "moe.expert_fc1" || name == "moe.expert_fc1.recompute") && s_.precision.dispatch == dt;
  }
  // HBM bytes per element of quantizing a GEMM's input (A): a BF16 input read once and written
  // row- and column-wise; rows that arrive quantized only get their column-wise copy.
  double input_quantize_bytes(const std::string& name, Dtype dt) const {
    return input_arrives_quantized(name, dt) ? 2.0 * bytes_per_element(dt) : quantize_bytes_per_element(dt);
  }

  // MLA's projection ops (attn.q_proj, attn.kv_proj, their recompute and backward) stand for the
  // down projection (hidden -> latent) and the up projection (latent -> heads) together: their FLOPs
  // are both, their shape the up projection's. The down projection is a GEMM of its own in the same
  // format, a module of its own in both frameworks (Megatron's linear_q_down_proj and
  // linear_kv_down_proj are TELinear modules, MaxText's wq_a and wkv_a dense layers), so it quantizes
  // its hidden-wide input itself, each projection its own copy. Its latent width; 0 for any other op.
  double mla_down_width(const std::string& name) const {
    if (name_starts(name, "attn.q_proj")) return mla_latent_width(m_.attention, false);
    if (name_starts(name, "attn.kv_proj")) return mla_latent_width(m_.attention, true);
    return 0.0;
  }
  // The down projection's quantization in the op's kernel (q, qb: bytes per element of the input
  // and of the weights, as for the op's own operands): forward or recompute, its hidden-wide input
  // and its weights; data gradient, the latent's gradient and its weights again. Its rows are the
  // op's m, the tokens the lowering gathered before the projections under tensor parallelism, as
  // for any attention (Megatron's MLA runs the down projections on the sequence shard and gathers
  // the latents instead: not modelled, here or in the TP collectives). An autograd stack's
  // recompute of these ops is the up projections' alone (Megatron's mla_up_proj, DeepSeek-V3's
  // recipe: mla_recompute_share), so it quantizes nothing for the down projection; JAX's remat reruns the
  // whole projection.
  double mla_down_quantize_bytes(const std::string& name, double m, double q, double qb) const {
    const double w = mla_down_width(name) / tp_;  // column-parallel, as the op's FLOPs and weights are split
    if (w == 0.0 || (name_ends(name, ".recompute") && !s_.stack.remat_dispatch)) return 0.0;
    const double h = d(m_.hidden);
    return (name_ends(name, ".dgrad") ? q * m * w : q * m * h) + qb * h * w;
  }
  // The share of an MLA projection op's FLOPs a recompute runs: the up projection's alone under
  // autograd (above), the whole op under JAX's remat; 1 for any other op.
  double mla_recompute_share(bool kv) const {
    const AttentionSpec& a = m_.attention;
    const double w = mla_latent_width(a, kv);
    if (w == 0.0 || s_.stack.remat_dispatch) return 1.0;
    const double up = (kv ? d(a.kv_lora_rank) : w) * mla_up_width(a, kv);  // the up projection reads the latent (kv: less its rope part)
    return up / (up + d(m_.hidden) * w);
  }

  int32_t gemm(OpName name, Category cat, int layer, double flops_exec, double flops_model, Dtype dt, double m,
               double n, double k, int64_t groups = 1, int launches = 1, std::vector<int32_t> deps = {}) {
    // A low-precision GEMM first quantizes its operands in a kernel of its own (row- and column-wise
    // copies of A and B); the weight-gradient GEMM reuses the column-wise copies made for the
    // forward/recompute and the dgrad. The weights' copies from the forward serve the recompute and
    // the dgrad unless FSDP gathers the weights again (in BF16) for the backward. Expert rows that
    // arrive in the GEMM's format (an MXFP8 dispatch) only need their column-wise copy.
    auto ends = [&](const auto& lit) { return name_ends(name, lit); };
    if (const double q = quantize_bytes_per_element(dt); q > 0 && !ends(".wgrad")) {
      const bool again = ends(".dgrad") || ends(".recompute");
      // Weights stored in the GEMM's format are used as they are; a per-step cache (Transformer
      // Engine's is_first_microbatch) quantizes them in the first micro-batch's forward only.
      const bool stored = s_.precision.weights == dt;
      const bool cached = s_.stack.weight_quant_cache && !fsdp() && mb_ > 0;
      // A data gradient after the same GEMM's recompute in this backward uses the weight copies that
      // recompute made from this backward's gather (one FSDP gather per layer and backward).
      const bool after_recompute =
          ends(".dgrad") && recomputed_.count({&stem(name, ".dgrad").str(), layer, mb_}) > 0;
      const double qb_gathered = (again && !fsdp()) || stored || cached ? 0.0 : q;
      const double qb = after_recompute ? 0.0 : qb_gathered;
      if (ends(".recompute")) recomputed_.emplace(&stem(name, ".recompute").str(), layer, mb_);
      const bool arrives_quantized = input_arrives_quantized(name, dt);
      // A normalization that writes the quantized copies itself (cuDNN's fused norm + quantize)
      // spares the quantization kernel its read of the BF16 input. Only a GEMM that owns its norm
      // can: Transformer Engine's LayerNormLinear (Megatron's fused QKV projection, MLA's
      // up-projections with their latent norms, which the projections here read, a dense MLP's FC1);
      // a MoE layer's norm is a module of its own (Megatron's layer spec: pre_mlp_layernorm = TENorm
      // with experts), so the shared expert's FC1 quantizes its input itself.
      const bool after_norm = name == "attn.q_proj" || name == "attn.kv_proj" || name == "attn.qkv_proj" || name == "mlp.fc1";
      const bool norm_fused = after_norm && s_.stack.norm_quantize_fusion;
      const double qa = arrives_quantized ? input_quantize_bytes(name, dt) : norm_fused ? q - 2.0 : q;
      // (An autograd recompute ran the up projection alone: the down projection's weights are
      // quantized in the data gradient still.)
      const double down = mla_down_quantize_bytes(name, m, q, after_recompute && !s_.stack.remat_dispatch ? qb_gathered : qb);
      if (norm_fused && qb == 0.0 && last_norm_ >= 0) {
        // Nothing left of this GEMM's input for a quantization kernel: the normalization's kernel
        // writes the row- and column-wise copies (cuDNN's fused norm + quantize), with no launch or
        // host op. MLA's down projection, a module of its own after the layer's input norm,
        // quantizes its input in a kernel still.
        op(last_norm_).hbm_bytes += Bytes(d(groups) * qa * m * k);
        if (down > 0) {
          memory(OpName::cat(name, ".quant"), layer, down, Category::memory, std::move(deps));
          deps = {};
        }
      } else {
        memory(OpName::cat(name, ".quant"), layer, d(groups) * (qa * m * k + qb * k * n) + down, Category::memory, std::move(deps));
        deps = {};
      }
    }
    Op op;
    op.name = std::move(name);
    op.category = cat;
    op.layer = layer;
    op.flops = Flops(flops_exec);
    op.model_flops = Flops(flops_model);
    op.dtype = dt;
    op.m = static_cast<int64_t>(std::llround(m));
    op.n = static_cast<int64_t>(std::llround(n));
    op.k = static_cast<int64_t>(std::llround(k));
    op.groups = groups;
    op.launches = launches;
    op.ragged = groups > 1 && launches == 1 && s_.stack.expert_gemm == ExpertGemm::grouped;
    op.grouped_kernel = s_.stack.grouped_kernel;
    op.m_padded = padded_rows_ && !name_ends(op.name, ".wgrad");  // a weight gradient's rows are its K
    // Reads A (m x k per group) and B (k x n per group), writes C (m x n) in BF16. A weight
    // gradient is written in the gradients' dtype and, after the step's first one of its layer,
    // added to the gradient accumulated so far: its C is read too (Megatron / Transformer Engine
    // accumulate into the FP32 main_grad inside the GEMM, beta = 1; others add it after): at a small
    // K (few rows per expert) these bytes, not the FLOPs, set the kernel's time. Under FSDP each
    // micro-batch's gradient is reduce-scattered as it is made, so nothing is read back.
    const double in = bytes_per_element(dt);
    double out = m * n * 2.0;
    if (name_ends(op.name, ".wgrad")) {
      const bool again = !wgrad_seen_.emplace(&op.name.str(), layer).second;  // names are interned
      out = m * n * bytes_per_element(s_.precision.grads) * (again && !fsdp() ? 2.0 : 1.0);
    }
    op.hbm_bytes = Bytes(d(groups) * (m * k * in + k * n * in + out));
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  // An op's name in the current phase: base, base.recompute or base.bwd.
  OpName phased(const char* base) const {
    return OpName::cat(base, phase_ == Phase::backward ? ".bwd" : phase_ == Phase::recompute ? ".recompute" : "");
  }

  int32_t memory(OpName name, int layer, double bytes, Category cat = Category::memory,
                 std::vector<int32_t> deps = {}) {
    Op op;
    op.name = std::move(name);
    op.category = cat;
    op.layer = layer;
    op.hbm_bytes = Bytes(bytes);
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  int32_t comm(OpName name, Category cat, Stream stream, int layer, Collective c, Group g, double bytes,
               std::vector<int32_t> deps = {}, double recv = -1, double fanout = 0) {
    Op op;
    op.name = std::move(name);
    op.category = cat;
    op.stream = stream;
    op.layer = layer;
    op.collective = c;
    op.group = g;
    op.bytes = Bytes(bytes);
    op.recv_bytes = Bytes(recv < 0 ? bytes : recv);
    op.fanout = fanout;
    // A fused, de-duplicating dispatcher crosses to each remote NVLink domain once per token.
    if (c == Collective::all_to_all && g == Group::ep && s_.stack.dispatcher == Dispatcher::fused_dedup &&
        load_.ep_domains > 1)
      op.node_fanout = load_.distinct_domains;
    if (c == Collective::all_to_all && g == Group::ep && s_.stack.dispatcher == Dispatcher::alltoall) {
      if (one_shot_applies()) {
        // XLA's one-shot kernel (ragged_all_to_all.cc): (ranks x updates) blocks copying from the
        // compute stream, between two rendezvous kernels; priced by the bytes it keeps in flight.
        const StackOptions& st = s_.stack;
        op.collective = Collective::none;
        op.stream = Stream::compute;
        op.one_shot_peers = p_.ep;
        op.one_shot_in_flight = d(st.one_shot_updates_per_peer) * st.one_shot_threads * st.one_shot_copy_bytes;
        op.launches = 3;
      } else if (s_.stack.ragged_a2a_host_waits > 0) {
        // XLA's NCCL path (ragged_all_to_all_thunk.cc): the output offsets go all-to-all, the host
        // waits, copies the size/offset arrays down and waits again, then grouped send/recv.
        Op off;
        off.name = OpName::cat(op.name, ".offsets");
        off.category = cat;
        off.stream = stream;
        off.layer = layer;
        off.collective = Collective::all_to_all;
        off.group = g;
        off.bytes = off.recv_bytes = Bytes(4.0 * 8.0 * d(p_.ep));  // four int64 arrays, one entry per peer
        off.deps = std::move(deps);
        deps = {emit(std::move(off))};
        for (int w = 0; w < s_.stack.ragged_a2a_host_waits; ++w) deps = {host_wait(OpName::cat(op.name, ".host_wait"), layer, deps)};
      }
    }
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  // A host wait: the host blocks until the GPU has run everything issued before it on the compute
  // stream (and `deps`), copies a few bytes down, and only then issues what follows.
  int32_t host_wait(OpName name, int layer, std::vector<int32_t> deps) {
    Op w;
    w.name = std::move(name);
    w.category = Category::sync;
    w.layer = layer;
    w.deps = std::move(deps);
    return emit(std::move(w));
  }

  // Whether XLA's one-shot ragged all-to-all kernel runs this EP group: the stack uses it, the
  // group has at most one_shot_max_ranks ranks, and every peer is reachable in its scope (one
  // process: one compute tray, as JAX runs a process per host; or one NVLink domain).
  bool one_shot_applies() const {
    const StackOptions& st = s_.stack;
    if (st.ragged_a2a != RaggedA2a::one_shot || p_.ep > st.one_shot_max_ranks) return false;
    if (st.one_shot_scope == PeerScope::nvlink_domain) return load_.ep_domains == 1;
    return p_.ep_span() <= s_.system.domain.tray.gpus;
  }

  // Rows of the ragged all-to-all's buffers (MaxText get_ragged_buffer_size): factor x the local
  // rows, or with a factor <= 0 the local rows x min(EP, experts / top_k).
  double buffer_rows() const { return ragged_buffer_rows(s_, load_); }

  // XLA's ragged all-to-all writes into the output operand MaxText passes it, jnp.zeros: the zeros
  // are written over the whole output (`rows` of the hidden size) before the exchange, which then
  // follows them (stack.a2a_zero_fill). The fill's id, or -1 when there is none.
  int32_t a2a_zero_fill(int l, const std::string& exchange, double rows, double bytes_per_elem) {
    if (!s_.stack.a2a_zero_fill || s_.stack.dispatcher != Dispatcher::alltoall || !ep_exchanges()) return -1;
    return memory(OpName::cat(exchange, ".zero_fill"), l, rows * d(m_.hidden) * bytes_per_elem);  // a fill, no row gather
  }

  // What the host spends issuing `op` (Op::host_ops) and the CUDA graph part that captures it.
  void host_cost(Op& op) const {
    const StackOptions& st = s_.stack;
    const std::string& n = op.name;
    auto starts = [&](const auto& lit) { return name_starts(n, lit); };
    auto ends = [&](const auto& lit) { return name_ends(n, lit); };
    double ops = st.host_ops_per_op * std::max(1, op.launches);
    if (ends(".quant")) {
      // One kernel per framework op (a separate allocation of the scales is a memset kernel);
      // with programmatic dependent launch none of them waits a launch gap.
      ops = st.quantize_host_ops;
      op.launches = st.pdl_quantize ? 0 : st.quantize_host_ops;
    } else if (starts("moe.topk")) {
      // Unfused, each of the router's ops is a kernel reading and writing the [tokens, experts]
      // scores; fused, one kernel reads them and writes the top-k.
      ops = st.router_fusion ? st.host_ops_per_op : st.unfused_router_ops;
      if (!st.router_fusion) {
        op.launches = st.unfused_router_ops;
        op.hbm_bytes = op.hbm_bytes * std::max(1.0, 0.5 * st.unfused_router_ops);
      }
    } else if (starts("moe.permute") || starts("moe.unpermute") || starts("moe.sort") || starts("moe.unsort")) {
      // Unfused, the index computations around the row gather are kernels of their own.
      ops = st.permute_fusion ? st.host_ops_per_op : st.unfused_permute_ops;
      if (!st.permute_fusion) op.launches = st.unfused_permute_ops;
    }
    op.host_ops = ops;
    const bool moe_layer = op.layer >= 0 && is_moe_layer(op.layer);
    unsigned part = 0;
    if (starts("attn.") || starts("cp.")) part = static_cast<unsigned>(GraphScope::attn);
    else if (starts("mlp.residual")) part = static_cast<unsigned>(moe_layer ? GraphScope::moe : GraphScope::mlp);
    else if (starts("mlp.norm")) part = static_cast<unsigned>(moe_layer ? GraphScope::moe_router : GraphScope::mlp);
    else if (starts("mlp.")) part = static_cast<unsigned>(GraphScope::mlp);
    else if (starts("moe.router") || starts("moe.topk")) part = static_cast<unsigned>(GraphScope::moe_router);
    else if (starts("moe.shared")) part = static_cast<unsigned>(GraphScope::shared_expert);
    else if (starts("moe.")) part = static_cast<unsigned>(GraphScope::moe);
    op.graph = (st.cuda_graphs & part) ? part : 0u;
    // A multi-stream grouped GEMM launches each group with a row count the host read this step: no
    // CUDA graph captures it (Megatron leaves the routed experts eager).
    if (op.category == Category::gemm && op.ragged && op.grouped_kernel == GroupedKernel::multi_stream) op.graph = 0;
    if (op.category == Category::sync) op.graph = 0;  // a host wait is the host's: no graph holds one
  }

  // ---------------------------------------------------------------- parameters of a layer
  // Non-expert weights of layer l on this rank (TP-split), expert weights of this rank's experts.
  double dense_params(int l) const { return dense_params_per_rank(m_, l, p_.tp); }
  double local_expert_params(int l) const { return layer_params(m_, l).routed_experts / d(p_.ep * p_.etp); }
  bool is_moe_layer(int l) const { return m_.is_moe_layer(l); }
  bool fsdp() const { return p_.fsdp > 1; }

  // ---------------------------------------------------------------- layers
  // FSDP: gathers are issued `depth` layers ahead of use (prefetch), each waiting only for the
  // compute issued before it (the buffer it reuses is then free); without prefetch a layer's gather
  // is issued when the layer starts and the layer waits for it.
  void begin_phase(std::vector<int> order) {
    order_ = std::move(order);
    issued_ = 0;
    gathers_.clear();
  }

  void issue_gathers(int l) {
    if (!fsdp()) return;
    const auto pos = static_cast<size_t>(std::find(order_.begin(), order_.end(), l) - order_.begin());
    const size_t depth = s_.stack.fsdp_prefetch ? static_cast<size_t>(s_.stack.fsdp_prefetch_depth) : 0;
    const std::string_view sfx = phase_ == Phase::backward ? ".bwd" : "";
    while (issued_ < order_.size() && issued_ <= pos + depth) {
      const int j = order_[issued_++];
      std::vector<int32_t> deps;
      if (last_compute_[lane_] >= 0) deps.push_back(last_compute_[lane_]);
      auto& ids = gathers_[j];
      ids.push_back(comm(OpName::cat("fsdp.all_gather", sfx), Category::fsdp_comm, Stream::fsdp_comm, j, Collective::all_gather,
                         Group::dense_shard, dense_params(j) * bw_, deps));
      if (is_moe_layer(j))
        ids.push_back(comm(OpName::cat("fsdp.all_gather_experts", sfx), Category::fsdp_comm, Stream::fsdp_comm, j,
                           Collective::all_gather, Group::fsdp, local_expert_params(j) * bw_, deps));
    }
  }

  std::vector<int32_t> gather_deps(int l) const {
    auto it = gathers_.find(l);
    return it == gathers_.end() ? std::vector<int32_t>{} : it->second;
  }

  void forward_layer(int l);

  double offloaded_bytes(int l) const {
    const auto b = saved_tensor_bytes(s_, load_, l);
    double sum = 0;
    // A class also recomputed: the part its recompute keeps (the layer input, MLA's latents under
    // autograd), as the memory report offloads it.
    for (TensorClass c : s_.memory.offload) {
      const double x = b[static_cast<size_t>(c)];
      sum += recomputes(s_, c) ? recomputed_class_kept_bytes(s_, c, x) : x;
    }
    return sum;
  }

  void attention_core(int l, double core_per_token, double heads, double kvh, double qk, double vd, bool backward);
  // Rotary position embedding on this rank's Q and K (and, for MLA, their assembly from the up
  // projection and the shared rope part): one memory-bound pass, forward, backward or recompute.
  void rope(int l, double heads, double kvh, double qk, double vd, bool q_part, bool k_part);
  // QK-norm (Qwen3, OLMoE, GLM-4.5 with use_qk_norm, Llama 4): an RMSNorm over each head of Q and K
  // after the projections; forward reads and writes them, the backward reads input and gradient
  // and writes the gradient.
  void qk_norm(int l, double heads, double kvh, double qk, bool q_part, bool k_part);
  double norm_passes() const;  // a layer norm's forward passes over the hidden state (layers.cpp)
  // The experts' activation output (the FC2 input, routed and shared) is rebuilt in the backward:
  // always under JAX's remat (it has no checkpoint name), under autograd when moe_act is recomputed.
  bool moe_act_rebuilt() const {
    return s_.stack.remat_dispatch || has(s_.memory.recompute, TensorClass::moe_act);
  }
  // A recomputed norm's forward in the backward (autograd stacks): `norms` of them, each [t, h].
  void norm_recompute(int l, const char* block, double norms = 1.0);
  double norm_bwd_passes() const;  // and its backward's
  void residual_add(int l, const char* name);           // unfused stacks: the residual add's kernel
  void norm_backward(int l, const std::string& block);  // the norm's backward and the skip gradient's sum

  // Without grouped GEMM the experts run as a batched (or looped) GEMM of one row count: dropless
  // needs every expert padded to the busiest expert's rows.
  double padded_rows() const {
    const double e_local = d(m_.experts) / d(p_.ep);
    return std::max(load_.max_rows, e_local * load_.max_expert_rows);
  }

  // How the busiest rank runs its expert GEMMs: a ragged grouped GEMM pads each expert's rows to
  // the tile; without it, the counts go to the host first (moe.count_sync, on the critical path)
  // and one GEMM per expert runs, every expert padded to the busiest one.
  struct ExpertGemms {
    std::vector<int32_t> after;  // what the first expert GEMM waits for
    int launches = 1;
    double rows_exec = 0;        // rows computed (padding included)
    double rows_gemm = 0;        // rows of the GEMM shape (for its efficiency)
    // rows_exec pads each expert's rows to the tile (a ragged grouped GEMM): the shape's M padding
    // is in the FLOPs already (Op::m_padded); else rows_exec is what the GEMMs run, unpadded.
    bool rows_padded = false;
  };
  // `forward`: the forward pass's (a multi-stream grouped GEMM reads its row counts on the host there;
  // its backward keeps them).
  ExpertGemms expert_gemms(int l, std::vector<int32_t> after, bool forward);

  // Whether the MoE block exchanges rows between GPUs: only with expert parallelism (at EP 1 the
  // permuted rows are the experts' input as they are, and no dispatch, combine or sort runs).
  bool ep_exchanges() const { return p_.ep > 1; }

  // Rows of one micro-batch in the MoE layer: per rank average and busiest (dropless imbalance).
  // The busiest rank's exchange over the average rank's: its rows over the mean, or under a
  // de-duplicating dispatch (one row per token and rank hit) its distinct tokens over the mean.
  double exchange_imbalance() const {
    if (s_.stack.dispatcher == Dispatcher::fused_dedup && ep_exchanges() && load_.mean_tokens > 0)
      return load_.max_tokens / load_.mean_tokens;
    return load_.mean_rows > 0 ? load_.max_rows / load_.mean_rows : 1.0;
  }
  // A fused EP kernel that reads each token once and leaves the expert order to the framework,
  // which permutes the received rows after the exchange and back before the combine
  // (stack.permute_after_dispatch: Megatron's flex dispatcher with DeepEP or HybridEP).
  bool permute_after_dispatch() const {
    return s_.stack.permute_after_dispatch && s_.stack.dispatcher == Dispatcher::fused_dedup && ep_exchanges();
  }
  // Rows the busiest rank receives from a de-duplicating dispatch (one per token and rank hit, its
  // own tokens included).
  double received_rows() const { return t_sp_ * dispatch_fanout() * exchange_imbalance(); }
  // One of the flex dispatcher's row passes between the received rows and the local experts' rows
  // (permute, un-permute and their backwards), after the op before it; `weights`: it also reads or
  // writes each expert row's FP32 routing weight.
  int32_t flex_permute(const std::string& name, int layer, double bytes_per_elem, bool weights = true) {
    const double rows = load_.max_rows;
    const int32_t id = memory(name, layer, (received_rows() + rows) * d(m_.hidden) * bytes_per_elem + (weights ? rows * 4.0 : 0.0),
                              Category::memory, {last()});
    op(id).rows = rows;
    return id;
  }
  double dispatch_fanout() const {
    if (!ep_exchanges()) return m_.top_k;  // no exchange to de-duplicate: the permute writes a row per choice
    switch (s_.stack.dispatcher) {
      case Dispatcher::alltoall: return m_.top_k;
      case Dispatcher::fused_dedup: return load_.distinct_ranks;
      case Dispatcher::allgather: return d(p_.ep);
    }
    return m_.top_k;
  }

  void moe_forward(int l, const LayerForwardFlops& f);

  void moe_dispatch(int l, const std::string& permute, const std::string& dispatch, double bd);
  void local_sort(int l, const std::string& name, double bytes_per_elem, std::vector<int32_t> deps);
  void etp_collective(int l, const std::string& name, Collective c, double bytes_per_elem);

  void shared_expert(int l, const LayerForwardFlops& f, Dtype dd);
  void shared_expert_backward(int l, const LayerForwardFlops& f, Dtype dd);

  // Megatron's sequence parallelism (tp > 1): a TP-split block (attention, dense MLP, shared
  // expert) reads the whole sequence, so an all-gather of the sequence shards comes before it, and
  // gives back shards through a reduce-scatter after it; in the backward, their mirrors. Each moves
  // the block's activations (t x h in BF16; `width` h-wide columns for a wider tensor, as MTP's
  // concatenated [t, 2h] input). tp_collective emits one after the last op; with `block` the next
  // compute op waits for it, else the caller names who does. -1 when tp is 1.
  int32_t tp_collective(int l, const char* name, Collective c, bool block, double width = 1.0) {
    if (p_.tp <= 1) return -1;
    const int32_t id = comm(name, Category::tp_comm, Stream::tp_comm, l, c, Group::tp, t_ * d(m_.hidden) * width * 2.0, {last()});
    if (block) wait_before_next_compute(id);
    return id;
  }
  // The backward's mirror of a block's input gather: the column-parallel projections kept their
  // input as this rank's sequence shard, and their weight gradients need the whole sequence again
  // (Megatron's LinearWithGradAccumulationAndAsyncCommunication and Transformer Engine's Linear
  // re-gather it in the backward, overlapped with the data gradients). Before a recomputation of
  // the projections it blocks (`block`); otherwise the caller makes their backward wait for it.
  int32_t sp_input_gather(int l, bool block) { return tp_collective(l, "tp.all_gather.input", Collective::all_gather, block); }
  // Sequence-parallel reduce-scatters whose result a later op of the layer adds in (the shared
  // expert's output beside the routed experts'): that op waits for them.
  std::vector<int32_t> take_tp_outputs() { return std::exchange(tp_outputs_, {}); }

  // Backward of a forward GEMM op: data gradient and weight gradient apart.
  void gemm_bwd(const OpName& name, Category cat, int l, double flops_exec, double flops_model, Dtype dt, double m,
                double n, double k, int64_t groups = 1, int launches = 1, std::vector<int32_t> deps = {}) {
    // JAX's remat keeps what its policy names and recomputes every other residual the backward
    // needs (jax.checkpoint). The column-wise copy of a quantized GEMM's input, which the weight
    // gradient contracts (X^T dY), is a residual of the quantization with no checkpoint name, so
    // the backward runs the input's quantization again, from the kept or rebuilt input, unless the
    // GEMM itself was recomputed (its recompute quantized the input). Autograd stacks keep the
    // copies Transformer Engine saved in the forward.
    if (s_.stack.remat_dispatch && quantize_bytes_per_element(dt) > 0 &&
        !recomputed_.count({&name.str(), l, mb_})) {
      const Phase was = std::exchange(phase_, Phase::recompute);
      memory(OpName::cat(name, ".recompute.quant"), l,
             d(groups) * m * k * input_quantize_bytes(name, dt) + mla_down_quantize_bytes(name, m, quantize_bytes_per_element(dt), 0.0),
             Category::memory, std::move(deps));
      deps = {};
      phase_ = was;
    }
    gemm(OpName::cat(name, ".dgrad"), cat, l, flops_exec, flops_model, dt, m, k, n, groups, launches, deps);  // dX = dY W^T
    if (defer_wgrad_ && !deferred_.empty()) {
      deferred_.back().gemms.push_back({OpName::cat(name, ".wgrad"), cat, l, flops_exec, flops_model, dt, k, n, m, groups, launches, mb_});
      return;
    }
    gemm(OpName::cat(name, ".wgrad"), cat, l, flops_exec, flops_model, dt, k, n, m, groups, launches);        // dW = X^T dY
  }

  void backward_layer(int l);

  void moe_backward(int l, const LayerForwardFlops& f);

  // ---------------------------------------------------------------- embedding, head, optimizer
  void embedding(bool backward);

  // The output head (final norm, vocabulary projection, loss); an MTP module's head ("mtp.head")
  // shares the weights and does the same work.
  // `layer`: an MTP head's module (its input may feed the next module); -1 for the main head.
  // table_here: the same virtual stage looked the tokens up (a tied head then uses that gathered
  // table; elsewhere it gathers its own copy under FSDP).
  void head(bool backward, const std::string& name = "head", int layer = -1, bool table_here = false);

  // An MTP module's input (DeepSeek-V3): RMSNorm of the previous depth's hidden state and of the
  // next token's embedding, concatenated and projected 2H -> H (eh_proj); its layer and head follow.
  void mtp_input(int l, bool backward, bool table_here);
  double table_grad_bytes();
  // A layer's gradient reductions (data-parallel, held to the unit's end; FSDP's reduce-scatters)
  // once its weight gradients are made.
  void reduce_layer_grads(int l);

  int32_t last() const { return static_cast<int32_t>(rc_.ops.size()) - 1; }
  // The last op that is not a copy of activations to host memory: what a unit's hand-off waits
  // for (the copy runs on in the background; the next stage needs the output, not the copy).
  int32_t last_but_offload() const {
    int32_t i = last();
    while (i >= 0 && rc_.ops[static_cast<size_t>(i)].stream == Stream::offload) --i;
    return i;
  }
  Op& op(int32_t i) { return rc_.ops[static_cast<size_t>(i)]; }
  void wait_before_next_compute(int32_t i) { pending_.push_back(i); }
  // The waits no compute op has consumed yet (a blocking TP collective or the shared expert's
  // output at the end of a unit), handed to the caller and cleared.
  std::vector<int32_t> take_pending() { return std::exchange(pending_, {}); }
  // The last op on stream `s` in the current lane.
  int32_t last_on(Stream s) const {
    for (int32_t i = last(); i >= 0; --i)
      if (rc_.ops[static_cast<size_t>(i)].stream == s && rc_.ops[static_cast<size_t>(i)].lane == lane_) return i;
    return -1;
  }

  void set_micro_batch(int mb) { mb_ = mb; }
  void set_lane(uint8_t lane) { lane_ = lane; }
  // Starts a unit whose ops may not begin, on any stream, before op `gate` is done (-1: none).
  void begin_unit(int32_t gate) { begin_unit(gate >= 0 ? std::vector<int32_t>{gate} : std::vector<int32_t>{}); }
  // ... before every op of `gates` is done.
  void begin_unit(std::vector<int32_t> gates) {
    gate_ = std::move(gates);
    gated_streams_ = 0;
  }
  // Zero-bubble split (DualPipe): while on, gemm_bwd keeps each weight-gradient GEMM for later;
  // start_deferred_unit() opens the group of one backward unit, emit_deferred_unit() emits the
  // oldest group (on the current lane, with its micro-batch and phase).
  void set_defer_wgrad(bool on) { defer_wgrad_ = on; }
  void start_deferred_unit() { deferred_.push_back({{}, reduce_grads_}); }
  bool has_deferred_unit() const { return !deferred_.empty(); }
  void emit_deferred_unit() {
    if (deferred_.empty()) return;
    const DeferredUnit unit = std::move(deferred_.front());
    deferred_.erase(deferred_.begin());
    const std::vector<DeferredGemm>& group = unit.gemms;
    const bool reduce = unit.reduce;
    const int mb = mb_;
    const Phase ph = phase_;
    for (size_t i = 0; i < group.size(); ++i) {
      const DeferredGemm& g = group[i];
      mb_ = g.micro_batch;
      phase_ = Phase::backward;
      gemm(g.name, g.cat, g.layer, g.flops_exec, g.flops_model, g.dt, g.m, g.n, g.k, g.groups, g.launches);
      // The last weight gradient of a layer in the step's last backward: its reduction may start.
      // The head's and the embedding's (layer -1) are reduced with the stage's rest after the step.
      if (reduce && g.layer >= 0 && (i + 1 == group.size() || group[i + 1].layer != g.layer)) grad_reduce(g.layer, last());
    }
    mb_ = mb;
    phase_ = ph;
  }
  // The step's last backward of this chunk is being lowered: with stack.overlap.grad_reduce (and
  // no FSDP), each layer's data-parallel gradient reduction follows its weight gradients.
  void set_reduce_grads(bool on) { reduce_grads_ = on && reduces_grads_per_layer(); }
  bool reduces_grads_per_layer() const { return s_.stack.grad_reduce_overlap && !fsdp(); }
  // One layer's gradient reduction over its data-parallel replicas (dense over dense_dp, experts
  // over the expert replicas), after op `after`; the ids are kept for the optimizer step.
  void grad_reduce(int l, int32_t after) {
    if (p_.dense_grad_replicas() > 1)
      grad_reduces_.push_back(dp_grad_reduce(false, l, Group::dense_dp, dense_params(l), {after}));
    if (is_moe_layer(l) && p_.expert_reduce_replicas() > 1)
      grad_reduces_.push_back(dp_grad_reduce(true, l, Group::expert_dp, local_expert_params(l), {after}));
  }
  // A data-parallel gradient reduction of `params` parameters (the replicas' whole buffer, as
  // NCCL-tests size it) without FSDP: an all-reduce, or under ZeRO-1 (the distributed optimizer) a
  // reduce-scatter, each rank keeping the gradient of the shard it steps (Megatron's
  // param_and_grad_buffer.py: reduce_scatter_tensor when use_distributed_optimizer, else
  // all_reduce), in the gradients' dtype. `experts`: the expert replicas' (Group::expert_dp).
  int32_t dp_grad_reduce(bool experts, int l, Group g, double params, std::vector<int32_t> deps) {
    static const OpName names[2][2] = {{OpName("dp.all_reduce"), OpName("dp.all_reduce_experts")},
                                       {OpName("dp.reduce_scatter"), OpName("dp.reduce_scatter_experts")}};
    const bool z = zero1();
    return comm(names[z][experts], Category::dp_comm, Stream::fsdp_comm, l,
                z ? Collective::reduce_scatter : Collective::all_reduce, g, params * bg_, std::move(deps));
  }
  // ZeRO-1: the distributed optimizer without FSDP. Each rank steps its shard of the parameters its
  // replicas share, then the updated weights are all-gathered over the replicas, in the weights'
  // dtype (Megatron's start_param_sync; FP8 with --fp8-param-gather, the embedding and head BF16).
  // With --overlap-param-gather (stack.overlap.fsdp_prefetch; Megatron asserts it comes with
  // --overlap-grad-reduce, so both must be on) the gathers are dispatched in the next step's forward
  // and a layer's first forward waits for its own (wait_param_gathers); without it the optimizer
  // step gathers them all before it returns (after the step's optimizer op, on the critical path).
  // Megatron dispatches the first bucket's gather at the step's start and each next one from the
  // previous bucket's forward pre-hook, one bucket ahead; here all are issued at the step's start
  // in the stage's layer order on one stream (the order of first use is the schedule's, known only
  // as it is lowered), so on a stage after the first they finish in the pipeline's fill where
  // Megatron's later buckets would wait for the stage's first forward (a review put it under 1 %).
  bool zero1() const { return p_.distributed_optimizer && !fsdp(); }
  // Q, K and V in one GEMM (stack.fused_qkv): grouped-query or multi-head attention only.
  bool fused_qkv() const { return fuses_qkv(s_); }
  bool zero1_prefetch() const { return zero1() && s_.stack.fsdp_prefetch && s_.stack.grad_reduce_overlap; }
  void param_gathers(const std::vector<int>& layers, bool embedding, bool head, const std::vector<int32_t>& deps) {
    auto gather = [&](const char* name, int key, int layer, Group g, double bytes) {
      if (bytes > 0) param_gathers_[key].push_back(comm(name, Category::dp_comm, Stream::fsdp_comm, layer, Collective::all_gather, g, bytes, deps));
    };
    const ParamCounts pc = count_params(m_);
    const bool dense = p_.dense_grad_replicas() > 1;
    if (embedding && dense) gather("dp.all_gather.embed", kEmbedKey, -1, Group::dense_dp, pc.embedding / tp_ * bw_edges_);
    for (int l : layers) {
      if (dense) gather("dp.all_gather", l, l, Group::dense_dp, dense_params(l) * bw_);
      if (is_moe_layer(l) && p_.expert_reduce_replicas() > 1)
        gather("dp.all_gather_experts", l, l, Group::expert_dp, local_expert_params(l) * bw_);
    }
    if (head && dense) gather("dp.all_gather.head", kHeadKey, -1, Group::dense_dp, (pc.lm_head + d(m_.hidden)) / tp_ * bw_edges_);
  }
  // What layer l's (or kEmbedKey's, kHeadKey's) first forward waits for under prefetched ZeRO-1 gathers.
  static constexpr int kEmbedKey = -1, kHeadKey = -2;
  // The first forward that reaches them waits; later ones find them done.
  void wait_param_gathers(int key) {
    if (phase_ != Phase::forward) return;
    if (auto it = param_gathers_.find(key); it != param_gathers_.end()) {
      for (int32_t x : it->second) wait_before_next_compute(x);
      param_gathers_.erase(it);
    }
  }
  const std::vector<int32_t>& grad_reduces() const { return grad_reduces_; }
  // Emits the gradient reductions held back by backward_layer (see there).
  void flush_grad_reduces();
  bool reduce_grads() const { return reduce_grads_ && !defer_wgrad_; }
  void set_phase(Phase ph) { phase_ = ph; }

 private:
  // First op of each layer in each phase of the current micro-batch, for prefetch dependencies.
  struct LayerStarts {
    std::vector<int32_t> fwd, bwd;
    std::vector<int> order_fwd, order_bwd;  // layers in the order they ran
    void record(int l, Phase ph, int32_t op) {
      auto& v = ph == Phase::backward ? bwd : fwd;
      auto& o = ph == Phase::backward ? order_bwd : order_fwd;
      if (static_cast<size_t>(l) >= v.size()) v.resize(static_cast<size_t>(l) + 1, -1);
      v[static_cast<size_t>(l)] = op;
      o.push_back(l);
    }
    int32_t get(int l, Phase ph) const {
      const auto& v = ph == Phase::backward ? bwd : fwd;
      return static_cast<size_t>(l) < v.size() ? v[static_cast<size_t>(l)] : -1;
    }
    // The first op of the layer that ran `depth` layers before the next one in this phase.
    int32_t find_at(int, int depth, Phase ph) const {
      const auto& o = ph == Phase::backward ? order_bwd : order_fwd;
      if (static_cast<int>(o.size()) < depth) return -1;
      return get(o[o.size() - static_cast<size_t>(depth)], ph);
    }
  };

  const Scenario& s_;
  const ModelSpec& m_;
  const Parallelism& p_;
  ExpertLoad load_;
  RankClass& rc_;
  double t_ = 0, tp_ = 1, t_sp_ = 0, bw_ = 2, bw_edges_ = 2, bg_ = 2;
  int mb_ = 0;
  std::set<std::pair<const std::string*, int>> wgrad_seen_;  // (weight gradient's interned name, layer) emitted so far
  std::set<int> table_grad_mbs_;  // micro-batches whose embedding table gradient exists on this rank
  std::set<std::tuple<const std::string*, int, int>> recomputed_;  // (GEMM's interned name, layer, micro-batch) recomputed
  Phase phase_ = Phase::forward;
  uint8_t lane_ = 0;
  std::vector<int32_t> gate_;
  struct DeferredGemm {
    OpName name;
    Category cat;
    int layer;
    double flops_exec, flops_model;
    Dtype dt;
    double m, n, k;
    int64_t groups;
    int launches;
    int micro_batch;
  };
  bool defer_wgrad_ = false;
  // While on, gemm() emits expert GEMMs whose FLOPs count tile-padded rows (see Op::m_padded).
  bool padded_rows_ = false;
  bool counts_on_host_ = false;  // the layer's dispatch waited on the host for its split sizes (moe_dispatch)
  struct DeferredUnit {
    std::vector<DeferredGemm> gemms;
    bool reduce = false;  // the step's last backward of its chunk: reduce its layers' gradients after it
  };
  std::vector<DeferredUnit> deferred_;  // per deferred backward unit, oldest first
  bool reduce_grads_ = false;
  std::vector<int32_t> grad_reduces_;
  std::vector<std::pair<int, int32_t>> held_reduces_;  // (layer, its last weight-gradient op)
  unsigned gated_streams_ = 0;
  std::array<int32_t, 2> last_compute_{-1, -1};  // per lane: the buffers a gather reuses are free after it
  std::vector<int32_t> pending_;  // dependencies of the next compute op (a pipeline receive, a TP gather)
  int32_t last_norm_ = -1;        // the last forward normalization (attn.norm, mlp.norm) emitted
  std::vector<int32_t> tp_outputs_;  // see take_tp_outputs()
  std::vector<int> order_;
  size_t issued_ = 0;
  std::map<int, std::vector<int32_t>> gathers_;
  std::map<int, std::vector<int32_t>> param_gathers_;  // ZeRO-1 weight gathers by layer (kEmbedKey, kHeadKey)
  LayerStarts layer_start_;

 public:
  void reset_layer_starts() { layer_start_ = LayerStarts{}; }
};

}  // namespace moeperf::detail
