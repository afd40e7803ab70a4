#include "model/study/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "model/pricing/cost.h"
#include "model/workload/flops.h"
#include "model/workload/memory.h"
#include "model/workload/pipeline_layout.h"
#include "model/workload/routing.h"

namespace moeperf {

ExpertLoad expert_load(const Scenario& s, const Calibration& cal, std::vector<std::string>* notes) {
  ExpertLoad load;
  const ModelSpec& m = s.model;
  if (!m.is_moe()) return load;
  const Parallelism& p = s.parallelism;
  // Tokens one EP group routes per micro-batch: each rank's sequence-parallel shard.
  const int64_t per_rank = s.batch.micro_batch * s.batch.seq_len / p.cp / p.tp;
  const int64_t tokens = per_rank * p.ep;
  RouterSpec router = m.router;
  if (!s.routing.group_limited) router = RouterSpec{};
  if (s.routing.distribution != RoutingDistribution::uniform && s.routing.distribution != RoutingDistribution::balanced &&
      router.groups > 1) {
    router = RouterSpec{};
    if (notes) notes->push_back("group-limited routing is modelled for uniform shares only; skewed routing priced without it");
  }
  if (notes) {
    // A parameter of another distribution than the one routed (a sweep over distributions sets it
    // for all points): given, checked, not used.
    const char* routed = to_string(s.routing.distribution);
    auto unused = [&](const char* field, bool given, RoutingDistribution reads) {
      if (given && s.routing.distribution != reads)
        notes->push_back(std::string("routing.") + field + " is given but the distribution is " + routed + ": not used");
    };
    unused("zipf_exponent", s.routing.zipf_exponent > 0, RoutingDistribution::zipf);
    unused("dirichlet_alpha", s.routing.dirichlet_alpha > 0, RoutingDistribution::dirichlet);
    unused("histogram", !s.routing.histogram.empty(), RoutingDistribution::histogram);
  }
  const LoadStats st = expected_loads(s.routing, router, m.experts, m.top_k, static_cast<int>(p.ep), tokens);
  load.mean_rows = st.mean_rank_rows;
  load.max_rows = st.expected_max_rank_rows;
  load.max_rank_tile_rows = expected_tile_rows(s.routing, router, m.experts, m.top_k, static_cast<int>(p.ep), tokens,
                                               static_cast<int>(cal[Param::gemm_tile_m]));
  load.max_rank_tile_rows = std::max(load.max_rank_tile_rows, load.max_rows);
  load.distinct_ranks = st.expected_distinct_ranks;
  load.mean_tokens = st.mean_rank_tokens;
  load.max_tokens = st.expected_max_rank_tokens;
  // NVLink domains of the EP group of rank 0: a token's experts hit distinct_domains of them; a
  // dispatcher that crosses to each remote domain once sends that.
  const std::vector<int64_t> ep = group_members(Group::ep, p, 0);
  const int64_t per_domain = std::max<int64_t>(1, job_gpus_per_domain(s.system, s.gpus));
  int64_t ranks_per_domain = 0;
  for (int64_t g : ep) ranks_per_domain += g / per_domain == ep.front() / per_domain;
  load.ep_domains = (p.ep + ranks_per_domain - 1) / ranks_per_domain;
  // Where ep, tp and cp make some EP group straddle more domains than rank 0's, the exchanges wait
  // for that group: the load is the widest group's (its ranks taken as spread evenly over its
  // domains), as the pricer takes its members (Pricer::comm_cost, widest_group).
  if (p.ep > 1) {
    const int64_t stride = p.ep_stride();
    int64_t worst = 0;
    for (int64_t base = 0; base < s.gpus; ++base) {
      if ((base / stride) % p.ep != 0) continue;
      int64_t domains = 1;
      for (int64_t i = 1; i < p.ep; ++i)
        domains += (base + i * stride) / per_domain != (base + (i - 1) * stride) / per_domain;
      worst = std::max(worst, domains);
    }
    if (worst > load.ep_domains) {
      if (notes)
        notes->push_back("some EP groups span " + std::to_string(worst) + " NVLink domains, rank 0's spans " +
                         std::to_string(load.ep_domains) + "; the EP exchanges are priced as the widest group's, which "
                         "the step waits for (choose ep, tp and cp so that groups do not straddle a domain boundary)");
      load.ep_domains = worst;
      ranks_per_domain = (p.ep + worst - 1) / worst;
    }
  }
  load.distinct_domains = load.ep_domains > 1
                              ? expected_distinct_nodes(s.routing, router, m.experts, m.top_k, static_cast<int>(p.ep),
                                                        static_cast<int>(ranks_per_domain))
                              : 1.0;
  load.max_expert_rows = st.expected_max_expert_rows;
  // A ragged exchange into MaxText's static buffers (the zeroed outputs it passes XLA,
  // stack.a2a_zero_fill) receives at most their rows: MaxText drops what overflows them
  // (get_ragged_buffer_size's factor > 0), so a buffer below the busiest rank's rows is not
  // dropless, while moeperf prices every row. A PyTorch exchange's output has its exact size.
  if (notes && p.ep > 1 && s.stack.dispatcher == Dispatcher::alltoall && s.stack.a2a_zero_fill && s.stack.a2a_buffer_factor > 0) {
    const double buffer = ragged_buffer_rows(s, load);
    if (buffer < load.max_rows) {
      char line[400];
      std::snprintf(line, sizeof line,
                    "stack.a2a_buffer_factor = %g sizes the ragged buffers at %.0f rows, fewer than the busiest rank's "
                    "%.0f: MaxText drops the rows that overflow (the run is not dropless), while this prediction prices "
                    "every row; a factor of at least %.2f keeps them all",
                    s.stack.a2a_buffer_factor, buffer, load.max_rows, std::ceil(load.max_rows / load.mean_rows * 100) / 100);
      notes->push_back(line);
    }
  }
  // Megatron-Core splits each expert over the TP ranks unless told otherwise
  // (megatron/training/arguments.py: --expert-tensor-parallel-size defaults to
  // --tensor-model-parallel-size), on its folded mesh; moeperf's unfolded mesh with tp > 1 keeps each
  // expert whole on every TP rank of its EP rank and strides the EP groups by tp: a layout
  // Megatron does not build, and the likely reading of "TP 2, EP 8" there is etp 2.
  // (The folded mesh needs fsdp 1: with FSDP the note would point at a layout the loader refuses.)
  if (notes && p.tp > 1 && !p.folded && p.fsdp == 1 && m.is_moe() && s.stack.name == "megatron-core") {
    const std::string tp = std::to_string(p.tp);
    notes->push_back("tp " + tp + " without parallelism.etp prices the unfolded mesh: every expert whole on each of the " + tp +
                     " TP ranks of its EP rank" + (p.ep > 1 ? (p.cp > 1 ? ", the EP groups strided by tp x cp" : ", the EP groups strided by tp") : "") +
                     ". Megatron-Core splits the experts over TP unless told (--expert-tensor-parallel-size defaults to the TP "
                     "size) on its folded mesh: give parallelism.etp (" + tp + ", or 1 for --expert-tensor-parallel-size 1) and "
                     "dp = ep x dp of this mesh (" + std::to_string(p.ep * p.dp) +
                     ": the folded mesh counts gpus = tp x cp x pp x dp) to price its layout");
  }
  return load;
}

Lowered lower(const Scenario& s, const Calibration& cal) {
  Lowered l;
  l.load = expert_load(s, cal, &l.notes);
  l.graph = std::make_shared<const StepGraph>(lower_step(s, l.load));
  return l;
}

namespace {

Scenario evenly_split(const Scenario& s) {
  Scenario x = s;
  x.parallelism.layout.clear();
  x.parallelism.layout_spec.clear();
  return x;
}

std::string ms_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", 1e3 * s);
  return b;
}

double largest(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

}  // namespace

namespace {

// Each layer's, the embedding's and the tail's cost from the even split's graph (balanced_layout).
void price_items(const Scenario& s, const Pricer& pricer, const StepGraph& even, BalancedLayout& out) {
  const int L = s.model.layers;
  // Items: the layers, then the embedding (L) and the tail (L + 1: head, loss, MTP modules). Each is
  // priced on the first class that runs it, for the first micro-batch it runs there.
  const size_t items = static_cast<size_t>(L) + 2;
  std::vector<int> owner(items, -1);
  std::vector<int64_t> mb(items, -1);
  std::vector<double> cost(items, 0.0);
  for (size_t c = 0; c < even.classes.size(); ++c)
    for (const Op& op : even.classes[c].ops) {
      const bool layer_comm = op.category == Category::ep_comm || op.category == Category::tp_comm;
      if (op.stream != Stream::compute && !layer_comm) continue;
      if (op.category == Category::optimizer || op.category == Category::pp_comm) continue;
      int item = -1;
      if (op.layer >= 0) item = op.layer < L ? op.layer : L + 1;
      else if (name_starts(op.name, "embed.")) item = L;
      else if (name_starts(op.name, "head.") || name_starts(op.name, "mtp.head.")) item = L + 1;
      if (item < 0) continue;
      const auto i = static_cast<size_t>(item);
      if (owner[i] < 0) owner[i] = static_cast<int>(c), mb[i] = op.micro_batch;
      if (owner[i] != static_cast<int>(c) || mb[i] != op.micro_batch) continue;
      cost[i] += pricer.time(op, even.classes[c].pp_stage).value();
    }
  out.layer_costs.assign(cost.begin(), cost.begin() + L);
  out.embedding_cost = cost[static_cast<size_t>(L)];
  out.tail_cost = cost[static_cast<size_t>(L) + 1];
}

// The virtual stages each GPU of the pipeline runs (two or more under interleaving and DualPipe).
std::vector<std::vector<int>> gpu_stages_of(const Scenario& s) {
  std::vector<std::vector<int>> g(static_cast<size_t>(s.parallelism.pp));
  for (int st = 0; st < s.parallelism.pp; ++st)
    for (int c = 0; c < pipeline_chunks(s); ++c) g[static_cast<size_t>(st)].push_back(virtual_stage(s, st, c));
  return g;
}

// The even split in `out`'s place, for the reason given.
void keep_even(const Scenario& s, BalancedLayout& out, std::string why) {
  out.layout = effective_layout(s);
  out.spec = format_pipeline_layout(out.layout);
  out.balanced_costs = out.even_costs;
  out.balanced_gpu_costs = out.even_gpu_costs;
  out.capped = false;
  out.even_kept = std::move(why);
}

// The split from the priced items, at most max_layers per virtual stage (none when empty), or the
// even split when it is as good. Throws std::invalid_argument when no split keeps the caps.
void choose_split(const Scenario& s, BalancedLayout& out, const std::vector<int>& max_layers) {
  const std::vector<std::vector<int>> gpu_stages = gpu_stages_of(s);
  const int mtp = s.train_mtp ? s.model.mtp_layers : 0;
  const bool paired = dualpipe_family(s);
  out.layout = balance_pipeline_layout(out.layer_costs, out.embedding_cost, out.tail_cost, mtp, virtual_stages(s),
                                       gpu_stages, max_layers, paired);
  auto stage_costs = [&](const std::vector<VirtualStageLayout>& lay) {
    std::vector<double> v;
    size_t l = 0;
    for (const VirtualStageLayout& x : lay) {
      double c = (x.embedding ? out.embedding_cost : 0.0) + (x.loss ? out.tail_cost : 0.0);
      for (int k = 0; k < x.layers; ++k) c += out.layer_costs[l++];
      v.push_back(c);
    }
    return v;
  };
  auto gpu_costs = [&](const std::vector<double>& stage) {
    std::vector<double> v;
    for (const auto& g : gpu_stages) v.push_back(pipeline_gpu_cost(g, stage, paired));
    return v;
  };
  const std::vector<VirtualStageLayout> even_layout = effective_layout(s);
  out.even_costs = stage_costs(even_layout);
  out.balanced_costs = stage_costs(out.layout);
  out.even_gpu_costs = gpu_costs(out.even_costs);
  out.balanced_gpu_costs = gpu_costs(out.balanced_costs);
  out.even_kept.clear();
  // The even split is kept unless the balanced one lowers the busiest GPU's sum, or keeps it and
  // lowers the costliest virtual stage (Kimi-K2 under 1F1B: 60 MoE layers on 16 stages hold four on
  // some stage either way; the sum of squares alone is no reason to move layers).
  const double ge = largest(out.even_gpu_costs), gb = largest(out.balanced_gpu_costs);
  const bool lower_gpu = gb < ge * (1 - 1e-9);
  const bool same_gpu = !lower_gpu && gb <= ge * (1 + 1e-9);
  out.spec = format_pipeline_layout(out.layout);
  if (!lower_gpu && !(same_gpu && largest(out.balanced_costs) < largest(out.even_costs) * (1 - 1e-9)))
    keep_even(s, out, max_layers.empty() ? "no other split lowers it" : "no split that fits in HBM lowers it");
}

}  // namespace

BalancedLayout balanced_layout(const Scenario& scenario, const Pricer& pricer, const StepGraph& even) {
  const Scenario s = evenly_split(scenario);
  BalancedLayout out;
  price_items(s, pricer, even, out);
  choose_split(s, out, {});
  return out;
}

BalancedLayout balanced_layout(const Scenario& scenario, const Calibration& cal, const Pricer& pricer) {
  const Scenario s = evenly_split(scenario);
  // 2 x pp micro-batches keep every schedule's rule (a multiple of pp for interleaving, an even
  // count of at least 2 x pp for DualPipe).
  Scenario probe = s;
  const int64_t mbs = s.micro_batches(), few = 2 * s.parallelism.pp;
  if (mbs > few) probe.batch.global_batch = s.batch.global_batch / mbs * few;
  const Lowered low = lower(probe, cal);
  BalancedLayout b;
  price_items(s, pricer, *low.graph, b);
  choose_split(s, b, {});
  // Memory: more layers on the first stages hold more activations in flight there. While the split
  // does not fit and the even one does, the fullest GPU's largest virtual stage is capped at one
  // layer fewer and the split chosen again; the even split when no split within the caps is better.
  if (!b.even_kept.empty() || !memory_report(s, low.load, cal).fits) return b;
  const std::vector<std::vector<int>> gpu_stages = gpu_stages_of(s);
  std::vector<int> caps(static_cast<size_t>(virtual_stages(s)), s.model.layers);
  // Each round caps one stage at one layer fewer than it holds; the split of the last round is
  // checked too.
  for (int round = 0;; ++round) {
    Scenario x = s;
    x.parallelism.layout = b.layout;
    const MemoryReport m = memory_report(x, low.load, cal);
    if (m.fits) return b;
    if (round > s.model.layers) break;
    const auto& mine = gpu_stages[static_cast<size_t>(m.pp_stage)];
    const int v = *std::max_element(mine.begin(), mine.end(), [&](int a, int c) {
      return b.layout[static_cast<size_t>(a)].layers < b.layout[static_cast<size_t>(c)].layers;
    });
    const int held = b.layout[static_cast<size_t>(v)].layers;
    if (held == 0) break;
    caps[static_cast<size_t>(v)] = held - 1;
    try {
      choose_split(s, b, caps);
    } catch (const std::invalid_argument&) {
      break;
    }
    if (!b.even_kept.empty()) return b;  // nothing within the caps beats the even split, which fits
    b.capped = true;
  }
  keep_even(s, b, "no balanced split found fits in HBM where it does");
  return b;
}

Seconds host_free_step_time(const Scenario& s, const Calibration& cal) {
  Scenario x = s;
  x.stack.host_op_s = 0;
  x.stack.graph_launch_s = 0;
  Calibration c = cal;
  c.set(Param::gemm_multi_stream_group_s, 0.0);
  return predict(x, c).step_time;
}

void add_host_cost(StepReport& r, const Calibration& cal) {
  if (r.simulated && r.host_busy.value() > 0 && r.scenario)
    r.host_cost = Seconds(std::max(0.0, r.step_time.value() - host_free_step_time(*r.scenario, cal).value()));
}

StepReport predict(const Scenario& s, const Calibration& cal, const PredictOptions& opt) {
  if (!s.parallelism.balance_layout) return predict_lowered(s, cal, lower(s, cal), opt);
  // "balanced": any layout the scenario holds is a previous prediction's choice and is found again
  // (a study that changed the scenario gets its own). One virtual stage has nothing to balance.
  const Scenario even = evenly_split(s);
  if (virtual_stages(even) < 2) return predict_lowered(even, cal, lower(even, cal), opt);
  // The even split lowered and priced, its stages' costs evened, the result predicted.
  auto topo = opt.topology ? opt.topology : std::make_shared<const Topology>(Topology::build(s.system, s.gpus));
  std::optional<Pricer> own;
  const Pricer& pricer = opt.pricer ? *opt.pricer : own.emplace(even, *topo, cal);
  const BalancedLayout b = balanced_layout(even, cal, pricer);
  Scenario x = even;
  x.parallelism.layout = b.layout;
  x.parallelism.layout_spec = b.spec;
  PredictOptions o = opt;
  o.topology = topo;
  o.pricer = nullptr;  // priced again for the scenario that holds the layout
  StepReport r = predict_lowered(x, cal, lower(x, cal), o);
  const bool chunks = pipeline_chunks(even) > 1;
  const bool paired = dualpipe_family(even);
  const std::string what = paired   ? "busiest GPU's virtual stages (their sum plus the costlier, as overlapped pairs run)"
                           : chunks ? "busiest GPU's sum of virtual stages"
                                    : "costliest pipeline stage";
  const std::string priced = "; priced from the compute, EP and TP collectives of one micro-batch, uncontended";
  std::string note = "layout balanced by priced stage cost: " + b.spec;
  if (!b.even_kept.empty()) {
    note += ", the even split: " + b.even_kept + " (its " + what + ": " + ms_text(largest(b.even_gpu_costs)) +
            " per micro-batch" + priced + ")";
  } else {
    note += "; its " + what + " " + ms_text(largest(b.balanced_gpu_costs)) + " per micro-batch against the even split's " +
            ms_text(largest(b.even_gpu_costs));
    if (chunks)
      note += ", its costliest virtual stage " + ms_text(largest(b.balanced_costs)) + " against " + ms_text(largest(b.even_costs));
    note += " (" + priced.substr(2) + ")";
    if (b.capped) note += "; layers per stage capped to fit in HBM, where the uncapped split does not";
  }
  r.notes.insert(r.notes.begin(), note);
  return r;
}

StepReport predict_lowered(const Scenario& s, const Calibration& cal, const Lowered& lowered, const PredictOptions& opt) {
  StepReport r;
  auto scen = std::make_shared<const Scenario>(s);
  auto topo = opt.topology ? opt.topology : std::make_shared<const Topology>(Topology::build(s.system, s.gpus));
  r.scenario = scen;
  r.topology = topo;
  r.name = s.name;
  r.gpus = s.gpus;
  r.load = lowered.load;
  r.notes = lowered.notes;
  auto graph = lowered.graph;
  r.graph = graph;
  std::optional<Pricer> own;
  const Pricer& pricer = opt.pricer ? *opt.pricer : own.emplace(*scen, *topo, cal);
  for (const auto& n : pricer.notes()) r.notes.push_back(n);
  for (const auto& n : graph->notes) r.notes.push_back(n);

  // Serial estimate of the busiest class.
  for (const RankClass& rc : graph->classes) r.serial_step_time = std::max(r.serial_step_time, serial_time(rc, pricer));
  SimResult sim;
  if (opt.simulate) {
    sim = simulate(*graph, pricer, s.stack);
  } else {
    // Back to back on one queue: start = previous end.
    for (const RankClass& rc : graph->classes) {
      SimClass sc;
      Seconds t;
      for (const Op& op : rc.ops) {
        const Seconds d = class_op_time(rc, op, pricer);
        sc.ops.push_back({t, t + d, 0, Seconds(0)});
        t += d;
      }
      sc.finish = t;
      sc.queues = {Stream::compute};
      sim.step_time = std::max(sim.step_time, t);
      sim.classes.push_back(std::move(sc));
    }
  }
  r.step_time = sim.step_time;
  r.simulated = opt.simulate;
  // Report the class that finishes last.
  for (size_t c = 0; c < sim.classes.size(); ++c)
    // The first class among those finishing last: on a tie (classes that end on a collective they
    // share) the stage's own class, holding the busiest EP rank, not a copy of its program.
    if (sim.classes[c].finish > sim.classes[static_cast<size_t>(r.busiest_class)].finish) r.busiest_class = static_cast<int>(c);
  const RankClass& rc = graph->classes[static_cast<size_t>(r.busiest_class)];
  const SimClass& sc = sim.classes[static_cast<size_t>(r.busiest_class)];

  r.model_flops_per_token = graph->model_flops_per_token;
  r.tokens_per_step_per_gpu = static_cast<double>(s.batch.global_batch * s.batch.seq_len) / static_cast<double>(s.gpus);
  r.tokens_per_s_per_gpu = r.tokens_per_step_per_gpu / r.step_time.value();
  r.model_tflops_per_gpu = r.tokens_per_s_per_gpu * r.model_flops_per_token / 1e12;
  r.cluster_tokens_per_s = r.tokens_per_s_per_gpu * static_cast<double>(s.gpus);
  r.domains_used = r.topology->domains();
  r.gpus_bought = r.domains_used * s.system.domain.gpus();
  r.mfu = r.tokens_per_s_per_gpu * r.model_flops_per_token / s.system.gpu().dense_bf16.value();

  // Kernel time as a profiler sums it: a collective counts from its launch, its wait for a slower
  // synchronized class included.
  auto kernel_time = [](const OpTiming& t) { return t.end - t.start + t.waited; };
  // Communication share of kernel time summed over every GPU (each class weighted by its ranks),
  // so the GPUs that wait for a straggler count as many times as there are of them.
  double comm_all = 0, kernel_all = 0;
  for (size_t c = 0; c < graph->classes.size() && c < sim.classes.size(); ++c) {
    const double w = static_cast<double>(graph->classes[c].ranks);
    for (size_t i = 0; i < graph->classes[c].ops.size(); ++i) {
      const double d = kernel_time(sim.classes[c].ops[i]).value();
      kernel_all += w * d;
      if (is_communication(graph->classes[c].ops[i].category)) comm_all += w * d;
    }
  }
  // Kernel time per category, per op, exposed communication: the reported class.
  std::map<std::string, size_t> index;
  std::map<Param, double> at_default;  // compute seconds priced by a parameter no measurement set
  std::map<Param, double> shaped;      // compute seconds whose rate a shape term no measurement set bends
  // EP exchanges through HybridEP's PyTorch API, whose buffer copies (ep_api_copy_passes) no
  // measurement of the generation set: the exchanges' seconds (the copies are part of them).
  double api_copies = 0;
  const bool copies = s.stack.dispatcher == Dispatcher::fused_dedup && s.stack.ep_buffer_copies &&
                      s.stack.ep_kernel == EpKernel::hybridep && cal[Param::ep_api_copy_passes] > 0 &&
                      (cal.borrowed.count(Param::ep_api_copy_passes) || cal.carried.count(Param::ep_api_copy_passes));
  auto unset = [&](Param p) { return cal.is_default(p) || cal.borrowed.count(p) || cal.carried.count(p); };
  for (size_t i = 0; i < rc.ops.size(); ++i) {
    const Op& op = rc.ops[i];
    const Seconds d = kernel_time(sc.ops[i]);
    if (const auto p = rate_param(op, s.system.gpu()); p && unset(*p)) at_default[*p] += d.value();
    if (copies && op.collective == Collective::all_to_all && op.group == Group::ep) api_copies += d.value();
    // Shape terms carried or borrowed only: one at its default is often a fit that landed on it
    // (Blackwell's gemm_k_half at its bound 0), which the profile's values cannot tell apart.
    for (Param p : shape_params(op))
      if (cal.borrowed.count(p) || cal.carried.count(p)) shaped[p] += d.value();
    r.breakdown[static_cast<size_t>(op.category)] += d;
    auto [it, inserted] = index.try_emplace(op.name, r.ops.size());
    if (inserted) r.ops.push_back({op.name, op.category, 0, {}, {}, {}, {}, {}, {}, {}});
    OpSummary& o = r.ops[it->second];
    ++o.count;
    o.seconds += d;
    o.serial_seconds += class_op_time(rc, op, pricer);
    o.flops += op.flops;
    // XLA's one-shot all-to-all is a copy kernel (no collective) whose bytes are messages.
    const bool message = op.collective != Collective::none || op.one_shot_peers > 0;
    o.bytes += message ? op.bytes : op.hbm_bytes;
    o.hbm_bytes += op.hbm_bytes;
    if (message) o.message_bytes += op.bytes;
    o.ep_kernel = op.one_shot_peers > 0 || (op.collective == Collective::all_to_all && op.group == Group::ep &&
                                            s.stack.dispatcher == Dispatcher::fused_dedup);
  }
  const std::vector<double> exposed_share = exposed_by_op(rc, sc);
  for (size_t i = 0; i < rc.ops.size(); ++i) r.ops[index.at(rc.ops[i].name)].exposed += Seconds(exposed_share[i]);
  r.idle = idle_time(rc, sc);
  r.host_busy = sc.host_busy;
  r.host_ops = sc.host_ops;
  r.graph_launches = sc.graph_launches;
  r.comm_fraction_of_kernel_time = kernel_all > 0 ? comm_all / kernel_all : 0.0;
  // Exposed: time covered by communication but by no compute; the per-op shares add up to it.
  double exposed = 0;
  for (double x : exposed_share) exposed += x;
  r.exposed_comm = Seconds(exposed);
  r.exposed_comm_fraction = r.step_time.value() > 0 ? exposed / r.step_time.value() : 0.0;
  // The band: per op class its critical-path share times its fit spread, in quadrature.
  {
    std::map<std::string, double> share;
    const double step = std::max(r.step_time.value(), 1e-300);
    auto add = [&](const char* cls, double sec) { share[cls] += sec / step; };
    add("gemm", r.breakdown[static_cast<size_t>(Category::gemm)].value());
    add("attention", r.breakdown[static_cast<size_t>(Category::attention)].value());
    add("memory", r.breakdown[static_cast<size_t>(Category::memory)].value() +
                      r.breakdown[static_cast<size_t>(Category::optimizer)].value());
    for (const OpSummary& o : r.ops) {
      if (o.category == Category::offload) add("host_copy", o.exposed.value());
      // Fused EP kernels and XLA's one-shot kernel are priced by the EP class's fitted parameters.
      else if (o.ep_kernel) add("ep", o.exposed.value());
      else if (is_communication(o.category)) add("collective", o.exposed.value());
    }
    double sq = 0;
    for (auto& [cls, w] : share) {
      auto it = cal.residual_rms.find(cls);
      if (it == cal.residual_rms.end()) continue;
      const double term = std::min(1.0, w) * it->second;
      r.band_terms[cls] = term;
      sq += term * term;
    }
    r.band = std::sqrt(sq);
  }
  r.band_high = r.band;
  r.band_low = std::min(0.99, r.band);  // a step's low end stays above zero
  // The end-to-end ratios are published steps over simulated ones: they do not bound a serial sum.
  if (!cal.end_to_end.empty() && opt.simulate) {
    StepReport::EndToEndTerm e;
    e.stack = s.stack.name;
    e.source = cal.end_to_end_source;
    // The cases of this very configuration of the stack first (the same name and overrides: the
    // published run closest to what is priced here), else every case of the stack's name, else all.
    std::vector<double> ratios;
    for (const auto& c : cal.end_to_end)
      if (c.stack == s.stack.name && c.overrides && *c.overrides == s.stack.overrides) ratios.push_back(c.step_ratio);
    e.same_config = !ratios.empty();
    if (ratios.empty())
      for (const auto& c : cal.end_to_end)
        if (c.stack == s.stack.name) ratios.push_back(c.step_ratio);
    if (ratios.empty()) {
      e.own_stack = false;
      for (const auto& c : cal.end_to_end) ratios.push_back(c.step_ratio);
    }
    e.cases = static_cast<int>(ratios.size());
    e.slowest = *std::max_element(ratios.begin(), ratios.end());
    e.fastest = *std::min_element(ratios.begin(), ratios.end());
    r.band_high = std::hypot(r.band, std::max(0.0, e.slowest - 1));
    r.band_low = std::min(0.99, std::hypot(r.band, std::max(0.0, 1 - e.fastest)));
    r.end_to_end = e;
  }
  // A fitted profile may leave a parameter at its default where no record of the generation moves
  // it (Hopper's attention backward), borrow it (Hopper's BF16 GEMMs) or carry it from the
  // generation its fit started from (Blackwell Ultra's attention): the band does not cover that, so say it.
  if (cal.profile != "defaults") {
    // A parameter's value and its share of the step's kernel time, as the notes print them; false
    // below 5 %.
    auto figures = [&](Param p, double sec, std::string& value, std::string& pct) {
      const double share = sec / std::max(r.step_time.value(), 1e-300);
      if (share < 0.05) return false;
      char v[32], q[32];
      std::snprintf(v, sizeof v, "%g", cal[p]);
      std::snprintf(q, sizeof q, "%.0f %%", 100 * share);
      value = v, pct = q;
      return true;
    };
    std::string value, pct;
    for (const auto& [p, sec] : at_default) {
      if (!figures(p, sec, value, pct)) continue;
      const ParamDef& d = param_def(p);
      if (auto b = cal.borrowed.find(p); b != cal.borrowed.end())
        r.notes.push_back(std::string(d.name) + " = " + value + " is borrowed, not a fit: " + b->second + "; it prices " + pct +
                          " of the step's kernel time (the band does not cover it)");
      else if (auto c = cal.carried.find(p); c != cal.carried.end())
        r.notes.push_back(std::string(d.name) + " = " + value + " is carried from the " + c->second +
                          " profile: no measurement of this GPU's generation sets it, and it prices " + pct +
                          " of the step's kernel time (the band does not cover it)");
      else
        r.notes.push_back(std::string(d.name) + " = " + value + " is its default, not a fit: no measurement of the profile's " +
                          "GPU generation sets it, and it prices " + pct + " of the step's kernel time (the band does not cover it)");
    }
    // A shape term (Blackwell Ultra's attention head-dim term, Hopper's fitted on FlashAttention-3,
    // where Blackwell Ultra's exp units run twice as fast) bends the rate of the ops it shapes.
    for (const auto& [p, sec] : shaped) {
      if (!figures(p, sec, value, pct)) continue;
      const auto c = cal.carried.find(p);
      const std::string whence = c != cal.carried.end() ? "is carried from the " + c->second + " profile" : "is borrowed, not a fit";
      r.notes.push_back(std::string(param_def(p).name) + " = " + value + " " + whence +
                        ": no measurement of this GPU's generation sets this shape term, and it bends the rate of " + pct +
                        " of the step's kernel time (the band does not cover it)");
    }
    if (figures(Param::ep_api_copy_passes, api_copies, value, pct)) {
      const auto c = cal.carried.find(Param::ep_api_copy_passes);
      const auto b = cal.borrowed.find(Param::ep_api_copy_passes);
      const std::string whence = c != cal.carried.end() ? "is carried from the " + c->second + " profile"
                                 : b != cal.borrowed.end() ? "is borrowed, not a fit (" + b->second + ")"
                                                           : "is borrowed, not a fit";
      r.notes.push_back("ep_api_copy_passes = " + value + " " + whence +
                        ": no measurement of this GPU's generation sets the HBM passes of HybridEP's PyTorch-API buffer "
                        "copies, which the EP exchanges taking " + pct + " of the step's kernel time include (the band does not cover it)");
    }
  }
  r.profile = cal.profile;
  r.stack = s.stack.name;
  r.memory = memory_report(s, r.load, cal);
  const double tokens_per_step = static_cast<double>(s.batch.global_batch * s.batch.seq_len);
  const double gpus = static_cast<double>(s.gpus);
  if (const auto& w = s.system.power_price.watts_per_gpu) {
    r.energy_per_step = (*w * gpus) * r.step_time;
    r.kwh_per_million_tokens = r.energy_per_step->value() / 3.6e6 / tokens_per_step * 1e6;
  }
  if (const auto& usd = s.system.power_price.usd_per_gpu_hour)
    r.usd_per_million_tokens = *usd * gpus * r.step_time.value() / 3600.0 / tokens_per_step * 1e6;
  r.sim = std::make_shared<const SimResult>(std::move(sim));
  return r;
}

TrainingBudget training_budget(const StepReport& r, double tokens) {
  TrainingBudget b;
  b.tokens = tokens;
  b.seconds = r.cluster_tokens_per_s > 0 ? tokens / r.cluster_tokens_per_s : 0;
  if (r.kwh_per_million_tokens) b.mwh = *r.kwh_per_million_tokens * tokens / 1e6 / 1e3;
  if (r.usd_per_million_tokens) b.usd = *r.usd_per_million_tokens * tokens / 1e6;
  return b;
}

}  // namespace moeperf
