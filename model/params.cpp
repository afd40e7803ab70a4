#include "model/params.h"

#include <array>

namespace moeperf {
namespace {

// Every parameter with its default and why. Keep in the enum's order (a test checks).
constexpr std::array<ParamDef, kParamCount> kDefs{{
    // Defaults are the model before any fit (a roofline near every ceiling, no shape terms); the
    // shipped profiles (calibration/profiles/, fitted by `moeperf calibrate` to published
    // measurements of parts) replace them per GPU generation and record the records each value
    // was fitted on.
    {Param::gemm_fraction_bf16, "gemm_fraction_bf16", 0.80, "fraction", 0.05, 1.0,
     "Sustained rate of a large BF16 GEMM over the datasheet dense peak. Below 1 because tensor cores do not "
     "run at boost clock under the board power limit and the mainloop has bubbles; fitted per GPU generation "
     "to cuBLAS/CUTLASS GEMM measurements (calibration/published/gemm.json)."},
    {Param::gemm_fraction_fp8, "gemm_fraction_fp8", 0.80, "fraction", 0.05, 1.0,
     "The same for FP8 with per-tensor or per-channel scales (cuBLASLt FP8, CUTLASS FP8): the scale is "
     "applied once in the epilogue."},
    {Param::gemm_fraction_mxfp8, "gemm_fraction_mxfp8", 0.80, "fraction", 0.05, 1.0,
     "Block-scaled FP8 (MXFP8 with a E8M0 scale per 32 elements; DeepGEMM's 1x128 / 128x128 FP32 scales on "
     "Hopper): the scales are read and applied inside the K loop (promoted to CUDA cores on Hopper), so it "
     "sustains less of the FP8 peak than per-tensor FP8."},
    {Param::gemm_fraction_nvfp4, "gemm_fraction_nvfp4", 0.80, "fraction", 0.05, 1.0,
     "NVFP4/MXFP4 GEMMs over the FP4 dense peak."},
    {Param::gemm_k_half, "gemm_k_half", 0, "elements", 0, 16384,
     "Each output tile's K loop has a prologue (filling the shared-memory pipeline) and an epilogue "
     "(converting and storing the tile) that do no MMA work: efficiency x K / (K + gemm_k_half x r). Small-K "
     "GEMMs (the expert FC2 at K = 2048, attention projections at K = 512) pay most. Counted in K elements "
     "at the FP8 tensor rate: the fixed time is r = dtype peak / FP8 peak as many elements of another "
     "dtype's mainloop (BF16 0.5; NVFP4 2 on B200, 3 on B300)."},
    {Param::gemm_tile_m, "gemm_tile_m", 128, "rows", 1, 1024,
     "CTA tile rows (cuBLAS, CUTLASS and DeepGEMM use 128-row tiles on Hopper and Blackwell): M is padded to "
     "a multiple, per expert in a grouped GEMM, and the padding is computed and wasted."},
    {Param::gemm_tile_n, "gemm_tile_n", 128, "columns", 1, 1024,
     "CTA tile columns (128 on Hopper; 256 with Blackwell's 2-SM 256x128 MMA): N is padded to a multiple. "
     "With the tiles' K blocks spread over the SMs by a stream-K scheduler, the last wave of K blocks "
     "leaves SMs idle: efficiency x units / (waves x SMs), units = tiles x ceil(K / gemm_tile_k); a ragged "
     "grouped kernel's persistent scheduler deals whole tiles (units = tiles)."},
    {Param::gemm_tile_k, "gemm_tile_k", 128, "elements", 16, 1024,
     "Depth of one K block of a tile's mainloop, the unit a stream-K scheduler deals out to the SMs: 128 "
     "elements is one 128-byte FP8 row of a TMA load (64 for BF16 moves the same bytes; the tail of a wave "
     "is what matters, and it changes little between the two)."},
    {Param::gemm_group_overhead_s, "gemm_group_overhead_s", 0, "s", 0, 1e-3,
     "Per group of a contiguous grouped GEMM (one expert): the rows of every group in one operand sorted "
     "by group, one tensor descriptor for all (DeepGEMM's m_grouped contiguous and masked kernels); the "
     "ragged tile scheduler's prologue and a partly filled last tile row per group."},
    {Param::gemm_ptr_array_group_s, "gemm_ptr_array_group_s", 0, "s", 0, 1e-3,
     "Per group of a pointer-array grouped GEMM (CUTLASS grouped / ptr-array kernels, torch._grouped_mm, "
     "cuBLAS's grouped-batched API, Transformer Engine's CUTLASS grouped GEMM): each group has its own "
     "operand pointers, problem size and TMA descriptors, rebuilt by the CTAs that move to it. Fitted "
     "per generation on such kernels' records; a flat cost per group (the records hold one group count "
     "per generation, so a per-CTA form cannot be told apart)."},
    {Param::gemm_multi_stream_group_s, "gemm_multi_stream_group_s", 33e-6, "s", 0, 1e-3,
     "Host time per group of a grouped GEMM run as one library GEMM per group over several streams "
     "(Transformer Engine's GroupedLinear before its CUTLASS kernel: nvte_multi_stream_cublas_gemm, a C++ "
     "loop that sets up and launches one cuBLASLt matmul per expert, spreading them over its streams with "
     "events). A CPU core's time, not the GPU's: the GPU runs each group as an ordinary GEMM, and the op "
     "cannot end before the host has issued its last group. The default is TransformerEngine PR #3134's "
     "multi-stream row (267 us for 8 groups of 128 x 2048 x 2048 whose GEMMs take a few us of GPU time: "
     "about 33 us a group), which the Blackwell profile fits; a per-group GPU cost cannot be it, since "
     "Megatron's multi-stream MXFP8 grouped GEMM at the DeepSeek-V3 FC1 shape (8 x 4096 x 2048 x 7168, 360 us "
     "at 2,672 TFLOP/s) would leave its GEMMs no time. The same on any GPU generation (Hopper has no "
     "record of it and keeps this)."},
    {Param::attention_fwd_fraction, "attention_fwd_fraction", 0.60, "fraction", 0.05, 1.0,
     "Flash-attention forward rate over the BF16 peak at long key ranges and head dim 128, for the "
     "generation's native kernel (FlashAttention-3 or cuDNN on Hopper, FlashAttention-4 / cuDNN on "
     "Blackwell); FlashAttention-2 on Blackwell is a different kernel and is not this."},
    {Param::attention_bwd_fraction, "attention_bwd_fraction", 0.45, "fraction", 0.05, 1.0,
     "Flash-attention backward over the BF16 peak (long key ranges, head dim 128): five matmuls with more synchronization and atomics (dQ "
     "accumulation) than the forward."},
    {Param::attention_kv_half, "attention_kv_half", 0, "keys", 0, 65536,
     "Each query block streams the keys it attends to; short key ranges (short sequences, sliding windows) "
     "spend a larger share on the block's prologue and softmax rescaling: efficiency x keys / (keys + attention_kv_half), keys = mean keys per query."},
    {Param::attention_hd_half, "attention_hd_half", 0, "dims", 0, 1024,
     "Softmax (exp on the MUFU units) is per score, the matmuls are per score x head dim: small head dims "
     "are more exp-bound: efficiency x [hd / (hd + attention_hd_half)] / [128 / (128 + attention_hd_half)] "
     "(relative to head dim 128, where the fractions are quoted; the backward's half is divided by its "
     "matmul work per score over the forward's, (3 qk + 2 vd) / (qk + vd): 2.5 at equal head dims, 2.6 for MLA). Identified only by records of two head dims or more."},
    {Param::attention_tile_rows, "attention_tile_rows", 128, "rows", 0, 512,
     "A flash-attention kernel walks the queries in tiles of this many rows and computes every tile it "
     "touches whole: at a causal diagonal (and a sliding window's far edge) the tile's masked scores are "
     "computed and thrown away, about half a tile of keys per query and masked edge. So efficiency x "
     "keys / (keys + attention_kv_half + edges x attention_tile_rows / 2), edges 0 for full attention, "
     "1 causal, 2 causal with a window. A fact of the kernel's source, fitted where records tell it from "
     "attention_kv_half (the executor's suite: moeperf's CPU reference computes 64-row tiles); else "
     "128, the GPU kernels' tile at a masked edge (FlashAttention-3 hopper/tile_size.h, "
     "tile_size_fwd_sm90: 128 x 128 for causal or local attention at head dim 128 and at 192 with "
     "a value dim of 128). 0 would price a 128-key window as if no masked score were computed."},
    {Param::hbm_fraction, "hbm_fraction", 0.85, "fraction", 0.05, 1.0,
     "A device-to-device copy or STREAM kernel moves 84-90 % of the HBM datasheet bandwidth; gathers, "
     "scatters and reductions of elementwise kernels run a little below a plain copy."},
    {Param::memory_row_s, "memory_row_s", 0, "s", 0, 1e-6,
     "A row gather or scatter (a permute, un-permute or sort of the MoE block) handles each row on its own: "
     "its index load, the address, a short copy loop and its start. Beyond the bytes, t = rows x "
     "memory_row_s: nothing for rows of kilobytes, a large share for rows of a few hundred bytes. On a GPU "
     "thousands of rows are in flight at once, so the device-wide figure is small; no published GPU record "
     "gives rows, so the GPU profiles keep 0. Fitted by the executor's suite (rows of 256 B to 4 KiB)."},
    {Param::kernel_launch_s, "kernel_launch_s", 4e-6, "s", 0, 1e-3,
     "Gap between dependent kernels on one stream: launch latency and tail effects, a few microseconds "
     "(CUDA launch overhead is 2-5 us without graphs)."},
    {Param::host_sync_s, "host_sync_s", 30e-6, "s", 0, 1e-2,
     "Copying per-expert counts to the host and waiting for the stream: a small cudaMemcpy (~10 us) plus the "
     "host synchronization and relaunch (~20 us), on the critical path of a per-expert GEMM loop."},
    {Param::nvlink_fraction, "nvlink_fraction", 0.80, "fraction", 0.05, 1.0,
     "NCCL ring/direct bus bandwidth inside an NVLink domain over the link rate: NCCL's protocol overhead "
     "(~20 %, the NCCL maintainers' 370 of 450 GB/s on H100)."},
    {Param::nvls_fraction, "nvls_fraction", 0.80, "fraction", 0.05, 1.0,
     "NVLink SHARP all-reduce: achieved over what the switch's multicast and in-switch reduction allow "
     "(S(1 + 1/n) each way at the link rate). NVLS runs far below that bound: 480 GB/s bus bandwidth on "
     "8 x H100 where the bound is 700."},
    {Param::ib_fraction, "ib_fraction", 0.90, "fraction", 0.05, 1.0,
     "Achieved InfiniBand bandwidth over the NIC line rate: 48-49 GB/s of 50 on ConnectX-7 NDR."},
    {Param::host_link_fraction, "host_link_fraction", 0.80, "fraction", 0.05, 1.0,
     "Host-to-device copies over NVLink-C2C or PCIe over the link rate per direction (nvbandwidth)."},
    {Param::host_link_d2h_fraction, "host_link_d2h_fraction", 0.80, "fraction", 0.05, 1.0,
     "Device-to-host copies: on Grace-Hopper the reverse direction measured lower (297 vs 375 GB/s)."},
    {Param::collective_launch_s, "collective_launch_s", 10e-6, "s", 0, 1e-2,
     "Fixed cost of one NCCL collective or grouped send/recv: kernel launch, proxy thread and channel setup, "
     "~10 us in nccl-tests' small-message latency."},
    {Param::nvlink_step_s, "nvlink_step_s", 3.4e-6, "s", 0, 1e-3,
     "One step of a ring or tree (a chunk handed to the next GPU and its flag seen) over NVLink: NCCL's own "
     "latency model charges 3.4 us per ring step with the Simple protocol used for large messages "
     "(hwLat table, src/graph/tuning.cc); a route's wire and switch latency is the floor. Fitted only from "
     "records whose time depends on it (small ring or tree messages: the executor's suite has them, the "
     "published set does not)."},
    {Param::nvls_step_s, "nvls_step_s", 12.5e-6, "s", 0, 1e-3,
     "One phase of an NVLink SHARP all-reduce (the switches reduce each shard, then multicast it; two phases): "
     "NCCL's latency model charges NVLS 25 us over NVLink with the Simple protocol (hwLat table, "
     "src/graph/tuning.cc), against 3.4 us for a ring step (nvlink_step_s), which NVLS records no longer set."},
    {Param::network_step_s, "network_step_s", 14e-6, "s", 0, 1e-2,
     "One algorithm step through the network (proxy thread, RDMA write, completion): NCCL's latency model "
     "charges 14 us per network step for ring and tree with the Simple protocol (hwLat table, "
     "src/graph/tuning.cc). A ring over D domains of n GPUs makes D - 1 network and n - D NVLink steps."},
    {Param::host_reduce_fraction, "host_reduce_fraction", 0.85, "fraction", 0.05, 1.0,
     "Where the ranks' links are host memory (a CPU under MPI: the system `moeperf run --suite calibrate` "
     "writes), a ring reduce-scatter or all-reduce adds each received block into its own after the transfer, "
     "on the same core: reading both and writing one, 3 bytes of memory traffic per byte reduced, at this "
     "fraction of the device's memory bandwidth (default as a copy's, hbm_fraction; ranks sharing a core "
     "fit lower). Unused on GPUs: NCCL's kernel reduces a chunk while the next is on the wire."},
    {Param::host_cache_speedup, "host_cache_speedup", 2.0, "ratio", 1.0, 10.0,
     "Over a host-memory transport a collective whose buffers fit the CPU's caches copies at cache rather "
     "than DRAM speed: the link's rate for sizes far below host_cache_bytes over its rate for large ones "
     "(the system file's link is a large pairwise exchange's rate). 2 is the usual last-level-cache over "
     "DRAM copy rate of one server core; fitted by the calibration suite's collectives over sizes. "
     "Unused on GPUs."},
    {Param::host_cache_bytes, "host_cache_bytes", 32e6, "bytes", 65536, 4294967296,
     "The collective size (bytes per rank, as an op counts it) at which half of host_cache_speedup's gain "
     "is left: s / (1 + (speedup - 1) x C / (C + S)). Of the order of the last-level cache a rank shares "
     "(32 MB default); fitted, since ranks, their buffers and the cache's sharing all set it."},
    {Param::ep_nvlink_fraction, "ep_nvlink_fraction", 0.80, "fraction", 0.05, 1.0,
     "A fused expert-parallel dispatch/combine kernel (DeepEP, HybridEP: stack.dispatcher fused_dedup) "
     "over NVLink: algorithm bandwidth over the link rate when given many SMs."},
    {Param::ep_network_fraction, "ep_network_fraction", 0.90, "fraction", 0.05, 1.0,
     "The same kernel's RDMA part: the NIC's achieved rate over its line rate, for the rows that cross it (one "
     "per remote node a token's top-k hits). The RDMA records count a row per node hit, own node included: "
     "(D - 1)/D of them cross the NIC on D nodes, and HybridEP's SMs follow x / (x + ep_sm_half) with x = SMs "
     "x (D - 1) (each SM keeps requests in flight to every remote node)."},
    {Param::ep_sm_half, "ep_sm_half", 0, "SMs", 0, 256,
     "The EP kernel's copy engines are its thread blocks: rate x sms / (sms + ep_sm_half), with the SMs it "
     "is given (comm_sm_fraction of the GPU in a training step)."},
    {Param::deepep_nvlink_fraction, "deepep_nvlink_fraction", 0.80, "fraction", 0.05, 1.0,
     "DeepEP's normal dispatch/combine kernels (stack.ep_kernel deepep) over NVLink: algorithm bandwidth "
     "over the link rate when given many SMs. A kernel of its own: its published rates climb with SMs far "
     "longer than HybridEP's."},
    {Param::deepep_sm_half, "deepep_sm_half", 16, "SMs", 0, 512,
     "DeepEP's rate x sms / (sms + deepep_sm_half): each of its channels is a pair of SMs moving one "
     "stream of tokens, so its rate follows the SMs it is given."},
    {Param::ep_peer_cost, "ep_peer_cost", 0, "ratio", 0, 1,
     "A fused EP kernel's rate over NVLink, dispatch and combine alike, falls as 1 / (1 + ep_peer_cost x "
     "(ranks - 1)): its fixed set of SMs keeps a queue per peer (head and tail pointers polled, chunks cut per "
     "peer), and with more peers each carries fewer rows for the same per-chunk work. HybridEP's published "
     "dispatch rows at 16 and 32 SMs fall from EP 8 to EP 36 more than the rows it keeps for itself "
     "((n - 1)/n of them cross the links) explain. 0 unless the records show a fall with ranks."},
    {Param::deepep_peer_cost, "deepep_peer_cost", 0, "ratio", 0, 1,
     "ep_peer_cost for DeepEP's normal kernels: set by its EP 32 dispatch on GB200 (Megatron's 400 GB/s at 24 "
     "SMs) beside its EP 8 rows (DeepEP on GB200 and B200), the only EP size beyond 8 it is published at over "
     "NVLink."},
    {Param::ep_combine_sm_half, "ep_combine_sm_half", 0, "SMs", 0, 256,
     "A fused EP combine (and a dispatch's backward, the same kernel) reads each token's rows back from the "
     "ranks of its experts and sums them before writing one row: work on the SMs beside the copy, so over "
     "NVLink its rate is the dispatch's x sms / (sms + ep_combine_sm_half). Fitted to HybridEP's published "
     "dispatch/combine pairs (combine 0.87-0.91 of dispatch at 16 SMs, 0.94-0.97 at 32). Over RDMA the NIC "
     "bounds both alike (the H100 pairs), so the factor applies to NVLink only."},
    {Param::ep_combine_peer_cost, "ep_combine_peer_cost", 0, "ratio", 0, 1,
     "The combine's rate over NVLink also falls as 1 / (1 + ep_combine_peer_cost x (ranks - 1)), on top of "
     "the kernel's ep_peer_cost: a receiver that sums every peer's rows does more per-peer work than a "
     "sender. 0 unless the records show a combine falling faster with ranks than its dispatch."},
    {Param::deepep_combine_sm_half, "deepep_combine_sm_half", 0, "SMs", 0, 512,
     "ep_combine_sm_half for DeepEP's normal combine (stack.ep_kernel deepep)."},
    {Param::deepep_combine_peer_cost, "deepep_combine_peer_cost", 0, "ratio", 0, 1,
     "ep_combine_peer_cost for DeepEP's normal combine: its published combine runs at 0.83-0.86 of its dispatch "
     "at EP 8 whatever the SMs, and at 0.48 at EP 32 (Megatron's GB200 figures)."},
    {Param::ep_api_copy_passes, "ep_api_copy_passes", 0, "passes", 0, 8,
     "A fused EP kernel called through its PyTorch API (stack.ep_buffer_copies) moves the rows between the "
     "kernel's registered buffers and the framework's tensors around the kernel: this many passes of the "
     "exchanged bytes over HBM (a copy reads and writes: 2 per copy), at hbm_fraction of the GPU's HBM "
     "bandwidth, in series with the kernel. Fitted to HybridEP's published torch-API rows against its "
     "kernel-only rows of the same runs (GB200 and B200, NVLink). 0: the kernel writes the framework's "
     "buffers itself (DeepEP's published rates are already its API's)."},
    {Param::ep_row_sm_s, "ep_row_sm_s", 0, "SM s", 0, 1e-5,
     "A fused EP kernel (HybridEP, NCCL EP) spends SM time on each token row beside moving its bytes: reading "
     "its routing, computing its destinations and offsets, copying its scale factors, signalling. A row's "
     "time is bytes / rate + ep_row_sm_s / SMs, so a row of fewer bytes moves at a lower byte rate: FP8 rows "
     "(half a BF16 row's bytes and a scale per 128) at 0.82-0.93 of BF16's byte rate at EP 8 in HybridEP's "
     "published kernel-only rows, and small-hidden models' rows likewise. Fitted on the FP8 and BF16 rows of "
     "the same runs (GB200 and B200, NVLink; over RDMA counted per node hit, as the records count rows), which "
     "tell the two terms apart."},
    {Param::deepep_row_sm_s, "deepep_row_sm_s", 0, "SM s", 0, 1e-5,
     "ep_row_sm_s for DeepEP's normal kernels over NVLink: its published FP8 dispatch moves 0.68-0.73 of its BF16 "
     "byte rate at 16-32 SMs on GB200 (EP 8), 0.86 at 48 SMs on B200. Its RDMA kernels run at the NIC's rate "
     "alone (no SM term there)."},
    {Param::oneshot_copy_latency_s, "oneshot_copy_latency_s", 0.6e-6, "s", 20e-9, 20e-6,
     "A copy kernel with few thread blocks moves what its threads keep in flight per memory round trip "
     "(Little's law): XLA's one-shot ragged all-to-all runs one block of 128 threads x 8 bytes per peer, so its "
     "rate is ranks x 1 KiB / this latency. The default is an HBM load latency of the order measured by "
     "microbenchmarks (~0.5-0.7 us); the profiles fit it to the one-shot kernel's published rates."},
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
