// Pipeline schedules: which layers each (virtual) stage holds (1F1B, interleaved, DualPipe's V), and
// lower_step(), which runs Lowering over every micro-batch of every stage in the schedule's order,
// then adds the gradient reduction, the optimizer step and the rank classes of dropless imbalance
// and stragglers.
#include "model/hardware/topology.h"
#include "model/workload/lowering.h"

namespace moeperf {

using detail::d;
using detail::Lowering;

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
    std::map<std::pair<int64_t, int>, int32_t> fwd_end, bwd_end_of;  // (micro-batch, chunk) -> unit's last op
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
        // A hand-off between two virtual stages on this GPU (DualPipe's V turn, stage pp - 1) moves
        // nothing: the receiving unit waits for the sending unit's last op instead.
        if (stage_of_virtual(s, peer_v) == st) {
          if (std::string(name).rfind("pp.recv", 0) == 0) {
            const auto& ends = forward ? fwd_end : bwd_end_of;
            const auto it = ends.find({mb, chunk_of_virtual(s, peer_v)});
            if (it != ends.end()) low.wait_before_next_compute(it->second);
          }
          return;
        }
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
      bwd_end_of[bwd_units[next_b]] = bwd_end;
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
    if (st == head_stage(s)) dense += (pc.lm_head + static_cast<double>(s.model.hidden)) / static_cast<double>(p.tp);
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
