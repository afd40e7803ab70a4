// Lowering a Scenario into the ops of one training step, per pipeline stage.
#include "model/step.h"

#include "model/topology.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "model/flops.h"

namespace moeperf {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

bool has(const std::vector<TensorClass>& v, TensorClass c) { return std::find(v.begin(), v.end(), c) != v.end(); }

// Builds one rank class's op list in program order.
class Lowering {
 public:
  Lowering(const Scenario& s, const ExpertLoad& load, RankClass& rc)
      : s_(s), m_(s.model), p_(s.parallelism), load_(load), rc_(rc) {
    t_ = d(s.batch.micro_batch * s.batch.seq_len) / d(p_.cp);
    tp_ = d(p_.tp);
    t_sp_ = t_ / tp_;
    bw_ = bytes_per_element(s.precision.weights);
    bg_ = bytes_per_element(s.precision.grads);
  }

  // ---------------------------------------------------------------- emitters
  int32_t emit(Op op) {
    op.micro_batch = mb_;
    if (op.stream == Stream::compute && !pending_.empty()) {
      op.deps.insert(op.deps.end(), pending_.begin(), pending_.end());
      pending_.clear();
    }
    op.phase = op.phase == Phase::forward ? phase_ : op.phase;
    op.lane = lane_;
    // The first op of each stream in a gated unit waits for the gate (see begin_unit).
    if (gate_ >= 0 && !(gated_streams_ & (1u << static_cast<unsigned>(op.stream)))) {
      op.deps.push_back(gate_);
      gated_streams_ |= 1u << static_cast<unsigned>(op.stream);
    }
    rc_.ops.push_back(std::move(op));
    return static_cast<int32_t>(rc_.ops.size() - 1);
  }

  int32_t gemm(std::string name, Category cat, int layer, double flops_exec, double flops_model, Dtype dt, double m,
               double n, double k, int64_t groups = 1, int launches = 1, std::vector<int32_t> deps = {}) {
    // A low-precision GEMM first quantizes its operands in a kernel of its own (row- and column-wise
    // copies of A and B); the weight-gradient GEMM reuses the column-wise copies made for the
    // forward/recompute and the dgrad. The weights' copies from the forward serve the recompute and
    // the dgrad unless FSDP gathers the weights again (in BF16) for the backward. Expert rows that
    // arrive in the GEMM's format (an MXFP8 dispatch) only need their column-wise copy.
    auto ends = [&](const char* sfx) {
      const size_t l = std::char_traits<char>::length(sfx);
      return name.size() >= l && name.compare(name.size() - l, l, sfx) == 0;
    };
    if (const double q = quantize_bytes_per_element(dt); q > 0 && !ends(".wgrad")) {
      const bool again = ends(".dgrad") || ends(".recompute");
      const double qb = again && !fsdp() ? 0.0 : q;
      const bool arrives_quantized =
          (name == "moe.expert_fc1" || name == "moe.expert_fc1.recompute") && s_.precision.dispatch == dt;
      const double qa = arrives_quantized ? 2.0 * bytes_per_element(dt) : q;
      memory(name + ".quant", layer, d(groups) * (qa * m * k + qb * k * n), Category::memory, std::move(deps));
      deps = {};
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
    // Reads A (m x k per group) and B (k x n per group), writes C (m x n) in BF16.
    const double in = bytes_per_element(dt);
    op.hbm_bytes = Bytes(d(groups) * (m * k * in + k * n * in + m * n * 2.0));
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  int32_t memory(std::string name, int layer, double bytes, Category cat = Category::memory,
                 std::vector<int32_t> deps = {}) {
    Op op;
    op.name = std::move(name);
    op.category = cat;
    op.layer = layer;
    op.hbm_bytes = Bytes(bytes);
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  int32_t comm(std::string name, Category cat, Stream stream, int layer, Collective c, Group g, double bytes,
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
    op.deps = std::move(deps);
    return emit(std::move(op));
  }

  // ---------------------------------------------------------------- parameters of a layer
  // Non-expert weights of layer l on this rank (TP-split), expert weights of this rank's experts.
  double dense_params(int l) const { return layer_params(m_, l).dense / tp_; }
  double local_expert_params(int l) const { return layer_params(m_, l).routed_experts / d(p_.ep); }
  bool is_moe_layer(int l) const { return m_.is_moe() && l >= m_.dense_layers; }
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
    const std::string sfx = phase_ == Phase::backward ? ".bwd" : "";
    while (issued_ < order_.size() && issued_ <= pos + depth) {
      const int j = order_[issued_++];
      std::vector<int32_t> deps;
      if (last_compute_[lane_] >= 0) deps.push_back(last_compute_[lane_]);
      auto& ids = gathers_[j];
      ids.push_back(comm("fsdp.all_gather" + sfx, Category::fsdp_comm, Stream::fsdp_comm, j, Collective::all_gather,
                         Group::dense_shard, dense_params(j) * bw_, deps));
      if (is_moe_layer(j))
        ids.push_back(comm("fsdp.all_gather_experts" + sfx, Category::fsdp_comm, Stream::fsdp_comm, j,
                           Collective::all_gather, Group::fsdp, local_expert_params(j) * bw_, deps));
    }
  }

  std::vector<int32_t> gather_deps(int l) const {
    auto it = gathers_.find(l);
    return it == gathers_.end() ? std::vector<int32_t>{} : it->second;
  }

  void forward_layer(int l) {
    issue_gathers(l);
    const LayerForwardFlops f = layer_forward_flops(m_, l, s_.batch.seq_len);
    const AttentionSpec& a = m_.attention;
    const Dtype dd = s_.precision.dense_gemm;
    const double h = d(m_.hidden);
    const double heads = a.heads / tp_;
    const double qk = a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
    const double vd = a.kind == AttentionKind::mla ? a.v_head_dim : a.head_dim;
    const double kvh = a.kind == AttentionKind::mla ? heads : std::max(1.0, a.kv_heads / tp_);
    auto first = memory("attn.norm", l, 3.0 * t_sp_ * h * 2.0, Category::memory, gather_deps(l));
    layer_start_.record(l, phase_, first);
    if (p_.tp > 1) comm("tp.all_gather", Category::tp_comm, Stream::tp_comm, l, Collective::all_gather, Group::tp, t_ * h * 2.0, {first});
    gemm("attn.q_proj", Category::gemm, l, t_ * f.q_proj / tp_, t_ * f.q_proj / tp_, dd, t_, heads * qk,
         a.kind == AttentionKind::mla && a.q_lora_rank > 0 ? a.q_lora_rank : h);
    gemm("attn.kv_proj", Category::gemm, l, t_ * f.kv_proj / tp_, t_ * f.kv_proj / tp_, dd, t_, kvh * (qk + vd),
         a.kind == AttentionKind::mla ? a.kv_lora_rank : h);
    if (p_.cp > 1)
      comm("cp.all_gather", Category::tp_comm, Stream::tp_comm, l, Collective::all_gather, Group::cp,
           t_ * d(p_.cp) * kvh * (qk + vd) * 2.0, {last()});
    attention_core(l, f.core, heads, kvh, qk, vd, false);
    gemm("attn.out_proj", Category::gemm, l, t_ * f.out_proj / tp_, t_ * f.out_proj / tp_, dd, t_, h, heads * vd);
    if (p_.tp > 1) comm("tp.reduce_scatter", Category::tp_comm, Stream::tp_comm, l, Collective::reduce_scatter, Group::tp, t_ * h * 2.0, {last()});
    memory("mlp.norm", l, 3.0 * t_sp_ * h * 2.0);
    if (!is_moe_layer(l)) {
      const double ffn = d(m_.dense_ffn);
      gemm("mlp.fc1", Category::gemm, l, t_ * f.dense_ffn * 2 / 3 / tp_, t_ * f.dense_ffn * 2 / 3 / tp_, dd, t_, 2 * ffn / tp_, h);
      memory("mlp.act", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
      gemm("mlp.fc2", Category::gemm, l, t_ * f.dense_ffn / 3 / tp_, t_ * f.dense_ffn / 3 / tp_, dd, t_, h, ffn / tp_);
    } else {
      moe_forward(l, f);
    }
    last_compute_[lane_] = last_on(Stream::compute);
    // Offload: the layer's offloaded activations go to host memory once the layer is done.
    if (const double b = offloaded_bytes(l); b > 0)
      comm("offload.d2h", Category::offload, Stream::offload, l, Collective::d2h, Group::none, b, {last_compute_[lane_]});
  }

  double offloaded_bytes(int l) const {
    const auto b = saved_tensor_bytes(s_, load_, l);
    double sum = 0;
    for (TensorClass c : s_.memory.offload)
      if (!has(s_.memory.recompute, c)) sum += b[static_cast<size_t>(c)];
    return sum;
  }

  void attention_core(int l, double core_per_token, double heads, double kvh, double qk, double vd, bool backward) {
    const double fwd = t_ * core_per_token / tp_;
    // Flash attention reads Q, K, V and writes O (+ LSE); the backward also reads O, dO and writes dQ, dK, dV,
    // and recomputes the scores (2.5 x the forward matmul work executed, 2 x counted).
    const double io = t_ * (heads * qk + kvh * (qk + vd) + heads * vd) * 2.0;
    Op op;
    const bool recompute = phase_ == Phase::recompute;
    op.name = backward ? "attn.core.bwd" : recompute ? "attn.core.recompute" : "attn.core";
    op.category = Category::attention;
    op.layer = l;
    op.flops = Flops(backward ? 2.5 * fwd : fwd);
    op.model_flops = Flops(recompute ? 0.0 : backward ? 2.0 * fwd : fwd);
    op.hbm_bytes = Bytes(backward ? 2.5 * io : io);
    op.dtype = Dtype::bf16;
    emit(std::move(op));
  }

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
  };
  ExpertGemms expert_gemms(int l, std::vector<int32_t> after) {
    ExpertGemms g{std::move(after), 1, load_.max_rank_tile_rows, load_.max_rows};
    if (s_.stack.grouped_gemm) return g;
    Op sync;
    sync.name = "moe.count_sync";
    sync.category = Category::sync;
    sync.layer = l;
    sync.deps = g.after;
    g.after = {emit(std::move(sync))};
    g.launches = static_cast<int>(d(m_.experts) / d(p_.ep));
    g.rows_exec = g.rows_gemm = padded_rows();
    return g;
  }

  // Rows of one micro-batch in the MoE layer: per rank average and busiest (dropless imbalance).
  double dispatch_fanout() const {
    switch (s_.stack.dispatcher) {
      case Dispatcher::alltoall: return m_.top_k;
      case Dispatcher::fused_dedup: return load_.distinct_ranks;
      case Dispatcher::allgather: return d(p_.ep);
    }
    return m_.top_k;
  }

  void moe_forward(int l, const LayerForwardFlops& f) {
    const double h = d(m_.hidden), ffn = d(m_.expert_ffn), e_local = d(m_.experts) / d(p_.ep);
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
    const ExpertGemms eg = expert_gemms(l, {dispatched});
    std::vector<int32_t> after = eg.after;
    const int launches = eg.launches;
    const double rows_exec = eg.rows_exec, rows_gemm = eg.rows_gemm;
    const double rows_mean = load_.mean_rows, rows_max = load_.max_rows;
    const double fc1_w = 2.0 * h * 2.0 * ffn, fc2_w = 2.0 * ffn * h;  // FLOPs per row
    const int32_t fc1 = gemm("moe.expert_fc1", Category::gemm, l, rows_exec * fc1_w, rows_mean * fc1_w, de,
                             rows_gemm / e_local, 2 * ffn, h, static_cast<int64_t>(e_local), launches, after);
    (void)fc1;
    memory("moe.act", l, rows_max * (2 * ffn * 2.0 + ffn * bytes_per_element(de == Dtype::bf16 ? Dtype::bf16 : de)));
    gemm("moe.expert_fc2", Category::gemm, l, rows_exec * fc2_w, rows_mean * fc2_w, de, rows_gemm / e_local, h, ffn,
         static_cast<int64_t>(e_local), launches);
    const double fan = dispatch_fanout();
    if (s_.stack.dispatcher == Dispatcher::allgather) {
      comm("moe.combine", Category::ep_comm, Stream::ep_comm, l, Collective::reduce_scatter, Group::ep,
           r * t_sp_ * h * bc, {last()});
    } else {
      const double send = t_sp_ * fan * h * bc * (r - 1) / r;
      comm("moe.combine", Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep,
           send * rows_max / rows_mean, {last()}, send, fan);
    }
    const int32_t combined = last();
    memory("moe.unpermute", l, t_sp_ * (fan * h * bc + h * 4.0 + h * 2.0), Category::memory, {combined});
    if (!overlap_shared) shared_expert(l, f, dd);
  }

  void moe_dispatch(int l, const std::string& permute, const std::string& dispatch, double bd) {
    const double h = d(m_.hidden), r = d(p_.ep);
    const double fan = dispatch_fanout();
    if (s_.stack.dispatcher == Dispatcher::allgather) {
      // Every rank gathers every token of its EP group, then keeps the rows for its own experts.
      const int32_t g = comm(dispatch, Category::ep_comm, Stream::ep_comm, l, Collective::all_gather, Group::ep,
                             r * t_sp_ * h * bd, {last()});
      memory(permute, l, r * t_sp_ * h * bd + load_.max_rows * h * bd, Category::memory, {g});
      return;
    }
    // Permute: read the tokens, write one row per destination (quantized to the dispatch dtype).
    memory(permute, l, t_sp_ * h * 2.0 + t_sp_ * fan * h * bd);
    const double send = t_sp_ * fan * h * bd * (r - 1) / r;
    comm(dispatch, Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep, send, {last()},
         send * load_.max_rows / load_.mean_rows, fan);
  }

  void shared_expert(int l, const LayerForwardFlops& f, Dtype dd) {
    if (m_.shared_experts == 0) return;
    const double h = d(m_.hidden), ffn = d(m_.expert_ffn) * m_.shared_experts;
    gemm("moe.shared_fc1", Category::gemm, l, t_ * f.shared_experts * 2 / 3 / tp_, t_ * f.shared_experts * 2 / 3 / tp_, dd,
         t_, 2 * ffn / tp_, h);
    memory("moe.shared_act", l, t_ * (2 * ffn / tp_ * 2.0 + ffn / tp_ * 2.0));
    gemm("moe.shared_fc2", Category::gemm, l, t_ * f.shared_experts / 3 / tp_, t_ * f.shared_experts / 3 / tp_, dd, t_,
         h, ffn / tp_);
  }

  // Backward of a forward GEMM op: data gradient and weight gradient apart.
  void gemm_bwd(const std::string& name, Category cat, int l, double flops_exec, double flops_model, Dtype dt, double m,
                double n, double k, int64_t groups = 1, int launches = 1, std::vector<int32_t> deps = {}) {
    gemm(name + ".dgrad", cat, l, flops_exec, flops_model, dt, m, k, n, groups, launches, deps);  // dX = dY W^T
    gemm(name + ".wgrad", cat, l, flops_exec, flops_model, dt, k, n, m, groups, launches);        // dW = X^T dY
  }

  void backward_layer(int l) {
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
    const int32_t first = memory("mlp.norm.bwd", l, 4.0 * t_sp_ * h * 2.0, Category::memory, first_deps);
    layer_start_.record(l, phase_, first);
    if (!is_moe_layer(l)) {
      const double ffn = d(m_.dense_ffn);
      if (has(s_.memory.recompute, TensorClass::mlp)) {
        phase_ = Phase::recompute;
        gemm("mlp.fc1.recompute", Category::gemm, l, t_ * f.dense_ffn * 2 / 3 / tp_, 0, dd, t_, 2 * ffn / tp_, h);
        phase_ = Phase::backward;
      }
      gemm_bwd("mlp.fc2", Category::gemm, l, t_ * f.dense_ffn / 3 / tp_, t_ * f.dense_ffn / 3 / tp_, dd, t_, h, ffn / tp_);
      memory("mlp.act.bwd", l, t_ * (2 * ffn / tp_ * 2.0 * 2 + ffn / tp_ * 2.0));
      gemm_bwd("mlp.fc1", Category::gemm, l, t_ * f.dense_ffn * 2 / 3 / tp_, t_ * f.dense_ffn * 2 / 3 / tp_, dd, t_,
               2 * ffn / tp_, h);
    } else {
      moe_backward(l, f);
    }
    if (p_.tp > 1) comm("tp.all_gather.bwd", Category::tp_comm, Stream::tp_comm, l, Collective::all_gather, Group::tp, t_ * h * 2.0, {last()});
    // Attention: recompute the projections the policy did not keep, then the backward.
    phase_ = Phase::recompute;
    if (has(s_.memory.recompute, TensorClass::q_proj))
      gemm("attn.q_proj.recompute", Category::gemm, l, t_ * f.q_proj / tp_, 0, dd, t_, heads * qk,
           a.kind == AttentionKind::mla && a.q_lora_rank > 0 ? a.q_lora_rank : h);
    if (has(s_.memory.recompute, TensorClass::kv_proj))
      gemm("attn.kv_proj.recompute", Category::gemm, l, t_ * f.kv_proj / tp_, 0, dd, t_, kvh * (qk + vd),
           a.kind == AttentionKind::mla ? a.kv_lora_rank : h);
    if (has(s_.memory.recompute, TensorClass::attn_out)) attention_core(l, f.core, heads, kvh, qk, vd, false);
    if (has(s_.memory.recompute, TensorClass::out_proj))
      gemm("attn.out_proj.recompute", Category::gemm, l, t_ * f.out_proj / tp_, 0, dd, t_, h, heads * vd);
    phase_ = Phase::backward;
    gemm_bwd("attn.out_proj", Category::gemm, l, t_ * f.out_proj / tp_, t_ * f.out_proj / tp_, dd, t_, h, heads * vd);
    attention_core(l, f.core, heads, kvh, qk, vd, true);
    if (p_.cp > 1)
      comm("cp.reduce_scatter", Category::tp_comm, Stream::tp_comm, l, Collective::reduce_scatter, Group::cp,
           t_ * d(p_.cp) * kvh * (qk + vd) * 2.0, {last()});
    gemm_bwd("attn.kv_proj", Category::gemm, l, t_ * f.kv_proj / tp_, t_ * f.kv_proj / tp_, dd, t_, kvh * (qk + vd),
             a.kind == AttentionKind::mla ? a.kv_lora_rank : h);
    gemm_bwd("attn.q_proj", Category::gemm, l, t_ * f.q_proj / tp_, t_ * f.q_proj / tp_, dd, t_, heads * qk,
             a.kind == AttentionKind::mla && a.q_lora_rank > 0 ? a.q_lora_rank : h);
    if (p_.tp > 1) comm("tp.reduce_scatter.bwd", Category::tp_comm, Stream::tp_comm, l, Collective::reduce_scatter, Group::tp, t_ * h * 2.0, {last()});
    memory("attn.norm.bwd", l, 4.0 * t_sp_ * h * 2.0);
    const int32_t wgrads_done = last();
    if (fsdp()) {
      comm("fsdp.reduce_scatter", Category::fsdp_comm, Stream::fsdp_comm, l, Collective::reduce_scatter,
           Group::dense_shard, dense_params(l) * bg_, {wgrads_done});
      if (is_moe_layer(l))
        comm("fsdp.reduce_scatter_experts", Category::fsdp_comm, Stream::fsdp_comm, l, Collective::reduce_scatter,
             Group::fsdp, local_expert_params(l) * bg_, {wgrads_done});
    }
    last_compute_[lane_] = last_on(Stream::compute);
  }

  void moe_backward(int l, const LayerForwardFlops& f) {
    const double h = d(m_.hidden), ffn = d(m_.expert_ffn), e_local = d(m_.experts) / d(p_.ep), r = d(p_.ep);
    const Dtype de = s_.precision.expert_gemm, dd = s_.precision.dense_gemm;
    const double bg = 2.0;  // gradients travel in BF16
    if (!s_.stack.a2a_with_shared_expert) {
      gemm_bwd("moe.shared_fc2", Category::gemm, l, t_ * f.shared_experts / 3 / tp_, t_ * f.shared_experts / 3 / tp_, dd,
               t_, h, d(m_.expert_ffn) * m_.shared_experts / tp_);
      gemm_bwd("moe.shared_fc1", Category::gemm, l, t_ * f.shared_experts * 2 / 3 / tp_,
               t_ * f.shared_experts * 2 / 3 / tp_, dd, t_, 2 * d(m_.expert_ffn) * m_.shared_experts / tp_, h);
    }
    // The expert input rows are not a checkpoint: rebuild them (permute + dispatch) as JAX's remat does.
    phase_ = Phase::recompute;
    moe_dispatch(l, "moe.permute.recompute", "moe.dispatch.recompute", bytes_per_element(s_.precision.dispatch));
    const int32_t redispatched = last();
    phase_ = Phase::backward;
    const double fan = dispatch_fanout();
    memory("moe.unpermute.bwd", l, t_sp_ * (h * 2.0 + fan * h * bg));
    int32_t cb;
    if (s_.stack.dispatcher == Dispatcher::allgather) {
      cb = comm("moe.combine.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::all_gather, Group::ep,
                r * t_sp_ * h * bg, {last()});
    } else {
      const double send = t_sp_ * fan * h * bg * (r - 1) / r;
      cb = comm("moe.combine.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep, send,
                {last()}, send * load_.max_rows / load_.mean_rows, fan);
    }
    const ExpertGemms eg = expert_gemms(l, {cb, redispatched});
    std::vector<int32_t> after = eg.after;
    const int launches = eg.launches;
    const double rows_exec = eg.rows_exec, rows_gemm = eg.rows_gemm;
    const double rows_mean = load_.mean_rows, rows_max = load_.max_rows;
    const double fc1_w = 2.0 * h * 2.0 * ffn, fc2_w = 2.0 * ffn * h;
    if (has(s_.memory.recompute, TensorClass::moe_mlpwi)) {
      phase_ = Phase::recompute;
      after = {gemm("moe.expert_fc1.recompute", Category::gemm, l, rows_exec * fc1_w, 0, de, rows_gemm / e_local, 2 * ffn,
                    h, static_cast<int64_t>(e_local), launches, after)};
      phase_ = Phase::backward;
    }
    // The FC2 input (activation output) is rebuilt from the saved FC1 outputs by the act kernel.
    memory("moe.act.recompute", l, rows_max * (2 * ffn * 2.0 + ffn * 2.0), Category::memory, after);
    if (has(s_.memory.recompute, TensorClass::moe_mlpwo)) {
      phase_ = Phase::recompute;
      gemm("moe.expert_fc2.recompute", Category::gemm, l, rows_exec * fc2_w, 0, de, rows_gemm / e_local, h, ffn,
           static_cast<int64_t>(e_local), launches);
      phase_ = Phase::backward;
    }
    gemm_bwd("moe.expert_fc2", Category::gemm, l, rows_exec * fc2_w, rows_mean * fc2_w, de, rows_gemm / e_local, h, ffn,
             static_cast<int64_t>(e_local), launches);
    memory("moe.act.bwd", l, rows_max * (2 * ffn * 2.0 * 2 + ffn * 2.0));
    gemm_bwd("moe.expert_fc1", Category::gemm, l, rows_exec * fc1_w, rows_mean * fc1_w, de, rows_gemm / e_local, 2 * ffn,
             h, static_cast<int64_t>(e_local), launches);
    const double bd = bg;
    if (s_.stack.dispatcher == Dispatcher::allgather) {
      comm("moe.dispatch.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::reduce_scatter, Group::ep,
           r * t_sp_ * h * bd, {last()});
    } else {
      const double send = t_sp_ * fan * h * bd * (r - 1) / r;
      comm("moe.dispatch.bwd", Category::ep_comm, Stream::ep_comm, l, Collective::all_to_all, Group::ep,
           send * load_.max_rows / load_.mean_rows, {last()}, send, fan);
    }
    memory("moe.permute.bwd", l, t_sp_ * (fan * h * bd + h * 4.0), Category::memory, {last()});
    gemm_bwd("moe.router", Category::gemm, l, t_sp_ * f.router, t_sp_ * f.router, Dtype::bf16, t_sp_, d(m_.experts), h);
    if (s_.stack.a2a_with_shared_expert) {
      gemm_bwd("moe.shared_fc2", Category::gemm, l, t_ * f.shared_experts / 3 / tp_, t_ * f.shared_experts / 3 / tp_, dd,
               t_, h, d(m_.expert_ffn) * m_.shared_experts / tp_);
      gemm_bwd("moe.shared_fc1", Category::gemm, l, t_ * f.shared_experts * 2 / 3 / tp_,
               t_ * f.shared_experts * 2 / 3 / tp_, dd, t_, 2 * d(m_.expert_ffn) * m_.shared_experts / tp_, h);
    }
  }

  // ---------------------------------------------------------------- embedding, head, optimizer
  void embedding(bool backward) {
    const double h = d(m_.hidden);
    memory(backward ? "embed.lookup.bwd" : "embed.lookup", -1, t_sp_ * h * 2.0 * 2.0);
  }

  // The output head (final norm, vocabulary projection, loss); an MTP module's head ("mtp.head")
  // shares the weights and does the same work.
  void head(bool backward, const std::string& name = "head") {
    const double h = d(m_.hidden), v = d(m_.vocab);
    const double f = t_ * lm_head_forward_flops(m_) / tp_;
    if (!backward) {
      memory(name + ".norm", -1, 3.0 * t_sp_ * h * 2.0);
      gemm(name + ".proj", Category::gemm, -1, f, f, Dtype::bf16, t_, v / tp_, h);
      memory(name + ".loss", -1, t_ * v / tp_ * (2.0 + 4.0));  // logits in, FP32 softmax statistics
    } else {
      memory(name + ".loss.bwd", -1, t_ * v / tp_ * (2.0 + 2.0));
      gemm_bwd(name + ".proj", Category::gemm, -1, f, f, Dtype::bf16, t_, v / tp_, h);
      memory(name + ".norm.bwd", -1, 4.0 * t_sp_ * h * 2.0);
    }
  }

  // An MTP module's input (DeepSeek-V3): RMSNorm of the previous depth's hidden state and of the
  // next token's embedding, concatenated and projected 2H -> H (eh_proj); its layer and head follow.
  void mtp_input(int l, bool backward) {
    const double h = d(m_.hidden);
    const double f = t_ * 2.0 * 2.0 * h * h / tp_;
    if (!backward) {
      memory("mtp.embed.lookup", l, t_sp_ * h * 2.0 * 2.0);  // the next tokens' embeddings
      memory("mtp.norm", l, 2.0 * 3.0 * t_sp_ * h * 2.0);
      gemm("mtp.proj", Category::gemm, l, f, f, s_.precision.dense_gemm, t_, h / tp_, 2.0 * h);
    } else {
      gemm_bwd("mtp.proj", Category::gemm, l, f, f, s_.precision.dense_gemm, t_, h / tp_, 2.0 * h);
      memory("mtp.norm.bwd", l, 2.0 * 4.0 * t_sp_ * h * 2.0);
      memory("mtp.embed.lookup.bwd", l, t_sp_ * h * 2.0 * 2.0);
    }
  }

  int32_t last() const { return static_cast<int32_t>(rc_.ops.size()) - 1; }
  Op& op(int32_t i) { return rc_.ops[static_cast<size_t>(i)]; }
  void wait_before_next_compute(int32_t i) { pending_.push_back(i); }
  // The last op on stream `s` in the current lane.
  int32_t last_on(Stream s) const {
    for (int32_t i = last(); i >= 0; --i)
      if (rc_.ops[static_cast<size_t>(i)].stream == s && rc_.ops[static_cast<size_t>(i)].lane == lane_) return i;
    return -1;
  }

  void set_micro_batch(int mb) { mb_ = mb; }
  void set_lane(uint8_t lane) { lane_ = lane; }
  // Starts a unit whose ops may not begin, on any stream, before op `gate` is done (-1: none).
  void begin_unit(int32_t gate) {
    gate_ = gate;
    gated_streams_ = 0;
  }
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
  double t_ = 0, tp_ = 1, t_sp_ = 0, bw_ = 2, bg_ = 2;
  int mb_ = 0;
  Phase phase_ = Phase::forward;
  uint8_t lane_ = 0;
  int32_t gate_ = -1;
  unsigned gated_streams_ = 0;
  std::array<int32_t, 2> last_compute_{-1, -1};  // per lane: the buffers a gather reuses are free after it
  std::vector<int32_t> pending_;  // dependencies of the next compute op (a pipeline receive)
  std::vector<int> order_;
  size_t issued_ = 0;
  std::map<int, std::vector<int32_t>> gathers_;
  LayerStarts layer_start_;

 public:
  void reset_layer_starts() { layer_start_ = LayerStarts{}; }
};

}  // namespace

std::array<double, kTensorClassCount> saved_tensor_bytes(const Scenario& s, const ExpertLoad& load, int l) {
  const ModelSpec& m = s.model;
  const AttentionSpec& a = m.attention;
  const Parallelism& p = s.parallelism;
  const double t = d(s.batch.micro_batch * s.batch.seq_len) / d(p.cp), tp = d(p.tp), t_sp = t / tp, h = d(m.hidden);
  const double heads = a.heads / tp;
  const double qk = a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const double vd = a.kind == AttentionKind::mla ? a.v_head_dim : a.head_dim;
  const double kvh = a.kind == AttentionKind::mla ? heads : std::max(1.0, a.kv_heads / tp);
  std::array<double, kTensorClassCount> b{};
  auto at = [&](TensorClass c) -> double& { return b[static_cast<size_t>(c)]; };
  at(TensorClass::norm) = t_sp * h * 2.0;  // decoder_layer_input
  at(TensorClass::q_proj) = t * ((a.kind == AttentionKind::mla ? a.q_lora_rank : 0) + heads * qk) * 2.0;
  at(TensorClass::kv_proj) =
      t * ((a.kind == AttentionKind::mla ? a.kv_lora_rank + a.qk_rope_head_dim : 0) + kvh * (qk + vd)) * 2.0;
  at(TensorClass::attn_out) = t * heads * (vd * 2.0 + 4.0);  // context + FP32 log-sum-exp
  at(TensorClass::out_proj) = t_sp * h * 2.0;
  if (m.is_moe() && l >= m.dense_layers) {
    at(TensorClass::router) = t_sp * m.experts * 4.0;
    const double shared = d(m.expert_ffn) * m.shared_experts / tp;
    at(TensorClass::moe_mlpwi) = load.max_rows * 2.0 * d(m.expert_ffn) * 2.0 + t * 2.0 * shared * 2.0;
    at(TensorClass::moe_mlpwo) = t_sp * h * 2.0;  // the combined expert output, one row per token
  } else {
    at(TensorClass::mlp) = t * 2.0 * d(m.dense_ffn) / tp * 2.0 + t_sp * h * 2.0;  // mlpwi + mlpwo
  }
  return b;
}


int pipeline_chunks(const Scenario& s) {
  if (s.parallelism.pp == 1) return 1;
  switch (s.parallelism.schedule) {
    case PipelineSchedule::interleaved: return static_cast<int>(s.parallelism.vpp);
    case PipelineSchedule::dualpipe: return 2;
    case PipelineSchedule::one_f_one_b: return 1;
  }
  return 1;
}

int virtual_stage(const Scenario& s, int stage, int chunk) {
  const int pp = static_cast<int>(s.parallelism.pp);
  if (s.parallelism.schedule == PipelineSchedule::dualpipe && pp > 1) return chunk == 0 ? stage : 2 * pp - 1 - stage;
  return chunk * pp + stage;
}

int stage_of_virtual(const Scenario& s, int v) {
  const int pp = static_cast<int>(s.parallelism.pp);
  if (s.parallelism.schedule == PipelineSchedule::dualpipe && pp > 1) return v < pp ? v : 2 * pp - 1 - v;
  return v % pp;
}

int chunk_of_virtual(const Scenario& s, int v) { return v / static_cast<int>(s.parallelism.pp); }

std::vector<int> virtual_stage_layers(const Scenario& s, int v) {
  const int vstages = static_cast<int>(s.parallelism.pp) * pipeline_chunks(s);
  std::vector<int> out;
  for (int l = 0; l < s.model.layers; ++l)
    if (static_cast<int>(static_cast<int64_t>(l) * vstages / s.model.layers) == v) out.push_back(l);
  // Trained MTP modules follow the last layer on the last virtual stage, numbered layers, layers + 1, ...
  if (s.train_mtp && v == vstages - 1)
    for (int j = 0; j < s.model.mtp_layers; ++j) out.push_back(s.model.layers + j);
  return out;
}

std::vector<int> stage_layers(const Scenario& s, int stage) {
  std::vector<int> out;
  for (int c = 0; c < pipeline_chunks(s); ++c)
    for (int l : virtual_stage_layers(s, virtual_stage(s, stage, c))) out.push_back(l);
  std::sort(out.begin(), out.end());
  return out;
}

const char* to_string(Category c) {
  switch (c) {
    case Category::gemm: return "gemm";
    case Category::attention: return "attention";
    case Category::memory: return "memory_bound";
    case Category::ep_comm: return "ep_comm";
    case Category::fsdp_comm: return "fsdp_comm";
    case Category::dp_comm: return "dp_comm";
    case Category::tp_comm: return "tp_comm";
    case Category::pp_comm: return "pp_comm";
    case Category::offload: return "offload";
    case Category::sync: return "host_sync";
    case Category::optimizer: return "optimizer";
    case Category::kCount: break;
  }
  return "?";
}

bool is_communication(Category c) {
  return c == Category::ep_comm || c == Category::fsdp_comm || c == Category::dp_comm || c == Category::tp_comm ||
         c == Category::pp_comm || c == Category::offload;
}

const char* to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::ep_comm: return "ep_comm";
    case Stream::fsdp_comm: return "fsdp_dp_comm";
    case Stream::tp_comm: return "tp_comm";
    case Stream::pp_comm: return "pp_comm";
    case Stream::offload: return "offload";
    case Stream::kCount: break;
  }
  return "?";
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::none: return "none";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
    case Collective::d2h: return "d2h";
    case Collective::h2d: return "h2d";
  }
  return "?";
}

const char* to_string(Group g) {
  switch (g) {
    case Group::none: return "none";
    case Group::tp: return "tp";
    case Group::cp: return "cp";
    case Group::ep: return "ep";
    case Group::fsdp: return "fsdp";
    case Group::dense_shard: return "ep_x_fsdp";
    case Group::dp: return "dp";
    case Group::dense_dp: return "ep_x_dp";
    case Group::pp: return "pp";
  }
  return "?";
}

bool holds_mtp_embedding(const Scenario& s, int stage) {
  if (!s.train_mtp || s.model.mtp_layers == 0) return false;
  const int vstages = static_cast<int>(s.parallelism.pp) * pipeline_chunks(s);
  return stage_of_virtual(s, vstages - 1) == stage;
}

void place_stragglers(Scenario& s) {
  const int64_t per = job_gpus_per_domain(s.system, s.gpus);
  for (Straggler& x : s.stragglers)
    if (x.rack >= 0) {
      x.gpu = x.rack * per;
      x.count = std::max<int64_t>(0, std::min(per, s.gpus - x.gpu));
    }
}

std::string straggler_problem(const Scenario& s, size_t* index) {
  const int64_t pp = s.parallelism.pp;
  if (pp < 1 || s.gpus % pp != 0) return "";  // the mesh check reports this
  const int64_t stage = s.gpus / pp;
  std::map<int64_t, int64_t> slow;  // stage -> straggler GPUs in it
  for (size_t i = 0; i < s.stragglers.size(); ++i) {
    const Straggler& x = s.stragglers[i];
    if (index) *index = i;
    const std::string what = x.rack >= 0 ? "rack " + std::to_string(x.rack) : "GPU " + std::to_string(x.gpu);
    if (x.count < 1 || x.gpu + x.count > s.gpus)
      return what + " is not in this " + std::to_string(s.gpus) + "-GPU job";
    if (x.gpu / stage != (x.gpu + x.count - 1) / stage)
      return what + " (GPUs " + std::to_string(x.gpu) + "-" + std::to_string(x.gpu + x.count - 1) +
             ") spans two pipeline stages of " + std::to_string(stage) + " GPUs; a straggler must lie inside one";
    for (size_t j = 0; j < i; ++j) {
      const Straggler& o = s.stragglers[j];
      if (x.gpu < o.gpu + o.count && o.gpu < x.gpu + x.count)
        return "GPUs " + std::to_string(x.gpu) + "-" + std::to_string(x.gpu + x.count - 1) + " overlap an earlier entry's " +
               std::to_string(o.gpu) + "-" + std::to_string(o.gpu + o.count - 1) + "; stragglers must not overlap";
    }
    if ((slow[x.gpu / stage] += x.count) >= stage)
      return "every GPU of pipeline stage " + std::to_string(x.gpu / stage) + " (" + std::to_string(stage) +
             " GPUs) would be a straggler: nobody is left to be slower than";
  }
  return "";
}

StepGraph lower_step(const Scenario& s, const ExpertLoad& load) {
  StepGraph g;
  const Parallelism& p = s.parallelism;
  g.micro_batches = s.micro_batches();
  g.tokens_per_gpu = s.batch.global_batch * s.batch.seq_len / (s.gpus / (p.tp * p.cp * p.pp));
  g.load = load;
  const FlopsPerToken f = model_flops_per_token(s.model, s.batch.seq_len, s.train_mtp);
  g.model_flops_per_token = f.total;
  const int stages = static_cast<int>(p.pp);
  auto lower_stage = [&](int st, const ExpertLoad& stage_load) {
    RankClass rc;
    rc.name = stages > 1 ? "pp stage " + std::to_string(st) : "all ranks";
    rc.ranks = s.gpus / p.pp;
    rc.pp_stage = st;
    Lowering low(s, stage_load, rc);
    const std::vector<int> layers = stage_layers(s, st);
    const int64_t mbs = g.micro_batches;
    const int chunks = pipeline_chunks(s);
    const int vstages = stages * chunks;
    const double act_bytes = static_cast<double>(s.batch.micro_batch * s.batch.seq_len / p.cp / p.tp) *
                             static_cast<double>(s.model.hidden) * 2.0;
    // Forward/backward overlap: backward units on the second lane; each waits for its own forward
    // (the last op of that unit here), and a steady-state forward waits for the backward before it
    // (1F1B keeps that many micro-batches in flight), so each forward pairs with one backward.
    const bool overlap = s.stack.fwd_bwd_overlap || (s.parallelism.schedule == PipelineSchedule::dualpipe && stages > 1);
    std::map<std::pair<int64_t, int>, int32_t> fwd_end;
    int32_t bwd_end = -1;
    // One unit: the forward or backward of one micro-batch through one chunk (virtual stage) of this stage.
    auto unit = [&](bool forward, int64_t mb, int c, int32_t gate) {
      const int v = virtual_stage(s, st, c);
      const std::vector<int> vl = virtual_stage_layers(s, v);
      low.set_lane(overlap && !forward ? 1 : 0);
      low.begin_unit(overlap ? gate : -1);
      low.set_micro_batch(static_cast<int>(mb));
      low.set_phase(forward ? Phase::forward : Phase::backward);
      low.reset_layer_starts();
      low.begin_phase(forward ? vl : std::vector<int>(vl.rbegin(), vl.rend()));
      auto p2p = [&](const char* name, int peer_v, std::vector<int32_t> deps) {
        const int32_t id = low.comm(name, Category::pp_comm, Stream::pp_comm, -1, Collective::send_recv, Group::pp,
                                    act_bytes, std::move(deps));
        Op& op = low.op(id);
        op.chunk = c;
        op.peer_stage = stage_of_virtual(s, peer_v);
        op.peer_chunk = chunk_of_virtual(s, peer_v);
        if (std::string(name).rfind("pp.recv", 0) == 0) low.wait_before_next_compute(id);
      };
      const int L = s.model.layers;
      if (forward) {
        if (v > 0) p2p("pp.recv", v - 1, {});
        if (v == 0) low.embedding(false);
        for (int l : vl) {
          if (l == L) low.head(false);  // the main head before the MTP modules that follow it
          if (l >= L) low.mtp_input(l, false);
          low.forward_layer(l);
          if (l >= L) low.head(false, "mtp.head");
        }
        if (v == vstages - 1 && (vl.empty() || vl.back() < L)) low.head(false);
        if (v < vstages - 1) p2p("pp.send", v + 1, {low.last()});
      } else {
        if (v < vstages - 1) p2p("pp.recv.bwd", v + 1, {});
        if (v == vstages - 1 && (vl.empty() || vl.back() < L)) low.head(true);
        for (auto it = vl.rbegin(); it != vl.rend(); ++it) {
          if (*it >= L) low.head(true, "mtp.head");
          low.backward_layer(*it);
          if (*it >= L) low.mtp_input(*it, true);
          if (*it == L) low.head(true);
        }
        if (v == 0) low.embedding(true);
        if (v > 0) p2p("pp.send.bwd", v - 1, {low.last()});
      }
    };
    // Units in program order: warm-up forwards, then one forward and one backward in turn, then the
    // remaining backwards (1F1B). With chunks (interleaved VPP, DualPipe's V placement) the forward
    // units run chunk by chunk in groups of pp micro-batches and the warm-up is
    // (pp - stage - 1) x 2 + (chunks - 1) x pp units, as in Megatron's interleaved schedule.
    std::vector<std::pair<int64_t, int>> fwd_units, bwd_units;
    const int64_t groups = (mbs + stages - 1) / stages;
    for (int64_t k = 0; k < groups * stages * chunks; ++k) {
      const int64_t grp = k / (stages * chunks), within = k % (stages * chunks);
      const int64_t mb = grp * stages + within % stages;
      if (mb >= mbs) continue;
      const int c = static_cast<int>(within / stages);
      fwd_units.emplace_back(mb, c);
      bwd_units.emplace_back(mb, chunks - 1 - c);
    }
    const int64_t total = static_cast<int64_t>(fwd_units.size());
    // DualPipe's V placement sends chunk 1 back down the pipeline, which the interleaved warm-up
    // count does not cover: there every forward runs first (deadlock-free for any placement).
    const int64_t warm = s.parallelism.schedule == PipelineSchedule::dualpipe ? total
                         : chunks == 1 ? std::min<int64_t>(stages - st - 1, total)
                                       : std::min<int64_t>((stages - st - 1) * 2 + (chunks - 1) * stages, total);
    // With overlap each steady-state forward pairs with the backward of an earlier micro-batch, so
    // one more forward runs in the warm-up (Megatron's combined 1F1B); the pair runs concurrently.
    const int64_t warm_up = overlap ? std::min<int64_t>(warm + 1, total) : warm;
    int64_t next_f = 0, next_b = 0;
    auto run_forward = [&](bool steady) {
      unit(true, fwd_units[next_f].first, fwd_units[next_f].second, steady ? bwd_end : -1);
      fwd_end[fwd_units[next_f]] = low.last();
      ++next_f;
    };
    auto run_backward = [&] {
      const auto it = fwd_end.find(bwd_units[next_b]);
      unit(false, bwd_units[next_b].first, bwd_units[next_b].second, it != fwd_end.end() ? it->second : -1);
      bwd_end = low.last();
      ++next_b;
    };
    for (int64_t i = 0; i < warm_up; ++i) run_forward(false);
    while (next_f < total) {
      run_forward(true);
      run_backward();
    }
    while (next_b < total) run_backward();
    // Gradient reduction over data-parallel replicas, then the optimizer step on this rank's shard.
    low.set_lane(0);
    low.begin_unit(-1);
    low.set_phase(Phase::optimizer);
    std::vector<int32_t> grads{low.last()};
    const ParamCounts pc = count_params(s.model);
    double dense = 0, expert = 0;
    for (int l : layers) {
      dense += low.dense_params(l);
      expert += low.local_expert_params(l);
    }
    if (st == 0 || holds_mtp_embedding(s, st)) dense += pc.embedding / static_cast<double>(p.tp);
    if (st == stages - 1) dense += (pc.lm_head + static_cast<double>(s.model.hidden)) / static_cast<double>(p.tp);
    const double bgrad = bytes_per_element(s.precision.grads);
    const double dense_shard = p.fsdp > 1 ? static_cast<double>(p.ep * p.fsdp) : 1.0;
    const double expert_shard = static_cast<double>(p.fsdp);
    if (p.fsdp == 1 && p.ep * p.dp > 1)
      grads.push_back(low.comm("dp.all_reduce", Category::dp_comm, Stream::fsdp_comm, -1, Collective::all_reduce,
                               Group::dense_dp, dense * bgrad, {low.last()}));
    if (p.dp > 1) {
      if (p.fsdp > 1)
        grads.push_back(low.comm("dp.all_reduce", Category::dp_comm, Stream::fsdp_comm, -1, Collective::all_reduce,
                                 Group::dp, dense / dense_shard * bgrad, {low.last()}));
      grads.push_back(low.comm("dp.all_reduce_experts", Category::dp_comm, Stream::fsdp_comm, -1,
                               Collective::all_reduce, Group::dp, expert / expert_shard * bgrad, {low.last()}));
    }
    // Adam: read weights, gradients and both moments (and FP32 master weights), write all but the gradients.
    // Each rank updates the parameters it owns: its FSDP shard, or under ZeRO-1 (distributed
    // optimizer, no FSDP) its slice of every replica group: dense over ep x dp, experts over dp.
    const bool zero1 = s.parallelism.distributed_optimizer && p.fsdp == 1;
    const double local = zero1 ? dense / static_cast<double>(p.dense_data_parallel()) +
                                     expert / static_cast<double>(p.expert_data_parallel())
                               : dense / dense_shard + expert / expert_shard;
    const double bw = bytes_per_element(s.precision.weights), bo = bytes_per_element(s.precision.optimizer_state);
    const double per_param = 2 * bw + bgrad + 4 * bo + (s.precision.master_weights_fp32 ? 8.0 : 0.0);
    Op opt;
    opt.name = "optimizer.step";
    opt.category = Category::optimizer;
    opt.phase = Phase::optimizer;
    opt.hbm_bytes = Bytes(local * per_param);
    opt.deps = grads;
    low.emit(std::move(opt));
    return rc;
  };
  for (int st = 0; st < stages; ++st) g.classes.push_back(lower_stage(st, load));
  // Dropless imbalance: the busiest EP rank of each group sets the pace; the others compute the
  // mean load and spin in the all-to-alls until it arrives (a profiler counts that as
  // communication). When the busiest rank is at least 1 % above the mean (below that the wait is
  // under the model's resolution), each stage also gets a class of its typical ranks, synchronized
  // with the busiest ones: one busiest GPU per EP group, the rest typical.
  const double imbalance = load.mean_rows > 0 ? load.max_rows / load.mean_rows : 1.0;
  std::vector<int> typical(static_cast<size_t>(stages), -1);
  if (s.model.is_moe() && p.ep > 1 && imbalance >= 1.01) {
    ExpertLoad mean = load;
    mean.max_rows = load.mean_rows;
    mean.max_rank_tile_rows = load.max_rank_tile_rows / imbalance;
    for (int st = 0; st < stages; ++st) {
      RankClass rc = lower_stage(st, mean);
      const int64_t busiest = s.gpus / p.pp / p.ep;  // one per EP group
      g.classes[static_cast<size_t>(st)].ranks = busiest;
      g.classes[static_cast<size_t>(st)].name += stages > 1 ? ", busiest EP rank" : " (busiest EP rank)";
      rc.ranks = s.gpus / p.pp - busiest;
      rc.name += stages > 1 ? ", typical EP rank" : " (typical EP rank)";
      rc.sync_with = st;  // its pipeline receives match the stage classes' sends (sim.cpp)
      typical[static_cast<size_t>(st)] = static_cast<int>(g.classes.size());
      g.classes.push_back(std::move(rc));
    }
  }
  // Stragglers: a copy of their stage's program as a class of their GPUs, synchronized with it.
  // (Every collective of the stage waits for them: right for the FSDP/DP/PP collectives that span
  // racks; EP groups that lie wholly outside a slow rack are synchronized too, through them.)
  for (const Straggler& x : s.stragglers) {
    const int64_t stage = x.gpu / (s.gpus / p.pp);  // pp is the outermost mesh axis
    RankClass rc = g.classes[static_cast<size_t>(stage)];
    // Slow GPUs are taken from the typical ranks when there are enough of them.
    const int t = typical[static_cast<size_t>(stage)];
    if (t >= 0 && g.classes[static_cast<size_t>(t)].ranks > x.count) g.classes[static_cast<size_t>(t)].ranks -= x.count;
    else g.classes[static_cast<size_t>(stage)].ranks -= x.count;
    rc.name = x.rack >= 0 ? "straggler rack " + std::to_string(x.rack) : "straggler GPU " + std::to_string(x.gpu);
    rc.ranks = x.count;
    rc.compute_slowdown = x.compute_slowdown;
    rc.nvlink_slowdown = x.nvlink_slowdown;
    rc.network_slowdown = x.network_slowdown;
    rc.sync_with = static_cast<int>(stage);  // its pipeline receives match the stage classes' sends (sim.cpp)
    g.classes.push_back(std::move(rc));
  }
  if (s.parallelism.schedule == PipelineSchedule::dualpipe && s.parallelism.pp > 1)
    g.notes.push_back("DualPipe is lowered as its V-shaped placement (stage s holds virtual stages s and 2pp-1-s) "
                      "with forwards and backwards on two overlapping lanes, each backward as soon as its inputs are "
                      "there; DualPipe's exact chunk order and its bound on micro-batches in flight are not modelled");
  return g;
}

}  // namespace moeperf
