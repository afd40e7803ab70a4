#include "model/study.h"

#include <algorithm>
#include <functional>

#include "model/error.h"

namespace moeperf {

Scenario baseline_of(const Scenario& s) {
  Scenario b = s;
  b.name = s.name + " [every optimization off]";
  b.stack.grouped_gemm = false;
  b.stack.multistream_collectives = false;
  b.stack.fsdp_prefetch = false;
  b.stack.dispatcher = Dispatcher::alltoall;
  b.stack.a2a_with_shared_expert = false;
  b.precision.dense_gemm = b.precision.expert_gemm = Dtype::bf16;
  b.precision.dispatch = b.precision.combine = Dtype::bf16;
  for (TensorClass c : b.memory.offload)
    if (std::find(b.memory.recompute.begin(), b.memory.recompute.end(), c) == b.memory.recompute.end())
      b.memory.recompute.push_back(c);
  b.memory.offload.clear();
  return b;
}

std::vector<WaterfallStep> waterfall(const Scenario& from, const Scenario& to, const Calibration& cal) {
  struct Move {
    const char* name;
    const char* changes;
    std::function<void(Scenario&)> apply;
  };
  const std::vector<Move> moves = {
      {"grouped GEMM", "stack.grouped_gemm", [&](Scenario& s) { s.stack.grouped_gemm = to.stack.grouped_gemm; }},
      {"multistream collectives", "stack.multistream_collectives, stack.overlap.fsdp_prefetch",
       [&](Scenario& s) {
         s.stack.multistream_collectives = to.stack.multistream_collectives;
         s.stack.fsdp_prefetch = to.stack.fsdp_prefetch;
         s.stack.fsdp_prefetch_depth = to.stack.fsdp_prefetch_depth;
       }},
      {"MXFP8 / FP8", "precision", [&](Scenario& s) { s.precision = to.precision; }},
      {"host offload", "memory", [&](Scenario& s) { s.memory = to.memory; }},
      {"fused dedup dispatch", "stack.dispatcher, stack.overlap.a2a_with_shared_expert, stack.a2a_buffer_factor",
       [&](Scenario& s) {
         s.stack.dispatcher = to.stack.dispatcher;
         s.stack.a2a_with_shared_expert = to.stack.a2a_with_shared_expert;
         s.stack.a2a_buffer_factor = to.stack.a2a_buffer_factor;
       }},
      {"everything else", "model, system, layout, batch, routing", [&](Scenario& s) { s = to; }},
  };
  std::vector<WaterfallStep> out;
  Scenario cur = from;
  out.push_back({"start", "", predict(cur, cal)});
  for (const Move& m : moves) {
    Scenario next = cur;
    m.apply(next);
    // A step that changes nothing predicts the same as the previous one: skip it.
    const StepReport r = predict(next, cal);
    const bool same = r.step_time == out.back().report.step_time && r.memory.hbm_total == out.back().report.memory.hbm_total;
    if (same && std::string(m.name) == "everything else") break;
    out.push_back({m.name, m.changes, r});
    cur = next;
  }
  return out;
}

std::vector<ScalePoint> scale(const Scenario& s, const std::vector<int64_t>& gpus, GrowAxis axis, const Calibration& cal) {
  std::vector<ScalePoint> out;
  const Parallelism& p = s.parallelism;
  const int64_t per_dp_rank = s.batch.global_batch / p.dense_data_parallel();  // sequences per data-parallel rank
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
    x.batch.global_batch = per_dp_rank * x.parallelism.dense_data_parallel();
    // Stragglers keep their GPU or rack index; each point checks they still fit.
    place_stragglers(x);
    size_t bad = 0;
    if (const std::string why = straggler_problem(x, &bad); !why.empty())
      throw InputError("at " + std::to_string(n) + " GPUs, straggler " + std::to_string(bad) + ": " + why);
    x.name = s.name + " @ " + std::to_string(n) + " GPUs";
    ScalePoint pt{n, predict(x, cal), 0.0};
    pt.efficiency = out.empty() ? 1.0 : pt.report.tokens_per_s_per_gpu / out.front().report.tokens_per_s_per_gpu;
    out.push_back(std::move(pt));
  }
  return out;
}

}  // namespace moeperf
