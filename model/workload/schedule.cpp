// Pipeline schedules: which layers each (virtual) stage holds (1F1B, interleaved, DualPipe,
// DualPipeV, ZB-H1), DualPipe's and ZB-H1's programs, and lower_step(), which runs Lowering over every micro-batch of
// every stage in the schedule's order, then adds the gradient reduction, the optimizer step and the
// rank classes of dropless imbalance and stragglers.
#include <cmath>
#include <cstdio>
#include <string_view>

#include "model/hardware/topology.h"
#include "model/workload/lowering.h"

namespace moeperf {

using detail::d;
using detail::Lowering;

bool dualpipe_family(const Scenario& s) {
  return s.parallelism.pp > 1 && (s.parallelism.schedule == PipelineSchedule::dualpipe ||
                                  s.parallelism.schedule == PipelineSchedule::dualpipev);
}

int pipeline_chunks(const Scenario& s) {
  if (s.parallelism.pp == 1) return 1;
  switch (s.parallelism.schedule) {
    case PipelineSchedule::interleaved: return static_cast<int>(s.parallelism.vpp);
    case PipelineSchedule::dualpipe:
    case PipelineSchedule::dualpipev: return 2;
    case PipelineSchedule::one_f_one_b:
    case PipelineSchedule::zb_h1: return 1;
  }
  return 1;
}

int virtual_stages(const Scenario& s) {
  const int pp = static_cast<int>(s.parallelism.pp);
  return s.parallelism.schedule == PipelineSchedule::dualpipe ? pp : pp * pipeline_chunks(s);
}

int virtual_stage(const Scenario& s, int stage, int chunk) {
  const int pp = static_cast<int>(s.parallelism.pp);
  if (pp > 1 && s.parallelism.schedule == PipelineSchedule::dualpipe) return chunk == 0 ? stage : pp - 1 - stage;
  if (pp > 1 && s.parallelism.schedule == PipelineSchedule::dualpipev) return chunk == 0 ? stage : 2 * pp - 1 - stage;
  return chunk * pp + stage;
}

StageChunk place_virtual(const Scenario& s, int v, int chunk) {
  const int pp = static_cast<int>(s.parallelism.pp);
  if (pp > 1 && s.parallelism.schedule == PipelineSchedule::dualpipe) return {chunk == 0 ? v : pp - 1 - v, chunk};
  if (pp > 1 && s.parallelism.schedule == PipelineSchedule::dualpipev) return v < pp ? StageChunk{v, 0} : StageChunk{2 * pp - 1 - v, 1};
  return {v % pp, v / pp};
}

// DeepSeek's dualpipe.py (DualPipe.step) and dualpipev.py (DualPipeV.step) in eight steps. DualPipe
// on N ranks runs it as rank min(r, N-1-r) of N/2 "half ranks" with half the micro-batches per
// direction, its "phase 0" being the direction that enters nearer to it (phase ^ is_in_second_half),
// and the two middle ranks special in step 4; DualPipeV runs it as rank r of N with every
// micro-batch, phase = chunk, the last rank special. Weight gradients are split from the backward
// (zero bubble) in step 3, in the second half of step 6 and in step 7; steps 3, 7 and 8 run them.
std::vector<PipeAction> dualpipe_program(int ranks, int64_t micro_batches, int stage, bool bidirectional) {
  using K = PipeAction::Kind;
  const int64_t n = bidirectional ? ranks / 2 : ranks;
  const int64_t h = bidirectional ? std::min(stage, ranks - 1 - stage) : stage;
  const int64_t chunks = bidirectional ? micro_batches / 2 : micro_batches;  // per direction, or in all
  const bool special = bidirectional ? (stage == ranks / 2 - 1 || stage == ranks / 2) : stage == ranks - 1;
  const int flip = bidirectional && stage >= ranks / 2 ? 1 : 0;
  auto c = [&](int phase) { return phase ^ flip; };
  std::vector<PipeAction> p;
  auto F = [&](int ph) { p.push_back({K::forward, c(ph), 0}); };
  auto B = [&](int ph, bool zb) { p.push_back({zb ? K::backward_input : K::backward, c(ph), 0}); };
  auto W = [&] { p.push_back({K::weight, 0, 0}); };
  auto FB = [&](int f, int b) { p.push_back({K::forward_backward, c(f), c(b)}); };
  for (int64_t i = 0; i < (n - h - 1) * 2; ++i) F(0);  // step 1: nF0
  for (int64_t i = 0; i < h + 1; ++i) F(0), F(1);       // step 2: nF0F1
  for (int64_t i = 0; i < n - h - 1; ++i) B(1, true), W(), F(1);  // step 3: nB1W1F1
  for (int64_t i = 0; i < chunks - 2 * n + h + 1; ++i) {  // step 4 (main): nF0B1F1B0
    if (i == 0 && special) F(0), B(1, false);  // "we don't overlap these two chunks"
    else FB(0, 1);
    FB(1, 0);
  }
  for (int64_t i = 0; i < n - h - 1; ++i) B(1, false), FB(1, 0);  // step 5: nB1F1B0
  bool zb = false;  // step 6: nB1B0, the second half zero bubble
  for (int64_t i = 0; i < h + 1; ++i) {
    if (i == (h + 1) / 2 && h % 2 == 1) zb = true;
    B(1, zb);
    if (i == (h + 1) / 2 && h % 2 == 0) zb = true;
    B(0, zb);
  }
  for (int64_t i = 0; i < n - h - 1; ++i) W(), B(0, true);  // step 7: nWB0
  for (int64_t i = 0; i < h + 1; ++i) W();                  // step 8: nW
  return p;
}

std::vector<PipeAction> dualpipe_program(const Scenario& s, int stage) {
  return dualpipe_program(static_cast<int>(s.parallelism.pp), s.micro_batches(), stage,
                          s.parallelism.schedule == PipelineSchedule::dualpipe);
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3.1 and figure 3):
// 1F1B's warm-up of pp - stage - 1 forwards, its steady forward-backward pairs and its cool-down
// backwards, every backward without its weight gradients (B) and each weight-gradient unit (W) run
// after it, except that stage s keeps back the W of its first s steady pairs and runs them last,
// where 1F1B's cool-down waits. The backward chain no longer carries W, so the bubble is
// (pp - 1)(F + B - W) where 1F1B's is (pp - 1)(F + B + W) (W <= F), and every stage holds at most
// pp micro-batches between a forward and its W: 1F1B's peak (stage 0's).
std::vector<PipeAction> zb_h1_program(int ranks, int64_t micro_batches, int stage) {
  using K = PipeAction::Kind;
  std::vector<PipeAction> p;
  const int64_t warm = std::min<int64_t>(ranks - stage - 1, micro_batches);
  int64_t kept = 0;
  for (int64_t i = 0; i < warm; ++i) p.push_back({K::forward, 0, 0});
  for (int64_t k = 0; k < micro_batches - warm; ++k) {
    p.push_back({K::forward, 0, 0});
    p.push_back({K::backward_input, 0, 0});
    if (k >= stage) p.push_back({K::weight, 0, 0});
    else ++kept;
  }
  for (int64_t i = 0; i < warm; ++i) {
    p.push_back({K::backward_input, 0, 0});
    p.push_back({K::weight, 0, 0});
  }
  for (int64_t i = 0; i < kept; ++i) p.push_back({K::weight, 0, 0});
  return p;
}

OneFOneBUnits one_f_one_b_units(const Scenario& s, int stage, int64_t mbs, bool overlap) {
  OneFOneBUnits u;
  const int64_t stages = s.parallelism.pp;
  const int chunks = pipeline_chunks(s);
  const int64_t groups = (mbs + stages - 1) / stages;
  for (int64_t k = 0; k < groups * stages * chunks; ++k) {
    const int64_t grp = k / (stages * chunks), within = k % (stages * chunks);
    const int64_t mb = grp * stages + within % stages;
    if (mb >= mbs) continue;
    const int c = static_cast<int>(within / stages);
    u.forward.emplace_back(mb, c);
    u.backward.emplace_back(mb, chunks - 1 - c);
  }
  const int64_t total = static_cast<int64_t>(u.forward.size());
  const int64_t warm = chunks == 1 ? std::min<int64_t>(stages - stage - 1, total)
                                   : std::min<int64_t>((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  // With overlap each steady-state forward pairs with the backward of an earlier micro-batch, so
  // one more forward runs in the warm-up (Megatron's combined 1F1B); the pair runs concurrently.
  u.warm_up = overlap ? std::min<int64_t>(warm + 1, total) : warm;
  return u;
}

std::vector<PipeAction> stage_program(const Scenario& s, int stage) {
  if (s.parallelism.schedule == PipelineSchedule::zb_h1)
    return zb_h1_program(static_cast<int>(s.parallelism.pp), s.micro_batches(), stage);
  return dualpipe_program(s, stage);
}

std::vector<int> virtual_stage_layers(const Scenario& s, int v) {
  const auto& lay = s.parallelism.layout;
  if (!lay.empty()) {
    // An explicit layout: its layers follow the previous virtual stages', its MTP modules the
    // model's last layer (numbered layers, layers + 1, ...). Without 'm', trained MTP modules go
    // where the loss is, as in the even split.
    int first = 0, mtp = 0, all_mtp = 0;
    for (const VirtualStageLayout& x : lay) all_mtp += x.mtp;
    for (int u = 0; u < v; ++u) first += lay[static_cast<size_t>(u)].layers, mtp += lay[static_cast<size_t>(u)].mtp;
    std::vector<int> out;
    const VirtualStageLayout& x = lay[static_cast<size_t>(v)];
    for (int l = 0; l < x.layers; ++l) out.push_back(first + l);
    const int n_mtp = all_mtp == 0 && x.loss && s.train_mtp ? s.model.mtp_layers : x.mtp;
    for (int j = 0; j < n_mtp; ++j) out.push_back(s.model.layers + mtp + j);
    return out;
  }
  const int vstages = virtual_stages(s);
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

double expected_max_of_normals(int64_t n) {
  if (n <= 1) return 0.0;
  // E[max] = int_0^inf (1 - Phi^n) dx - int_-inf^0 Phi^n dx; Phi^n by exp(n log Phi).
  auto phi_n = [&](double x) { return std::exp(static_cast<double>(n) * std::log(0.5 * std::erfc(-x / std::sqrt(2.0)))); };
  // Simpson's rule on each side of 0, where the integrand jumps by 1.
  auto simpson = [](auto f, double lo, double hi) {
    const int steps = 12000;  // h = 0.001
    const double h = (hi - lo) / steps;
    double sum = 0;
    for (int i = 0; i <= steps; ++i) sum += ((i == 0 || i == steps) ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0)) * f(lo + i * h);
    return sum * h / 3.0;
  };
  return simpson([&](double x) { return 1.0 - phi_n(x); }, 0.0, 12.0) - simpson(phi_n, -12.0, 0.0);
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
    const int vstages = virtual_stages(s);
    // Room for the ops up front: growing the list by doubling moves every op again, and took a
    // fifth of a plan's time. A layer pass lowers about 36 ops (DeepSeek-V3, 2026-12: 4,493 ops for
    // 63 forward and backward passes), a recomputing one up to about 52; the room is 64 per pass,
    // since pages never written cost only address space.
    rc.ops.reserve(static_cast<size_t>(mbs) * (layers.size() + 2) * 2 * 64 + 256);
    const double act_bytes = static_cast<double>(s.batch.micro_batch * s.batch.seq_len / p.cp / p.tp) *
                             static_cast<double>(s.model.hidden) * 2.0;
    // Forward/backward overlap: backward units on the second lane; each waits for its own forward
    // (the last op of that unit here), and a steady-state forward waits for the backward before it
    // (1F1B keeps that many micro-batches in flight), so each forward pairs with one backward.
    const bool dual = dualpipe_family(s);
    // A stage program (DualPipe's, ZB-H1's) runs action by action; ZB-H1's units run one at a time.
    const bool programmed = dual || (p.pp > 1 && p.schedule == PipelineSchedule::zb_h1);
    const bool overlap = (s.stack.fwd_bwd_overlap && !programmed) || dual;
    std::map<std::pair<int64_t, int>, int32_t> fwd_end, bwd_end_of;  // (micro-batch, chunk) -> unit's last op
    int32_t bwd_end = -1;
    // A pipeline hand-off between this stage's chunk c and the virtual stage peer_v, for micro-batch
    // mb: its op id, or, between two virtual stages on this GPU (DualPipeV's turn, stage pp - 1),
    // which moves nothing, the sending unit's last op that the receiving unit waits for (-1: none).
    auto is_recv = [](const char* name) { return std::string_view(name).substr(0, 7) == "pp.recv"; };
    auto p2p = [&](bool forward, int64_t mb, int c, const char* name, int peer_v, std::vector<int32_t> deps) -> int32_t {
      const StageChunk peer = place_virtual(s, peer_v, c);
      const bool recv = is_recv(name);
      if (peer.stage == st) {
        if (!recv) return -1;
        const auto& ends = forward ? fwd_end : bwd_end_of;
        const auto it = ends.find({mb, peer.chunk});
        if (it == ends.end()) return -1;
        low.wait_before_next_compute(it->second);
        return it->second;
      }
      const int32_t id = low.comm(name, Category::pp_comm, Stream::pp_comm, -1, Collective::send_recv, Group::pp,
                                  act_bytes, std::move(deps));
      Op& op = low.op(id);
      op.chunk = c;
      op.peer_stage = peer.stage;
      op.peer_chunk = peer.chunk;
      if (recv) low.wait_before_next_compute(id);
      return id;
    };
    // An overlapped pair (dualpipe.py's _forward_backward_chunk): both inputs are received and
    // waited for before either half computes, and both outputs are sent once both halves are done.
    // While `on`, the units take their inputs from `inputs` and hold their sends.
    struct HeldSend {
      const char* name;
      int peer_v;
      int64_t mb;
      int chunk;
      bool forward;
      std::vector<int32_t> deps;
    };
    struct {
      bool on = false;
      std::vector<int32_t> inputs;
      std::vector<HeldSend> sends;
    } pair;
    // One unit: the forward or backward of one micro-batch through one chunk (virtual stage) of this
    // stage; returns its last op before the hand-off to the next stage.
    auto unit = [&](bool forward, int64_t mb, int c, std::vector<int32_t> gates) {
      const int v = virtual_stage(s, st, c);
      const std::vector<int> vl = virtual_stage_layers(s, v);
      low.set_lane(overlap && !forward ? 1 : 0);
      low.begin_unit(overlap ? std::move(gates) : std::vector<int32_t>{});
      low.set_micro_batch(static_cast<int>(mb));
      low.set_phase(forward ? Phase::forward : Phase::backward);
      low.reset_layer_starts();
      low.begin_phase(forward ? vl : std::vector<int>(vl.rbegin(), vl.rend()));
      auto hand_off = [&](const char* name, int peer_v, std::vector<int32_t> deps) {
        const bool recv = is_recv(name);
        if (pair.on && recv) {
          for (int32_t x : pair.inputs) low.wait_before_next_compute(x);
        } else if (pair.on) {
          pair.sends.push_back({name, peer_v, mb, c, forward, std::move(deps)});
        } else {
          p2p(forward, mb, c, name, peer_v, std::move(deps));
        }
      };
      // What the hand-off waits for: the unit's last op and the waits no compute op consumed (a
      // blocking TP collective or the shared expert's output ending the unit). Under overlap the
      // next unit runs on the other lane and does not wait for them; in one stream it does.
      auto tail = [&](int32_t last_op) {
        std::vector<int32_t> deps = low.take_pending();
        if (!overlap)
          for (int32_t x : deps) low.wait_before_next_compute(x);
        deps.push_back(last_op);
        return deps;
      };
      const int L = s.model.layers;
      int32_t end = -1;
      if (forward) {
        if (v > 0 || pair.on) hand_off("pp.recv", v - 1, {});
        if (v == 0) low.embedding(false);
        for (int l : vl) {
          if (l == L) low.head(false, "head", -1, v == 0);  // the main head before the MTP modules that follow it
          if (l >= L) low.mtp_input(l, false, v == 0);
          low.forward_layer(l);
          if (l >= L) low.head(false, "mtp.head", l);
        }
        if (v == vstages - 1 && (vl.empty() || vl.back() < L)) low.head(false, "head", -1, v == 0);
        end = low.last_but_offload();
        std::vector<int32_t> out = tail(end);
        if (v < vstages - 1) hand_off("pp.send", v + 1, std::move(out));
      } else {
        if (v < vstages - 1 || pair.on) hand_off("pp.recv.bwd", v + 1, {});
        if (v == vstages - 1 && (vl.empty() || vl.back() < L)) low.head(true, "head", -1, v == 0);
        for (auto it = vl.rbegin(); it != vl.rend(); ++it) {
          if (*it >= L) low.head(true, "mtp.head", *it);
          low.backward_layer(*it);
          if (*it >= L) low.mtp_input(*it, true, v == 0);
          if (*it == L) low.head(true, "head", -1, v == 0);
        }
        if (v == 0) low.embedding(true);
        // The hand-off waits for the input gradient, not for the gradient reduce-scatters FSDP
        // issues after the chunk's first layer (nothing but the optimizer waits for those).
        int32_t grad_out = low.last();
        while (grad_out > 0 && low.op(grad_out).category == Category::fsdp_comm &&
               low.op(grad_out).collective == Collective::reduce_scatter)
          --grad_out;
        end = grad_out;
        std::vector<int32_t> out = tail(grad_out);
        if (v > 0) hand_off("pp.send.bwd", v - 1, std::move(out));
        low.flush_grad_reduces();
      }
      return end;
    };
    auto gate = [](int32_t id) { return id >= 0 ? std::vector<int32_t>{id} : std::vector<int32_t>{}; };
    // ZeRO-1 with --overlap-param-gather: the weights the last step updated are all-gathered as this
    // step's forward reaches them (Lowering::param_gathers), issued before the first unit.
    if (low.zero1_prefetch()) {
      low.set_lane(0);
      low.begin_unit(-1);
      low.set_micro_batch(0);
      low.set_phase(Phase::forward);
      low.param_gathers(layers, holds_embedding(s, st), holds_head(s, st), {});
    }
    if (programmed) {
      // DualPipe / DualPipeV / ZB-H1: the stage's program (stage_program) action by action, each
      // after the one before it; an overlapped pair runs its forward and its backward on the two
      // lanes at once. DualPipe's chunk 1 carries the second half of the micro-batches.
      const int64_t base1 = s.parallelism.schedule == PipelineSchedule::dualpipe ? mbs / 2 : 0;
      std::array<int64_t, 2> next_fwd{0, base1}, next_bwd{0, base1};
      // Split weight gradients are kept for the stage's weight units; under FSDP a layer's gradient
      // reduce-scatter follows its backward at once, so there every backward runs whole.
      const bool split_w = p.fsdp == 1;
      std::vector<int32_t> prev;
      auto forward = [&](int c, std::vector<int32_t> gates) {
        const std::pair<int64_t, int> key{next_fwd[static_cast<size_t>(c)]++, c};
        const int32_t end = unit(true, key.first, c, std::move(gates));
        fwd_end[key] = end;
        return end;
      };
      auto backward = [&](int c, bool input_only, std::vector<int32_t> gates) {
        const std::pair<int64_t, int> key{next_bwd[static_cast<size_t>(c)]++, c};
        const bool defer = input_only && split_w;
        // The chunk's last micro-batch: its layers' gradients are complete after this backward.
        const int64_t last_mb = (c == 0 ? 0 : base1) + (s.parallelism.schedule == PipelineSchedule::dualpipe ? mbs / 2 : mbs) - 1;
        low.set_reduce_grads(key.first == last_mb);
        if (defer) low.start_deferred_unit();
        low.set_defer_wgrad(defer);
        const auto it = fwd_end.find(key);
        if (it != fwd_end.end()) gates.push_back(it->second);
        const int32_t end = unit(false, key.first, c, std::move(gates));
        low.set_defer_wgrad(false);
        low.set_reduce_grads(false);
        bwd_end_of[key] = end;
        return end;
      };
      for (const PipeAction& a : stage_program(s, st)) {
        switch (a.kind) {
          case PipeAction::Kind::forward: prev = {forward(a.chunk, prev)}; break;
          case PipeAction::Kind::backward:
          case PipeAction::Kind::backward_input:
            prev = {backward(a.chunk, a.kind == PipeAction::Kind::backward_input, prev)};
            break;
          case PipeAction::Kind::weight:
            if (!low.has_deferred_unit()) break;
            low.set_lane(overlap ? 1 : 0);
            low.begin_unit(overlap ? prev : std::vector<int32_t>{});
            low.emit_deferred_unit();
            prev = {low.last()};
            break;
          case PipeAction::Kind::forward_backward: {
            // Both receives first, each gated on the action before (as every unit's first ops are).
            pair.inputs.clear();
            pair.sends.clear();
            const size_t fc = static_cast<size_t>(a.chunk), bc = static_cast<size_t>(a.bwd_chunk);
            const int vf = virtual_stage(s, st, a.chunk), vb = virtual_stage(s, st, a.bwd_chunk);
            auto receive = [&](bool fwd, int64_t mb, int c, const char* name, int peer_v) {
              low.set_lane(fwd ? 0 : 1);
              low.begin_unit(prev);
              low.set_micro_batch(static_cast<int>(mb));
              low.set_phase(fwd ? Phase::forward : Phase::backward);
              if (const int32_t id = p2p(fwd, mb, c, name, peer_v, {}); id >= 0) pair.inputs.push_back(id);
            };
            if (vf > 0) receive(true, next_fwd[fc], a.chunk, "pp.recv", vf - 1);
            if (vb < vstages - 1) receive(false, next_bwd[bc], a.bwd_chunk, "pp.recv.bwd", vb + 1);
            low.take_pending();  // each half waits for pair.inputs itself
            pair.on = true;
            const int32_t fwd = forward(a.chunk, prev);
            const int32_t bwd = backward(a.bwd_chunk, false, prev);
            pair.on = false;
            // Both sends after both halves' ends (and what each half's hand-off waited for), also
            // where only one half sends (the last virtual stage's forward sends nothing).
            std::vector<int32_t> both;
            for (int32_t x : {fwd, bwd})
              if (x >= 0) both.push_back(x);
            for (const HeldSend& h : pair.sends) both.insert(both.end(), h.deps.begin(), h.deps.end());
            for (const HeldSend& h : pair.sends) {
              low.set_lane(h.forward ? 0 : 1);
              low.set_micro_batch(static_cast<int>(h.mb));
              low.set_phase(h.forward ? Phase::forward : Phase::backward);
              p2p(h.forward, h.mb, h.chunk, h.name, h.peer_v, both);
            }
            prev = {fwd, bwd};
            break;
          }
        }
      }
    } else {
    // Units in program order (one_f_one_b_units): warm-up forwards, then one forward and one
    // backward in turn, then the remaining backwards.
    const OneFOneBUnits order = one_f_one_b_units(s, st, mbs, overlap);
    const auto& fwd_units = order.forward;
    const auto& bwd_units = order.backward;
    const int64_t total = static_cast<int64_t>(fwd_units.size());
    const int64_t warm_up = order.warm_up;
    int64_t next_f = 0, next_b = 0;
    auto run_forward = [&](bool steady) {
      unit(true, fwd_units[next_f].first, fwd_units[next_f].second, gate(steady ? bwd_end : -1));
      fwd_end[fwd_units[next_f]] = low.last();
      ++next_f;
    };
    auto run_backward = [&] {
      const auto it = fwd_end.find(bwd_units[next_b]);
      low.set_reduce_grads(bwd_units[next_b].first == mbs - 1);  // the chunk's last backward
      unit(false, bwd_units[next_b].first, bwd_units[next_b].second, gate(it != fwd_end.end() ? it->second : -1));
      low.set_reduce_grads(false);
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
    }
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
    const double layers_dense = dense;  // the rest (embedding, head) is added below
    if (holds_embedding(s, st)) dense += pc.embedding / static_cast<double>(p.tp);
    if (holds_head(s, st)) dense += (pc.lm_head + static_cast<double>(s.model.hidden)) / static_cast<double>(p.tp);
    const double edges = dense - layers_dense;  // the embedding and the head (with the final norm)
    const double bgrad = bytes_per_element(s.precision.grads);
    if (dual && s.parallelism.schedule == PipelineSchedule::dualpipe) {
      // DualPipe holds every model stage twice (stage s and pp - 1 - s hold the same two): the
      // copies' gradients are summed before the data-parallel reduction, a 2-rank all-reduce of
      // all of this stage's gradients, which moves their size each way.
      low.set_micro_batch(0);
      const double bytes = (dense + expert) * bgrad;
      const int peer = stages - 1 - st;
      for (const char* name : {"pp.send.grad", "pp.recv.grad"}) {
        const int32_t id = low.comm(name, Category::pp_comm, Stream::pp_comm, -1, Collective::send_recv, Group::pp,
                                    bytes, {grads.front()});
        low.op(id).peer_stage = peer;
        grads = {id};
      }
    }
    const double dense_shard = p.fsdp > 1 ? static_cast<double>(p.ep * p.fsdp) : 1.0;
    const double expert_shard = static_cast<double>(p.fsdp);
    // A stage that holds a copy of the embedding table (for an MTP module, or for a head tied to
    // the table: holds_embedding) and stage 0 keep the copies in step: Megatron's finalize_model_grads all-reduces their gradients
    // over the two-rank embedding group (_allreduce_word_embedding_grads) before the optimizer, the
    // table's size each way. DualPipe's exchange above sums them already (each of its two stages
    // holds both ends); DualPipeV's stage 0 holds both.
    if (!(dual && s.parallelism.schedule == PipelineSchedule::dualpipe) && holds_embedding(s, st)) {
      int peer = -1, holders = 0;
      for (int o = 0; o < stages; ++o)
        if (holds_embedding(s, o)) {
          ++holders;
          if (o != st) peer = o;
        }
      if (holders == 2 && peer >= 0) {
        // Under FSDP each copy's gradient was reduce-scattered as it was made: the ranks exchange
        // their shards.
        low.set_micro_batch(0);
        for (const char* name : {"pp.send.embed_grad", "pp.recv.embed_grad"}) {
          const int32_t id = low.comm(name, Category::pp_comm, Stream::pp_comm, -1, Collective::send_recv, Group::pp,
                                      pc.embedding / static_cast<double>(p.tp) / dense_shard * bgrad, {grads.front()});
          low.op(id).peer_stage = peer;
          grads = {id};
        }
      }
    }
    if (low.reduces_grads_per_layer()) {
      // The layers' reductions ran during the last backward; the embedding and head remain.
      for (int32_t id : low.grad_reduces()) grads.push_back(id);
      if (p.dense_grad_replicas() > 1 && edges > 0) grads.push_back(low.dp_grad_reduce(false, -1, Group::dense_dp, edges, {low.last()}));
    } else {
      // An all-reduce each, or reduce-scatters under ZeRO-1 (dp_grad_reduce); HSDP's replicas of the
      // FSDP shards all-reduce.
      if (p.fsdp == 1 && p.dense_grad_replicas() > 1) grads.push_back(low.dp_grad_reduce(false, -1, Group::dense_dp, dense, {low.last()}));
      if (p.cp * p.dp > 1 && p.fsdp > 1) grads.push_back(low.dp_grad_reduce(false, -1, Group::dp, dense / dense_shard, {low.last()}));
      // Experts: over the replicas FSDP has not reduce-scattered already (tp x cp x dp unfolded, edp folded).
      if (p.expert_reduce_replicas() > 1)
        grads.push_back(low.dp_grad_reduce(true, -1, Group::expert_dp, expert / expert_shard, {low.last()}));
    }
    // Adam: read weights, gradients and both moments (and FP32 master weights), write all but the gradients.
    // Each rank updates the parameters it owns: its FSDP shard, or under ZeRO-1 (distributed
    // optimizer, no FSDP) its slice of every replica group: dense over cp x ep x dp, experts over
    // their data-parallel group (tp x cp x dp unfolded; edp folded).
    const bool zero1 = low.zero1();
    const double local = zero1 ? dense / static_cast<double>(p.dense_grad_replicas()) +
                                     expert / static_cast<double>(p.expert_data_parallel())
                               : dense / dense_shard + expert / expert_shard;
    const double bw = bytes_per_element(s.precision.weights), bo = bytes_per_element(s.precision.optimizer_state);
    const double per_param = 2 * bw + bgrad + 4 * bo + (s.precision.master_weights_fp32 ? 8.0 : 0.0);
    // The embedding and head stay BF16 under low-precision primary weights (end_weight_bytes):
    // their share of the rank's parameters is read and written in BF16.
    const double bw_edges = end_weight_bytes(s);
    const double local_edges = edges / (zero1 ? static_cast<double>(p.dense_grad_replicas()) : dense_shard);
    Op opt;
    opt.name = "optimizer.step";
    opt.category = Category::optimizer;
    opt.phase = Phase::optimizer;
    opt.hbm_bytes = Bytes(local * per_param + local_edges * 2 * (bw_edges - bw));
    opt.deps = grads;
    const int32_t step = low.emit(std::move(opt));
    // ZeRO-1 without --overlap-param-gather: the optimizer step all-gathers the updated weights
    // before it returns (with it, they were gathered at the step's start: param_gathers above).
    if (zero1 && !low.zero1_prefetch()) low.param_gathers(layers, holds_embedding(s, st), holds_head(s, st), {step});
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
    mean.max_tokens = load.mean_tokens;  // a de-duplicating dispatch's exchange: the mean rank's too
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
  const size_t first_straggler = g.classes.size();
  int64_t straggling = 0;
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
    straggling += x.count;
  }
  // Fleet speed variation: the job waits at every synchronized step for its slowest GPU. A GPU's
  // log speed is normal with sd sigma (its relative spread, for small sigma), so the slowest of n
  // runs at exp(-sigma E[max of n normals]) of the mean speed and its compute takes exp(+sigma E)
  // as long: close to 1 + sigma E for a few percent, and never a negative speed for a wide spread.
  // The listed stragglers keep their own slowdown: a straggler GPU is one draw, not the fleet's
  // slowest (a straggler rack the slowest of its own GPUs); the rest of the fleet waits for the
  // slowest of its own n GPUs.
  if (s.speed_sigma > 0 && s.gpus > 1) {
    const int64_t n = std::max<int64_t>(1, s.gpus - straggling);
    const double e = expected_max_of_normals(n);
    g.fleet_slowdown = std::exp(s.speed_sigma * e);
    for (size_t c = 0; c < first_straggler; ++c) {
      g.classes[c].compute_slowdown *= g.fleet_slowdown;
      g.classes[c].fleet_slowdown = g.fleet_slowdown;
    }
    // A straggler rack's GPUs draw their speeds too: it waits for its own slowest of `count`.
    for (size_t c = first_straggler, x = 0; c < g.classes.size() && x < s.stragglers.size(); ++c, ++x) {
      const double own = std::exp(s.speed_sigma * expected_max_of_normals(s.stragglers[x].count));
      g.classes[c].compute_slowdown *= own;
      g.classes[c].fleet_slowdown = own;
    }
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "fleet speed spread %.1f %%: every synchronized step waits for the slowest of %lld GPUs, "
                  "%.2f standard deviations above the mean: compute x %.4f",
                  100 * s.speed_sigma, static_cast<long long>(n), e, g.fleet_slowdown);
    g.notes.push_back(buf);
  }
  if (dualpipe_family(s) && s.parallelism.fsdp > 1)
    g.notes.push_back("DualPipe's zero-bubble steps run whole backwards here: under FSDP a layer's gradient "
                      "reduce-scatter follows its backward, so weight gradients are not split from it");
  if (p.pp > 1 && p.schedule == PipelineSchedule::zb_h1) {
    if (p.fsdp > 1)
      g.notes.push_back("ZB-H1 runs whole backwards here: under FSDP a layer's gradient reduce-scatter follows its "
                        "backward, so weight gradients are not split from it (the schedule is 1F1B's)");
    if (s.stack.fwd_bwd_overlap)
      g.notes.push_back("ZB-H1 runs its forwards, backwards and weight gradients one at a time: the stack's "
                        "forward-backward overlap (overlap.fwd_bwd) is not applied under it");
  }
  return g;
}

}  // namespace moeperf
