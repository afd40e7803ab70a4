// Pricing ops on a GPU and a topology: compute ops by roofline with named efficiencies,
// communication ops by collective_cost on the graph.
//
//   Pricer pr(scenario, topo, cal);
//   Seconds t = pr.compute_time(op);          // GEMM, attention, memory-bound, sync, optimizer
//   CollectiveCost c = pr.comm_cost(op);       // ep/fsdp/dp/tp/pp collectives, offload copies
//
// Compute ops by the efficiency curves of model/pricing/efficiency.h (GEMM shape terms, attention
// by keys and head dim, HBM roofline); collectives on the graph with the NVLink/NVLS/IB fractions,
// and a fused EP dispatcher's all-to-all with the EP kernel's own fractions.
// A dtype the GPU has no tensor-core rate for is priced at the nearest one it has (MXFP8 on
// Hopper: FP8 with block scales; NVFP4 without FP4: MXFP8/FP8), and the Pricer says so in notes().
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "model/pricing/collective.h"
#include "model/params.h"
#include "model/specs.h"
#include "model/workload/step.h"
#include "model/hardware/topology.h"

namespace moeperf {

// Dense tensor-core rate for a GEMM in `d` on `gpu`, and the dtype actually priced.
FlopsPerSecond gemm_peak(Dtype d, const GpuSpec& gpu, Dtype* priced_as = nullptr);
const char* to_string(Dtype d);

// SMs a fused EP kernel holds: the stack's ep_sms, else comm_sm_fraction of the GPU's.
double ep_kernel_sms(const StackOptions& stack, const GpuSpec& gpu, const Calibration& cal);

// Collective costs shared by the Pricers of many scenarios on one topology and one calibration (a
// plan's candidates): keyed by the group's GPUs rather than its kind, so layouts whose groups land
// on the same GPUs price them once. Thread-safe; the map only grows.
class CollectiveMemo {
 public:
  // The collective, the group's GPUs, the all-to-all fanouts, and the NVLink and network fractions
  // it is priced at (a fused EP kernel's own, which depend on the stack's SMs for it).
  using Key = std::tuple<Collective, std::vector<int64_t>, double, double, double, double>;
  const std::vector<CollectiveCost>& get(const Key& k, const std::function<std::vector<CollectiveCost>()>& make);

 private:
  std::mutex mu_;
  std::map<Key, std::vector<CollectiveCost>> map_;
};

// The parameter that sets a compute op's rate: a GEMM's dtype fraction (as gemm_peak() prices the
// dtype), attention's forward or backward fraction, the HBM fraction of a memory-bound kernel;
// none for communication and host waits. predict names those still at their default in a fitted
// profile (no measurement set them).
std::optional<Param> rate_param(const Op& op, const GpuSpec& gpu);
// The shape terms that bend that rate for the op's shape (a GEMM's K roll-off; attention's keys
// and head-dim terms): a note names them when no measurement of the generation set them.
std::vector<Param> shape_params(const Op& op);

class Pricer {
 public:
  // `memo`, when given, must outlive the Pricer and serve only this topology and calibration.
  Pricer(const Scenario& s, const Topology& t, const Calibration& cal, CollectiveMemo* memo = nullptr);
  Seconds compute_time(const Op& op) const;
  // Host time a library spends issuing `op` beyond the framework's ops (Op::host_ops): a multi-stream
  // grouped GEMM's loop over its groups (gemm_host_seconds), one piece per group; 0 otherwise.
  Seconds host_loop_time(const Op& op) const;
  // `stage`: the pipeline stage of the class that runs the op; a send or receive crosses from it to
  // the op's peer_stage, between those stages' first GPUs (each stage is a block of GPU ids, so the
  // pair of first GPUs crosses what every pair of the two stages crosses).
  CollectiveCost comm_cost(const Op& op, int stage = 0) const;
  Seconds time(const Op& op, int stage = 0) const;  // either kind, uncontended
  const std::vector<std::string>& notes() const { return notes_; }
  const Calibration& calibration() const { return cal_; }
  const Scenario& scenario() const { return s_; }

 private:
  const Scenario& s_;
  const Topology& t_;
  Calibration cal_;
  std::vector<std::string> notes_;
  // Candidate algorithms per (collective, group, fanout, node fanout, combine, pipeline stage pair);
  // comm_cost picks the fastest at the op's size.
  mutable std::map<std::tuple<Collective, Group, double, double, bool, int, double>, std::vector<CollectiveCost>> cache_;
  mutable std::map<Group, std::vector<int64_t>> widest_;  // widest_group per group, scanned once
  CollectiveCost host_, host_d2h_;
  CollectiveMemo* memo_ = nullptr;
};

}  // namespace moeperf
