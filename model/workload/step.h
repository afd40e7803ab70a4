// One training step as an op graph: what every rank class runs, in program order, with each op's
// FLOPs, HBM bytes, message bytes, stream and dependencies. Op names are shared with the executor
// ("moe.dispatch", "moe.expert_fc1", "attn.core", "fsdp.all_gather", ...).
//
//   StepGraph g = lower_step(scenario, loads);          // loads: from the routing model
//   for (const Op& op : g.classes[0].ops) ...            // priced by cost.h, simulated by sim/
//
// Ranks doing identical work form one rank class (a pipeline stage; a straggler later); the graph
// is built per class, never per rank.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "model/specs.h"
#include "model/units.h"

namespace moeperf {

enum class Category : uint8_t {
  gemm, attention, memory, ep_comm, fsdp_comm, dp_comm, tp_comm, pp_comm, offload, sync, optimizer, kCount
};
inline constexpr int kCategoryCount = static_cast<int>(Category::kCount);
const char* to_string(Category c);
bool is_communication(Category c);  // ep/fsdp/dp/tp/pp comm and offload copies

// Logical streams; the simulator maps them to hardware queues by the stack's multistream policy.
enum class Stream : uint8_t { compute, ep_comm, fsdp_comm, tp_comm, pp_comm, offload, kCount };
inline constexpr int kStreamCount = static_cast<int>(Stream::kCount);
const char* to_string(Stream s);

enum class Collective : uint8_t { none, all_gather, reduce_scatter, all_reduce, all_to_all, send_recv, d2h, h2d };
const char* to_string(Collective c);

// The rank group a collective runs over (laid on GPUs by the documented rank order).
// Groups of a collective. dense_dp: the dense layers' gradient reduction (cp x ep x dp unfolded,
// cp x dp folded); dp: the same after FSDP's reduce-scatter (cp x dp); expert_dp: the experts'
// (tp x cp x dp unfolded, edp folded); etp: an expert's tensor-parallel group. CP ranks hold the same
// weights and reduce their gradients with the data-parallel replicas.
enum class Group : uint8_t { none, tp, cp, ep, fsdp, dense_shard, dp, dense_dp, pp, expert_dp, etp };
const char* to_string(Group g);

enum class Phase : uint8_t { forward, backward, recompute, optimizer };

// An op's name, interned: equal names share one string for the life of the process and an op
// holds a pointer to it. A step has up to ~10^5 ops of a few hundred distinct names; a string of
// its own per op (most names are past the 15 characters a std::string holds in place) was a third
// of a plan's time in malloc, free and the graph's destructor. Reads as a const std::string&.
// Thread-safe: each thread looks a name up in its own cache first, then in the shared table.
class OpName {
 public:
  OpName() noexcept;
  OpName(std::string_view s);  // NOLINT: implicit, as std::string's
  OpName(const std::string& s) : OpName(std::string_view(s)) {}
  OpName(const char* s) : OpName(std::string_view(s)) {}
  // a + b, interned without a heap string in between (the lowering names ops by suffixes).
  static OpName cat(std::string_view a, std::string_view b);
  static OpName cat(const OpName& a, std::string_view b) { return cat(std::string_view(*a.s_), b); }
  static OpName cat(const std::string& a, std::string_view b) { return cat(std::string_view(a), b); }
  static OpName cat(const char* a, std::string_view b) { return cat(std::string_view(a), b); }
  const std::string& str() const noexcept { return *s_; }
  operator const std::string&() const noexcept { return *s_; }  // NOLINT: reads as the string
  size_t size() const noexcept { return s_->size(); }
  bool empty() const noexcept { return s_->empty(); }
  const char* c_str() const noexcept { return s_->c_str(); }
  const char* data() const noexcept { return s_->data(); }
  size_t find(std::string_view x, size_t pos = 0) const noexcept { return s_->find(x, pos); }
  size_t find(char c, size_t pos = 0) const noexcept { return s_->find(c, pos); }
  size_t rfind(std::string_view x, size_t pos = std::string::npos) const noexcept { return s_->rfind(x, pos); }
  size_t rfind(char c, size_t pos = std::string::npos) const noexcept { return s_->rfind(c, pos); }
  std::string substr(size_t pos = 0, size_t n = std::string::npos) const { return s_->substr(pos, n); }
  int compare(std::string_view x) const noexcept { return s_->compare(x); }
  bool starts_with(std::string_view x) const noexcept { return std::string_view(*s_).starts_with(x); }
  bool ends_with(std::string_view x) const noexcept { return std::string_view(*s_).ends_with(x); }
  // One address is one name; the default's empty string is the one name not interned.
  friend bool operator==(const OpName& a, const OpName& b) noexcept { return a.s_ == b.s_ || *a.s_ == *b.s_; }
  friend bool operator==(const OpName& a, const std::string& b) noexcept { return *a.s_ == b; }
  friend bool operator==(const OpName& a, std::string_view b) noexcept { return *a.s_ == b; }
  friend bool operator==(const OpName& a, const char* b) noexcept { return *a.s_ == b; }
  friend bool operator<(const OpName& a, const OpName& b) noexcept { return *a.s_ < *b.s_; }
  friend std::string operator+(const OpName& a, std::string_view b) { return std::string(*a.s_).append(b); }
  friend std::string operator+(const OpName& a, const char* b) { return *a.s_ + b; }
  friend std::string operator+(const OpName& a, const std::string& b) { return *a.s_ + b; }
  friend std::string operator+(const std::string& a, const OpName& b) { return a + *b.s_; }
  friend std::string operator+(const char* a, const OpName& b) { return a + *b.s_; }
  friend std::ostream& operator<<(std::ostream& os, const OpName& n) { return os << *n.s_; }

 private:
  const std::string* s_;
};

// Prefix and suffix tests of an op's name against a literal. The literal's length is a constant,
// so the compare compiles to a few instructions: lowering and the simulator test names of every op.
template <size_t N>
bool name_starts(const std::string& name, const char (&lit)[N]) {
  return name.size() >= N - 1 && std::memcmp(name.data(), lit, N - 1) == 0;
}
template <size_t N>
bool name_ends(const std::string& name, const char (&lit)[N]) {
  return name.size() >= N - 1 && std::memcmp(name.data() + name.size() - (N - 1), lit, N - 1) == 0;
}

struct Op {
  OpName name;
  Category category = Category::memory;
  Stream stream = Stream::compute;
  Phase phase = Phase::forward;
  int layer = -1;        // -1: not a layer's op (embedding, head, optimizer)
  int micro_batch = 0;
  // Compute
  Flops flops;           // executed by this class's busiest rank: recompute, padding, imbalance included
  Flops model_flops;     // useful work (MaxText convention), this rank's average share
  Bytes hbm_bytes;       // bytes read and written in HBM
  Dtype dtype = Dtype::bf16;
  int64_t m = 0, n = 0, k = 0;  // GEMM shape (m: rows per group for grouped GEMMs)
  int64_t groups = 1;           // experts in a grouped GEMM or loop
  // A GEMM whose rows (m) are a ragged grouped GEMM's: its FLOPs already count each group's rows
  // padded to the tile (ExpertLoad::max_rank_tile_rows), so its shape pads M no further.
  bool m_padded = false;
  int launches = 1;             // kernel launches (a per-expert loop launches one per expert)
  // A grouped kernel over ragged groups (the experts' GEMMs of stack expert_gemm "grouped"), which
  // pays a cost per group; its kind. A batched dense dot or a per-expert loop is not one.
  bool ragged = false;
  GroupedKernel grouped_kernel = GroupedKernel::ptr_array;
  double rows = 0;              // memory-bound row gathers (permute, un-permute, sort): rows moved
  // Communication
  Collective collective = Collective::none;
  Group group = Group::none;
  Bytes bytes;           // NCCL-style size per rank: gathered buffer (all-gather/reduce-scatter/all-reduce),
                         // bytes sent (all-to-all, send/recv), bytes copied (d2h/h2d)
  Bytes recv_bytes;      // all-to-all: bytes received by the busiest rank (imbalance); else = bytes
  double fanout = 0;     // all-to-all: destination ranks per token (k without de-duplication)
  double node_fanout = 0;  // all-to-all: NVLink domains per token when each remote one is crossed once (0: no)
  bool combine = false;  // an EP all-to-all whose receiver sums each token's rows (a combine, a dispatch's backward)
  double row_bytes = 0;  // an EP all-to-all: bytes per token row (a fused kernel's per-row SM time: ep_row_sm_s)
  std::vector<int32_t> deps;  // ops (indices in the class) that must finish first; stream order is implicit
  // Pipeline send/receive: this op's chunk, and the stage class and chunk of its partner.
  int chunk = 0, peer_stage = -1, peer_chunk = 0;
  // With forward/backward overlap, backward units run on a second lane of streams (1), so that a
  // forward and a backward of different micro-batches overlap; 0 otherwise.
  uint8_t lane = 0;
  // An attention core's masked edges per query (1: causal; 2: causal with a sliding window): each
  // costs about half a query tile of scores computed and masked (attention_tile_rows).
  uint8_t mask_edges = 0;
  // The host that issues it (stack.host_op_s > 0): framework ops it stands for, and the CUDA graph
  // part (GraphScope bit) that captures it, 0 when none.
  double host_ops = 1;
  unsigned graph = 0;
  // XLA's one-shot ragged all-to-all: a copy kernel on the compute stream (collective none,
  // category ep_comm) whose thread blocks keep this many bytes in flight towards each peer.
  double one_shot_in_flight = 0;
  int64_t one_shot_peers = 0;
};

struct RankClass {
  std::string name;
  int64_t ranks = 0;     // GPUs in this class
  int pp_stage = 0;
  std::vector<Op> ops;   // program order
  // A straggler's class: slowdown factors, and the class whose program it shares (its collectives
  // start only when both have reached them).
  double compute_slowdown = 1.0, nvlink_slowdown = 1.0, network_slowdown = 1.0;
  double fleet_slowdown = 1.0;  // the part of compute_slowdown that is the fleet's slowest GPU (speed_sigma)
  int sync_with = -1;
};

// Per micro-batch expert load of one EP group (from the routing model).
struct ExpertLoad {
  double mean_rows = 0;        // (token, expert) rows an average rank receives
  double max_rows = 0;         // rows the busiest rank receives (sets the group's pace)
  double max_rank_tile_rows = 0;  // busiest rank's rows after padding each expert to gemm_tile_m
  double max_expert_rows = 0;  // rows of the busiest expert (a batched GEMM pads every expert to it)
  double distinct_ranks = 0;   // E[distinct EP ranks a token's k experts live on]
  double mean_tokens = 0;      // tokens an average rank receives once each (a de-duplicating dispatch)
  double max_tokens = 0;       // ... the busiest rank by that count
  double distinct_domains = 1; // E[distinct NVLink domains they live on] (1 when the EP group is in one)
  int64_t ep_domains = 1;      // NVLink domains one EP group spans
};

// Bytes of each saved activation class for one layer and one micro-batch on one rank (MaxText's
// checkpoint names; moe_mlpwi on the busiest rank).
std::array<double, kTensorClassCount> saved_tensor_bytes(const Scenario& s, const ExpertLoad& load, int layer);
// The layer's input (part of the norm class): no recompute frees it, every recomputation starts from it.
double layer_input_bytes(const Scenario& s);
// Bytes per element of the model's ends (the embedding table, the LM head and its final norm):
// BF16 under low-precision primary weights, which are the layers' GEMM weights (Transformer Engine
// quantizes its linear modules only), else the weights' dtype. Their memory, gathers and optimizer
// step use it.
double end_weight_bytes(const Scenario& s);
// Its share of the norm class's bytes: all of them under JAX's remat, a third under PyTorch's
// autograd (which also saves the two normalizations' outputs).
inline double norm_input_share(const Scenario& s) { return s.stack.remat_dispatch ? 1.0 : 1.0 / 3.0; }
// What a recomputed class still holds per layer and micro-batch: the layer input's share of the
// norm class; under autograd, MLA's latents of the q_proj and kv_proj classes, from which the up
// projections' recompute starts (the down projections are not run again); nothing otherwise.
double recomputed_class_kept_bytes(const Scenario& s, TensorClass c, double class_bytes);
// Q, K and V projected by one GEMM (stack.fused_qkv; grouped-query or multi-head attention, not MLA).
bool fuses_qkv(const Scenario& s);
// Whether the backward rebuilds class c: the recompute list's classes, where a fused QKV projection
// is one GEMM, so naming q_proj or kv_proj recomputes both (and neither is kept).
bool recomputes(const Scenario& s, TensorClass c);

struct StepGraph {
  std::vector<RankClass> classes;
  int64_t micro_batches = 0;        // per step per data-parallel rank (gradient accumulation)
  int64_t tokens_per_gpu = 0;       // tokens one GPU's data shard processes per step (global / (gpus / (tp cp pp)))
  double model_flops_per_token = 0; // MaxText convention, no MTP unless the scenario trains it
  ExpertLoad load;
  std::vector<std::string> notes;   // pricing choices worth saying (e.g. MXFP8 priced as FP8 on Hopper)
  double fleet_slowdown = 1;        // compute x this on every class but the listed stragglers: the slowest of the job's GPUs (speed_sigma)
};

// E[max of n independent standard normals] (0 for n = 1), by Simpson's rule on [-12, 12]:
// about sqrt(2 ln n) - (ln ln n + ln 4 pi) / (2 sqrt(2 ln n)) for large n.
double expected_max_of_normals(int64_t n);

// Pipeline placement. The layers are split evenly over virtual_stages() model stages; each
// pipeline stage (a GPU of the pp axis) runs pipeline_chunks() of them:
// - 1F1B: pp stages, one chunk, stage s holds stage s;
// - interleaved: pp x vpp, vpp chunks, stage s holds c x pp + s;
// - dualpipev: 2 pp, 2 chunks, V placement: stage s holds s and 2pp - 1 - s;
// - dualpipe: pp stages, 2 chunks, one per direction: stage s holds model stage s (chunk 0, the
//   micro-batches entering at stage 0) and pp - 1 - s (chunk 1, those entering at stage pp - 1), so
//   every model stage is held twice (DeepSeek-V3 report, table 2: 2x parameters).
int pipeline_chunks(const Scenario& s);
int virtual_stages(const Scenario& s);
int virtual_stage(const Scenario& s, int stage, int chunk);
// Where virtual stage v runs for a micro-batch travelling on `chunk` (only DualPipe's two
// directions need it: there chunk 0 runs v on stage v, chunk 1 on stage pp - 1 - v).
struct StageChunk {
  int stage = 0, chunk = 0;
};
StageChunk place_virtual(const Scenario& s, int v, int chunk);
std::vector<int> virtual_stage_layers(const Scenario& s, int v);
std::vector<int> stage_layers(const Scenario& s, int stage);  // all chunks, in layer order
// Whether `stage` runs the LM head (it holds the last virtual stage: pp - 1 under 1F1B, 0 under
// DualPipeV, 0 and pp - 1 under DualPipe). Its weights, gradients, optimizer states and gradient
// reduction belong there.
bool holds_head(const Scenario& s, int stage);
// Whether `stage` holds the embedding table: it runs virtual stage 0, or the head with the trained
// MTP modules (which read the shared table) or with its projection tied to the table (Megatron
// keeps a copy on the last pipeline stage, `shared_embedding`, and all-reduces the copies'
// gradients; count_params' lm_head is 0 then).
bool holds_embedding(const Scenario& s, int stage);

// One step of a pipeline stage's program (DeepSeek's dualpipe.py / dualpipev.py): the next
// forward or backward of a chunk (in micro-batch order per chunk), a backward whose weight
// gradients are deferred (zero bubble), a deferred weight-gradient unit (oldest first), or one
// chunk's forward overlapped with another chunk's backward.
struct PipeAction {
  enum class Kind : uint8_t { forward, backward, backward_input, weight, forward_backward };
  Kind kind = Kind::forward;
  int chunk = 0;      // the forward's chunk, or the backward's for backward kinds
  int bwd_chunk = 0;  // forward_backward: the backward's chunk
};
// The program of `stage` under dualpipe or dualpipev (pp > 1), for the scenario's micro-batches.
std::vector<PipeAction> dualpipe_program(const Scenario& s, int stage);
// The same for `ranks` GPUs and `micro_batches` per step, bidirectional (dualpipe) or V (dualpipev).
std::vector<PipeAction> dualpipe_program(int ranks, int64_t micro_batches, int stage, bool bidirectional);
// ZB-H1's program of `stage` of `ranks` (one chunk; backward_input and weight actions).
std::vector<PipeAction> zb_h1_program(int ranks, int64_t micro_batches, int stage);
// The program lower_step runs on `stage`: ZB-H1's, or DualPipe's / DualPipeV's.
std::vector<PipeAction> stage_program(const Scenario& s, int stage);
// 1F1B's program of `stage` as Megatron orders it (one chunk: plain 1F1B; vpp chunks: the
// interleaved schedule, megatron/core/pipeline_parallel/schedules.py): the (micro-batch, chunk)
// units in forward and in backward order, forwards chunk by chunk in groups of pp micro-batches
// (get_model_chunk_id), backwards from the last chunk; `warm_up` forwards run before the first
// backward, then a forward and a backward in turn, then the remaining backwards. `overlap` (a
// forward paired with a backward, Megatron's combined 1F1B) runs one forward more in the warm-up.
struct OneFOneBUnits {
  std::vector<std::pair<int64_t, int>> forward, backward;
  int64_t warm_up = 0;
};
OneFOneBUnits one_f_one_b_units(const Scenario& s, int stage, int64_t micro_batches, bool overlap);

// A pipeline under DualPipe or DualPipeV (pp > 1): its chunks run as overlapped pairs.
bool dualpipe_family(const Scenario& s);

StepGraph lower_step(const Scenario& s, const ExpertLoad& load);

// Rows of the ragged all-to-all's buffers (MaxText get_ragged_buffer_size): stack.a2a_buffer_factor
// x the average rows, or with a factor <= 0 the rows x min(EP, experts / top_k).
double ragged_buffer_rows(const Scenario& s, const ExpertLoad& load);

// Lays rack stragglers on the scenario's GPU count (first GPU and count of the rack) and checks
// every straggler: inside the job, inside one pipeline stage, stages left with GPUs of their own
// class. Returns "" or what is wrong, with the index of the entry in *index.
void place_stragglers(Scenario& s);
std::string straggler_problem(const Scenario& s, size_t* index);

}  // namespace moeperf
