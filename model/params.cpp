#include "model/params.h"

#include <array>

namespace moeperf {
namespace {

// Every parameter with its default and why. Keep in the enum's order (a test checks).
constexpr std::array<ParamDef, kParamCount> kDefs{{
    {Param::gemm_peak_fraction, "gemm_peak_fraction", 0.80, "fraction", 0.05, 1.0,
     "A large BF16 GEMM on one H200 runs at about 790 of 989 TFLOP/s (measured, primer section 5); cuBLAS on "
     "Blackwell reaches a similar fraction for FP8/MXFP8 tiles. Applied to the dtype's dense peak."},
    {Param::gemm_half_dim, "gemm_half_dim", 64, "rows", 1, 4096,
     "Skinny GEMMs cannot fill the tensor-core tiles and pipelines: efficiency x min_dim / (min_dim + 64), so a "
     "128-row GEMM runs at 2/3 of the large-GEMM rate and a 2,048-row one at 97 %; the roofline on HBM bytes "
     "limits the skinniest ones anyway."},
    {Param::gemm_tile_m, "gemm_tile_m", 128, "rows", 1, 1024,
     "Grouped GEMM kernels tile each expert's rows by 128 (cuBLAS and CUTLASS grouped kernels on Hopper/Blackwell "
     "use 128-row CTA tiles); rows padded to the tile are computed and wasted."},
    {Param::attention_fwd_fraction, "attention_fwd_fraction", 0.60, "fraction", 0.05, 1.0,
     "FlashAttention-3 forward reaches 0.6-0.75 of BF16 peak on H100 at head dim 128 (Shah et al. 2024); MLA's "
     "192/128 head dims and causal masking sit at the low end."},
    {Param::attention_bwd_fraction, "attention_bwd_fraction", 0.45, "fraction", 0.05, 1.0,
     "Flash-attention backward runs at 0.4-0.55 of BF16 peak (FA2/FA3 papers): five matmuls with more "
     "synchronization and atomics than the forward."},
    {Param::hbm_fraction, "hbm_fraction", 0.85, "fraction", 0.05, 1.0,
     "A device-to-device copy on one H200 moves about 4.3 of 4.8 TB/s (0.9, measured, primer section 5); "
     "gathers, scatters and reductions of elementwise kernels run a little below a plain copy."},
    {Param::kernel_launch_s, "kernel_launch_s", 4e-6, "s", 0, 1e-3,
     "Gap between dependent kernels on one stream: launch latency and tail effects, a few microseconds "
     "(CUDA launch overhead is 2-5 us without graphs)."},
    {Param::host_sync_s, "host_sync_s", 30e-6, "s", 0, 1e-2,
     "Copying per-expert counts to the host and waiting for the stream: a small cudaMemcpy (~10 us) plus the "
     "host synchronization and relaunch (~20 us), on the critical path of a per-expert GEMM loop."},
    {Param::nvlink_fraction, "nvlink_fraction", 0.80, "fraction", 0.05, 1.0,
     "NCCL all-reduce/all-gather bus bandwidth inside an NVLink switch domain reaches about 80 % of the link "
     "rate (nccl-tests on DGX H100: ~360-380 of 450 GB/s per direction)."},
    {Param::ib_fraction, "ib_fraction", 0.90, "fraction", 0.05, 1.0,
     "nccl-tests over InfiniBand reach about 90 % of the NIC line rate (e.g. ~45 GB/s bus bandwidth on "
     "400 Gb/s NDR): link-layer headers and flow control."},
    {Param::host_link_fraction, "host_link_fraction", 0.80, "fraction", 0.05, 1.0,
     "Device-host copies over NVLink-C2C or PCIe reach about 80 % of the link rate in cudaMemcpyAsync "
     "bandwidth tests."},
    {Param::collective_launch_s, "collective_launch_s", 10e-6, "s", 0, 1e-2,
     "Fixed cost of one NCCL collective or grouped send/recv: kernel launch, proxy thread and channel setup, "
     "~10 us in nccl-tests' small-message latency."},
    {Param::nvlink_step_s, "nvlink_step_s", 3.4e-6, "s", 0, 1e-3,
     "One step of a ring or tree (a chunk handed to the next GPU and its flag seen) over NVLink: NCCL's own "
     "latency model charges 3.4 us per ring step with the Simple protocol used for large messages "
     "(hwLat table, src/graph/tuning.cc); a route's wire and switch latency is the floor."},
    {Param::network_step_s, "network_step_s", 14e-6, "s", 0, 1e-2,
     "One algorithm step through the network (proxy thread, RDMA write, completion): NCCL's latency model "
     "charges 14 us per network step for ring and tree with the Simple protocol (hwLat table, "
     "src/graph/tuning.cc). A ring over D domains of n GPUs makes D - 1 network and n - D NVLink steps."},
    {Param::comm_sm_fraction, "comm_sm_fraction", 0.12, "fraction", 0, 0.9,
     "A running NCCL kernel holds its channels' thread blocks (typically 16-32 CTAs on 132-160 SMs), so "
     "concurrent compute runs on about 88 % of the SMs."},
    {Param::runtime_reserve_gib, "runtime_reserve_gib", 2.0, "GiB", 0, 64,
     "CUDA context (~0.5 GiB), NCCL channel buffers and cuBLAS/cuDNN workspaces (~1 GiB) and allocator "
     "fragmentation held outside the framework's own tensors."},
}};

}  // namespace

std::span<const ParamDef> param_defs() { return kDefs; }

const ParamDef& param_def(Param p) { return kDefs[static_cast<size_t>(p)]; }

std::optional<Param> find_param(std::string_view name) {
  for (const ParamDef& d : kDefs)
    if (d.name == name) return d.id;
  return std::nullopt;
}

Calibration::Calibration() {
  for (const ParamDef& d : kDefs) v_[static_cast<size_t>(d.id)] = d.value;
}

bool Calibration::is_default(Param p) const { return v_[static_cast<size_t>(p)] == param_def(p).value; }

}  // namespace moeperf
