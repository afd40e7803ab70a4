#include "model/study/study.h"

#include <algorithm>
#include <numeric>
#include <functional>
#include <map>
#include <tuple>

#include "model/error.h"

namespace moeperf {

Scenario baseline_of(const Scenario& s) {
  Scenario b = s;
  b.name = s.name + " [every optimization off]";
  b.stack.expert_gemm = ExpertGemm::per_expert_loop;
  b.stack.multistream_collectives = false;
  b.stack.fsdp_prefetch = false;
  b.stack.dispatcher = Dispatcher::alltoall;
  b.stack.a2a_with_shared_expert = false;
  b.precision.dense_gemm = b.precision.expert_gemm = Dtype::bf16;
  b.precision.dispatch = b.precision.combine = b.precision.combine_bwd = Dtype::bf16;
  for (TensorClass c : b.memory.offload)
    if (std::find(b.memory.recompute.begin(), b.memory.recompute.end(), c) == b.memory.recompute.end())
      b.memory.recompute.push_back(c);
  b.memory.offload.clear();
  return b;
}

std::vector<std::string> differing_fields(const Scenario& a, const Scenario& b) {
  std::vector<std::string> out;
  auto cmp = [&](const char* name, const auto& x, const auto& y) {
    if (!(x == y)) out.emplace_back(name);
  };
  const ModelSpec &ma = a.model, &mb = b.model;
  const AttentionSpec &aa = ma.attention, &ab = mb.attention;
  // Every field of the attention and the router (which layers slide, chunk or skip RoPE, MLA's head
  // dims, QK-norm, sinks, the score function): a model that differs in any prices differently.
  if (ma.name != mb.name ||
      std::tie(ma.hidden, ma.layers, ma.dense_layers, ma.dense_ffn, ma.vocab, ma.tie_embeddings, ma.experts, ma.top_k,
               ma.shared_experts, ma.expert_ffn, ma.mtp_layers, ma.router, ma.moe_map) !=
          std::tie(mb.hidden, mb.layers, mb.dense_layers, mb.dense_ffn, mb.vocab, mb.tie_embeddings, mb.experts, mb.top_k,
                   mb.shared_experts, mb.expert_ffn, mb.mtp_layers, mb.router, mb.moe_map) ||
      !(aa == ab))
    out.emplace_back("model");
  const SystemSpec &sa = a.system, &sb = b.system;
  const GpuSpec &ga = sa.gpu(), &gb = sb.gpu();
  // Every figure of the system the pricing or the report reads (a --set on any of them is a
  // difference a waterfall must show, not "the same in every field").
  const ComputeTraySpec &ta = sa.domain.tray, &tb = sb.domain.tray;
  const bool fabric_differs =
      sa.fabric.has_value() != sb.fabric.has_value() ||
      (sa.fabric && sb.fabric &&
       std::tie(sa.fabric->sw.adaptive_routing, sa.fabric->sw.port_bandwidth, sa.fabric->sw.latency, sa.fabric->sw.ports,
                sa.fabric->tiers, sa.fabric->rail_optimized, sa.fabric->nic_to_leaf_latency) !=
           std::tie(sb.fabric->sw.adaptive_routing, sb.fabric->sw.port_bandwidth, sb.fabric->sw.latency, sb.fabric->sw.ports,
                    sb.fabric->tiers, sb.fabric->rail_optimized, sb.fabric->nic_to_leaf_latency));
  // The NVLink switches the topology is built from (Topology::build: chips, each GPU's links per chip).
  const auto &na = sa.domain.nvswitch, &nb = sb.domain.nvswitch;
  const bool nvswitch_differs =
      na.has_value() != nb.has_value() ||
      (na && nb &&
       std::tie(na->adaptive_routing, na->port_bandwidth, na->latency, na->ports) !=
           std::tie(nb->adaptive_routing, nb->port_bandwidth, nb->latency, nb->ports));
  if (sa.name != sb.name || ga.name != gb.name || ga.sms != gb.sms || ga.dense_bf16 != gb.dense_bf16 ||
      ga.dense_fp8 != gb.dense_fp8 || ga.dense_mxfp8 != gb.dense_mxfp8 || ga.dense_nvfp4 != gb.dense_nvfp4 ||
      ga.hbm_bandwidth != gb.hbm_bandwidth || ga.hbm_usable != gb.hbm_usable || ga.hbm_capacity != gb.hbm_capacity ||
      ga.nvlink_bandwidth_per_link != gb.nvlink_bandwidth_per_link || ga.nvlink_links != gb.nvlink_links || fabric_differs ||
      ta.nic.port_bandwidth != tb.nic.port_bandwidth || ta.nic.host_link_bandwidth != tb.nic.host_link_bandwidth ||
      ta.gpus != tb.gpus || ta.cpus != tb.cpus || ta.nics != tb.nics || ta.cpu.memory != tb.cpu.memory ||
      ta.cpu.memory_bandwidth != tb.cpu.memory_bandwidth || ta.cpu.gpu_link_bidirectional != tb.cpu.gpu_link_bidirectional ||
      sa.domain.trays != sb.domain.trays || sa.domain.nvlink_latency != sb.domain.nvlink_latency || nvswitch_differs ||
      sa.domain.switch_chips != sb.domain.switch_chips || sa.domain.gpu_links_per_chip != sb.domain.gpu_links_per_chip ||
      sa.domain.host_memory != sb.domain.host_memory || sa.gpus_per_domain_when_spanning != sb.gpus_per_domain_when_spanning ||
      sa.power_price.watts_per_gpu != sb.power_price.watts_per_gpu ||
      sa.power_price.usd_per_gpu_hour != sb.power_price.usd_per_gpu_hour)
    out.emplace_back("system");
  cmp("gpus", a.gpus, b.gpus);
  const Parallelism &pa = a.parallelism, &pb = b.parallelism;
  cmp("parallelism.tp", pa.tp, pb.tp);
  cmp("parallelism.cp", pa.cp, pb.cp);
  cmp("parallelism.pp", pa.pp, pb.pp);
  cmp("parallelism.vpp", pa.vpp, pb.vpp);
  cmp("parallelism.ep", pa.ep, pb.ep);
  cmp("parallelism.fsdp", pa.fsdp, pb.fsdp);
  cmp("parallelism.dp", pa.dp, pb.dp);
  cmp("parallelism.etp", pa.folded ? pa.etp : 0, pb.folded ? pb.etp : 0);
  // "balanced" finds its layout at predict time: any layout it holds is a past choice, not input.
  const std::vector<VirtualStageLayout> none;
  cmp("parallelism.layout", std::tie(pa.balance_layout, pa.balance_layout ? none : pa.layout),
      std::tie(pb.balance_layout, pb.balance_layout ? none : pb.layout));
  cmp("parallelism.schedule", pa.schedule, pb.schedule);
  cmp("parallelism.sequence_parallel", pa.sequence_parallel, pb.sequence_parallel);
  cmp("parallelism.distributed_optimizer", pa.distributed_optimizer, pb.distributed_optimizer);
  cmp("batch.seq_len", a.batch.seq_len, b.batch.seq_len);
  cmp("batch.micro_batch", a.batch.micro_batch, b.batch.micro_batch);
  cmp("batch.global_batch", a.batch.global_batch, b.batch.global_batch);
  const Precision &qa = a.precision, &qb = b.precision;
  cmp("precision.dense_gemm", qa.dense_gemm, qb.dense_gemm);
  cmp("precision.expert_gemm", qa.expert_gemm, qb.expert_gemm);
  cmp("precision.dispatch", qa.dispatch, qb.dispatch);
  cmp("precision.combine", qa.combine, qb.combine);
  cmp("precision.combine_bwd", qa.combine_bwd, qb.combine_bwd);
  cmp("precision.weights", qa.weights, qb.weights);
  cmp("precision.grads", qa.grads, qb.grads);
  cmp("precision.optimizer_state", qa.optimizer_state, qb.optimizer_state);
  cmp("precision.master_weights_fp32", qa.master_weights_fp32, qb.master_weights_fp32);
  cmp("memory.recompute", a.memory.recompute, b.memory.recompute);
  cmp("memory.offload", a.memory.offload, b.memory.offload);
  cmp("memory.fp8_cache", a.memory.fp8_cache, b.memory.fp8_cache);
  cmp("memory.e5m6_cache", a.memory.e5m6_cache, b.memory.e5m6_cache);
  cmp("memory.usable_hbm_fraction", a.memory.usable_hbm_fraction, b.memory.usable_hbm_fraction);
  cmp("memory.host_offload_limit", a.memory.host_offload_limit, b.memory.host_offload_limit);
  const Routing &ra = a.routing, &rb = b.routing;
  cmp("routing.distribution", ra.distribution, rb.distribution);
  cmp("routing.zipf_exponent", ra.zipf_exponent, rb.zipf_exponent);
  cmp("routing.dirichlet_alpha", ra.dirichlet_alpha, rb.dirichlet_alpha);
  cmp("routing.histogram", ra.histogram, rb.histogram);
  cmp("routing.seed", ra.seed, rb.seed);
  cmp("routing.group_limited", ra.group_limited, rb.group_limited);
  const StackOptions &oa = a.stack, &ob = b.stack;
  cmp("stack.expert_gemm", oa.expert_gemm, ob.expert_gemm);
  cmp("stack.grouped_kernel", oa.grouped_kernel, ob.grouped_kernel);
  cmp("stack.dispatcher", oa.dispatcher, ob.dispatcher);
  cmp("stack.ragged_a2a", oa.ragged_a2a, ob.ragged_a2a);
  cmp("stack.one_shot_max_ranks", oa.one_shot_max_ranks, ob.one_shot_max_ranks);
  cmp("stack.one_shot_scope", oa.one_shot_scope, ob.one_shot_scope);
  cmp("stack.one_shot_threads", oa.one_shot_threads, ob.one_shot_threads);
  cmp("stack.one_shot_copy_bytes", oa.one_shot_copy_bytes, ob.one_shot_copy_bytes);
  cmp("stack.one_shot_updates_per_peer", oa.one_shot_updates_per_peer, ob.one_shot_updates_per_peer);
  cmp("stack.ragged_a2a_host_waits", oa.ragged_a2a_host_waits, ob.ragged_a2a_host_waits);
  cmp("stack.dispatch_host_syncs", oa.dispatch_host_syncs, ob.dispatch_host_syncs);
  cmp("stack.ep_sms", oa.ep_sms, ob.ep_sms);
  cmp("stack.ep_kernel", oa.ep_kernel, ob.ep_kernel);
  cmp("stack.ep_buffer_copies", oa.ep_buffer_copies, ob.ep_buffer_copies);
  cmp("stack.permute_after_dispatch", oa.permute_after_dispatch, ob.permute_after_dispatch);
  cmp("stack.multistream_collectives", oa.multistream_collectives, ob.multistream_collectives);
  cmp("stack.overlap.fsdp_prefetch", oa.fsdp_prefetch, ob.fsdp_prefetch);
  cmp("stack.overlap.fsdp_prefetch_depth", oa.fsdp_prefetch_depth, ob.fsdp_prefetch_depth);
  cmp("stack.overlap.a2a_with_shared_expert", oa.a2a_with_shared_expert, ob.a2a_with_shared_expert);
  cmp("stack.overlap.fwd_bwd", oa.fwd_bwd_overlap, ob.fwd_bwd_overlap);
  cmp("stack.overlap.grad_reduce", oa.grad_reduce_overlap, ob.grad_reduce_overlap);
  cmp("stack.a2a_buffer_factor", oa.a2a_buffer_factor, ob.a2a_buffer_factor);
  cmp("stack.a2a_zero_fill", oa.a2a_zero_fill, ob.a2a_zero_fill);
  cmp("stack.remat_dispatch", oa.remat_dispatch, ob.remat_dispatch);
  cmp("stack.host_op_s", oa.host_op_s, ob.host_op_s);
  cmp("stack.host_ops_per_op", oa.host_ops_per_op, ob.host_ops_per_op);
  cmp("stack.quantize_host_ops", oa.quantize_host_ops, ob.quantize_host_ops);
  cmp("stack.router_fusion", oa.router_fusion, ob.router_fusion);
  cmp("stack.unfused_router_ops", oa.unfused_router_ops, ob.unfused_router_ops);
  cmp("stack.permute_fusion", oa.permute_fusion, ob.permute_fusion);
  cmp("stack.unfused_permute_ops", oa.unfused_permute_ops, ob.unfused_permute_ops);
  cmp("stack.cuda_graphs", oa.cuda_graphs, ob.cuda_graphs);
  cmp("stack.graph_launch_s", oa.graph_launch_s, ob.graph_launch_s);
  cmp("stack.pdl_quantize", oa.pdl_quantize, ob.pdl_quantize);
  cmp("stack.norm_quantize_fusion", oa.norm_quantize_fusion, ob.norm_quantize_fusion);
  cmp("stack.residual_fusion", oa.residual_fusion, ob.residual_fusion);
  cmp("stack.fused_qkv", oa.fused_qkv, ob.fused_qkv);
  cmp("stack.weight_quant_cache", oa.weight_quant_cache, ob.weight_quant_cache);
  cmp("train_mtp", a.train_mtp, b.train_mtp);
  cmp("fleet.speed_sigma", a.speed_sigma, b.speed_sigma);
  if (a.stragglers.size() != b.stragglers.size()) {
    out.emplace_back("stragglers");
  } else {
    for (size_t i = 0; i < a.stragglers.size(); ++i) {
      const Straggler &x = a.stragglers[i], &y = b.stragglers[i];
      if (std::tie(x.gpu, x.count, x.rack, x.compute_slowdown, x.nvlink_slowdown, x.network_slowdown) !=
          std::tie(y.gpu, y.count, y.rack, y.compute_slowdown, y.nvlink_slowdown, y.network_slowdown)) {
        out.emplace_back("stragglers");
        break;
      }
    }
  }
  for (const ParamDef& d : param_defs())
    if (a.calibration[d.id] != b.calibration[d.id]) {
      out.emplace_back("calibration");
      break;
    }
  return out;
}

std::vector<std::string> comparison_notes(const Scenario& from, const Scenario& to) {
  std::vector<std::string> notes;
  const std::vector<std::string> diff = differing_fields(from, to);
  const bool model = std::find(diff.begin(), diff.end(), "model") != diff.end();
  const bool gpus = from.gpus != to.gpus;
  if (model || gpus) {
    std::string what = model ? "different models (" + from.model.name + " vs " + to.model.name + ")" : "";
    if (gpus)
      what += (model ? " on " : "") + std::string("different GPU counts (") + std::to_string(from.gpus) + " vs " +
              std::to_string(to.gpus) + ")";
    notes.push_back("the two scenarios train " + what +
                    ": the stack steps are priced on the first one's, and the last step switches to the second's; "
                    "compare tokens/s/GPU and TFLOPS/GPU across it, not step time");
  }
  if (diff.empty()) notes.push_back("the two scenarios are the same in every field moeperf reads");
  return notes;
}

std::vector<WaterfallStep> waterfall(const Scenario& from, const Scenario& to) {
  struct Move {
    const char* name;
    const char* changes;
    std::function<void(Scenario&)> apply;
  };
  // NVIDIA's post, in its order, then what a PyTorch stack adds (the host and its fusions); each
  // move copies the target's fields of that mechanism.
  const std::vector<Move> moves = {
      {"grouped GEMM", "stack.expert_gemm, stack.grouped_kernel", [&](Scenario& s) {
         s.stack.expert_gemm = to.stack.expert_gemm;
         s.stack.grouped_kernel = to.stack.grouped_kernel;
       }},
      {"multistream collectives", "stack.multistream_collectives, stack.overlap.fsdp_prefetch",
       [&](Scenario& s) {
         s.stack.multistream_collectives = to.stack.multistream_collectives;
         s.stack.fsdp_prefetch = to.stack.fsdp_prefetch;
         s.stack.fsdp_prefetch_depth = to.stack.fsdp_prefetch_depth;
       }},
      {"MXFP8 / FP8", "precision", [&](Scenario& s) { s.precision = to.precision; }},
      {"host offload", "memory", [&](Scenario& s) { s.memory = to.memory; }},
      {"fused dedup dispatch", "stack.dispatcher and the all-to-all's implementation",
       [&](Scenario& s) {
         StackOptions& o = s.stack;
         const StackOptions& t = to.stack;
         o.dispatcher = t.dispatcher;
         o.a2a_with_shared_expert = t.a2a_with_shared_expert;
         o.a2a_buffer_factor = t.a2a_buffer_factor;
         o.a2a_zero_fill = t.a2a_zero_fill;
         o.remat_dispatch = t.remat_dispatch;
         o.ragged_a2a = t.ragged_a2a;
         o.one_shot_max_ranks = t.one_shot_max_ranks;
         o.one_shot_scope = t.one_shot_scope;
         o.one_shot_threads = t.one_shot_threads;
         o.one_shot_copy_bytes = t.one_shot_copy_bytes;
         o.one_shot_updates_per_peer = t.one_shot_updates_per_peer;
         o.ragged_a2a_host_waits = t.ragged_a2a_host_waits;
         o.dispatch_host_syncs = t.dispatch_host_syncs;
         o.ep_sms = t.ep_sms;
         o.ep_kernel = t.ep_kernel;
         o.ep_buffer_copies = t.ep_buffer_copies;
         o.permute_after_dispatch = t.permute_after_dispatch;
       }},
      {"host and fusions", "the stack's host, fusion and CUDA graph fields",
       [&](Scenario& s) {
         StackOptions& o = s.stack;
         const StackOptions& t = to.stack;
         o.host_op_s = t.host_op_s;
         o.host_ops_per_op = t.host_ops_per_op;
         o.quantize_host_ops = t.quantize_host_ops;
         o.router_fusion = t.router_fusion;
         o.unfused_router_ops = t.unfused_router_ops;
         o.permute_fusion = t.permute_fusion;
         o.unfused_permute_ops = t.unfused_permute_ops;
         o.cuda_graphs = t.cuda_graphs;
         o.graph_launch_s = t.graph_launch_s;
         o.pdl_quantize = t.pdl_quantize;
         o.norm_quantize_fusion = t.norm_quantize_fusion;
         o.residual_fusion = t.residual_fusion;
         o.fused_qkv = t.fused_qkv;
         o.weight_quant_cache = t.weight_quant_cache;
       }},
      {"everything else", "model, system, layout, batch, routing", [&](Scenario& s) { s = to; }},
  };
  // Each state is priced with its own calibration: the start is the first scenario as predict
  // prices it, and a different profile is one of the fields the last step switches.
  std::vector<WaterfallStep> out;
  Scenario cur = from;
  out.push_back({"start", "", predict(cur, cur.calibration)});
  for (const Move& m : moves) {
    Scenario next = cur;
    m.apply(next);
    // The fields this step actually switches; a step that switches none (the option is the same
    // in both scenarios) is left out rather than shown as a zero gain.
    std::vector<std::string> diff = differing_fields(cur, next);
    if (diff.empty()) continue;
    std::string changes;
    for (const std::string& d : diff) changes += (changes.empty() ? "" : ", ") + d;
    out.push_back({m.name, changes, predict(next, next.calibration)});
    cur = next;
  }
  return out;
}

std::vector<WaterfallStep> walk(const std::vector<NamedState>& states, const Calibration& cal,
                                const std::function<void(std::vector<std::function<void()>>&)>& run) {
  std::vector<WaterfallStep> out(states.size());
  std::vector<std::function<void()>> jobs;
  for (size_t k = 0; k < states.size(); ++k) {
    std::string changes;
    if (k > 0) {
      for (const std::string& d : differing_fields(states[k - 1].scenario, states[k].scenario))
        changes += (changes.empty() ? "" : ", ") + d;
      if (changes.empty()) changes = states[k].note.empty() ? "(switches nothing moeperf models)" : "(" + states[k].note + ")";
    }
    out[k].name = states[k].name;
    out[k].changes = changes;
    jobs.push_back([&out, &states, &cal, k] { out[k].report = predict(states[k].scenario, cal); });
  }
  if (run) run(jobs);
  else
    for (auto& j : jobs) j();
  return out;
}

std::vector<std::pair<std::string, double>> step_terms(const StepReport& r) {
  static const std::vector<std::string> kinds = {"compute",   "optimizer", "slowest of N", "ep comm",    "dp/fsdp comm",
                                                 "tp/cp comm", "pp comm",   "host copy",    "other comm", "idle"};
  std::map<std::string, double> sum;
  for (const std::string& k : kinds) sum[k] = 0;
  const double step = r.step_time.value();
  if (!r.graph || !r.sim) return {};
  auto kind_of = [](Category c) -> const char* {
    switch (c) {
      case Category::ep_comm: return "ep comm";
      case Category::dp_comm:
      case Category::fsdp_comm: return "dp/fsdp comm";
      case Category::tp_comm: return "tp/cp comm";
      case Category::pp_comm: return "pp comm";
      case Category::offload: return "host copy";
      default: return "other comm";
    }
  };
  // Every class's timeline to the end of the step, weighted by its GPUs: what an average GPU
  // spends the step on (a class that finishes early idles until the step ends).
  double ranks = 0;
  for (size_t c = 0; c < r.graph->classes.size() && c < r.sim->classes.size(); ++c) {
    const RankClass& rc = r.graph->classes[c];
    const double slow = rc.fleet_slowdown;
    const SimClass& sc = r.sim->classes[c];
    const double w = static_cast<double>(rc.ranks);
    ranks += w;
    const std::vector<double> ex = exposed_by_op(rc, sc);
    double comm = 0, opt = 0;
    for (size_t i = 0; i < rc.ops.size(); ++i) {
      if (ex[i] > 0) sum[kind_of(rc.ops[i].category)] += w * ex[i], comm += ex[i];
      if (rc.ops[i].category == Category::optimizer) opt += (sc.ops[i].end - sc.ops[i].start).value();
    }
    const double idle = idle_time(rc, sc).value() + std::max(0.0, step - sc.finish.value());
    const double busy = std::max(0.0, step - idle - comm);
    opt = std::min(opt, busy);
    sum["optimizer"] += w * opt / slow;
    sum["compute"] += w * (busy - opt) / slow;
    sum["slowest of N"] += w * busy * (1 - 1 / slow);
    sum["idle"] += w * idle;
  }
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& k : kinds) out.emplace_back(k, ranks > 0 ? sum[k] / ranks : 0.0);
  return out;
}

std::vector<ScalePoint> scale(const Scenario& s, const std::vector<int64_t>& gpus, GrowAxis axis, const Calibration& cal,
                              ScaleBatch batch, const std::function<void(const Scenario&)>& check) {
  std::vector<ScalePoint> out;
  const Parallelism& p = s.parallelism;
  const int64_t per_dp_rank = s.batch.global_batch / p.dense_data_parallel();  // sequences per data-parallel rank
  if (p.folded && axis != GrowAxis::dp)
    throw InputError("a folded mesh (etp given) grows along dp only: ep and etp are carved from a stage's GPUs");
  for (int64_t n : gpus) {
    Scenario x = s;
    int64_t& grown = axis == GrowAxis::fsdp ? x.parallelism.fsdp : axis == GrowAxis::dp ? x.parallelism.dp : x.parallelism.ep;
    const int64_t others = p.world() / (axis == GrowAxis::fsdp ? p.fsdp : axis == GrowAxis::dp ? p.dp : p.ep);
    if (n % others != 0)
      throw InputError(std::to_string(n) + " GPUs is not a multiple of the other mesh axes' product " + std::to_string(others));
    grown = n / others;
    if (axis == GrowAxis::ep && x.model.is_moe() && x.model.experts % grown != 0)
      throw InputError("ep = " + std::to_string(grown) + " for " + std::to_string(n) + " GPUs must divide the model's " +
                       std::to_string(x.model.experts) + " routed experts");
    x.gpus = n;
    if (batch == ScaleBatch::per_gpu) {
      x.batch.global_batch = per_dp_rank * x.parallelism.dense_data_parallel();
    } else {
      const int64_t per = x.batch.micro_batch * x.parallelism.dense_data_parallel();
      if (x.batch.global_batch % per != 0) {
        // A micro-batch every point of the curve can run: a divisor of each count's sequences per
        // data-parallel rank, no larger than the scenario's (its memory), that passes the
        // scenario's rules at every count (DualPipe's and interleaving's micro-batch counts).
        int64_t common = 0;
        for (int64_t m : gpus) {
          if (m % others != 0) continue;
          Parallelism q = s.parallelism;
          (axis == GrowAxis::fsdp ? q.fsdp : axis == GrowAxis::dp ? q.dp : q.ep) = m / others;
          const int64_t ranks = q.dense_data_parallel();
          if (s.batch.global_batch % ranks != 0) {
            common = -1;
            break;
          }
          common = std::gcd(common, s.batch.global_batch / ranks);
        }
        int64_t fits = 0;
        for (int64_t d = std::min(common, s.batch.micro_batch); d >= 1 && fits == 0; --d) {
          if (common % d != 0) continue;
          bool ok = true;
          for (int64_t m : gpus) {
            Scenario y = s;
            (axis == GrowAxis::fsdp ? y.parallelism.fsdp : axis == GrowAxis::dp ? y.parallelism.dp : y.parallelism.ep) = m / others;
            y.gpus = m;
            y.batch.micro_batch = d;
            try {
              if (check) check(y);
            } catch (const InputError&) {
              ok = false;
              break;
            }
          }
          if (ok) fits = d;
        }
        const std::string hint =
            fits > 0     ? "; --set batch.micro_batch=" + std::to_string(fits) + " runs every count of the curve"
            : common > 0 ? "; no micro-batch up to " + std::to_string(std::min(common, s.batch.micro_batch)) +
                               " that divides every count's sequences per rank passes the scenario's rules at every count"
                         : "; the global batch must be a multiple of every count's data-parallel ranks";
        throw InputError("at " + std::to_string(n) + " GPUs the fixed global batch of " + std::to_string(x.batch.global_batch) +
                         " sequences is not a whole number of micro-batches of " + std::to_string(x.batch.micro_batch) +
                         " per data-parallel rank (" + std::to_string(x.parallelism.dense_data_parallel()) + " ranks)" + hint);
      }
    }
    // Stragglers keep their GPU or rack index; each point checks they still fit.
    place_stragglers(x);
    size_t bad = 0;
    if (const std::string why = straggler_problem(x, &bad); !why.empty())
      throw InputError("at " + std::to_string(n) + " GPUs, straggler " + std::to_string(bad) + ": " + why);
    x.name = s.name + " @ " + std::to_string(n) + " GPUs";
    // Points that break a rule of the scenario (DualPipe's micro-batch count, a layout) say so.
    if (check) check(x);
    ScalePoint pt;
    pt.gpus = n;
    pt.report = predict(x, cal);
    pt.terms = step_terms(pt.report);
    if (out.empty()) {
      pt.efficiency = 1.0;
      pt.ideal_step_s = pt.report.step_time.value();
      for (auto& [k, v] : pt.terms) pt.lost.emplace_back(k, 0.0);
    } else {
      const ScalePoint& first = out.front();
      pt.efficiency = pt.report.tokens_per_s_per_gpu / first.report.tokens_per_s_per_gpu;
      const double work = pt.report.tokens_per_step_per_gpu / first.report.tokens_per_step_per_gpu;
      pt.ideal_step_s = first.report.step_time.value() * work;
      for (size_t i = 0; i < pt.terms.size(); ++i)
        pt.lost.emplace_back(pt.terms[i].first, pt.terms[i].second - first.terms[i].second * work);
    }
    out.push_back(std::move(pt));
  }
  return out;
}

}  // namespace moeperf
