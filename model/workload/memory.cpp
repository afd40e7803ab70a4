#include "model/workload/memory.h"

#include <algorithm>
#include <numeric>

#include "model/workload/flops.h"
#include "model/workload/num.h"

namespace moeperf {

using detail::d;
using detail::has;

const char* to_string(TensorClass c) {
  switch (c) {
    case TensorClass::norm: return "norm";
    case TensorClass::q_proj: return "q_proj";
    case TensorClass::kv_proj: return "kv_proj";
    case TensorClass::attn_out: return "attn_out";
    case TensorClass::out_proj: return "out_proj";
    case TensorClass::mlp: return "mlp";
    case TensorClass::router: return "router";
    case TensorClass::moe_mlpwi: return "moe_mlpwi";
    case TensorClass::moe_mlpwo: return "moe_mlpwo";
    case TensorClass::moe_act: return "moe_act";
    case TensorClass::kCount: break;
  }
  return "?";
}

double micro_batches_in_flight(const Scenario& s, int stage) {
  const Parallelism& p = s.parallelism;
  const double all = d(s.micro_batches());
  // Megatron's combined 1F1B (stack.overlap.fwd_bwd) runs one forward more before its first
  // backward (one_f_one_b_units), at any pipeline depth: without a pipeline a micro-batch's
  // forward runs beside the previous one's backward, two in flight; the programmed schedules
  // (DualPipe, ZB-H1) do not apply it (lower_step).
  const bool plain = p.schedule == PipelineSchedule::one_f_one_b || p.schedule == PipelineSchedule::interleaved;
  const double paired = s.stack.fwd_bwd_overlap && plain ? 1.0 : 0.0;
  if (p.pp <= 1) return std::min(s.stack.fwd_bwd_overlap ? 2.0 : 1.0, all);  // every schedule is 1F1B's without a pipeline
  switch (p.schedule) {
    case PipelineSchedule::interleaved:
      return std::min(d((p.pp - stage - 1) * 2 + (p.vpp - 1) * p.pp + 1) + paired, d(p.vpp) * all) / d(p.vpp);
    // DualPipe and DualPipeV keep at most PP + 1 chunks' activations (DeepSeek-V3 report, table 2;
    // PP counts model stages): here in units of the stage's layers, which are two chunks.
    case PipelineSchedule::dualpipe: return std::min(d(p.pp + 1) / 2, all);
    case PipelineSchedule::dualpipev: return std::min(d(2 * p.pp + 1) / 2, all);
    // ZB-H1 holds a micro-batch from its forward to its deferred weight gradients: stage s keeps
    // back s of them, so every stage holds pp, 1F1B's peak (stage 0's), as the paper designs it.
    // Under FSDP nothing is deferred (lower_step) and the schedule is 1F1B's.
    case PipelineSchedule::zb_h1:
      if (p.fsdp == 1) return std::min(d(p.pp), all);
      break;
    case PipelineSchedule::one_f_one_b: break;
  }
  return std::min(d(p.pp - stage) + paired, all);
}

std::vector<double> chunk_micro_batches_in_flight(const Scenario& s, int stage, const std::vector<double>& chunk_bytes) {
  const Parallelism& p = s.parallelism;
  const int chunks = static_cast<int>(chunk_bytes.size());
  const bool none = std::all_of(chunk_bytes.begin(), chunk_bytes.end(), [](double b) { return b <= 0; });
  const bool dual = dualpipe_family(s);
  if (p.pp <= 1 || (p.schedule != PipelineSchedule::interleaved && !dual) || chunks != pipeline_chunks(s) || none)
    return std::vector<double>(chunk_bytes.size(), micro_batches_in_flight(s, stage));
  // A forward adds its chunk's activations, a backward (its input part) frees them; the peak, in
  // micro-batches per chunk, follows one of the forwards.
  struct Walk {
    const std::vector<double>& bytes;
    std::vector<double> n, best;
    double held = 0, peak = -1;
    void fwd(int c) {
      n[static_cast<size_t>(c)] += 1;
      held += bytes[static_cast<size_t>(c)];
      if (held > peak) peak = held, best = n;
    }
    void bwd(int c) {
      n[static_cast<size_t>(c)] -= 1;
      held -= bytes[static_cast<size_t>(c)];
    }
  } w{chunk_bytes, std::vector<double>(chunk_bytes.size(), 0.0), std::vector<double>(chunk_bytes.size(), 0.0)};
  if (dual) {
    // DeepSeek's program fills the two chunks unevenly: PP + 1 chunks' activations in all at the
    // peak (the report's table 2), but DualPipe's half-rank h holds N - h on the chunk entering
    // nearer it and h + 1 on the other (DualPipeV's rank r: 2N - r and r + 1), and the end stages'
    // chunks differ most (the embedding and the first layers on one, the head and MTP on the
    // other).
    for (const PipeAction& a : stage_program(s, stage)) {
      using K = PipeAction::Kind;
      if (a.kind == K::forward || a.kind == K::forward_backward) w.fwd(a.chunk);
      if (a.kind == K::backward || a.kind == K::backward_input) w.bwd(a.chunk);
      if (a.kind == K::forward_backward) w.bwd(a.bwd_chunk);
    }
    return w.best;
  }
  // Megatron's interleaved order: forwards chunk by chunk in groups of pp micro-batches, backwards
  // from the last chunk, one after each forward past the warm-up.
  const OneFOneBUnits u = one_f_one_b_units(s, stage, s.micro_batches(), s.stack.fwd_bwd_overlap);
  size_t next_b = 0;
  for (size_t f = 0; f < u.forward.size(); ++f) {
    w.fwd(u.forward[f].second);
    if (static_cast<int64_t>(f) >= u.warm_up && next_b < u.backward.size()) w.bwd(u.backward[next_b++].second);
  }
  return w.best;
}

MemoryReport memory_report(const Scenario& s, const ExpertLoad& load, const Calibration& cal) {
  const ModelSpec& m = s.model;
  const Parallelism& p = s.parallelism;
  const GpuSpec& g = s.system.gpu();
  const ParamCounts pc = count_params(m);
  const double tp = d(p.tp);
  const double dense_shard = p.fsdp > 1 ? d(p.ep * p.fsdp) : 1.0;
  const double expert_shard = p.fsdp > 1 ? d(p.fsdp) : 1.0;
  const double bw = bytes_per_element(s.precision.weights), bg = bytes_per_element(s.precision.grads),
               bo = bytes_per_element(s.precision.optimizer_state);
  // A distributed optimizer (ZeRO-1) without FSDP shards each parameter's optimizer states over the
  // ranks that hold a replica of it: cp x ep x dp for dense parameters (cp x dp folded), the expert
  // data-parallel group (tp x cp x dp unfolded; edp folded) for expert parameters, which EP has already split.
  const bool zero1 = p.distributed_optimizer && p.fsdp == 1;
  const double dense_opt_div = zero1 ? d(p.dense_grad_replicas()) : 1.0;
  const double expert_opt_div = zero1 ? d(p.expert_data_parallel()) : 1.0;
  MemoryReport best;
  std::vector<Bytes> by_stage;
  for (int st = 0; st < p.pp; ++st) {
    MemoryReport r;
    r.pp_stage = st;
    const std::vector<int> layers = stage_layers(s, st);
    double dense = 0, expert = 0, max_layer = 0;
    for (int l : layers) {
      const LayerParams lp = layer_params(m, l);
      const double own = dense_params_per_rank(m, l, p.tp);
      dense += own;
      expert += lp.routed_experts / d(p.ep * p.etp);
      max_layer = std::max(max_layer, own + lp.routed_experts / d(p.ep * p.etp));
    }
    // Transformer Engine's per-step cache of the quantized weights (row- and column-wise copies) for
    // the layers' low-precision GEMMs (the embedding and LM head stay BF16).
    if (s.stack.weight_quant_cache && p.fsdp == 1) {
      auto cache = [&](Dtype dt) { return quantize_bytes_per_element(dt) > 0 && s.precision.weights != dt ? 2.0 * bytes_per_element(dt) : 0.0; };
      r.weight_cache = Bytes(dense * cache(s.precision.dense_gemm) + expert * cache(s.precision.expert_gemm));
    }
    // Weights stored in a low-precision format (FP8 primary weights) are the layers' GEMM weights,
    // kept in both layouts the GEMMs read (row- and column-wise, as the quantized-weight cache holds
    // them); the embedding and the LM head stay BF16.
    const double layouts = quantize_bytes_per_element(s.precision.weights) > 0 ? 2.0 : 1.0;
    const double bw_edges = end_weight_bytes(s);
    double edges = 0;
    if (holds_embedding(s, st)) edges += pc.embedding / tp;
    if (holds_head(s, st)) edges += (pc.lm_head + d(m.hidden)) / tp;  // head and final norm
    r.weights = Bytes((dense / dense_shard + expert / expert_shard) * bw * layouts + edges / dense_shard * bw_edges);
    dense += edges;
    const double local = dense / dense_shard + expert / expert_shard;
    r.gradients = Bytes(local * bg);
    const double opt_params = dense / dense_shard / dense_opt_div + expert / expert_shard / expert_opt_div;
    r.optimizer_states = Bytes(opt_params * (2 * bo + (s.precision.master_weights_fp32 ? 4.0 : 0.0)));
    if (p.fsdp > 1) {
      // Gathered weights of the layer in use and the prefetched ones, plus one layer's unsharded
      // gradients; or at a model end, the gathered table (embedding, or head and final norm) and
      // its whole gradient before the reduce-scatter beside the prefetched layers, when larger
      // (a large vocabulary over small layers).
      const double depth = s.stack.fsdp_prefetch ? s.stack.fsdp_prefetch_depth : 0;
      double end = 0;
      if (holds_embedding(s, st)) end = std::max(end, pc.embedding / tp);
      if (holds_head(s, st)) end = std::max(end, (pc.lm_head + d(m.hidden)) / tp);
      r.fsdp_buffers = Bytes(std::max(max_layer * ((1 + depth) * bw + bg), end * (bw_edges + bg) + depth * max_layer * bw));
    }
    // One micro-batch's saved tensors per layer (the layer's input is the checkpoint every
    // recomputation starts from: no recompute list frees it, as JAX's scan keeps its carry and
    // PyTorch's checkpoint its input; offload moves it; recomputing "norm" drops what else the class
    // holds, the normalizations' outputs), and what each chunk keeps in HBM.
    const int chunks = pipeline_chunks(s);
    std::vector<std::array<double, kTensorClassCount>> saved_by_layer;
    std::vector<double> rows_by_layer, chunk_kept(static_cast<size_t>(chunks), 0.0), chunk_saved = chunk_kept;
    std::vector<size_t> chunk_of;
    for (int c = 0; c < chunks; ++c)
      for (int l : virtual_stage_layers(s, virtual_stage(s, st, c))) {
        auto b = saved_tensor_bytes(s, load, l);
        for (int k = 0; k < kTensorClassCount; ++k) {
          const auto cls = static_cast<TensorClass>(k);
          if (recomputes(s, cls)) b[static_cast<size_t>(k)] = recomputed_class_kept_bytes(s, cls, b[static_cast<size_t>(k)]);
          if (!has(s.memory.offload, cls)) chunk_kept[static_cast<size_t>(c)] += b[static_cast<size_t>(k)];
          chunk_saved[static_cast<size_t>(c)] += b[static_cast<size_t>(k)];
        }
        // A stack whose backward does not rebuild the expert input rows (PyTorch autograd) keeps
        // them for the expert GEMMs' weight gradients, whatever the recompute list says: the FC1's
        // input, the rows the EP rank received gathered over its etp GPUs (moe_block's etp
        // all-gather), as the GEMM reads them: a low-precision GEMM's quantized copy (Transformer
        // Engine's Linear and GroupedLinear save the column-wise quantized input for the weight
        // gradient, as moe_act keeps FC2's), else the rows as dispatched.
        const Dtype de = s.precision.expert_gemm;
        const double rows = !s.stack.remat_dispatch && m.is_moe_layer(l)
                                ? load.max_rows * d(p.etp) * d(m.hidden) *
                                      bytes_per_element(de == Dtype::bf16 ? s.precision.dispatch : de)
                                : 0.0;
        chunk_kept[static_cast<size_t>(c)] += rows;
        saved_by_layer.push_back(b);
        rows_by_layer.push_back(rows);
        chunk_of.push_back(static_cast<size_t>(c));
      }
    // Micro-batches in flight per chunk at the stage's peak: interleaved stages fill their chunks
    // in Megatron's order, so an uneven layout's chunks hold different counts. The peak is HBM's;
    // with everything offloaded, the host's (what the copies hold).
    const bool kept_any = std::any_of(chunk_kept.begin(), chunk_kept.end(), [](double b) { return b > 0; });
    const std::vector<double> in_flight = chunk_micro_batches_in_flight(s, st, kept_any ? chunk_kept : chunk_saved);
    double kept = 0, off = 0, layer_mbs = 0, layer_off_max = 0;
    for (size_t i = 0; i < saved_by_layer.size(); ++i) {
      const double n = in_flight[chunk_of[i]];
      layer_mbs += n;
      double layer_off = 0;  // one micro-batch's
      for (int c = 0; c < kTensorClassCount; ++c) {
        const double bytes = saved_by_layer[i][static_cast<size_t>(c)] * n;
        if (has(s.memory.offload, static_cast<TensorClass>(c))) {
          off += bytes;
          layer_off += saved_by_layer[i][static_cast<size_t>(c)];
        } else {
          kept += bytes;
          r.activations_by_class[static_cast<size_t>(c)] += Bytes(bytes);
        }
      }
      layer_off_max = std::max(layer_off_max, layer_off);
      kept += rows_by_layer[i] * n;
      r.activations_expert_rows += Bytes(rows_by_layer[i] * n);
    }
    r.micro_batches_in_flight = saved_by_layer.empty() ? micro_batches_in_flight(s, st) : layer_mbs / d(saved_by_layer.size());
    r.activations = Bytes(kept);
    r.offloaded_to_host = Bytes(off);
    r.offloaded_if_kept = Bytes(off);
    // Communication buffers of one MoE layer's exchanges: the dispatch sends the rank's own rows and
    // receives into a buffer of a2a_buffer_factor x the average rows (<= 0: MaxText's default, the
    // rows x min(EP, experts / top_k)); the combine sends that buffer back and receives the rank's
    // own rows (MaxText's moe.py: the combine's output is original_inputs_first_dim rows). At factor
    // 1 (PyTorch's exact-size outputs) that is two buffers of the average rows each way.
    const double t = d(s.batch.micro_batch * s.batch.seq_len) / d(p.cp), h = d(m.hidden);
    // A stage whose layers are all dense (Qwen's mlp_only_layers at the front) holds no MoE buffers.
    const bool stage_moe = std::any_of(layers.begin(), layers.end(), [&](int l) { return m.is_moe_layer(l); });
    if (stage_moe && p.ep > 1) {  // without expert parallelism nothing is exchanged
      const double rows = ragged_buffer_rows(s, load);
      r.comm_buffers = Bytes((rows + load.mean_rows) * h * (bytes_per_element(s.precision.dispatch) + bytes_per_element(s.precision.combine)));
    }
    // Largest transient: the LM head's logits (BF16) and FP32 softmax on the last stage, or one MoE
    // layer's expert intermediates (FC1 out, activation, FC2 out) with their gradients.
    double transient = 0;
    // With MTP modules, the heads before the last keep their FP32 statistics for their backward while
    // the next head runs.
    if (holds_head(s, st))
      transient = t * d(m.vocab) / tp * (2.0 + 4.0 + (s.train_mtp ? 4.0 * d(m.mtp_layers) : 0.0));
    if (stage_moe)
      transient = std::max(transient, 2 * load.max_rows * (2 * d(m.expert_ffn) * 2.0 + d(m.expert_ffn) * 2.0 + h * 2.0));
    // jax.lax.ragged_dot's default lowering (XLA's RaggedDotRewriter) materializes its operand
    // expanded over the local experts, each copy masked to its expert's rows, and the dot's output
    // per expert before summing them: the up-projection's [experts, buffer rows, hidden] input and
    // [experts, buffer rows, 2 x expert_ffn] output in BF16.
    if (stage_moe && s.stack.expert_gemm == ExpertGemm::masked_dense)
      transient = std::max(transient, d(m.experts) / d(p.ep) * ragged_buffer_rows(s, load) * (h + 2 * d(m.expert_ffn)) * 2.0);
    // Staging buffers for offloaded tensors: two layers' worth of one micro-batch (the largest
    // offloading layer's) stay on the GPU while copies run.
    transient += 2 * layer_off_max;
    r.transient = Bytes(transient);
    r.runtime_reserve = Bytes(cal[Param::runtime_reserve_gib] * kGibi);
    r.hbm_total = r.weights + r.weight_cache + r.gradients + r.optimizer_states + r.fsdp_buffers + r.activations + r.comm_buffers +
                  r.transient + r.runtime_reserve;
    r.hbm_capacity = g.hbm_usable * s.memory.usable_hbm_fraction;
    const ComputeTraySpec& tray = s.system.domain.tray;
    Bytes host = tray.cpus > 0 ? tray.cpu.memory * (d(tray.cpus) / d(tray.gpus)) : Bytes(0);
    if (s.memory.host_offload_limit) host = std::min(host, *s.memory.host_offload_limit);
    r.host_capacity = host;
    r.fits_hbm = r.hbm_total <= r.hbm_capacity;
    r.fits_host = r.offloaded_to_host <= r.host_capacity;
    r.fits = r.fits_hbm && r.fits_host;
    if (!r.fits_hbm) r.hbm_shortfall = r.hbm_total - r.hbm_capacity;
    if (!r.fits_host) r.host_shortfall = r.offloaded_to_host - r.host_capacity;
    by_stage.push_back(r.hbm_total);
    if (st == 0 || r.hbm_total > best.hbm_total) best = r;
  }
  best.hbm_by_stage = std::move(by_stage);
  return best;
}

}  // namespace moeperf
