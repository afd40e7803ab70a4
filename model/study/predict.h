// The cost model end to end: topology, routing loads, step lowering, pricing, simulation and
// memory, summarized as a StepReport (what `moeperf predict` prints and the GUI shows).
//
//   StepReport r = predict(io::load_scenario(path), Calibration{});
//   std::cout << r.model_tflops_per_gpu;
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/workload/memory.h"
#include "model/params.h"
#include "model/sim/sim.h"
#include "model/specs.h"
#include "model/workload/step.h"
#include "model/hardware/topology.h"

namespace moeperf {

struct OpSummary {
  std::string name;
  Category category = Category::memory;
  int64_t count = 0;
  Seconds seconds;        // simulated kernel time (start to end), summed
  Seconds serial_seconds; // uncontended time, summed
  Flops flops;
  Bytes bytes;            // HBM bytes (compute) or message bytes (communication)
  Bytes hbm_bytes;        // bytes read and written in HBM
  Bytes message_bytes;    // communication: NCCL-style size per rank (0 for compute)
  Seconds exposed;        // its share of the exposed communication time (see exposed_by_op)
  bool ep_kernel = false; // priced by the EP class's fitted parameters (a fused EP kernel, XLA's one-shot)
};

struct StepReport {
  std::string name;
  int64_t gpus = 0;
  Seconds step_time;             // simulated (overlap, shared links), or serial_step_time when not simulated
  bool simulated = true;         // false: PredictOptions::simulate was off (`predict --serial`)
  Seconds serial_step_time;      // the busiest class's ops back to back on one queue, uncontended:
                                 // no overlap, and no waiting for other pipeline stages
  Seconds idle;                  // the reported class runs nothing (pipeline bubble when pp > 1)
  // The host that issued the reported class's program (stack.host_op_s, graph_launch_s, libraries'
  // host loops; SimClass::host_busy; 0 under --serial): seconds spent issuing, framework ops issued
  // outside CUDA graphs, graph launches.
  Seconds host_busy;
  double host_ops = 0;
  int64_t graph_launches = 0;
  // What the host costs the step: the step less the step under a host that issues at once
  // (host_free_step_time; filled by add_host_cost, which `predict` and the GUI call).
  std::optional<Seconds> host_cost;
  // When the system file gives them (SystemSpec::power_price): every GPU's share of power over the
  // step, and the price of the step's GPU-hours, also per million tokens trained.
  std::optional<Joules> energy_per_step;
  std::optional<double> kwh_per_million_tokens;
  std::optional<double> usd_per_million_tokens;
  double tokens_per_step_per_gpu = 0;
  double tokens_per_s_per_gpu = 0;
  // Capacity: the whole job's throughput, and the GPUs it holds: every GPU of each NVLink domain
  // (rack or node) it uses, e.g. 64 used of 72 bought per GB300 NVL72 rack.
  double cluster_tokens_per_s = 0;
  int64_t domains_used = 0, gpus_bought = 0;
  double model_flops_per_token = 0;  // MaxText convention
  double model_tflops_per_gpu = 0;
  double mfu = 0;                    // model FLOP rate / dense BF16 peak
  double comm_fraction_of_kernel_time = 0;  // communication kernel time / all kernel time, summed over streams
                                            // and over every GPU (waits for slower classes included)
  double exposed_comm_fraction = 0;         // step time with communication running and no compute / step time
  std::array<Seconds, kCategoryCount> breakdown{};  // kernel seconds per category (busiest class)
  Seconds exposed_comm;
  MemoryReport memory;
  ExpertLoad load;
  std::vector<OpSummary> ops;
  std::vector<std::string> notes;
  // The calibration profile that priced it, and the error band: each op class's share of the step
  // on the critical path (compute kernels' time, communication's exposed time) times that class's
  // fit spread (Calibration::residual_rms), added in quadrature. 0 without a fitted profile.
  std::string profile;
  std::string stack;  // the software stack's name ("" : the built-in defaults)
  double band = 0;                              // the parts' band, relative: step_time x (1 -/+ band)
  std::map<std::string, double> band_terms;     // per class: share x spread
  // The band with the end-to-end term: the published cases of the scenario's stack (of every case
  // when none ran on it) ran `slowest` to `fastest` times the predicted step; above 1 widens the
  // high side, below 1 the low side, each in quadrature with the parts' band. Equal to `band`
  // without end-to-end errors (Calibration::end_to_end empty).
  double band_low = 0, band_high = 0;           // step_time x (1 - band_low) .. (1 + band_high)
  struct EndToEndTerm {
    std::string stack;     // the scenario's stack ("" : the built-in defaults)
    bool own_stack = true; // false: no case ran on it, every case's ratios are used
    // true: the cases are those of the scenario's very configuration of its stack (same overrides);
    // false with own_stack: none ran so configured, every case of the stack's name is used.
    bool same_config = false;
    int cases = 0;
    double slowest = 1, fastest = 1;  // max and min measured / predicted step over those cases
    std::string source;
  };
  std::optional<EndToEndTerm> end_to_end;
  double step_low() const { return step_time.value() * (1 - band_low); }
  double step_high() const { return step_time.value() * (1 + band_high); }
  // The pieces, for traces and views.
  std::shared_ptr<const Scenario> scenario;
  std::shared_ptr<const Topology> topology;
  std::shared_ptr<const StepGraph> graph;
  std::shared_ptr<const SimResult> sim;
  int busiest_class = 0;
};

struct PredictOptions {
  bool simulate = true;  // false: the sum of op times only (every op back to back, no overlap)
  // The scenario's topology when the caller already built it (Topology::build(s.system, s.gpus)):
  // a plan predicts thousands of layouts of one system on one GPU count. Null: built here.
  std::shared_ptr<const Topology> topology;
  // A pricer of this scenario, topology and calibration already used (its collective costs are
  // cached): a plan prices a candidate's collectives to bound it, then predicts it. Null: made here.
  const Pricer* pricer = nullptr;
};

ExpertLoad expert_load(const Scenario& s, const Calibration& cal, std::vector<std::string>* notes = nullptr);

// A scenario asking for "layout": "balanced" is predicted under balanced_layout()'s split (found
// again whatever layout it holds), and the report's scenario holds it.
StepReport predict(const Scenario& s, const Calibration& cal, const PredictOptions& opt = {});

// The step under a host that issues every op at once: stack.host_op_s and graph_launch_s 0 and no
// library host loop (gemm_multi_stream_group_s 0); host waits still drain the GPU queue. The
// difference to predict()'s step is what the host costs.
Seconds host_free_step_time(const Scenario& s, const Calibration& cal);
// Fills r.host_cost (the step less host_free_step_time) where a simulated step's host spent
// anything; a second simulation, so `predict`, the GUI's prediction and none of the studies call it.
void add_host_cost(StepReport& r, const Calibration& cal);

// The balanced pipeline layout (balance_pipeline_layout): each layer, the embedding and the tail
// priced from the even split's graph: per layer, the ops of one micro-batch (forward, recompute,
// backward, deferred weight gradients) on the compute stream and its EP and TP collectives,
// uncontended (Pricer::time); the embedding's ops on the first virtual stage; the LM head, the
// loss and the MTP modules on the last. Gradient reductions, parameter gathers, pipeline hand-offs
// and the optimizer are left out: they overlap, or do not depend on the split. With one virtual
// stage per GPU the costliest stage is lowered; with several (interleaved, DualPipe, DualPipeV) the
// busiest GPU's sum of them. The even split is kept unless the busiest GPU's cost goes down (or
// stays and the costliest virtual stage goes down). The second overload also keeps it in HBM when
// the even split fits: while the split does not, the fullest GPU's largest virtual stage is capped
// at a layer fewer and the split chosen again (the even split when none within the caps is
// better). Any layout `s` holds is ignored. Needs pp x vpp <= layers (the even split lowered first).
struct BalancedLayout {
  std::vector<VirtualStageLayout> layout;
  std::string spec;                               // Megatron's syntax (format_pipeline_layout)
  std::vector<double> even_costs, balanced_costs;  // seconds per virtual stage, per micro-batch
  // Per pipeline stage: its virtual stages' sum (plus the costlier under DualPipe and DualPipeV,
  // pipeline_gpu_cost).
  std::vector<double> even_gpu_costs, balanced_gpu_costs;
  std::string even_kept;                           // why the even split was kept ("" when it was not)
  bool capped = false;                             // layers per stage capped for memory (second overload)
  std::vector<double> layer_costs;                 // seconds per layer, per micro-batch
  double embedding_cost = 0, tail_cost = 0;        // the embedding; the head, loss and MTP modules
};
BalancedLayout balanced_layout(const Scenario& s, const Pricer& pricer, const StepGraph& even);
// The same from the even split lowered with 2 x pp micro-batches per pipeline (the scenario's count
// when it is fewer): a micro-batch's ops do not depend on how many follow it, and a step of
// hundreds of micro-batches is not lowered twice. `pricer` prices `s` (or the same ops alike).
BalancedLayout balanced_layout(const Scenario& s, const Calibration& cal, const Pricer& pricer);

// The step lowered, before pricing: what predict() does first. A plan lowers a candidate once to
// check its memory and bound its compute, then predicts from the same lowering.
struct Lowered {
  ExpertLoad load;
  std::vector<std::string> notes;  // expert_load's
  std::shared_ptr<const StepGraph> graph;
};
Lowered lower(const Scenario& s, const Calibration& cal);
StepReport predict_lowered(const Scenario& s, const Calibration& cal, const Lowered& lowered, const PredictOptions& opt = {});

// Training a token budget at the report's throughput: wall time, and energy and cost where the
// system file gives power and price.
struct TrainingBudget {
  double tokens = 0;
  double seconds = 0;
  std::optional<double> mwh, usd;
};
TrainingBudget training_budget(const StepReport& r, double tokens);

}  // namespace moeperf
