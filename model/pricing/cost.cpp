#include "model/pricing/cost.h"

#include <algorithm>

namespace moeperf {

const char* to_string(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp8: return "fp8";
    case Dtype::mxfp8: return "mxfp8";
    case Dtype::nvfp4: return "nvfp4";
  }
  return "?";
}

FlopsPerSecond gemm_peak(Dtype d, const GpuSpec& g, Dtype* priced_as) {
  Dtype p = d;
  FlopsPerSecond r = g.dense_bf16;
  switch (d) {
    case Dtype::fp32:  // FP32 GEMMs run as TF32/BF16 tensor-core work in training stacks
    case Dtype::bf16:
    case Dtype::fp16: p = Dtype::bf16; r = g.dense_bf16; break;
    case Dtype::fp8: r = g.dense_fp8; break;
    case Dtype::mxfp8:
      if (g.dense_mxfp8) r = *g.dense_mxfp8;
      else { p = Dtype::fp8; r = g.dense_fp8; }
      break;
    case Dtype::nvfp4:
      if (g.dense_nvfp4) r = *g.dense_nvfp4;
      else if (g.dense_mxfp8) { p = Dtype::mxfp8; r = *g.dense_mxfp8; }
      else { p = Dtype::fp8; r = g.dense_fp8; }
      break;
  }
  if (priced_as) *priced_as = p;
  return r;
}

Pricer::Pricer(const Scenario& s, const Topology& t, const Calibration& cal)
    : s_(s), t_(t), cal_(cal), host_(host_copy_cost(t, s.system, cal)) {
  for (Dtype d : {s.precision.dense_gemm, s.precision.expert_gemm}) {
    Dtype p = d;
    gemm_peak(d, s.system.gpu(), &p);
    if (p != d) {
      std::string note = std::string(to_string(d)) + " GEMMs priced as " + to_string(p) + ": " + s.system.gpu().name +
                         " has no native " + to_string(d) + " tensor-core rate";
      if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
    }
  }
}

Seconds Pricer::compute_time(const Op& op) const {
  const GpuSpec& g = s_.system.gpu();
  const double hbm = g.hbm_bandwidth.value() * cal_[Param::hbm_fraction];
  const double launch = cal_[Param::kernel_launch_s] * op.launches;
  const double mem_s = op.hbm_bytes.value() / hbm;
  switch (op.category) {
    case Category::gemm: {
      const double x = static_cast<double>(std::max<int64_t>(1, std::min({op.m, op.n, op.k})));
      const double eff = cal_[Param::gemm_peak_fraction] * x / (x + cal_[Param::gemm_half_dim]);
      const double flop_s = op.flops.value() / (gemm_peak(op.dtype, g).value() * eff);
      return Seconds(std::max(flop_s, mem_s) + launch);
    }
    case Category::attention: {
      const bool bwd = op.phase == Phase::backward;
      const double eff = cal_[bwd ? Param::attention_bwd_fraction : Param::attention_fwd_fraction];
      return Seconds(std::max(op.flops.value() / (g.dense_bf16.value() * eff), mem_s) + launch);
    }
    case Category::sync: return Seconds(cal_[Param::host_sync_s]);
    case Category::memory:
    case Category::optimizer: return Seconds(mem_s + launch);
    default: return Seconds(0);
  }
}

CollectiveCost Pricer::comm_cost(const Op& op) const {
  if (op.collective == Collective::d2h || op.collective == Collective::h2d) return host_;
  const AllToAllShape shape{op.collective == Collective::all_to_all && op.fanout > 0 ? op.fanout : 1.0,
                            op.collective == Collective::all_to_all ? op.node_fanout : 0.0};
  const auto key = std::make_tuple(op.collective, op.group, shape.fanout, shape.node_fanout);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    std::vector<int64_t> members;
    if (op.group == Group::pp) {
      const auto all = group_members(Group::pp, s_.parallelism, 0);
      members = {all[0], all.size() > 1 ? all[1] : all[0]};
    } else {
      members = group_members(op.group, s_.parallelism, 0);
    }
    it = cache_.emplace(key, collective_algorithms(op.collective, members, t_, cal_, shape)).first;
  }
  // The fastest algorithm at this op's size (NCCL's tuner chooses per size the same way).
  const Bytes size = std::max(op.bytes, op.recv_bytes);
  const CollectiveCost* best = &it->second.front();
  for (const CollectiveCost& c : it->second)
    if (c.time(size) < best->time(size)) best = &c;
  return *best;
}

Seconds Pricer::time(const Op& op) const {
  if (op.collective == Collective::none) return compute_time(op);
  const CollectiveCost c = comm_cost(op);
  return c.time(std::max(op.bytes, op.recv_bytes));
}

}  // namespace moeperf
