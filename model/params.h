// The cost model's named efficiency and overhead parameters: each has a default, a unit, its
// reasoning, and a valid range, in one table (params.cpp). A calibration profile overrides any of
// them by name; nothing else in the model is a tuning knob.
//
//   Calibration c;                                   // every default
//   c.set(Param::gemm_peak_fraction, 0.72);          // or from a profile file (model/io)
//   double f = c[Param::hbm_fraction];
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string_view>

namespace moeperf {

enum class Param : int {
  gemm_peak_fraction,      // large GEMM rate / dense peak
  gemm_half_dim,           // GEMM efficiency halves when its smallest dimension is this small
  gemm_tile_m,             // row tile of grouped GEMM (rows padded per expert to a multiple)
  attention_fwd_fraction,  // flash-attention forward rate / BF16 peak
  attention_bwd_fraction,  // flash-attention backward rate / BF16 peak
  hbm_fraction,            // memory-bound kernel bandwidth / HBM peak
  kernel_launch_s,         // per kernel launch gap
  host_sync_s,             // device-to-host copy of counts + host synchronization
  nvlink_fraction,         // achieved NVLink bandwidth / link rate (NCCL bus bandwidth)
  ib_fraction,             // achieved InfiniBand bandwidth / link rate
  host_link_fraction,      // achieved NVLink-C2C / PCIe bandwidth for offload copies
  collective_launch_s,     // fixed software latency per collective
  nvlink_step_s,           // latency of one algorithm step over NVLink (NCCL Simple protocol)
  network_step_s,          // latency of one algorithm step over the scale-out network
  comm_sm_fraction,        // fraction of SMs a running communication kernel takes from compute
  runtime_reserve_gib,     // HBM held by the CUDA context, NCCL and library workspaces
  kCount
};
inline constexpr int kParamCount = static_cast<int>(Param::kCount);

struct ParamDef {
  Param id;
  std::string_view name;
  double value;
  std::string_view unit;
  double min, max;
  std::string_view reasoning;
};

std::span<const ParamDef> param_defs();
const ParamDef& param_def(Param p);
std::optional<Param> find_param(std::string_view name);

class Calibration {
 public:
  Calibration();  // every parameter at its default
  double operator[](Param p) const { return v_[static_cast<size_t>(p)]; }
  void set(Param p, double v) { v_[static_cast<size_t>(p)] = v; }
  bool is_default(Param p) const;

 private:
  std::array<double, kParamCount> v_{};
};

}  // namespace moeperf
