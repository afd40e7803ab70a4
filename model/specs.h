// Value types that describe what moeperf models: hardware building blocks, a model architecture,
// the parallel layout, batch, precision, routing and stack options, and the Scenario tying them.
//
// These are plain data, valid once model/io has loaded and checked them (see check.h). No JSON,
// no strings that carry meaning (names are for display only): enums for every choice.
//
//   Scenario s = load_scenario("examples/deepseek-v3/gb300-optimized.json");   // model/io
//   int64_t dense_dp = s.parallelism.dense_data_parallel();                   // ep x fsdp x dp
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/params.h"
#include "model/units.h"

namespace moeperf {

// ---------------------------------------------------------------- precision
// fp8 is E4M3/E5M2 with one scale per tensor, priced as Transformer Engine's current scaling (an
// amax pass before the cast; delayed scaling, which takes the amax from history, would skip it);
// fp8_block is the same elements with one FP32 scale per 1 x 128 tile of activations and gradients
// and per 128 x 128 block of weights (DeepSeek-V3's recipe, arXiv 2412.19437 section 3.3.2;
// Transformer Engine's Float8BlockScaling); mxfp8 and nvfp4 are the OCP/NVIDIA block formats.
enum class Dtype { fp32, bf16, fp16, fp8, fp8_block, mxfp8, nvfp4 };

// Bytes per element of a tensor stored in this format, scales included (MXFP8: one E8M0 byte per
// 32 elements; NVFP4: one FP8 scale per 16 elements, per the OCP MX / NVFP4 formats; FP8 block
// scaling: one FP32 scale per 128 elements, the 1 x 128 tiles of the activations and gradients that
// dominate what is moved and quantized; a 128 x 128 weight block's scale is 1/128 of that).
constexpr double bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::fp32: return 4.0;
    case Dtype::bf16:
    case Dtype::fp16: return 2.0;
    case Dtype::fp8: return 1.0;
    case Dtype::fp8_block: return 1.0 + 4.0 / 128.0;
    case Dtype::mxfp8: return 1.0 + 1.0 / 32.0;
    case Dtype::nvfp4: return 0.5 + 1.0 / 16.0;
  }
  return 0.0;
}

// HBM bytes per element of quantizing a BF16 operand for a GEMM in `d`: the kernel reads it and
// writes a row-wise and a column-wise copy (forward/dgrad and wgrad contract different dimensions),
// scales included; per-tensor scaling (FP8 current scaling, NVFP4's global scale) reads it once more
// first for the amax, where a block format takes each block's amax in the same pass. 0 for BF16/FP16/FP32 GEMMs, which take their operands as they are.
constexpr double quantize_bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::fp8: return 2.0 + 2.0 + 2.0 * bytes_per_element(Dtype::fp8);
    case Dtype::fp8_block: return 2.0 + 2.0 * bytes_per_element(Dtype::fp8_block);
    case Dtype::mxfp8: return 2.0 + 2.0 * bytes_per_element(Dtype::mxfp8);
    case Dtype::nvfp4: return 2.0 + 2.0 + 2.0 * bytes_per_element(Dtype::nvfp4);
    default: return 0.0;
  }
}

// ---------------------------------------------------------------- hardware
struct GpuSpec {
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sms = 0;
  FlopsPerSecond dense_bf16, dense_fp8;
  std::optional<FlopsPerSecond> dense_mxfp8, dense_nvfp4;  // absent: no native support
  Bytes hbm_capacity, hbm_usable;
  BytesPerSecond hbm_bandwidth;
  int nvlink_generation = 0;
  int nvlink_links = 0;
  BytesPerSecond nvlink_bandwidth_per_link;  // per direction
  BytesPerSecond nvlink_bandwidth() const { return nvlink_bandwidth_per_link * nvlink_links; }
};

struct CpuSpec {
  std::string name;
  Bytes memory;
  BytesPerSecond memory_bandwidth;
  std::string gpu_link_name;
  BytesPerSecond gpu_link_bidirectional;  // per CPU, shared by the GPUs it serves
};

struct NicSpec {
  std::string name;
  BytesPerSecond port_bandwidth;  // per direction
  std::string host_link_name;
  BytesPerSecond host_link_bandwidth;  // per direction
};

struct SwitchSpec {
  std::string name;
  int ports = 0;
  BytesPerSecond port_bandwidth;  // per direction
  Seconds latency;                // port to port
  // How a fat tree of these switches spreads flows over a leaf's uplinks: adaptive routing (per
  // packet, by load: the leaf's uplinks as one pool) or static ECMP (each flow hashed to one
  // uplink, so flows collide: the busiest uplink carries the expected maximum of flows into bins).
  bool adaptive_routing = true;
};

struct ComputeTraySpec {
  std::string name;
  GpuSpec gpu;
  int gpus = 0;
  CpuSpec cpu;
  int cpus = 0;
  NicSpec nic;
  int nics = 0;  // NIC i serves GPU i (one per GPU) and sits on rail i
};

// A set of GPUs joined by NVLink switches: an NVL72 rack, a DGX node, or a lone GPU.
struct NvlinkDomainSpec {
  std::string name;
  ComputeTraySpec tray;
  int trays = 0;
  std::optional<SwitchSpec> nvswitch;
  int switch_chips = 0;
  std::vector<int> gpu_links_per_chip;  // one entry per chip
  Seconds nvlink_latency;
  // "transport": "host_memory": the domain's "links" are host memory (ranks of one host under MPI,
  // the system moeperf's calibration suite writes): the ranks' cores move the bytes and add the
  // reductions themselves, one after the other, where NCCL's kernel reduces under the transfer.
  bool host_memory = false;
  int gpus() const { return tray.gpus * trays; }
};

enum class FatTreeTiers { automatic, two, three };

struct FatTreeSpec {
  std::string name;
  SwitchSpec sw;
  FatTreeTiers tiers = FatTreeTiers::automatic;
  bool rail_optimized = true;
  Seconds nic_to_leaf_latency;
};

// What a system draws and costs, where a source gives it (optional): the power of one GPU's share
// of its node or rack, all-in (CPUs, NICs, fans), and a price per GPU-hour.
struct PowerPrice {
  std::optional<Watts> watts_per_gpu;
  std::string power_basis;                // how it was derived, for the report ("14.3 kW per node of 8 GPUs")
  std::optional<double> usd_per_gpu_hour;
  std::string price_basis;
};

struct SystemSpec {
  std::string name;
  std::string description;
  NvlinkDomainSpec domain;
  std::optional<FatTreeSpec> fabric;
  int64_t default_gpus = 0;
  int gpus_per_domain_when_spanning = 0;  // placement: GPUs used per domain in multi-domain jobs
  PowerPrice power_price;
  const GpuSpec& gpu() const { return domain.tray.gpu; }
};

// ---------------------------------------------------------------- model
enum class AttentionKind { mla, gqa };
enum class RouterScore { softmax, sigmoid };

struct AttentionSpec {
  AttentionKind kind = AttentionKind::gqa;
  int heads = 0;
  // GQA
  int kv_heads = 0;
  int head_dim = 0;
  bool qk_norm = false;
  int sliding_window = 0;              // 0: none
  std::vector<bool> sliding_layers;    // per layer: true if the layer uses the sliding window
  bool sinks = false;                  // GPT-OSS learned attention sinks (one scalar per head)
  // Chunked local attention (Llama 4's attention_chunk_size): on a chunked layer a query attends to
  // the earlier keys of its own chunk of chunk_size tokens only; 0: none.
  int chunk_size = 0;
  std::vector<bool> chunked_layers;    // per layer: true if the layer attends within its chunk
  // Per layer: true where the layer applies no rotary embedding (Llama 4's NoPE layers, global
  // attention without RoPE and without QK-norm); empty: every layer rotates.
  std::vector<bool> nope_layers;
  // MLA (DeepSeek-V3 / Kimi-K2); q_lora_rank 0 means a plain q projection
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool operator==(const AttentionSpec&) const = default;
};

struct RouterSpec {
  RouterScore score = RouterScore::softmax;
  bool bias = false;       // DeepSeek-V3 aux-loss-free bias on the scores
  int groups = 1;          // group-limited routing: experts split in n groups ...
  int topk_groups = 1;     // ... and tokens may pick from the best topk_groups of them
  bool operator==(const RouterSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  int64_t hidden = 0;
  int layers = 0;
  int dense_layers = 0;      // the first `dense_layers` layers have a dense FFN
  int64_t dense_ffn = 0;     // dense FFN intermediate size
  int64_t vocab = 0;
  bool tie_embeddings = false;
  AttentionSpec attention;
  // MoE (experts == 0: a dense model)
  int experts = 0;
  int top_k = 0;
  int shared_experts = 0;
  int64_t expert_ffn = 0;
  RouterSpec router;
  int mtp_layers = 0;        // multi-token-prediction modules (DeepSeek-V3: 1); trained only if the scenario says
  // Which layers are MoE when they are not simply those from `dense_layers` on (Llama 4's every
  // other layer, Qwen's decoder_sparse_step and mlp_only_layers, DeepSeek's moe_layer_freq): one
  // entry per layer, nonzero for an MoE layer; empty: the first `dense_layers` dense, the rest MoE.
  // Its dense layers have `dense_ffn`.
  std::vector<char> moe_map;
  bool is_moe() const { return experts > 0; }
  bool is_moe_layer(int l) const {
    if (!is_moe()) return false;
    if (moe_map.empty()) return l >= dense_layers;
    if (l < 0) return false;
    // Past the last layer: an MTP module's layer, of the last layer's kind.
    const size_t i = std::min(static_cast<size_t>(l), moe_map.size() - 1);
    return moe_map[i] != 0;
  }
  int moe_layers() const {
    if (!is_moe()) return 0;
    if (moe_map.empty()) return layers - dense_layers;
    int n = 0;
    for (char c : moe_map) n += c != 0;
    return n;
  }
};

// ---------------------------------------------------------------- scenario
// dualpipe: DeepSeek's bidirectional DualPipe (the model in pp stages, stage s holding stages s and
// pp - 1 - s, half the micro-batches entering at each end); dualpipev: its cut-in-half variant
// (V placement over 2 pp virtual stages, every micro-batch entering at stage 0). Both run the
// program of DeepSeek's dualpipe repository (model/workload/schedule.cpp). zb_h1: the zero-bubble
// paper's ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B's placement and
// order of forwards and backwards, each backward without its weight gradients, which stage s defers
// for its first s steady-state micro-batches and runs where 1F1B would idle; bubble
// (pp - 1)(F + B - W) against 1F1B's (pp - 1)(F + B + W), at 1F1B's peak activation memory.
enum class PipelineSchedule { one_f_one_b, interleaved, dualpipe, dualpipev, zb_h1 };

// One virtual stage of an explicit pipeline layout (Megatron's --pipeline-model-parallel-layout,
// "Et|(tt|)*30L"): the embedding, `layers` decoder layers continuing the previous stage's, `mtp`
// MTP modules, the loss (LM head).
struct VirtualStageLayout {
  bool embedding = false;
  int layers = 0;
  int mtp = 0;
  bool loss = false;
  bool operator==(const VirtualStageLayout&) const = default;
};

// The device mesh. Unfolded (the default, MaxText's): gpus = tp x cp x pp x ep x fsdp x dp; rank
// order, innermost first: tp, cp, ep, fsdp, dp, pp; experts split over ep inside the dense data
// parallelism. Folded (Megatron's MoE parallel folding, `etp` given): gpus = tp x cp x dp x pp for
// the dense layers (rank order tp, cp, dp, pp) and, over the same GPUs of each pipeline stage,
// etp x ep x edp for the experts (rank order etp, ep, edp), so an EP group may span TP ranks.
struct Parallelism {
  int64_t tp = 1, cp = 1, pp = 1, vpp = 1, ep = 1, fsdp = 1, dp = 1;
  int64_t etp = 1;      // expert tensor parallelism (folded only): each expert's FFN split over etp GPUs
  bool folded = false;  // Megatron's folding: ep and etp carved from the stage's GPUs, not from dp
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  // An explicit layout, one entry per virtual stage (empty: the layers split evenly), and the text
  // it was given as (for the report).
  std::vector<VirtualStageLayout> layout;
  std::string layout_spec;
  // "layout": "balanced": predict() replaces the empty layout by the split whose costliest virtual
  // stage costs least, its stages priced from the even split's ops (balanced_layout in
  // model/study/predict.h); layout_spec then holds the chosen layout.
  bool balance_layout = false;
  bool sequence_parallel = true;
  bool distributed_optimizer = false;  // ZeRO-1 over the data-parallel group
  int64_t world() const { return folded ? tp * cp * pp * dp : tp * cp * pp * ep * fsdp * dp; }
  // GPUs of one pipeline stage.
  int64_t stage_gpus() const { return world() / pp; }
  // Dense (non-expert) layers are data-parallel over every GPU not used by TP, CP or PP: the ranks
  // that split the global batch.
  int64_t dense_data_parallel() const { return folded ? dp : ep * fsdp * dp; }
  // The ranks holding a replica (or an FSDP shard of one) of a dense parameter: the batch's data
  // parallelism and the CP ranks, which hold the same weights and compute their gradients over other
  // tokens of the same sequences (Megatron reduces over get_data_parallel_group(with_context_parallel
  // =True) and shards its distributed optimizer over it).
  int64_t dense_grad_replicas() const { return cp * dense_data_parallel(); }
  // Expert layers split experts over ep (and each expert over etp) and are data-parallel over the
  // rest: tp x cp x fsdp x dp unfolded (the experts are not split over tp there, and each TP rank
  // routes its own sequence-parallel shard of the tokens), edp = stage GPUs / (etp x ep) folded
  // (which includes cp).
  int64_t expert_data_parallel() const { return folded ? stage_gpus() / (etp * ep) : tp * cp * fsdp * dp; }
  // The expert replicas a gradient all-reduce spans (those FSDP has not reduce-scattered already).
  int64_t expert_reduce_replicas() const { return folded ? expert_data_parallel() : tp * cp * dp; }
  // Rank distance between neighbours of an EP group, and the span of one group in ranks.
  int64_t ep_stride() const { return folded ? etp : tp * cp; }
  int64_t ep_span() const { return ep_stride() * ep; }
};

struct Batch {
  int64_t seq_len = 0;
  int64_t micro_batch = 0;   // sequences per micro-batch per data-parallel rank
  int64_t global_batch = 0;  // sequences per optimizer step
};

struct Precision {
  Dtype dense_gemm = Dtype::bf16, expert_gemm = Dtype::bf16;
  Dtype dispatch = Dtype::bf16, combine = Dtype::bf16;
  // The combine's backward exchange: the output gradients sent to the experts' down-projections
  // (DeepSeek-V3 quantizes them to FP8 as its dispatch; elsewhere they travel in BF16).
  Dtype combine_bwd = Dtype::bf16;
  Dtype weights = Dtype::bf16, grads = Dtype::bf16, optimizer_state = Dtype::fp32;
  bool master_weights_fp32 = false;
};

// Activation tensors saved for the backward pass, by MaxText's checkpoint names: norm
// (decoder_layer_input), q_proj (query_proj), kv_proj (key_proj, value_proj), attn_out (context),
// out_proj, mlp (dense mlpwi + mlpwo), router, moe_mlpwi (moe_mlpwi_0/1), moe_mlpwo. Only these are
// saved; everything between them is rebuilt in the backward pass, as JAX's remat does. moe_act, the
// experts' activation output (the FC2 input; the shared expert's too), has no checkpoint name in MaxText, so JAX
// rebuilds it always; PyTorch's autograd (stack.remat_dispatch false) keeps it unless it is
// recomputed (Megatron's --recompute-modules moe_act).
enum class TensorClass { norm, q_proj, kv_proj, attn_out, out_proj, mlp, router, moe_mlpwi, moe_mlpwo, moe_act, kCount };
inline constexpr int kTensorClassCount = static_cast<int>(TensorClass::kCount);

struct MemoryPolicy {
  std::vector<TensorClass> recompute;
  std::vector<TensorClass> offload;
  // Saved tensors kept in FP8 with a scale per 128 elements instead of BF16 (DeepSeek-V3's
  // low-precision storage of the SwiGLU input, arXiv 2412.19437 section 3.3).
  std::vector<TensorClass> fp8_cache;
  // Saved tensors kept in a 12-bit E5M6 format with a scale per 128 elements (DeepSeek-V3's cache
  // of the attention output projection's input, the same section): 1.53 bytes an element.
  std::vector<TensorClass> e5m6_cache;
  double usable_hbm_fraction = 1.0;  // JAX's XLA_PYTHON_CLIENT_MEM_FRACTION and the like
  std::optional<Bytes> host_offload_limit;  // per process
};

enum class RoutingDistribution { uniform, balanced, zipf, dirichlet, histogram };
// The name a scenario file gives it ("routing.distribution").
inline const char* to_string(RoutingDistribution d) {
  constexpr const char* kNames[] = {"uniform", "balanced", "zipf", "dirichlet", "histogram"};
  return kNames[static_cast<int>(d)];
}

struct Routing {
  RoutingDistribution distribution = RoutingDistribution::uniform;
  double zipf_exponent = 0.0;
  double dirichlet_alpha = 0.0;
  std::vector<double> histogram;  // measured per-expert shares, when distribution is histogram
  uint64_t seed = 1;
  bool group_limited = true;  // use the model's group-limited routing (DeepSeek-V3 n_group/topk_group)
};

enum class Dispatcher { allgather, alltoall, fused_dedup };

// The fused EP kernel of dispatcher fused_dedup, priced by its own fitted rates: HybridEP (and
// kernels taken to run like it, NCCL EP) or DeepEP's normal kernels.
enum class EpKernel { hybridep, deepep };

// How the busiest rank computes its experts: one grouped GEMM over each expert's real rows (cuBLAS
// / TE / CUTLASS), a loop of per-expert GEMMs padded to the busiest expert whose counts go to the
// host first, or jax.lax.ragged_dot's default XLA lowering, a masked dense dot over every local
// expert (RaggedDotRewriter: group-count times the FLOPs, over every ragged-buffer row).
enum class ExpertGemm { grouped, per_expert_loop, masked_dense };

// How a grouped expert GEMM finds its groups: per-group operand pointers, problem sizes and TMA
// descriptors (CUTLASS grouped / ptr-array kernels, torch._grouped_mm, cuBLAS's grouped-batched
// API, Transformer Engine's grouped GEMM), or one operand whose rows are sorted by group under one
// descriptor (DeepGEMM's contiguous layout). Each has its own fitted cost per group.
// Or one library GEMM per group, issued by the host over several streams (Transformer Engine's
// multi-stream cuBLASLt path): each group a kernel with its own descriptors (the pointer-array GPU cost
// per group), and host time per group (gemm_multi_stream_group_s); its row counts come from the host.
enum class GroupedKernel { ptr_array, contiguous, multi_stream };

// XLA's ragged all-to-all on GPU: the one-shot peer-copy kernel (few thread blocks, on the compute
// stream) or the NCCL path (offsets exchange, host waits, grouped send/recv).
enum class RaggedA2a { nccl, one_shot };

// Where the one-shot kernel can reach its peers: GPUs of one process, or every GPU of the NVLink
// domain (openxla/xla#47283).
enum class PeerScope { process, nvlink_domain };

// Parts of a layer captured in CUDA graphs (Megatron-Core's --cuda-graph-scope): their ops cost
// the host one graph launch instead of one issue each. A bit set.
enum class GraphScope : unsigned { attn = 1, mlp = 2, moe_router = 4, shared_expert = 8, moe = 16 };

// One optimization of a stack's ablation (compare --ablate): its name, the scenario fields (dotted,
// as in --set) it switched with their values before it (JSON text; "+offloaded" in
// memory.recompute stands for the scenario's offloaded tensors), and what a reader must know (an
// unmapped step says so).
struct AblationStep {
  std::string name;
  std::vector<std::pair<std::string, std::string>> off;
  std::string note;
};

// The software stack: how a framework lowers and schedules the step (stacks/*.json, each field
// with its source). A scenario names a stack and may override fields.
struct StackOptions {
  std::string name;  // the stack file's name ("maxtext-te-2026-09"); "" for the built-in defaults
  // The fields a scenario set on top of its named stack (its "stack" object beside "base", --set
  // stack.X), each "field=JSON value", sorted: with `name`, what tells one configuration of a
  // stack from another (the end-to-end band's cases are matched on both). Empty: the stack as named.
  std::vector<std::string> overrides;
  ExpertGemm expert_gemm = ExpertGemm::grouped;
  bool grouped_gemm() const { return expert_gemm == ExpertGemm::grouped; }
  GroupedKernel grouped_kernel = GroupedKernel::ptr_array;
  Dispatcher dispatcher = Dispatcher::alltoall;
  // The ragged all-to-all of an XLA stack (dispatcher alltoall): the one-shot kernel when it
  // applies (ranks <= one_shot_max_ranks, all reachable in one_shot_scope), else the NCCL path.
  RaggedA2a ragged_a2a = RaggedA2a::nccl;
  int one_shot_max_ranks = 8;
  PeerScope one_shot_scope = PeerScope::process;
  int one_shot_threads = 128;          // threads per block
  int one_shot_copy_bytes = 8;         // bytes each thread copies per access
  int one_shot_updates_per_peer = 1;   // thread blocks per peer (grid = ranks x updates)
  // Host waits on the critical path per dispatch (the NCCL ragged path's two, a PyTorch
  // dispatcher's .tolist() of the split sizes); the one-shot kernel takes none.
  int dispatch_host_syncs = 0;
  int ragged_a2a_host_waits = 0;       // per call on XLA's NCCL ragged path (ragged_all_to_all_thunk.cc: 2)
  int ep_sms = 0;                      // SMs a fused EP kernel holds (0: comm_sm_fraction of the GPU's)
  EpKernel ep_kernel = EpKernel::hybridep;
  // The fused EP kernel is called through its PyTorch API: the rows pass between its registered
  // buffers and the framework's tensors (ep_api_copy_passes over HBM; HybridEP only: DeepEP's
  // published rates are its API's already).
  bool ep_buffer_copies = false;
  // The fused EP kernel reads each token once and the framework permutes the received rows into
  // expert order after the exchange, and back before the combine (Megatron's flex dispatcher with
  // DeepEP or HybridEP); false: the rows are laid out per destination before the exchange.
  bool permute_after_dispatch = false;
  bool multistream_collectives = true;
  bool fsdp_prefetch = true;
  bool a2a_with_shared_expert = false;
  int fsdp_prefetch_depth = 1;     // layers gathered ahead of use when fsdp_prefetch is on
  // The forward of one micro-batch and the backward of another run as two lanes of streams that
  // overlap (one's all-to-all behind the other's compute): DualPipe's overlap, Megatron's combined
  // 1F1B with EP communication overlap. On by itself under the dualpipe schedule.
  bool fwd_bwd_overlap = false;
  // Without FSDP: each layer's data-parallel gradient reduction is issued as soon as the last
  // micro-batch's backward has produced that layer's gradients, overlapping the rest of the
  // backward (Megatron's --overlap-grad-reduce, bucketed per layer here); else one reduction of all
  // of the stage's gradients after the backward.
  bool grad_reduce_overlap = false;
  // The backward rebuilds the expert input rows (permute and dispatch again) as JAX's remat does,
  // the rows carrying no checkpoint name; false: autograd keeps them (PyTorch), in HBM.
  bool remat_dispatch = true;
  // Ragged all-to-all buffers: this x the average rows; <= 0: MaxText's default sizing, the local
  // rows x min(EP, experts / top_k). The local sort and unsort touch every buffer row.
  double a2a_buffer_factor = 2.0;
  // The ragged all-to-all's output operand is a zeroed array the exchange writes into (MaxText's
  // jnp.zeros passed to jax.lax.ragged_all_to_all): XLA materializes the zeros over the whole
  // output before each call (the dispatch's buffer rows, the combine's own rows). false: the
  // output is allocated without filling (PyTorch's all_to_all_single into new_empty).
  bool a2a_zero_fill = false;
  // The host: CPU time to issue one framework op (0: the host always runs ahead of the GPU, as
  // with one compiled executable), framework ops per op of moeperf's graph (the glue between
  // them: casts, reshapes, allocations), and what fusion and CUDA graphs take away.
  double host_op_s = 0;
  double host_ops_per_op = 1;
  int quantize_host_ops = 1;      // framework ops per quantization (scale-buffer allocation apart)
  bool router_fusion = true;      // the router's top-k/score/bias as one kernel
  int unfused_router_ops = 1;     // ops of the router's top-k without it
  bool permute_fusion = true;     // permute / un-permute as one kernel
  int unfused_permute_ops = 1;    // ops of one permute without it
  unsigned cuda_graphs = 0;       // GraphScope bits
  double graph_launch_s = 0;      // host time of one graph launch
  bool pdl_quantize = false;      // quantization kernels launched with programmatic dependent launch (no gap)
  bool norm_quantize_fusion = false;  // the norm writes the GEMM's quantized input itself
  bool residual_fusion = true;    // the residual add runs inside the next normalization's kernel
  bool fused_qkv = false;         // GQA/MHA: Q, K and V projected by one GEMM (Megatron's linear_qkv)
  bool weight_quant_cache = false;  // quantized weight copies made once per step (TE's is_first_microbatch), kept in HBM
  bool captured(GraphScope g) const { return (cuda_graphs & static_cast<unsigned>(g)) != 0; }
  std::vector<AblationStep> ablation;  // the stack file's, in the order the optimizations were added
};

// Slow GPUs (a straggler): one GPU, or every GPU of one NVLink domain (rack); their compute and
// their links run slower by these factors (>= 1). They become a rank class of their own; every
// collective they join waits for them.
struct Straggler {
  int64_t gpu = 0;    // first GPU
  int64_t count = 1;  // GPUs from `gpu` on (a rack: its GPUs in the job)
  int64_t rack = -1;  // the NVLink domain when the straggler is a whole rack, else -1
  double compute_slowdown = 1.0;
  double nvlink_slowdown = 1.0;
  double network_slowdown = 1.0;  // its NIC and the fabric links it uses
};

struct Scenario {
  std::string name;
  std::string description;
  ModelSpec model;
  SystemSpec system;
  int64_t gpus = 0;
  Parallelism parallelism;
  Batch batch;
  Precision precision;
  MemoryPolicy memory;
  Routing routing;
  StackOptions stack;
  bool train_mtp = false;  // include the model's MTP modules in the step (MaxText's deepseek3-671b: off)
  Calibration calibration;  // the cost model's parameters: defaults unless a profile overrides them
  std::vector<Straggler> stragglers;
  // Fleet speed variation: the standard deviation of log GPU speed across the job's GPUs (a
  // persistent property of each GPU; its relative spread, for small values). Every synchronized
  // step waits for the slowest of the job's GPUs but the listed stragglers: compute x
  // exp(speed_sigma x E[max of n standard normals]). 0: not modelled.
  double speed_sigma = 0;
  // Derived: micro-batches per step per data-parallel rank (gradient accumulation).
  int64_t micro_batches() const {
    return batch.global_batch / (batch.micro_batch * parallelism.dense_data_parallel());
  }
};

}  // namespace moeperf
