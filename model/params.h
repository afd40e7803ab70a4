// The cost model's named efficiency and overhead parameters: each has a default, a unit, its
// reasoning, and a valid range, in one table (params.cpp). A calibration profile overrides any of
// them by name; nothing else in the model is a tuning knob.
//
//   Calibration c;                                   // every default
//   c.set(Param::gemm_fraction_bf16, 0.72);          // or from a profile file (model/io)
//   double f = c[Param::hbm_fraction];
#pragma once

#include <array>
#include <map>
#include <string>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace moeperf {

enum class Param : int {
  gemm_fraction_bf16,      // sustained BF16/FP16 GEMM rate / dense BF16 peak (clocks under the power limit)
  gemm_fraction_fp8,       // the same for FP8 with per-tensor or per-channel scales
  gemm_fraction_mxfp8,     // block-scaled FP8: MXFP8 (1x32 E8M0) or 1x128/128x128 FP32 scales (DeepGEMM)
  gemm_fraction_nvfp4,     // NVFP4 / MXFP4
  gemm_k_half,             // K-loop prologue/epilogue: efficiency x K / (K + gemm_k_half)
  gemm_tile_m,             // CTA tile rows (grouped GEMM rows padded per expert to a multiple)
  gemm_tile_n,             // CTA tile columns
  gemm_tile_k,             // K depth of one mainloop block (the stream-K scheduler's unit of work)
  gemm_group_overhead_s,   // per group of a contiguous grouped GEMM (one operand, rows sorted by group)
  gemm_ptr_array_group_s,  // per group of a pointer-array grouped GEMM (per-group pointers and descriptors)
  gemm_multi_stream_group_s,  // host time per group of a grouped GEMM run as one library GEMM per group
  attention_fwd_fraction,  // flash-attention forward rate / BF16 peak at long keys and large head dims
  attention_bwd_fraction,  // flash-attention backward rate / BF16 peak
  attention_kv_half,       // efficiency x keys / (keys + attention_kv_half): per-query-block pipeline fill
  attention_hd_half,       // efficiency x hd / (hd + attention_hd_half): softmax work per matmul FLOP
  attention_tile_rows,     // query rows per tile: a masked edge (causal diagonal, window) costs half a tile of keys
  hbm_fraction,            // memory-bound kernel bandwidth / HBM peak
  memory_row_s,            // a row gather's (permute's) time per row beyond its bytes
  kernel_launch_s,         // per kernel launch gap
  host_sync_s,             // device-to-host copy of counts + host synchronization
  nvlink_fraction,         // achieved NVLink bandwidth / link rate (NCCL ring/direct bus bandwidth)
  nvls_fraction,           // NVLink SHARP all-reduce: achieved / what the switch's multicast and reduction allow
  ib_fraction,             // achieved InfiniBand bandwidth / link rate
  host_link_fraction,      // achieved NVLink-C2C / PCIe bandwidth, host to device
  host_link_d2h_fraction,  // the same, device to host
  collective_launch_s,     // fixed software latency per collective
  nvlink_step_s,           // latency of one algorithm step over NVLink (NCCL Simple protocol)
  nvls_step_s,             // latency of one phase of an NVLink SHARP collective (switch reduction, multicast)
  network_step_s,          // latency of one algorithm step over the scale-out network
  host_reduce_fraction,    // a collective's reduction over a host-memory transport: memory rate / the device's memory bandwidth
  host_cache_speedup,      // a host-memory transport's rate for collectives far below host_cache_bytes / its rate for large ones
  host_cache_bytes,        // collective size at which a host-memory transport's cache gain is half spent
  ep_nvlink_fraction,      // fused EP dispatch/combine kernel (DeepEP/HybridEP): NVLink rate / link rate at many SMs
  ep_network_fraction,     // the same over RDMA: rate / NIC line rate
  ep_sm_half,              // EP kernel rate x sms / (sms + ep_sm_half): SMs the kernel is given
  deepep_nvlink_fraction,  // DeepEP's normal kernels over NVLink: rate / link rate at many SMs
  deepep_sm_half,          // DeepEP's rate x sms / (sms + deepep_sm_half)
  ep_peer_cost,            // a fused EP kernel's NVLink rate / (1 + this x (ranks - 1)): per-peer work of its senders and receivers
  deepep_peer_cost,        // the same for DeepEP's normal kernels
  ep_combine_sm_half,      // a fused EP combine's NVLink rate x sms / (sms + this) on top of its dispatch's: the reduction's SMs
  ep_combine_peer_cost,    // ... / (1 + this x (ranks - 1)): per-peer work of the receiver's reduction
  deepep_combine_sm_half,  // the same two for DeepEP's normal combine
  deepep_combine_peer_cost,
  ep_api_copy_passes,      // HBM passes over the exchanged bytes a framework API adds around a fused EP kernel
  ep_row_sm_s,             // a fused EP kernel's SM time per token row, beside its bytes
  deepep_row_sm_s,         // the same for DeepEP's normal kernels
  oneshot_copy_latency_s,  // one load-store round of a copy kernel's thread (XLA's one-shot all-to-all): Little's law
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

  // Where the values came from, for reports: "defaults", or a profile's name (a shipped profile
  // of the GPU's generation, or a user's file).
  std::string profile = "defaults";
  // Spread of the profile's fit per op class ("gemm", "attention", "memory", "collective", "ep"):
  // the standard deviation of log(predicted / measured) over the records it was fitted on and held
  // back, the fitted parameters' degrees of freedom taken out (calibrate.cpp). Empty for
  // the defaults (no fit behind them).
  std::map<std::string, double> residual_rms;
  // Parameters a fit set from other parameters of the same generation rather than from records of
  // their own (a GEMM dtype no record measures takes the median of the generation's fitted GEMM
  // fractions), with how: predict says so where they price a large share of the step.
  std::map<Param, std::string> borrowed;
  // Parameters no record of this profile's GPU generation set, kept at the value a fit of another
  // generation gave (the profile the fit started from: Blackwell Ultra's attention is Blackwell's),
  // with that profile's name: predict says so where they price a large share of the step.
  std::map<Param, std::string> carried;
  // The GPU generation the profile was fitted for ("" when none says: the defaults, a hand-written
  // file): a refit of the same generation from it carries nothing.
  std::string generation;
  // End-to-end errors of the published training runs (`moeperf accuracy --out`; the shipped
  // calibration/accuracy/end-to-end.json unless a scenario names another or "none"): each case's
  // software stack and its measured step over the predicted one. Never fitted: predict widens the
  // step's band by the cases of the scenario's stack (tests of the whole, not inputs of a fit).
  struct EndToEndCase {
    std::string name;
    std::string stack;       // the case's stack name ("" : the built-in defaults)
    double step_ratio = 1;   // measured step / predicted step (> 1: the run was slower than predicted)
    // The case's overrides of its stack (StackOptions::overrides); nullopt: the file does not say
    // (written before moeperf recorded them), so the case matches on the name alone.
    std::optional<std::vector<std::string>> overrides;
  };
  std::vector<EndToEndCase> end_to_end;
  std::string end_to_end_source;  // the file they came from ("" : none)

 private:
  std::array<double, kParamCount> v_{};
};

}  // namespace moeperf
