// Per-GPU memory of a scenario: weights, gradients and optimizer states by precision and
// sharding, FSDP gather buffers, saved activations per micro-batch in flight (by schedule,
// recompute and offload policy, per tensor class), communication buffers, the largest transient,
// and the host memory offload uses; checked against the GPU's usable HBM and the host's share.
//
//   MemoryReport r = memory_report(scenario, load, cal);
//   if (!r.fits) std::cout << "short by " << in_gigabytes(r.hbm_shortfall) << " GB";
#pragma once

#include <array>
#include <string>
#include <vector>

#include "model/params.h"
#include "model/specs.h"
#include "model/workload/step.h"
#include "model/units.h"

namespace moeperf {

struct MemoryReport {
  Bytes weights, gradients, optimizer_states, fsdp_buffers, activations, comm_buffers, transient, runtime_reserve;
  Bytes weight_cache;  // quantized weight copies kept for the step (stack.weight_quant_cache)
  std::array<Bytes, kTensorClassCount> activations_by_class{};  // saved in HBM, whole stage, all micro-batches in flight
  Bytes activations_expert_rows;  // the expert GEMMs' input rows an autograd stack keeps (no class: outside the recompute lists)
  Bytes offloaded_to_host;        // tensors the policy offloads (host memory they use)
  Bytes offloaded_if_kept;        // the HBM those tensors would need without offload
  Bytes hbm_total;                // everything above that lives in HBM
  Bytes hbm_capacity;             // usable HBM x usable_hbm_fraction
  Bytes host_capacity;            // host memory per GPU (min of the CPU's share and the offload cap)
  double micro_batches_in_flight = 1;  // of the stage's layers (a fraction under interleaving)
  bool fits_hbm = true, fits_host = true, fits = true;
  Bytes hbm_shortfall, host_shortfall;  // how much is missing when it does not fit
  int pp_stage = 0;                     // the stage reported (the one with the most HBM)
  std::vector<Bytes> hbm_by_stage;      // every pipeline stage's HBM total (one entry without PP)
};

MemoryReport memory_report(const Scenario& s, const ExpertLoad& load, const Calibration& cal);

// Micro-batches whose saved activations a stage holds at once, in units of one micro-batch through
// all of the stage's layers. 1F1B: pp - stage. Interleaved 1F1B: Megatron's warm-up of
// (pp - stage - 1) x 2 + (vpp - 1) x pp chunks plus the one running, each 1/vpp of the stage's
// layers. Both one more under stack.overlap.fwd_bwd (a forward more in the warm-up). DualPipe and DualPipeV: PP + 1 chunks on every stage (DeepSeek-V3 report, table 2; PP
// counts model stages, pp for DualPipe and 2 pp for DualPipeV), each half the stage's layers:
// (pp + 1) / 2 and pp + 1/2. Never more than the micro-batches of a step.
double micro_batches_in_flight(const Scenario& s, int stage);
// Micro-batches in flight per chunk of `stage` at its activation peak, given what one micro-batch
// leaves in HBM through each chunk (pipeline_chunks entries). Interleaved: Megatron's unit order
// (one_f_one_b_units) run forward by forward, each adding its chunk's bytes, each backward freeing
// them; the counts after the forward that holds the most. DualPipe / DualPipeV: DeepSeek's program
// (stage_program) alike, which fills the two chunks unevenly (PP + 1 chunks in all). Other
// schedules: micro_batches_in_flight for every chunk. Under an even split of an interleaved
// schedule both give the same bytes.
std::vector<double> chunk_micro_batches_in_flight(const Scenario& s, int stage, const std::vector<double>& chunk_bytes);

const char* to_string(TensorClass c);

}  // namespace moeperf
