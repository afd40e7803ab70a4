#include "model/io/plan.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "model/error.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/report_io.h"
#include "model/pricing/cost.h"
#include "model/pricing/efficiency.h"
#include "model/study/study.h"
#include "model/workload/flops.h"
#include "model/workload/memory.h"

namespace moeperf::io {
namespace {

struct Candidate {
  Scenario s;
  std::string layout;
  std::vector<std::string> sets;
};

std::vector<int64_t> powers_of_two_dividing(int64_t n, int64_t max) {
  std::vector<int64_t> v;
  for (int64_t p = 1; p <= max && n % p == 0; p *= 2) v.push_back(p);
  return v;
}

// A lower bound on the step the model predicts, from FLOPs alone: the step's model FLOPs per GPU at
// the fastest GEMM rate the model prices any of its formats at (its calibrated fraction of the
// peak), stretched by the pipeline's fill and drain ((M + (pp - 1) / vpp) / M with M micro-batches).
// Attention, memory-bound ops, recompute and communication only add to it.
// The attention core's FLOPs are counted apart, at the fastest rate attention_efficiency can give
// them (keys without bound, head dims without bound: fraction x (128 + half) / 128, capped at the
// BF16 peak; the backward's half over its 2.5 x work), since a calibration may price attention
// faster than the GEMMs (a BF16 GEMM fraction below the attention one).
double step_bound_s(const Scenario& s) {
  const FlopsPerToken f = model_flops_per_token(s.model, s.batch.seq_len, s.train_mtp);
  const double tokens = static_cast<double>(s.batch.global_batch * s.batch.seq_len) / static_cast<double>(s.gpus);
  const double attn = f.attention_core * tokens, flops = f.total * tokens - attn;  // both forward + backward (3 x)
  double rate = 0;
  for (Dtype d : {s.precision.dense_gemm, s.precision.expert_gemm})
    rate = std::max(rate, gemm_peak(d, s.system.gpu()).value() * gemm_fraction(d, s.calibration));
  const Calibration& c = s.calibration;
  const double half = c[Param::attention_hd_half], bf16 = s.system.gpu().dense_bf16.value();
  const double fwd = bf16 * std::min(1.0, c[Param::attention_fwd_fraction] * (128.0 + half) / 128.0);
  const double bwd = bf16 * std::min(1.0, c[Param::attention_bwd_fraction] * (128.0 + half / kAttentionBwdWork) / 128.0);
  const double attn_s = fwd > 0 && bwd > 0 ? attn / 3.0 / fwd + 2.0 * attn / 3.0 / bwd : 0.0;
  // ZB-H1 and DualPipe(V) fill part of the bubble with weight gradients and paired chunks: none
  // of it is counted for them (a looser bound, still one).
  const Parallelism& p = s.parallelism;
  const double m = static_cast<double>(s.micro_batches());
  const bool classic = p.schedule == PipelineSchedule::one_f_one_b || p.schedule == PipelineSchedule::interleaved;
  const double fill = p.pp > 1 && classic ? (m + static_cast<double>(p.pp - 1) / static_cast<double>(p.vpp)) / m : 1.0;
  return rate > 0 ? (flops / rate + attn_s) * fill : 0.0;
}

}  // namespace

namespace {
// "a, b,c" -> {"a", "b", "c"}: the items of a comma-separated list, blanks around them dropped.
std::vector<std::string> comma_items(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    out.push_back(a == std::string::npos ? std::string() : item.substr(a, b - a + 1));
    at = comma + 1;
  }
  return out;
}
}  // namespace

std::vector<PipelineSchedule> parse_schedules(const std::string& text) {
  constexpr PipelineSchedule every[] = {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved, PipelineSchedule::zb_h1,
                                        PipelineSchedule::dualpipe, PipelineSchedule::dualpipev};
  const std::vector<std::string> items = comma_items(text);
  if (items.size() == 1 && items.front() == "all") return {std::begin(every), std::end(every)};
  std::string names;
  for (PipelineSchedule s : every) names += std::string(names.empty() ? "" : ", ") + schedule_name(s);
  std::vector<PipelineSchedule> out;
  for (const std::string& name : items) {
    const auto* hit = std::find_if(std::begin(every), std::end(every), [&](PipelineSchedule s) { return name == schedule_name(s); });
    if (hit == std::end(every))
      throw InputError("--schedules " + text + ": unknown schedule \"" + name + "\" (expected a comma-separated list of " + names +
                       ", or all)");
    if (std::find(out.begin(), out.end(), *hit) == out.end()) out.push_back(*hit);
  }
  return out;
}

std::vector<int64_t> parse_vpps(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : comma_items(text)) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 2 || v > 1024)
      throw InputError("--vpp " + text + ": expected virtual stages per GPU, whole numbers from 2 to 1024 separated by commas, got \"" +
                       item + "\"");
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

PlanResult plan(const Scenario& base, const std::string& file, const PlanOptions& o,
                const std::function<void(std::vector<std::function<void()>>&)>& run) {
  if (o.gpus < 1) throw InputError("plan: --gpus must be at least 1");
  if (o.objective == "cost" && !base.system.power_price.usd_per_gpu_hour)
    throw InputError("plan --objective cost: " + base.system.name + " gives no price per GPU-hour (system price.usd_per_gpu_hour)");
  if (o.schedules.empty()) throw InputError("plan: no pipeline schedule to search (--schedules)");
  if (o.max_layer_passes < 1) throw InputError("plan: --max-passes must be at least 1");
  if (o.vpps.empty() || *std::min_element(o.vpps.begin(), o.vpps.end()) < 2)
    throw InputError("plan: interleaving needs virtual stages per GPU of at least 2 (--vpp)");
  if (o.objective == "time_to_train" && !(o.train_tokens > 0))
    throw InputError("plan --objective time_to_train needs --tokens (a budget like 15T)");
  if (o.objective != "time_to_train" && o.train_tokens > 0)
    throw InputError("plan --tokens is the budget of --objective time_to_train; with --objective " + o.objective +
                     " it would change nothing (add --objective time_to_train, or drop --tokens)");
  PlanResult res;
  const ModelSpec& m = base.model;
  // The batch: the scenario's sequences per GPU on the new count, unless given.
  res.global_batch = o.global_batch > 0 ? o.global_batch
                                        : std::max<int64_t>(1, static_cast<int64_t>(std::llround(
                                                                   static_cast<double>(base.batch.global_batch) *
                                                                   static_cast<double>(o.gpus) / static_cast<double>(base.gpus))));
  const int64_t domain = base.system.domain.gpus();
  std::vector<int64_t> tps;
  for (int64_t t : {1, 2, 4, 8})
    if (t <= domain && m.attention.heads % t == 0 && o.gpus % t == 0) tps.push_back(t);
  std::vector<int64_t> cps = {1};
  if (base.batch.seq_len >= 16384) cps = {1, 2, 4};
  std::vector<int64_t> pps;
  for (int64_t p : {1, 2, 4, 8, 16})
    if (2 * p <= m.layers) pps.push_back(p);
  const std::vector<int64_t> eps = m.is_moe() ? powers_of_two_dividing(m.experts, m.experts) : std::vector<int64_t>{1};
  // Memory policies: the scenario's, and every saved tensor recomputed (none offloaded).
  std::vector<std::pair<std::string, MemoryPolicy>> mems = {{"the scenario's", base.memory}};
  {
    MemoryPolicy full = base.memory;
    full.recompute.clear();
    full.offload.clear();
    for (int c = 0; c < kTensorClassCount; ++c) full.recompute.push_back(static_cast<TensorClass>(c));
    mems.emplace_back("all recomputed", full);
  }
  std::vector<Candidate> cands;
  // One candidate per micro-batch and memory policy of a mesh. `folded`: Megatron's MoE parallel
  // folding (ep x etp carved from each stage's tp x cp x dp GPUs, dense data parallelism dp).
  auto add = [&](int64_t tp, int64_t cp, int64_t pp, PipelineSchedule sched, int64_t vpp, int64_t ep, int64_t fsdp, int64_t dp,
                 bool folded, int64_t etp) {
    // Under FSDP the weight gradients stay in the backward and ZB-H1 is 1F1B (lower_step): not
    // searched twice.
    if (sched == PipelineSchedule::zb_h1 && fsdp > 1) return;
    const int64_t dense_dp = folded ? dp : ep * fsdp * dp;
    if (res.global_batch % dense_dp != 0) return;
    const int64_t per_rank = res.global_batch / dense_dp;
    std::vector<int64_t> mbs;
    for (int64_t mb : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}, base.batch.micro_batch, per_rank})
      if (mb >= 1 && per_rank % mb == 0 && std::find(mbs.begin(), mbs.end(), mb) == mbs.end()) mbs.push_back(mb);
    // Folded meshes only with the scenario's micro-batch (else all of a rank's sequences) and
    // memory policy: with every choice they took a 128-GPU plan from 9 s to 55 s.
    if (folded) mbs = {per_rank % base.batch.micro_batch == 0 ? base.batch.micro_batch : per_rank};
    // With --balance each pipelined layout runs its balanced split and, as a candidate of its own,
    // its even split: the balancing rule compares priced per-stage costs, which the simulated step
    // can rank the other way (a single micro-batch's pipeline).
    std::vector<bool> splits{false};
    if (o.balance && pp > 1) splits.push_back(true);
    for (int64_t mb : mbs)
      for (size_t mi = 0; mi < (folded ? 1 : mems.size()); ++mi)
        for (const bool balanced : splits) {
          const auto& [mem_name, mem] = mems[mi];
          Candidate c{base, "", {}};
          Parallelism& p = c.s.parallelism;
          // The scenario's own options stay (distributed optimizer, sequence parallelism); its layout
          // string does not carry over to another mesh: the even split, or the balanced one
          // (predict() finds it again for the kept ones).
          p.tp = tp, p.cp = cp, p.pp = pp, p.ep = ep, p.fsdp = fsdp, p.dp = dp;
          p.vpp = vpp;
          p.schedule = sched;
          p.layout.clear(), p.layout_spec.clear();
          p.balance_layout = balanced;
          p.folded = folded, p.etp = folded ? etp : 1;
          c.s.gpus = o.gpus;
          c.s.batch.global_batch = res.global_batch;
          c.s.batch.micro_batch = mb;
          c.s.memory = mem;
          c.layout = layout_text(c.s) + (p.balance_layout ? ", balanced" : "") + ", micro-batch " + std::to_string(mb) +
                     ", memory: " + mem_name;
          c.sets = {"gpus=" + std::to_string(o.gpus), "parallelism.tp=" + std::to_string(tp),
                    "parallelism.cp=" + std::to_string(cp), "parallelism.pp=" + std::to_string(pp),
                    "parallelism.vpp=" + std::to_string(p.vpp),
                    std::string("parallelism.schedule=") + schedule_name(sched),
                    "parallelism.ep=" + std::to_string(ep), "parallelism.fsdp=" + std::to_string(fsdp),
                    "parallelism.dp=" + std::to_string(dp), "batch.global_batch=" + std::to_string(res.global_batch),
                    "batch.micro_batch=" + std::to_string(mb)};
          if (p.balance_layout) c.sets.push_back("parallelism.layout=balanced");
          else if (!base.parallelism.layout.empty() || base.parallelism.balance_layout) c.sets.push_back("parallelism.layout=null");
          if (folded) c.sets.push_back("parallelism.etp=" + std::to_string(etp));
          else if (base.parallelism.folded) c.sets.push_back("parallelism.etp=null");
          if (mi == 1) {
            std::string rc;
            for (TensorClass t : mem.recompute) rc += (rc.empty() ? "\"" : ",\"") + std::string(to_string(t)) + "\"";
            c.sets.push_back("memory.recompute=[" + rc + "]");
          }
          if (mi >= 1) c.sets.push_back("memory.offload=[]");
          cands.push_back(std::move(c));
        }
  };
  // The schedules for a pipeline depth: each asked, interleaved once per VPP asked that leaves every
  // virtual stage a layer; without a pipeline, none (1F1B's program is the plain step).
  auto pipe_choices = [&](int64_t pp) {
    std::vector<std::pair<PipelineSchedule, int64_t>> v;
    if (pp == 1) return decltype(v){{PipelineSchedule::one_f_one_b, 1}};
    for (PipelineSchedule sc : o.schedules) {
      if (sc != PipelineSchedule::interleaved) {
        v.emplace_back(sc, 1);
        continue;
      }
      for (int64_t vpp : o.vpps)
        if (pp * vpp <= m.layers) v.emplace_back(sc, vpp);
    }
    return v;
  };
  for (int64_t tp : tps)
    for (int64_t cp : cps)
      for (int64_t pp : pps)
        for (const auto& [sched, vpp] : pipe_choices(pp)) {
          for (int64_t ep : eps) {
            const int64_t inner = tp * cp * pp * ep;
            if (inner > o.gpus || o.gpus % inner != 0) continue;
            const int64_t rest = o.gpus / inner;
            add(tp, cp, pp, sched, vpp, ep, rest, 1, false, 1);
            if (rest > 1) add(tp, cp, pp, sched, vpp, ep, 1, rest, false, 1);
          }
          // Folded: ETP 1 (an EP group across TP/CP ranks; with tp = cp = 1 it is the unfolded
          // EP x DP above), 2, 4 or 8 inside an NVLink domain, dividing the experts' FFN width.
          if (!m.is_moe() || o.gpus % (tp * cp * pp) != 0) continue;
          const int64_t dp = o.gpus / (tp * cp * pp), stage = tp * cp * dp;
          for (int64_t etp : {1, 2, 4, 8}) {
            if (etp > domain || m.expert_ffn % etp != 0 || (etp == 1 && tp * cp == 1)) continue;
            for (int64_t ep : eps)
              if (stage % (ep * etp) == 0) add(tp, cp, pp, sched, vpp, ep, 1, dp, true, etp);
          }
        }
  res.candidates = cands.size();
  // Cheapest bound first, so good layouts are found early and the bound prunes the rest.
  std::vector<double> bound(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) bound[i] = step_bound_s(cands[i].s);
  std::vector<size_t> order(cands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bound[a] < bound[b]; });
  // The K-th best step found so far (the ranking by any objective is the ranking by step time: the
  // GPUs and the tokens per step are the same for every candidate).
  std::vector<double> kept;
  const size_t keep = static_cast<size_t>(std::max(2, o.top));
  auto kth = [&] { return !o.prune || kept.size() < keep ? 1e300 : kept[keep - 1]; };
  // Checked as a file would be, then memory (cheap: no pricing, no simulation), then predicted.
  std::vector<std::optional<double>> out(cands.size());  // simulated step, s
  // One topology for every candidate: the same system on the same GPU count.
  PredictOptions popt;
  popt.topology = std::make_shared<const Topology>(Topology::build(base.system, o.gpus));
  CollectiveMemo memo;  // collectives priced once per group of GPUs, across candidates
  std::mutex mu;
  std::vector<std::function<void()>> jobs;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    if (static_cast<int>(pos % static_cast<size_t>(std::max(1, o.shards))) != o.shard) continue;
    const size_t i = order[pos];
    jobs.push_back([&, i] {
      const Candidate& c = cands[i];
      if (o.cancel && o.cancel->load()) return;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (bound[i] > kth()) {
          ++res.bounded;
          return;
        }
      }
      try {
        check_scenario(c.s, file);
      } catch (const InputError&) {
        std::lock_guard<std::mutex> lk(mu);
        ++res.invalid;
        return;
      }
      // Thousands of micro-batch passes per step make a slow simulation and often a poor layout
      // (tiny micro-batches on a deep pipeline): left out of a plan (o.max_layer_passes), and counted.
      if (c.s.micro_batches() * (c.s.model.layers + (c.s.train_mtp ? c.s.model.mtp_layers : 0)) > o.max_layer_passes) {
        std::lock_guard<std::mutex> lk(mu);
        ++res.too_fine;
        return;
      }
      try {
        // --balance: the even split lowered and priced to find the balanced one, which the rest
        // checks, bounds and simulates (the FLOP bound above holds for any split).
        std::optional<Scenario> balanced;
        if (c.s.parallelism.balance_layout) {
          const Pricer pr(c.s, *popt.topology, c.s.calibration, &memo);
          const BalancedLayout b = balanced_layout(c.s, c.s.calibration, pr);
          balanced.emplace(c.s);
          balanced->parallelism.layout = b.layout;
          balanced->parallelism.layout_spec = b.spec;
          if (!b.even_kept.empty()) {  // the even split, which is a candidate of its own
            std::lock_guard<std::mutex> lk(mu);
            ++res.balanced_is_even;
            return;
          }
        }
        const Scenario& cs = balanced ? *balanced : c.s;
        // Memory needs the expert load only: a layout that does not fit is never lowered (lowering
        // every candidate first spent half of a plan's lowerings on layouts memory then refused);
        // under --balance only its even split's few micro-batches were, to price its layers.
        Lowered low;
        low.load = expert_load(cs, cs.calibration, &low.notes);
        if (!memory_report(cs, low.load, cs.calibration).fits) {
          std::lock_guard<std::mutex> lk(mu);
          ++res.no_fit;
          return;
        }
        low.graph = std::make_shared<const StepGraph>(lower_step(cs, low.load));
        // The second bound: the step lowered and its ops priced, not simulated: its compute work
        // (a few times cheaper than a prediction and far tighter than the FLOPs: attention,
        // memory-bound kernels, recompute, small-GEMM efficiency), then each collective queue's.
        const Pricer pr(cs, *popt.topology, cs.calibration, &memo);
        {
          const double cb = compute_bound(*low.graph, pr).value();
          std::lock_guard<std::mutex> lk(mu);
          if (cb > kth()) {
            ++res.compute_bounded;
            return;
          }
        }
        {
          const double qb = comm_bound(*low.graph, pr, cs.stack).value();
          std::lock_guard<std::mutex> lk(mu);
          if (qb > kth()) {
            ++res.comm_bounded;
            return;
          }
        }
        // The third: the step scheduled without contention, a fraction of a simulation's cost and
        // within a few percent of it where little overlaps (most slow layouts are slow by their
        // exposed communication and bubbles, which the first two bounds do not see).
        // Not computed while it cannot prune (the first K, or --no-prune). The simulator may end
        // an op up to 1e-12 of its time early: a tie with the K-th best is kept.
        bool can_prune;
        {
          std::lock_guard<std::mutex> lk(mu);
          can_prune = kth() < 1e300;
        }
        if (can_prune) {
          const double sb = schedule_bound(*low.graph, pr, cs.stack).value();
          std::lock_guard<std::mutex> lk(mu);
          if (sb > kth() * (1 + 1e-9)) {
            ++res.schedule_bounded;
            return;
          }
        }
        // Ranked by the simulated step alone (every objective orders as the step does: the GPUs
        // and the tokens per step are the same for every candidate); the best are predicted
        // whole below.
        const double step = simulate(*low.graph, pr, cs.stack).step_time.value();
        std::lock_guard<std::mutex> lk(mu);
        ++res.predicted;
        kept.insert(std::upper_bound(kept.begin(), kept.end(), step), step);
        if (kept.size() > keep) kept.pop_back();
        out[i] = step;
      } catch (const std::exception&) {
        std::lock_guard<std::mutex> lk(mu);
        ++res.failed;
      }
    });
  }
  if (o.progress) {
    const size_t total = jobs.size();
    auto finished = std::make_shared<size_t>(0);
    for (auto& j : jobs)
      j = [&mu, &o, inner = std::move(j), total, finished] {
        inner();
        std::lock_guard<std::mutex> lk(mu);
        o.progress(++*finished, total);
      };
  }
  if (run) run(jobs);
  else
    for (auto& j : jobs) j();
  std::vector<std::pair<size_t, double>> found;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i]) found.emplace_back(i, *out[i]);
  if (o.shards > 1 && o.merge && !o.merge(res, found)) return res;
  std::vector<size_t> ranked;
  for (const auto& [i, step] : found) {
    out[i] = step;
    ranked.push_back(i);
  }
  if (ranked.empty())
    throw InputError("plan: no layout of " + m.name + " on " + std::to_string(o.gpus) + " GPUs of " + base.system.name +
                     " is valid and fits in memory (" + std::to_string(res.candidates) + " tried: " + std::to_string(res.invalid) +
                     " invalid, " + std::to_string(res.no_fit) + " do not fit)");
  // Shortest step first; ties broken by the layout text, so the order does not depend on the threads.
  std::sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    if (*out[a] != *out[b]) return *out[a] < *out[b];
    return cands[a].layout < cands[b].layout;
  });
  ranked.resize(std::min<size_t>(ranked.size(), keep));
  // The kept layouts predicted whole: figures, band, memory, capacity, the objective.
  std::vector<PlanEntry> ok;
  for (size_t i : ranked) {
    // Cancelled (o.cancel): the best found so far is predicted, no more.
    if (o.cancel && o.cancel->load() && !ok.empty()) break;
    PlanEntry e{cands[i].layout, cands[i].sets, predict(cands[i].s, cands[i].s.calibration, popt), 0};
    // A balanced candidate names the split it runs, in Megatron's syntax.
    if (const Parallelism& p = e.report.scenario->parallelism; p.balance_layout && !p.layout_spec.empty())
      if (const size_t at = e.layout.find(", balanced,"); at != std::string::npos)
        e.layout.insert(at + std::string(", balanced").size(), " " + p.layout_spec);
    e.objective = o.objective == "cost"            ? *e.report.usd_per_million_tokens
                  : o.objective == "time_to_train" ? training_budget(e.report, o.train_tokens).seconds / 86400
                                                   : e.report.cluster_tokens_per_s;
    ok.push_back(std::move(e));
    // Only the best two are read past this point (step_terms, for the runner-up's loss): the others
    // keep their figures and drop their graph and simulation (megabytes each at --top 400).
    if (ok.size() > 2) {
      ok.back().report.graph.reset();
      ok.back().report.sim.reset();
    }
  }
  if (ok.size() > 1) {
    std::map<std::string, double> best;
    for (const auto& [k, v] : step_terms(ok[0].report)) best[k] = v;
    for (const auto& [k, v] : step_terms(ok[1].report)) res.runner_up_loss.emplace_back(k, v - best[k]);
    // Largest first by size, gains as well as losses (a large gain is as much of the difference).
    std::stable_sort(res.runner_up_loss.begin(), res.runner_up_loss.end(),
                     [](const auto& a, const auto& b) { return std::abs(a.second) > std::abs(b.second); });
  }
  ok.resize(std::min<size_t>(ok.size(), static_cast<size_t>(std::max(1, o.top))));
  res.best = std::move(ok);
  if (base.gpus == o.gpus && base.batch.global_batch == res.global_batch && !(o.cancel && o.cancel->load()))
    res.own = predict(base, base.calibration, popt);
  return res;
}

}  // namespace moeperf::io
