#include "model/pricing/efficiency.h"

#include <algorithm>
#include <cmath>

#include "model/pricing/cost.h"
#include "model/workload/flops.h"

namespace moeperf {

Param gemm_fraction_param(Dtype d) {
  switch (d) {
    case Dtype::fp8: return Param::gemm_fraction_fp8;
    // Block-scaled FP8 as MXFP8: the fraction fitted on Hopper's DeepGEMM records (1 x 128 / 128 x 128
    // FP32 scales, filed as mxfp8) and Blackwell's block-scaled kernels.
    case Dtype::fp8_block:
    case Dtype::mxfp8: return Param::gemm_fraction_mxfp8;
    case Dtype::nvfp4: return Param::gemm_fraction_nvfp4;
    default: return Param::gemm_fraction_bf16;
  }
}

Param priced_fraction_param(Dtype d, Dtype priced) { return gemm_fraction_param(d == Dtype::mxfp8 ? Dtype::mxfp8 : priced); }

double gemm_fraction(Dtype d, const Calibration& cal) { return cal[gemm_fraction_param(d)]; }

namespace {

// gemm_k_half counts K elements of the mainloop at the GPU's FP8 tensor rate. The prologue and the
// epilogue it stands for take a fixed time per tile (the pipeline's first loads: the same bytes per
// K block in every dtype; the output tile's conversion and store: the same BF16 tile), and that time
// is fewer K elements of a slower dtype's mainloop (BF16: half) and more of a faster one's (NVFP4:
// twice). `peak` is the rate the GEMM is priced at.
double k_half_scale(double peak, const GpuSpec& gpu) {
  const double fp8 = gpu.dense_fp8.value();
  return fp8 > 0 && peak > 0 ? peak / fp8 : 1.0;
}

// Tile padding x the stream-K wave tail x the K roll-off: what the shape leaves of the fraction.
double shape_efficiency(const GemmShape& s, const GpuSpec& gpu, const Calibration& cal, double peak) {
  const double m = std::max(1.0, s.m), n = std::max(1.0, s.n), k = std::max(1.0, s.k), g = std::max(1.0, s.groups);
  const double tm = cal[Param::gemm_tile_m], tn = cal[Param::gemm_tile_n];
  const double tiles_m = std::ceil(m / tm), tiles_n = std::ceil(n / tn);
  const double padding = (s.m_padded ? 1.0 : m / (tiles_m * tm)) * n / (tiles_n * tn);
  // Stream-K: every tile's K blocks are spread evenly over the SMs; the last wave of blocks leaves
  // the rest of the SMs idle. A grouped kernel's persistent scheduler deals out whole tiles (CUTLASS's
  // grouped tile scheduler, DeepGEMM's: data-parallel, no split of K), so its waves are of tiles.
  const double units = g * tiles_m * tiles_n * (s.ragged ? 1.0 : std::ceil(k / cal[Param::gemm_tile_k]));
  const double sms = std::max(1, gpu.sms);
  const double wave_eff = units / (std::ceil(units / sms) * sms);
  return padding * wave_eff * k / (k + cal[Param::gemm_k_half] * k_half_scale(peak, gpu));
}

// The fraction for `d` priced as `priced` (priced_fraction_param).
double priced_fraction(Dtype d, Dtype priced, const Calibration& cal) { return cal[priced_fraction_param(d, priced)]; }

}  // namespace

double gemm_efficiency(const GemmShape& s, Dtype d, const GpuSpec& gpu, const Calibration& cal) {
  Dtype priced = d;
  const double peak = gemm_peak(d, gpu, &priced).value();
  return priced_fraction(d, priced, cal) * shape_efficiency(s, gpu, cal, peak);
}

Seconds gemm_seconds(const GemmShape& s, Dtype d, double flops, double hbm_bytes, const GpuSpec& gpu,
                     const Calibration& cal, int launches) {
  Dtype priced = d;
  const double peak = gemm_peak(d, gpu, &priced).value();
  const double f = flops > 0 ? flops : s.flops();
  const double compute = f / (peak * priced_fraction(d, priced, cal) * shape_efficiency(s, gpu, cal, peak));
  const double mem = hbm_bytes / (gpu.hbm_bandwidth.value() * cal[Param::hbm_fraction]);
  // A multi-stream grouped GEMM's groups are kernels of their own, each with its own descriptors:
  // the same GPU cost per group as a pointer-array kernel's (and its host loop beside it).
  const double groups =
      s.ragged ? s.groups * cal[s.kernel == GroupedKernel::contiguous ? Param::gemm_group_overhead_s : Param::gemm_ptr_array_group_s]
               : 0.0;
  return Seconds(std::max(compute, mem) + launches * cal[Param::kernel_launch_s] + groups);
}

Seconds gemm_host_seconds(const GemmShape& s, const Calibration& cal) {
  if (!s.ragged || s.kernel != GroupedKernel::multi_stream) return Seconds(0);
  return Seconds(s.groups * cal[Param::gemm_multi_stream_group_s]);
}

double attention_efficiency(const AttentionShape& s, const Calibration& cal) {
  const double frac = cal[s.backward ? Param::attention_bwd_fraction : Param::attention_fwd_fraction];
  const double keys = std::max(1.0, s.keys), hd = std::max(1.0, s.head_dim);
  const double wasted = s.masked_edges * cal[Param::attention_tile_rows] / 2.0;
  // The backward recomputes the scores' softmax (one exp per score, as the forward) but runs
  // bwd_work times the forward's matmul FLOPs per score: its softmax share is that much smaller.
  const double hd_half = cal[Param::attention_hd_half] / (s.backward ? std::max(1.0, s.bwd_work) : 1.0);
  // The head-dim term is relative to head dim 128, where the fractions are quoted (and where the
  // records of most generations sit): a fitted attention_hd_half reshapes other head dims without
  // moving the level a generation without such records inherits.
  // Above 128 the term exceeds 1: the efficiency is capped at the peak.
  constexpr double kRefHd = 128.0;
  return std::min(1.0, frac * keys / (keys + cal[Param::attention_kv_half] + wasted) * (hd / (hd + hd_half)) /
                           (kRefHd / (kRefHd + hd_half)));
}

Seconds attention_seconds(const AttentionShape& s, double flops, double hbm_bytes, const GpuSpec& gpu,
                          const Calibration& cal, int launches) {
  const double compute = flops / (gpu.dense_bf16.value() * attention_efficiency(s, cal));
  const double mem = hbm_bytes / (gpu.hbm_bandwidth.value() * cal[Param::hbm_fraction]);
  return Seconds(std::max(compute, mem) + launches * cal[Param::kernel_launch_s]);
}

Seconds memory_seconds(double hbm_bytes, const GpuSpec& gpu, const Calibration& cal, int launches, double rows) {
  return Seconds(hbm_bytes / (gpu.hbm_bandwidth.value() * cal[Param::hbm_fraction]) + rows * cal[Param::memory_row_s] +
                 launches * cal[Param::kernel_launch_s]);
}

double ep_sm_factor(double sms, const Calibration& cal, bool deepep) {
  const double s = std::max(1.0, sms);
  return s / (s + cal[deepep ? Param::deepep_sm_half : Param::ep_sm_half]);
}

double ep_peer_factor(double ranks, const Calibration& cal, bool deepep) {
  return 1.0 / (1.0 + cal[deepep ? Param::deepep_peer_cost : Param::ep_peer_cost] * (std::max(1.0, ranks) - 1.0));
}

double ep_combine_factor(double sms, double ranks, const Calibration& cal, bool deepep) {
  const double s = std::max(1.0, sms), n = std::max(1.0, ranks);
  const double half = cal[deepep ? Param::deepep_combine_sm_half : Param::ep_combine_sm_half];
  const double peer = cal[deepep ? Param::deepep_combine_peer_cost : Param::ep_combine_peer_cost];
  return s / (s + half) / (1.0 + peer * (n - 1.0));
}

double ep_row_rate(double rate, double row_bytes, double sms, const Calibration& cal, bool deepep) {
  const double per_byte = row_bytes > 0 ? cal[deepep ? Param::deepep_row_sm_s : Param::ep_row_sm_s] / (std::max(1.0, sms) * row_bytes) : 0.0;
  return rate > 0 ? 1.0 / (1.0 / rate + per_byte) : rate;
}

double ep_api_copy_s_per_byte(const GpuSpec& gpu, const Calibration& cal) {
  const double hbm = gpu.hbm_bandwidth.value() * cal[Param::hbm_fraction];
  return hbm > 0 ? cal[Param::ep_api_copy_passes] / hbm : 0.0;
}

}  // namespace moeperf
