// Efficiency curves of compute kernels: what fraction of a datasheet ceiling a GEMM, an attention
// kernel or a memory-bound kernel sustains at a given shape. Each curve has a physical form with
// named, bounded parameters (model/params.h); the shipped profiles fit them to published
// measurements of parts (calibration/). The Pricer prices ops with these functions and
// `moeperf calibrate` fits with the very same ones, so a fitted value means the same in both.
//
// GEMM (dense, batched or grouped; `groups` problems of m x n x k each):
//   eff = gemm_fraction(dtype) x K/(K + gemm_k_half) x useful/padded tiles x units/(waves x SMs)
//   tiles = groups x ceil(m/tile_m) x ceil(n/tile_n); units = tiles x ceil(K/tile_k) K-blocks spread
//   over the SMs by a stream-K scheduler (a ragged grouped kernel's persistent scheduler deals whole
//   tiles: units = tiles), waves = ceil(units / SMs);
//   t = max(FLOPs / (peak(dtype) x eff), HBM bytes / (HBM x hbm_fraction)) + launches x
//       kernel_launch_s + (ragged ? groups x (gemm_ptr_array_group_s | gemm_group_overhead_s by kernel) : 0);
//   a multi-stream grouped GEMM (one library GEMM per group) pays gemm_ptr_array_group_s per group on
//   the GPU and groups x gemm_multi_stream_group_s on the host: measured alone, back to back (a
//   throughput), it takes max(t, that); in a step the host's lane pays it (model/sim/sim.cpp).
// Attention (flash kernels; keys = mean keys per query, hd = head dim):
//   eff = attention_{fwd,bwd}_fraction x keys/(keys + attention_kv_half + edges x attention_tile_rows/2)
//         x [hd/(hd + hd_half)] / [128/(128 + hd_half)] (relative to head dim 128); edges: masked edges per query (0 full, 1 causal, 2 causal with a
//         sliding window), each costing about half a query tile of computed-then-masked scores;
//         hd_half = attention_hd_half forward, attention_hd_half / 2.5 backward (the same softmax
//         work per score against 2.5 x the matmul FLOPs).
//   t = max(FLOPs / (BF16 peak x eff), HBM bytes / (HBM x hbm_fraction)) + launches x kernel_launch_s.
// Memory-bound kernels: t = bytes / (HBM x hbm_fraction) + rows x memory_row_s + launches x kernel_launch_s
//   (rows: a row gather's rows, 0 for elementwise kernels).
// Fused EP dispatch/combine kernels: rate factor sms / (sms + ep_sm_half) on top of
//   ep_{nvlink,network}_fraction; over NVLink x ep_peer_factor by the EP size, and a combine's x
//   ep_combine_factor.
#pragma once

#include "model/params.h"
#include "model/specs.h"
#include "model/units.h"

namespace moeperf {

struct GemmShape {
  double m = 0, n = 0, k = 0;  // per group
  double groups = 1;           // problems in a batched or grouped GEMM
  bool ragged = false;         // grouped (experts with their own row counts): pays a cost per group
  // How a ragged kernel finds its groups: per-group pointers (gemm_ptr_array_group_s), rows sorted by
  // group (gemm_group_overhead_s), or one library GEMM per group issued by the host (the pointer-array
  // cost per group, and gemm_host_seconds on the host).
  GroupedKernel kernel = GroupedKernel::contiguous;
  // The FLOPs priced already count each group's rows padded to the tile (m is the unpadded mean):
  // the efficiency leaves out the M padding, which would count it twice.
  bool m_padded = false;
  double flops() const { return 2.0 * m * n * k * groups; }
};

// The sustained fraction of the dense peak a GEMM in `d` reaches. Block-scaled FP8 keeps its own
// fraction where the GPU prices it at the FP8 rate (Hopper: the scales are applied in the K loop).
double gemm_fraction(Dtype d, const Calibration& cal);
// The parameter gemm_fraction reads for `d`; and the one a GEMM in `d` priced as `priced` (what
// gemm_peak() prices it as) uses: the dtype's own, except a format the GPU lacks takes the one it is
// priced as, and MXFP8 priced at the FP8 rate stays block-scaled.
Param gemm_fraction_param(Dtype d);
Param priced_fraction_param(Dtype d, Dtype priced);
// Fraction of the dense peak (of the dtype gemm_peak() prices `d` as) a GEMM of this shape sustains.
double gemm_efficiency(const GemmShape& s, Dtype d, const GpuSpec& gpu, const Calibration& cal);
// Seconds for a GEMM of this shape executing `flops` (<= 0: the shape's own) and moving `hbm_bytes`.
Seconds gemm_seconds(const GemmShape& s, Dtype d, double flops, double hbm_bytes, const GpuSpec& gpu,
                     const Calibration& cal, int launches = 1);
// Host time to issue it: a multi-stream grouped GEMM's groups x gemm_multi_stream_group_s, else 0.
// Measured alone, back to back, such a kernel takes max(gemm_seconds, gemm_host_seconds).
Seconds gemm_host_seconds(const GemmShape& s, const Calibration& cal);

struct AttentionShape {
  double keys = 0;       // mean keys each query attends to (causal: about half the sequence)
  double head_dim = 0;   // mean of the QK and V head dims
  bool backward = false;
  int masked_edges = 0;  // 0: full attention; 1: causal (the diagonal); 2: causal with a sliding window
  // The backward's matmul work per score over the forward's (attention_bwd_work: 2.5 at equal head
  // dims, 2.6 for MLA's 192 / 128): its softmax share is that much smaller.
  double bwd_work = 2.5;
};
double attention_efficiency(const AttentionShape& s, const Calibration& cal);
Seconds attention_seconds(const AttentionShape& s, double flops, double hbm_bytes, const GpuSpec& gpu,
                          const Calibration& cal, int launches = 1);

Seconds memory_seconds(double hbm_bytes, const GpuSpec& gpu, const Calibration& cal, int launches = 1, double rows = 0);

// A fused EP kernel's rate with `sms` SMs over its rate with all of them: sms / (sms + ep_sm_half).
double ep_sm_factor(double sms, const Calibration& cal, bool deepep = false);
// 1 / (1 + peer_cost x (ranks - 1)): a fused EP kernel's NVLink rate, dispatch and combine alike, by
// the NVLink peers it reaches (per-peer queues on a fixed set of SMs), per kernel family.
double ep_peer_factor(double ranks, const Calibration& cal, bool deepep = false);
// A fused EP combine's NVLink rate over its dispatch's (the receiver sums each token's rows):
// sms / (sms + combine_sm_half) / (1 + combine_peer_cost x (ranks - 1)), per kernel family.
double ep_combine_factor(double sms, double ranks, const Calibration& cal, bool deepep = false);
// A fused EP kernel's byte rate `rate` with each row's SM time added: row_bytes per row, `sms` SMs,
// ep_row_sm_s (deepep_row_sm_s): 1 / (1 / rate + row_sm_s / (sms x row_bytes)). Unchanged when
// row_bytes is 0 (unknown).
double ep_row_rate(double rate, double row_bytes, double sms, const Calibration& cal, bool deepep = false);
// Seconds per exchanged byte that a fused EP kernel's PyTorch API adds in series with the kernel
// (stack.ep_buffer_copies): ep_api_copy_passes over HBM at hbm_fraction of the GPU's bandwidth.
double ep_api_copy_s_per_byte(const GpuSpec& gpu, const Calibration& cal);

}  // namespace moeperf
