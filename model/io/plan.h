// moeperf plan: the feasible layouts of a scenario's model, system and batch on N GPUs, ranked.
// Candidates: TP (inside an NVLink domain, dividing the heads), CP (long sequences), PP with 1F1B
// or interleaved (VPP 2, or the VPPs asked) (or the schedules asked: ZB-H1, DualPipe, DualPipeV), EP (powers of two dividing the experts), the rest FSDP or DP, the
// micro-batch, and the memory policy (the scenario's recompute/offload, or everything recomputed);
// and MoE parallel folding (ETP 1 across TP/CP ranks, 2, 4, 8; the rest DP) at the scenario's
// micro-batch and memory policy. Pipelined candidates split the layers evenly, or (balance) by
// balanced_layout().
// Each candidate is checked as a scenario file would be (check_scenario) and for memory before it
// is priced and simulated, and skipped when a lower bound of its step already exceeds the K-th
// best step found: first its FLOPs at the fastest calibrated GEMM rate, stretched by the pipeline
// fill; then, lowered, its compute ops priced (compute_bound) and each collective queue's
// uncontended time (comm_bound); then the whole step scheduled without contention
// (schedule_bound: dependencies and queue order kept, every op at its priced time alone).
// Candidates go cheapest FLOP bound first; the rest are simulated
// (step time only, collectives priced once per group of GPUs across candidates), and the best K
// predicted whole, with what the runner-up loses.
//
//   PlanResult r = plan(io::load_scenario(path), path, {.gpus = 2048, .top = 5});
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/study/predict.h"

namespace moeperf::io {

struct PlanResult;

struct PlanOptions {
  int64_t gpus = 0;
  int top = 5;
  std::string objective = "tokens_per_s";  // or "time_to_train" (needs train_tokens), "cost" (needs a price)
  double train_tokens = 0;
  int64_t global_batch = 0;  // 0: the scenario's sequences per GPU times gpus
  bool prune = true;         // false: every valid candidate that fits is simulated (to check the bounds)
  // Each candidate with pp > 1 runs its balanced layout too (parallelism.layout "balanced": the
  // even split lowered and priced first, one lowering more per candidate), beside the even split
  // (the balancing rule ranks priced stage costs; the simulated step may rank the two otherwise).
  bool balance = false;
  // The schedules searched for pp > 1 (interleaved with VPP 2, the others with one virtual stage
  // per GPU, or two for DualPipe(V) as their programs place them); a layout the loader refuses
  // under one (DualPipe's even pp, its micro-batch count) is counted invalid.
  std::vector<PipelineSchedule> schedules = {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved};
  // Virtual stages per GPU tried under the interleaved schedule (each at least 2; pp x vpp at most
  // the model's layers).
  std::vector<int64_t> vpps = {2};
  // Candidates with more micro-batch x layer passes per step are left out (too_fine): their
  // simulations are slow. DeepSeek-V3's published Megatron mesh on 256 GB200 (PP 8 x VPP 4 x EP 32,
  // micro-batch 1) has 3,904.
  int64_t max_layer_passes = 2048;
  // Across processes: this one searches the candidates at positions shard, shard + shards, ... of
  // the search order; `merge` (given when shards > 1) then brings every shard's counts and best
  // (candidate, simulated step) pairs to one process, and returns false on the others, whose
  // plan() returns the counts of their shard and no layouts.
  int shard = 0, shards = 1;
  std::function<bool(PlanResult&, std::vector<std::pair<size_t, double>>&)> merge;
  // Set (from another thread) to stop: candidates not started are skipped, and of the best found
  // only the first is predicted whole (the GUI's Cancel, and its window closing).
  const std::atomic<bool>* cancel = nullptr;
  // Called (one thread at a time) as each of this process's candidates is done: how many of how many.
  std::function<void(size_t done, size_t total)> progress;
};

struct PlanEntry {
  std::string layout;  // "tp 1 x cp 1 x pp 1 x ep 8 x fsdp 16 x dp 1, micro-batch 6, memory: scenario's"
  std::vector<std::string> sets;  // the --set arguments that give this layout from the scenario file
  // Its figures. Past the best two (whose step_terms give the runner-up's loss) the report keeps no
  // graph and no simulation (report.graph and report.sim are null: megabytes each at --top 400):
  // predict its --set list for the timeline, trace or op table.
  StepReport report;
  double objective = 0;  // tokens/s for the cluster, days, or $ per million tokens
};

struct PlanResult {
  std::vector<PlanEntry> best;  // the best first
  size_t candidates = 0, invalid = 0, no_fit = 0, predicted = 0, failed = 0;
  size_t too_fine = 0;  // more than max_layer_passes micro-batch x layer passes per step: not simulated
  size_t bounded = 0;   // pruned: their FLOP bound already exceeds the K-th best step found
  size_t compute_bounded = 0;  // pruned: their compute ops, priced, already exceed it (compute_bound)
  size_t comm_bounded = 0;     // pruned: one of their collective queues already exceeds it (comm_bound)
  size_t schedule_bounded = 0; // pruned: their step scheduled without contention exceeds it (schedule_bound)
  size_t balanced_is_even = 0; // --balance: the balanced split was the even one, a candidate of its own
  int64_t global_batch = 0;
  // The scenario's own layout predicted whole, when the plan is for its GPU count and global batch
  // (how far the layout a user runs is from the best); empty otherwise, or cancelled.
  std::optional<StepReport> own;
  // For the runner-up: its step terms minus the best's (step_terms), largest first.
  std::vector<std::pair<std::string, double>> runner_up_loss;
};

// "1f1b,zbh1" or "all" (as --schedules takes them): the schedules a scenario file names, each once,
// in the order given; InputError naming the text and the names expected.
std::vector<PipelineSchedule> parse_schedules(const std::string& text);

// "2,4" (as --vpp takes them): whole numbers of at least 2, each once, in the order given;
// InputError naming the text.
std::vector<int64_t> parse_vpps(const std::string& text);

// `run` maps independent jobs onto threads (serial when not given). Throws InputError for an
// objective the scenario cannot give (cost without a price) or a GPU count no layout fits.
PlanResult plan(const Scenario& base, const std::string& file, const PlanOptions& o,
                const std::function<void(std::vector<std::function<void()>>&)>& run = {});

}  // namespace moeperf::io
