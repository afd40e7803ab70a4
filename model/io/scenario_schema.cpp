#include "model/io/scenario_schema.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace moeperf::io {

namespace {
constexpr std::string_view kDtype = "\"fp32\" | \"bf16\" | \"fp16\" | \"fp8\" | \"fp8_block\" | \"mxfp8\" | \"nvfp4\"";
constexpr std::string_view kTensorClasses =
    "array of \"norm\" | \"q_proj\" | \"kv_proj\" | \"attn_out\" | \"out_proj\" | \"mlp\" | \"router\" | "
    "\"moe_mlpwi\" | \"moe_mlpwo\" | \"moe_act\"";
}  // namespace

const std::vector<FieldDoc>& scenario_fields() {
  static const std::vector<FieldDoc> fields = {
      // ---------------------------------------------------------------- the file
      {"kind", "\"scenario\"", "", "optional", "", "What the file is; `validate` and the loaders use it to say when a file of another kind is handed over."},
      {"name", "string", "", "the file name without .json", "", "Shown in reports, traces and the GUI; `--set` overrides are appended to it."},
      {"description", "string", "", "\"\"", "\"\"", "Free text for the reader; not used by the model."},
      {"note", "string", "", "none", "", "Free text for the reader; not used by the model."},
      {"model", "path or object", "", "required", "", "The model: a Hugging Face `config.json` (deepseek_v3, deepseek_v2, kimi_k2, glm4_moe, qwen3_moe, qwen2_moe (its shared expert too), olmoe, mixtral, phimoe, gpt_oss, llama4, llama, mistral, qwen2, qwen3; MoE layers as the config interleaves them) or a moeperf model file (`\"kind\": \"model\"`), relative to this file, or inline."},
      {"system", "path or object", "", "required", "", "The hardware: a system file of `topologies/` (GPUs, NVLink domains, fabric), relative to this file, or inline. `--set system.a.b=V` reaches any field of it through its references."},
      {"gpus", "integer >= 1", "GPUs", "the system's \"gpus\"", "", "GPUs in the job; must equal tp x cp x pp x ep x fsdp x dp. Sets how many NVLink domains (racks) and fabric switches the topology has."},
      // ---------------------------------------------------------------- parallelism
      {"parallelism", "object", "", "required", "", "The device mesh; rank order, innermost first: tp, cp, ep, fsdp, dp, pp."},
      {"parallelism.tp", "integer >= 1", "GPUs", "1", "1", "Tensor parallelism: splits attention heads and dense FFNs; all-reduce / reduce-scatter + all-gather per layer. Must divide the heads."},
      {"parallelism.cp", "integer >= 1", "GPUs", "1", "1", "Context parallelism: splits each sequence (load-balanced causal halves); seq_len must be a multiple of 2 x cp. The CP ranks of a sequence hold the same weights: their gradients are reduced (and a distributed optimizer sharded) over cp with the data-parallel ranks; the batch is split over the data-parallel ranks only."},
      {"parallelism.pp", "integer >= 1", "stages", "1", "1", "Pipeline stages: layers split across stages; sends between stages and the pipeline bubble."},
      {"parallelism.vpp", "integer >= 1", "chunks", "1", "1", "Virtual stages per pipeline rank (interleaved schedule only): smaller bubble, more sends."},
      {"parallelism.ep", "integer >= 1", "GPUs", "1", "1", "Expert parallelism: routed experts split over ep GPUs; dispatch and combine all-to-alls. Must divide the routed experts."},
      {"parallelism.etp", "integer >= 1", "GPUs", "absent (unfolded)", "", "Expert tensor parallelism; giving it switches to Megatron's MoE parallel folding: the dense layers on tp x cp x dp (gpus = tp x cp x pp x dp, rank order tp, cp, dp, pp), the experts on etp x ep x edp over the same GPUs of each stage (rank order etp, ep, edp; edp = tp x cp x dp / (etp x ep)), so an EP group may span TP ranks. etp > 1 splits each expert's FFN and gathers/reduce-scatters its rows over the etp GPUs. Needs fsdp 1. Megatron-Core's own default is etp = tp (--expert-tensor-parallel-size defaults to the TP size): with tp > 1 give it to price Megatron's layout (predict notes an unfolded mesh under the megatron-core stack)."},
      {"parallelism.fsdp", "integer >= 1", "GPUs", "1", "1", "Fully sharded data parallelism: weights, gradients and optimizer states sharded; all-gather before use, reduce-scatter of gradients."},
      {"parallelism.dp", "integer >= 1", "GPUs", "1", "1", "Plain data parallelism (replicas): gradient all-reduce (or reduce-scatter with the distributed optimizer)."},
      {"parallelism.schedule", "\"1f1b\" | \"interleaved\" | \"dualpipe\" | \"dualpipev\" | \"zbh1\"", "", "\"1f1b\"", "\"1f1b\"", "The pipeline schedule (pp > 1): 1F1B, interleaved 1F1B (with vpp), DualPipe (DeepSeek's bidirectional schedule: the model in pp stages, each GPU holding two, half the micro-batches entering at each end; even pp, an even number of at least 2 x pp micro-batches) or DualPipeV (its V-placed variant over 2 x pp stages, at least 2 x pp micro-batches). Both run the program of DeepSeek's dualpipe repository: overlapped forward-backward pairs, weight gradients split from the backward where its zero-bubble steps defer them. ZB-H1 (the zero-bubble paper's schedule at 1F1B's memory): 1F1B's order with each backward's weight gradients split off, stage s deferring those of its first s steady micro-batches to fill the cool-down; bubble (pp - 1)(F + B - W) against 1F1B's (pp - 1)(F + B + W). Without FSDP (under FSDP the weight gradients stay in the backward and the schedule is 1F1B's). plan searches 1f1b and interleaved unless --schedules names others."},
      {"parallelism.layout", "string | array", "", "the layers split evenly", "", "Which layers each virtual stage holds (Megatron's --pipeline-model-parallel-layout): a string of E (embedding), t (layer), m (MTP module), L (loss), '|' between virtual stages, X*n and (...)*n to repeat; or an array with one entry per virtual stage, its letters or its number of layers. One entry per virtual stage of the schedule (pp, pp x vpp interleaved, 2 x pp dualpipev), every layer once, E on the first, L (and m) on the last. \"balanced\": moeperf chooses it: the split whose busiest pipeline stage (the sum of its virtual stages; under DualPipe and DualPipeV that sum plus the costlier, as their overlapped pairs run) costs least, each layer, the embedding and the head priced from the even split's ops of one micro-batch (compute, EP and TP collectives); the even split when no split beats it or only it fits; the report gives it in Megatron's syntax. plan ranks even splits, and with --balance each pipelined layout's balanced split beside its even one."},
      {"parallelism.sequence_parallel", "boolean", "", "true", "true", "Read and compared, not yet modelled: TP activations are always priced as with sequence parallelism."},
      {"parallelism.distributed_optimizer", "boolean", "", "false", "false", "ZeRO-1 without FSDP (Megatron's --use-distributed-optimizer): optimizer states sharded over the replicas of each parameter (dense: cp x ep x dp, experts: tp x cp x dp; folded: cp x dp and edp); the gradients are reduce-scattered over those replicas (not all-reduced) in the gradients' dtype, and the updated weights all-gathered in the weights' dtype (the embedding and head in BF16): in the step's forward, each layer waiting for its own, with stack.overlap.fsdp_prefetch and stack.overlap.grad_reduce (--overlap-param-gather, which Megatron accepts only with --overlap-grad-reduce), else after the optimizer step."},
      // ---------------------------------------------------------------- batch
      {"batch", "object", "", "required", "", "What one optimizer step processes."},
      {"batch.seq_len", "integer >= 1", "tokens", "required", "", "Tokens per sequence: attention cost, activation memory, tokens per step."},
      {"batch.micro_batch", "integer >= 1", "sequences", "required", "", "Sequences per micro-batch per data-parallel rank: GEMM sizes, activation memory."},
      {"batch.global_batch", "integer >= 1", "sequences", "required", "", "Sequences per step; micro-batches per step = global_batch / (micro_batch x ep x fsdp x dp)."},
      // ---------------------------------------------------------------- precision
      {"precision", "object", "", "all defaults below", "", "Number formats: GEMM rate (the GPU's dense FLOPS of that format), bytes moved and stored."},
      {"precision.dense_gemm", kDtype, "", "\"bf16\"", "\"bf16\"", "Attention projections, dense FFN and head GEMMs: their peak rate; FP8 formats add quantization ops. \"fp8\" is one scale per tensor (Transformer Engine's current scaling: the quantization reads its input twice, once for the amax); \"fp8_block\" one FP32 scale per 1 x 128 tile (DeepSeek-V3's recipe, TE's Float8BlockScaling: one read, 1/32 byte of scale per element); \"mxfp8\" one E8M0 scale per 32."},
      {"precision.expert_gemm", kDtype, "", "\"bf16\"", "\"bf16\"", "Routed and shared expert GEMMs: their peak rate; FP8 formats add quantization ops."},
      {"precision.dispatch", kDtype, "", "\"bf16\"", "\"bf16\"", "Bytes per element of the dispatch all-to-all (tokens to experts)."},
      {"precision.combine", kDtype, "", "\"bf16\"", "\"bf16\"", "Bytes per element of the combine all-to-all (expert outputs back)."},
      {"precision.combine_bwd", kDtype, "", "\"bf16\"", "\"bf16\"", "Bytes per element of the combine's backward exchange: the output gradients sent to the experts' down-projections (DeepSeek-V3 report, section 3.3.2: quantized to FP8 like the dispatch; the backward of the dispatch, gradients back to the tokens, stays in BF16). A low-precision format needs an FP8 expert_gemm, whose backward quantizes them."},
      {"precision.weights", kDtype, "", "\"bf16\"", "\"bf16\"", "Stored weights: memory and FSDP all-gather bytes."},
      {"precision.grads", kDtype, "", "\"bf16\"", "\"bf16\"", "Gradients: memory and reduce-scatter / all-reduce bytes."},
      {"precision.optimizer_state", kDtype, "", "\"fp32\"", "\"fp32\"", "Each of Adam's two moments: optimizer memory."},
      {"precision.master_weights_fp32", "boolean", "", "false", "false", "Keeps an FP32 copy of the weights with the optimizer states (4 bytes per parameter)."},
      // ---------------------------------------------------------------- memory
      {"memory", "object", "", "all defaults below", "", "Which saved activations are rebuilt or moved to host memory, and how much HBM may be used."},
      {"memory.recompute", kTensorClasses, "", "[]", "[]", "Saved tensors (MaxText checkpoint names) rebuilt in the backward pass: less activation memory, recompute ops. norm is the layer input, which no recompute frees (every recomputation starts from it; offload moves it), and under PyTorch's autograd also the two normalizations' outputs, which norm recompute drops (Megatron's layernorm module, a norm forward re-run per block); an MTP module's layer holds its input's tensors in this class too (the next tokens' embedding, a layer input; under autograd eh_proj's input, the module's two norm outputs, rebuilt by mtp.norm.recompute where norm is recomputed under autograd); router re-runs the router GEMM and top-k. moe_act (the experts' activation output, the shared expert's included) matters under PyTorch's autograd (stack.remat_dispatch false: kept unless listed, Megatron's --recompute-modules moe_act); JAX's remat always rebuilds it."},
      {"memory.offload", kTensorClasses, "", "[]", "[]", "Saved tensors copied to host memory and back (host-link copies on their own stream, staging buffers in HBM)."},
      {"memory.fp8_cache", kTensorClasses, "", "[]", "[]", "Saved tensors kept in FP8 with an FP32 scale per 128 elements (1.03 bytes) instead of BF16, as DeepSeek-V3 caches the SwiGLU input (arXiv 2412.19437, section 3.3): their activation memory and offload bytes. Not router (FP32 scores); attn_out's log-sum-exp stays FP32; a class is cached in one format (not also in memory.e5m6_cache)."},
      {"memory.e5m6_cache", kTensorClasses, "", "[]", "[]", "Saved tensors kept in a 12-bit E5M6 format with a scale per 128 elements (1.53 bytes; assumption: an FP32 scale as the FP8 cache's, where the report says only that these scales are powers of two, which one byte could hold: 1.51) instead of BF16, as DeepSeek-V3 caches the input of the Linear after attention (arXiv 2412.19437, section 3.3): their activation memory and offload bytes. Not router; a class is cached in one format (not also in memory.fp8_cache)."},
      {"memory.usable_hbm_fraction", "number in (0, 1]", "", "1", "1", "Share of the GPU's usable HBM the framework may take (JAX's XLA_PYTHON_CLIENT_MEM_FRACTION): the fit check."},
      {"memory.host_offload_limit", "bytes", "bytes", "the host memory per GPU", "", "Host memory a GPU may offload into, e.g. \"180 GB\": the host fit check."},
      // ---------------------------------------------------------------- routing
      {"routing", "object", "", "all defaults below", "", "How tokens spread over experts: the busiest EP rank's rows (the expected maximum) set the expert GEMMs and all-to-alls (a de-duplicating dispatch's exchange: its distinct tokens, each sent once)."},
      {"routing.distribution", "\"uniform\" | \"balanced\" | \"zipf\" | \"dirichlet\" | \"histogram\"", "", "\"uniform\"", "\"uniform\"", "Expert popularity: uniform (every k-subset alike, random imbalance only), balanced (every expert exactly its share: an idealisation; Megatron's --moe-router-force-load-balancing draws random logits, which is uniform), Zipf, Dirichlet, or a measured histogram."},
      {"routing.zipf_exponent", "number > 0", "", "required for zipf", "", "Zipf exponent s: the i-th most popular expert's share ~ i^-s (experts shuffled by the seed). Checked wherever given; under another distribution unused, and the report notes it."},
      {"routing.dirichlet_alpha", "number > 0", "", "required for dirichlet", "", "Concentration of Dirichlet-drawn expert shares (smaller: more skew). Checked wherever given; under another distribution unused, and the report notes it."},
      {"routing.histogram", "array of numbers >= 0, or path", "tokens", "required for histogram", "", "Measured tokens (rows) per routed expert, one per expert, inline or a `\"kind\": \"histogram\"` file: each token draws its top_k experts with the weights that give these rows (no expert more than 1/top_k of them, at least top_k with some). Checked wherever given; under another distribution unused, and the report notes it."},
      {"routing.seed", "integer >= 0", "", "1", "1", "Seed of the shuffles and draws of zipf and dirichlet. Under zipf it decides which EP ranks hold the heavy experts, so the busiest rank's rows move with it (DeepSeek-V3 at EP 8, s = 1: up to 1.5x between seeds); try a few."},
      {"routing.group_limited", "boolean", "", "true", "true", "Applies the model's group-limited routing (DeepSeek-V3: 4 of 8 groups) to the expected loads and distinct nodes (uniform shares only)."},
      // ---------------------------------------------------------------- stack
      {"stack", "stack name, path or object", "", "built-in defaults (every optimization on, host always ahead)", "", "The software stack: a name of `stacks/` (\"maxtext-te-2026-09\", \"maxtext-xla-2026-09\", \"megatron-core\"), a path to a `\"kind\": \"stack\"` file relative to this file, or an object whose `base` names one and whose other fields override it. Each field below is also a field of a stack file, there with its source."},
      {"stack.base", "stack name or path", "", "none (the built-in defaults)", "", "The stack the other fields of this object override."},
      {"stack.expert_gemm", "\"grouped\" | \"per_expert_loop\" | \"masked_dense\"", "", "\"grouped\"", "\"grouped\"", "Expert GEMMs: one grouped GEMM over each expert's rows; a per-expert loop padded to the busiest expert, counts copied to the host first; or jax.lax.ragged_dot's default XLA lowering, a masked dense dot over every local expert and every ragged-buffer row (experts-per-rank times the FLOPs)."},
      {"stack.grouped_kernel", "\"ptr_array\" | \"contiguous\" | \"multi_stream\"", "", "\"ptr_array\"", "\"ptr_array\"", "The grouped expert GEMM's kernel: per-group pointers and descriptors (CUTLASS grouped, torch._grouped_mm, cuBLAS grouped-batched, Transformer Engine's CUTLASS grouped GEMM; calibration gemm_ptr_array_group_s per group), one operand sorted by group (DeepGEMM's contiguous layout; gemm_group_overhead_s per group), or one library GEMM per group issued from the host over several streams (Transformer Engine's multi-stream cuBLASLt path; host time gemm_multi_stream_group_s per group, on the host's lane)."},
      {"stack.grouped_gemm", "boolean", "", "true", "true", "Older name: true is expert_gemm \"grouped\", false \"per_expert_loop\"."},
      {"stack.dispatcher", "\"allgather\" | \"alltoall\" | \"fused_dedup\"", "", "\"alltoall\"", "\"alltoall\"", "Token dispatch: all-gather + local pick, ragged all-to-all, or a fused EP kernel (DeepEP, HybridEP, NCCL EP) that crosses to each remote NVLink domain once per token."},
      {"stack.ragged_a2a", "\"nccl\" | \"one_shot\"", "", "\"nccl\"", "\"nccl\"", "XLA's ragged all-to-all (dispatcher alltoall): the one-shot peer-copy kernel where it applies (on the compute stream, its rate set by the bytes its thread blocks keep in flight), else NCCL send/recv."},
      {"stack.one_shot_max_ranks", "integer >= 1", "GPUs", "8", "8", "The one-shot kernel applies to EP groups of at most this many ranks."},
      {"stack.one_shot_scope", "\"process\" | \"nvlink_domain\"", "", "\"process\"", "\"process\"", "Peers the one-shot kernel reaches: GPUs of one process (one compute tray or node), or the whole NVLink domain."},
      {"stack.one_shot_threads", "integer >= 1", "threads", "128", "128", "Threads per block of the one-shot kernel."},
      {"stack.one_shot_copy_bytes", "integer >= 1", "bytes", "8", "8", "Bytes one thread copies per access."},
      {"stack.one_shot_updates_per_peer", "integer >= 1", "blocks", "1", "1", "Thread blocks per peer (the grid is ranks x updates)."},
      {"stack.ragged_a2a_host_waits", "integer >= 0", "waits", "0", "0", "Host waits per call of XLA's NCCL ragged all-to-all (2: after the offsets exchange and after the size copy), each after a small offsets all-to-all."},
      {"stack.dispatch_host_syncs", "integer >= 0", "waits", "0", "0", "Host waits per forward dispatch of a PyTorch dispatcher (the split sizes copied to the host: AlltoAll, DeepEP's normal kernels): the GPU queue drains, the host round trip, then every later op is issued again. With the AlltoAll dispatcher the tokens per expert are first all-gathered over the EP group (moe.dispatch.counts), as Megatron's preprocess does."},
      {"stack.ep_sms", "integer >= 0", "SMs", "0", "0", "SMs a fused EP kernel holds (0: the calibration's comm_sm_fraction of the GPU's SMs)."},
      {"stack.ep_kernel", "\"hybridep\" | \"deepep\"", "", "\"hybridep\"", "\"hybridep\"", "The fused EP kernel (dispatcher fused_dedup), each priced by its own rates fitted to its published microbenchmarks: HybridEP (NCCL EP is taken to run like it) or DeepEP's normal kernels."},
      {"stack.ep_buffer_copies", "boolean", "", "false", "false", "The fused EP kernel (HybridEP) is called through its PyTorch API: each dispatch and combine also moves its rows between the kernel's registered buffers and the framework's tensors, priced as the calibration's ep_api_copy_passes over HBM in series with the kernel (fitted to HybridEP's torch-API rows against its kernel-only rows). DeepEP's rates are its API's already; false: the kernel reads and writes the framework's buffers itself."},
      {"stack.permute_after_dispatch", "boolean", "", "false", "false", "Fused EP kernels (dispatcher fused_dedup): the kernel reads each token once and the framework permutes the received rows (one per token and rank) into one row per local expert after the exchange, and sums them back before the combine (Megatron's flex dispatcher with DeepEP or HybridEP); false: a permute before the exchange writes one row per destination rank and an un-permute after the combine sums them."},
      {"stack.multistream_collectives", "boolean", "", "true", "true", "Each group's collectives on a stream of their own (false: one queue carries them all, in program order)."},
      {"stack.overlap", "object", "", "all defaults below", "", "What runs concurrently."},
      {"stack.overlap.fsdp_prefetch", "boolean", "", "true", "true", "FSDP all-gathers issued ahead of use (latency hiding); under distributed_optimizer without FSDP (and with overlap.grad_reduce), the weights' all-gather overlapped with the forward (Megatron's --overlap-param-gather) instead of run after the optimizer step."},
      {"stack.overlap.fsdp_prefetch_depth", "integer >= 1", "layers", "1", "1", "Layers gathered ahead when prefetching: more overlap, more gathered weights in HBM."},
      {"stack.overlap.a2a_with_shared_expert", "boolean", "", "false", "false", "The dispatch/combine all-to-alls overlap the shared expert's GEMMs."},
      {"stack.overlap.fwd_bwd", "boolean", "", "false (DualPipe and DualPipeV overlap their own pairs)", "false", "One micro-batch's forward and another's backward as two overlapping lanes (DualPipe, Megatron's combined 1F1B)."},
      {"stack.overlap.grad_reduce", "boolean", "", "false", "false", "Without FSDP: each layer's data-parallel gradient reduction starts when the last micro-batch's backward has produced it, overlapping the rest of the backward (Megatron's --overlap-grad-reduce); false: one reduction after the backward."},
      {"stack.a2a_buffer_factor", "number", "", "2", "2", "Ragged all-to-all buffers at this times the average rows; <= 0: MaxText's default, the local rows x min(EP, experts / top_k). Memory (the dispatch's receive and the combine's send buffers), and the local sort and unsort after the dispatch touch every buffer row."},
      {"stack.a2a_zero_fill", "boolean", "", "false", "false", "The ragged all-to-all writes into a zeroed output the framework passes it (MaxText's jnp.zeros to jax.lax.ragged_all_to_all): the zeros are written over the whole output before each exchange (the dispatch's and the combine's backward's buffer rows, the combine's and the dispatch's backward's own rows); false: an unfilled output (PyTorch's new_empty)."},
      {"stack.remat_dispatch", "boolean", "", "true", "true", "The backward rebuilds what JAX's remat rebuilds: the expert input rows (permute and dispatch again: rows without a checkpoint name), and a quantized GEMM's input quantization before its weight gradient (the column-wise copy is an unnamed residual) unless the GEMM itself is recomputed, and a recompute of MLA's projections reruns them whole (down and up); false: autograd keeps both in HBM (PyTorch), no second dispatch, no second quantization, and a recompute of MLA's projections is the up projections' alone (Megatron's mla_up_proj)."},
      {"stack.host_op_s", "time", "s", "0", "0", "Host (CPU) time to issue one framework op; 0: the host always runs ahead of the GPU. An op cannot start before the host issued it."},
      {"stack.host_ops_per_op", "number >= 1", "ops", "1", "1", "Framework ops issued per op of moeperf's graph (the glue between them: casts, reshapes, allocations)."},
      {"stack.quantize_host_ops", "integer >= 1", "ops", "1", "1", "Framework ops per quantization (a separate scale-buffer allocation adds one)."},
      {"stack.router_fusion", "boolean", "", "true", "true", "The router's scores, bias and top-k as one kernel."},
      {"stack.unfused_router_ops", "integer >= 1", "ops", "1", "1", "Ops (and kernels) of the router's top-k without router fusion."},
      {"stack.permute_fusion", "boolean", "", "true", "true", "Permute and un-permute as one kernel each."},
      {"stack.unfused_permute_ops", "integer >= 1", "ops", "1", "1", "Ops (and kernels) of one permute or un-permute without permute fusion."},
      {"stack.cuda_graphs", "array of \"attn\" | \"mlp\" | \"moe_router\" | \"shared_expert\" | \"moe\"", "", "[]", "[]", "Parts of each layer captured in CUDA graphs: their ops cost the host one graph launch per part instead of one issue each."},
      {"stack.graph_launch_s", "time", "s", "0", "0", "Host time of one CUDA graph launch."},
      {"stack.pdl_quantize", "boolean", "", "false", "false", "Quantization kernels launched with programmatic dependent launch: no launch gap before them."},
      {"stack.norm_quantize_fusion", "boolean", "", "false", "false", "The normalization writes the next GEMM's quantized input itself (cuDNN's fused norm + quantize): no separate read of its BF16 output, and where nothing else is left to quantize (the weights stored in the GEMM's format, or their quantized copies cached from an earlier micro-batch) no quantization kernel of its own (no launch, no host op). Only a GEMM that owns its norm (Transformer Engine's LayerNormLinear: a fused QKV projection, MLA's up-projections, a dense MLP's FC1); a MoE layer's norm is a module of its own."},
      {"stack.weight_quant_cache", "boolean", "", "false", "false", "A low-precision GEMM's quantized weight copies (row- and column-wise) are made on a step's first micro-batch and kept in HBM for the others (Transformer Engine's is_first_microbatch cache, which Megatron-Core's schedules set); false: the weights are quantized again in every micro-batch's forward. Without effect under FSDP (the weights are gathered again) or when the weights are stored in the GEMM's format (precision.weights)."},
      {"stack.residual_fusion", "boolean", "", "true", "true", "The residual add runs inside the next normalization's kernel (XLA's fusion: 3 passes over the hidden state forward, 4 backward with the skip gradient summed in); false: a kernel of its own (Megatron's bias-dropout-add, 3 passes) beside a normalization of 2, and backward the skip gradient summed in one more kernel (autograd's accumulation, 3 passes) after a normalization backward of 3; in the MoE block the shared expert's output is added to the routed one in a kernel (moe.output_add, 3), and backward the router's and the shared expert's input gradients are summed into the permute's (moe.grad_sum.bwd, 3 each)."},
      {"stack.fused_qkv", "boolean", "", "false", "false", "Grouped-query (or multi-head) attention projects Q, K and V with one GEMM over the fused weight (Megatron's linear_qkv, a Transformer Engine LayerNormColumnParallelLinear of width q + 2 kv): one op attn.qkv_proj (its recompute and backward), one quantization of its input, the K/V part at the fused GEMM's rate; a recompute of q_proj or kv_proj reruns it whole and keeps neither class. false: attn.q_proj and attn.kv_proj apart (MaxText's default fused_qkv: False). No effect on MLA, whose projections are modules of their own."},
      // ---------------------------------------------------------------- calibration, MTP, stragglers
      {"calibration", "path, object or name", "", "the shipped profile of the system's GPU generation", "", "A calibration profile (`\"kind\": \"calibration\"`, from `moeperf calibrate`): values of the cost model's named parameters (`moeperf params`), each overriding the GPU generation's shipped profile (calibration/profiles/). Or a shipped profile by name (\"hopper\", \"blackwell\", \"blackwell-ultra\"), which prices the step in place of the system's own: another generation's fitted efficiencies on this hardware."},
      {"end_to_end", "path, object or \"none\"", "", "calibration/accuracy/end-to-end.json", "", "End-to-end errors of published training runs (`\"kind\": \"end_to_end\"`, from `moeperf accuracy --out`): the step's band is widened, in quadrature, by the measured-over-predicted step ratios of the cases run on the scenario's stack as configured here (its name and the fields the scenario changes on it); else of the cases of the stack's name; else of every case. Tests of the whole, never fitted: the predicted step does not move. \"none\": the band of the parts alone."},
      {"train_mtp", "boolean", "", "false", "false", "Trains the model's multi-token-prediction module (DeepSeek-V3: one more MoE layer, eh_proj and a second head on the last stage); needs a model with one."},
      {"fleet", "object", "", "{}", "", "Properties of the fleet that grow with the GPU count."},
      {"fleet.speed_sigma", "number in [0, 0.5)", "", "0 (not modelled)", "0", "GPU-to-GPU speed variation: the standard deviation of the log of a GPU's compute speed across the fleet (its relative spread, for a few percent). Every synchronized step waits for the slowest of the job's N GPUs (the listed stragglers apart, which keep their own slowdown): compute x exp(sigma x E[max of N standard normals]), E = 3.25 at 1,024 GPUs, 3.80 at 8,192, 4.38 at 100,000. No sourced default is in moeperf's data; measure it (per-GPU GEMM rates from `moeperf run`) and give it."},
      {"stragglers", "array of objects", "", "[]", "[]", "Slow GPUs or racks: each becomes a rank class of its own that every collective it joins waits for."},
      {"stragglers[].gpu", "integer >= 0", "", "one of gpu or rack", "", "A slow GPU, by rank."},
      {"stragglers[].rack", "integer >= 0", "", "one of gpu or rack", "", "A slow NVLink domain (rack), by index among the job's domains: all its GPUs."},
      {"stragglers[].compute_slowdown", "number >= 1", "", "1", "", "Its compute ops take this many times longer."},
      {"stragglers[].nvlink_slowdown", "number >= 1", "", "1", "", "Its NVLink transfers take this many times longer."},
      {"stragglers[].network_slowdown", "number >= 1", "", "1", "", "Its NIC and fabric transfers take this many times longer."},
      {"stragglers[].note", "string", "", "none", "", "Free text for the reader."},
  };
  return fields;
}

std::vector<std::string> scenario_keys(std::string_view object_path) {
  std::vector<std::string> keys;
  const std::string prefix = object_path.empty() ? "" : std::string(object_path) + ".";
  for (const FieldDoc& f : scenario_fields()) {
    if (f.path.size() <= prefix.size() || f.path.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = f.path.substr(prefix.size());
    if (rest.find('.') == std::string_view::npos) keys.emplace_back(rest.substr(0, rest.find('[')));
  }
  return keys;
}

namespace {
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}
}  // namespace

std::string scenario_reference_markdown() {
  std::ostringstream o;
  o << "# Scenario file reference\n\n"
    << "Generated by `moeperf schema` from the loader's own field list (`model/io/scenario_schema.cpp`);\n"
    << "a test keeps this file equal to it. Every field can be set from the command line with\n"
    << "`--set PATH=VALUE` (the value is JSON, or a string when it is not valid JSON), also inside the\n"
    << "files a scenario references (`--set system.nvlink_domain.tray.nic.port_bandwidth=\"400 Gb/s\"`).\n"
    << "Quantities are strings with a unit (`\"180 GB\"`, `\"400 Gb/s\"`, `\"2 us\"`) or\n"
    << "`{\"value\": ..., \"source\": ...}`. Examples: `examples/deepseek-v3/`.\n\n"
    << "| field | type | unit | default | what it changes |\n|---|---|---|---|---|\n";
  for (const FieldDoc& f : scenario_fields())
    o << "| `" << f.path << "` | " << cell(f.type) << " | " << cell(f.unit) << " | " << cell(f.default_text) << " | "
      << cell(f.effect) << " |\n";
  return o.str();
}

std::string scenario_reference_json() {
  nlohmann::json j = nlohmann::json::array();
  for (const FieldDoc& f : scenario_fields()) {
    nlohmann::json x = {{"path", f.path}, {"type", f.type}, {"unit", f.unit}, {"default", f.default_text}, {"effect", f.effect}};
    if (!f.default_json.empty()) x["default_value"] = nlohmann::json::parse(f.default_json);
    j.push_back(x);
  }
  return j.dump(2);
}

}  // namespace moeperf::io
