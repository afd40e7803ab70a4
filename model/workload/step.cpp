// The step's op graph outside the lowering itself: names of categories, streams, collectives and
// groups, saved activation bytes per tensor class, and straggler placement.
#include "model/workload/step.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "model/hardware/topology.h"
#include "model/workload/lowering.h"

namespace moeperf {

using detail::d;

namespace {

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
struct NameEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
};

// The process's names: nodes of an unordered_set never move, so a pointer to one lives as long as
// the process. Guarded by its mutex; each thread keeps a cache of the names it used.
const std::string& intern_name(std::string_view s) {
  thread_local std::unordered_map<std::string_view, const std::string*, NameHash, NameEq> cache;
  if (const auto it = cache.find(s); it != cache.end()) return *it->second;
  static std::mutex mu;
  static std::unordered_set<std::string, NameHash, NameEq> names;
  const std::string* p;
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = names.find(s);
    if (it == names.end()) it = names.emplace(s).first;
    p = &*it;
  }
  cache.emplace(std::string_view(*p), p);
  return *p;
}

// In front of intern_name: a small direct-mapped table per thread keyed by where the caller's
// characters are and how many (a literal has one address at every call, and the lowering names
// ops by literals and their suffixes), each hit checked against those characters, so a buffer
// reused for another name only misses. Hashing the names was about a sixth of a plan's time.
struct Seen {
  const char* a = nullptr;
  const char* b = nullptr;
  size_t an = 0, bn = 0;
  const std::string* name = nullptr;
};
constexpr size_t kSeen = 1024;  // a step has a few hundred distinct names

Seen& seen_slot(std::string_view a, std::string_view b) {
  thread_local std::array<Seen, kSeen> table;
  const uint64_t h = (reinterpret_cast<uintptr_t>(a.data()) + a.size()) * 0x9E3779B97F4A7C15ull ^
                     (reinterpret_cast<uintptr_t>(b.data()) + b.size()) * 0xC2B2AE3D27D4EB4Full;
  return table[(h >> 40) & (kSeen - 1)];
}

// The interned a + b, from the table when the same characters were seen at the same addresses.
const std::string& intern_seen(std::string_view a, std::string_view b, const std::string& (*slow)(std::string_view, std::string_view)) {
  Seen& e = seen_slot(a, b);
  if (e.name && e.a == a.data() && e.an == a.size() && e.b == b.data() && e.bn == b.size() &&
      std::memcmp(e.name->data(), a.data(), a.size()) == 0 &&
      (b.empty() || std::memcmp(e.name->data() + a.size(), b.data(), b.size()) == 0))
    return *e.name;
  const std::string& n = slow(a, b);
  e = {a.data(), b.data(), a.size(), b.size(), &n};
  return n;
}

const std::string& intern_one(std::string_view a, std::string_view) { return intern_name(a); }

const std::string& intern_pair(std::string_view a, std::string_view b) {
  char buf[128];
  if (a.size() + b.size() > sizeof buf) return intern_name(std::string(a).append(b));
  std::memcpy(buf, a.data(), a.size());
  std::memcpy(buf + a.size(), b.data(), b.size());
  return intern_name(std::string_view(buf, a.size() + b.size()));
}

}  // namespace

OpName::OpName() noexcept {
  static const std::string empty;
  s_ = &empty;
}

OpName::OpName(std::string_view s) : s_(&intern_seen(s, {}, intern_one)) {}

OpName OpName::cat(std::string_view a, std::string_view b) {
  OpName n;
  n.s_ = &intern_seen(a, b, intern_pair);
  return n;
}

double end_weight_bytes(const Scenario& s) {
  const Dtype w = s.precision.weights;
  return quantize_bytes_per_element(w) > 0 ? bytes_per_element(Dtype::bf16) : bytes_per_element(w);
}

double layer_input_bytes(const Scenario& s) {
  const Parallelism& p = s.parallelism;
  return d(s.batch.micro_batch * s.batch.seq_len) / d(p.cp) / d(p.tp) * d(s.model.hidden) * 2.0;
}

std::array<double, kTensorClassCount> saved_tensor_bytes(const Scenario& s, const ExpertLoad& load, int l) {
  const ModelSpec& m = s.model;
  const AttentionSpec& a = m.attention;
  const Parallelism& p = s.parallelism;
  const double t = d(s.batch.micro_batch * s.batch.seq_len) / d(p.cp), tp = d(p.tp), t_sp = t / tp, h = d(m.hidden);
  const double heads = a.heads / tp;
  const double qk = a.kind == AttentionKind::mla ? a.qk_nope_head_dim + a.qk_rope_head_dim : a.head_dim;
  const double vd = a.kind == AttentionKind::mla ? a.v_head_dim : a.head_dim;
  const double kvh = a.kind == AttentionKind::mla ? heads : std::max(1.0, a.kv_heads / tp);
  std::array<double, kTensorClassCount> b{};
  auto at = [&](TensorClass c) -> double& { return b[static_cast<size_t>(c)]; };
  // decoder_layer_input; under PyTorch autograd also the two normalizations' outputs it saves for
  // the projections' weight gradients (Megatron's "layernorm" recompute drops those, not the input).
  at(TensorClass::norm) = layer_input_bytes(s) / norm_input_share(s);
  // An MTP module's layer (index past the last; DeepSeek-V3's, Megatron's MultiTokenPredictionLayer)
  // also holds its input's tensors: the next tokens' embedding, the enorm's input (a layer input,
  // [t, h]: kept by every recompute), and under autograd the two norms' outputs concatenated, eh_proj's
  // [t, 2h] input for its weight gradient (dropped by "norm" recompute, as a layer's norm outputs,
  // and rebuilt by mtp.norm.recompute): the norm class's bytes once more, at the same kept share.
  // The previous depth's hidden state, hnorm's input, is not counted, as the head's own saved input
  // is not.
  if (l >= m.layers) at(TensorClass::norm) *= 2.0;
  at(TensorClass::q_proj) = t * (mla_latent_width(a, false) + heads * qk) * 2.0;
  at(TensorClass::kv_proj) = t * (mla_latent_width(a, true) + kvh * (qk + vd)) * 2.0;
  at(TensorClass::attn_out) = t * heads * (vd * 2.0 + 4.0);  // context + FP32 log-sum-exp
  at(TensorClass::out_proj) = t_sp * h * 2.0;
  double mlp_fc1 = 0, mlp_fc2_in = 0;  // a dense layer's two parts of the mlp class
  if (m.is_moe_layer(l)) {
    at(TensorClass::router) = t_sp * m.experts * 4.0;
    const double shared = d(m.expert_ffn) * m.shared_experts / tp;
    at(TensorClass::moe_mlpwi) = load.max_rows * 2.0 * d(m.expert_ffn) * 2.0 + t * 2.0 * shared * 2.0;
    at(TensorClass::moe_mlpwo) = t_sp * h * 2.0;  // the combined expert output, one row per token
    // The activation's output, the FC2 input in BF16 (or its quantized copy for an FP8 FC2, as the
    // moe.act op writes it): kept by autograd only; JAX's remat rebuilds it from moe_mlpwi.
    const Dtype de = s.precision.expert_gemm;
    // The shared expert's activation output (BF16, as moe.shared_act writes it) for its FC2's
    // weight gradient, alike.
    if (!s.stack.remat_dispatch)
      at(TensorClass::moe_act) = load.max_rows * d(m.expert_ffn) * bytes_per_element(de == Dtype::bf16 ? Dtype::bf16 : de) +
                                 t * shared * 2.0;
  } else {
    // FC1's output (the activation's input, BF16) and under autograd FC2's input as its GEMM reads
    // it (Transformer Engine saves a low-precision GEMM's quantized input for the weight gradient),
    // where JAX's remat rebuilds it from FC1's output (it has no checkpoint name, as moe_act). FC2's
    // output (MaxText's mlpwo) is no residual: no backward reads it.
    const Dtype dd = s.precision.dense_gemm;
    mlp_fc1 = t * 2.0 * d(m.dense_ffn) / tp * 2.0;
    mlp_fc2_in = s.stack.remat_dispatch ? 0.0 : t * d(m.dense_ffn) / tp * bytes_per_element(dd == Dtype::bf16 ? Dtype::bf16 : dd);
    at(TensorClass::mlp) = mlp_fc1 + mlp_fc2_in;
  }
  // Classes cached in FP8 (one byte and an FP32 scale per 128 elements) or in DeepSeek's 12-bit
  // E5M6 (1.5 bytes and the same scale): their BF16 elements at that share of two bytes.
  constexpr double kFp8Cached = bytes_per_element(Dtype::fp8_block) / 2.0, kE5m6Cached = (1.5 + 4.0 / 128.0) / 2.0;
  for (const auto& [classes, share] : {std::pair{&s.memory.fp8_cache, kFp8Cached}, std::pair{&s.memory.e5m6_cache, kE5m6Cached}})
    for (TensorClass c : *classes) {
      double& x = at(c);
      if (c == TensorClass::attn_out) x = t * heads * (vd * 2.0 * share + 4.0);  // the log-sum-exp stays FP32
      else if (c == TensorClass::moe_act && s.precision.expert_gemm != Dtype::bf16) continue;  // already the FC2's quantized copy
      else if (c == TensorClass::mlp && s.precision.dense_gemm != Dtype::bf16) x = mlp_fc1 * share + mlp_fc2_in;  // likewise
      else x *= share;
    }
  return b;
}

double recomputed_class_kept_bytes(const Scenario& s, TensorClass c, double class_bytes) {
  if (c == TensorClass::norm) return class_bytes * norm_input_share(s);
  if (s.stack.remat_dispatch || (c != TensorClass::q_proj && c != TensorClass::kv_proj)) return 0.0;
  const double t = d(s.batch.micro_batch * s.batch.seq_len) / d(s.parallelism.cp);
  return t * mla_latent_width(s.model.attention, c == TensorClass::kv_proj) * 2.0;
}

bool fuses_qkv(const Scenario& s) { return s.stack.fused_qkv && s.model.attention.kind != AttentionKind::mla; }

bool recomputes(const Scenario& s, TensorClass c) {
  if (detail::has(s.memory.recompute, c)) return true;
  return fuses_qkv(s) && (c == TensorClass::q_proj || c == TensorClass::kv_proj) &&
         (detail::has(s.memory.recompute, TensorClass::q_proj) || detail::has(s.memory.recompute, TensorClass::kv_proj));
}

double ragged_buffer_rows(const Scenario& s, const ExpertLoad& load) {
  const double f = s.stack.a2a_buffer_factor;
  if (f > 0) return load.mean_rows * f;
  return load.mean_rows * std::min(d(s.parallelism.ep), d(s.model.experts) / std::max(1.0, d(s.model.top_k)));
}

const char* to_string(Category c) {
  switch (c) {
    case Category::gemm: return "gemm";
    case Category::attention: return "attention";
    case Category::memory: return "memory_bound";
    case Category::ep_comm: return "ep_comm";
    case Category::fsdp_comm: return "fsdp_comm";
    case Category::dp_comm: return "dp_comm";
    case Category::tp_comm: return "tp_comm";
    case Category::pp_comm: return "pp_comm";
    case Category::offload: return "offload";
    case Category::sync: return "host_sync";
    case Category::optimizer: return "optimizer";
    case Category::kCount: break;
  }
  return "?";
}

bool is_communication(Category c) {
  return c == Category::ep_comm || c == Category::fsdp_comm || c == Category::dp_comm || c == Category::tp_comm ||
         c == Category::pp_comm || c == Category::offload;
}

const char* to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::ep_comm: return "ep_comm";
    case Stream::fsdp_comm: return "fsdp_dp_comm";
    case Stream::tp_comm: return "tp_comm";
    case Stream::pp_comm: return "pp_comm";
    case Stream::offload: return "offload";
    case Stream::kCount: break;
  }
  return "?";
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::none: return "none";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
    case Collective::d2h: return "d2h";
    case Collective::h2d: return "h2d";
  }
  return "?";
}

const char* to_string(Group g) {
  switch (g) {
    case Group::none: return "none";
    case Group::tp: return "tp";
    case Group::cp: return "cp";
    case Group::ep: return "ep";
    case Group::fsdp: return "fsdp";
    case Group::dense_shard: return "ep_x_fsdp";
    case Group::dp: return "cp_x_dp";
    case Group::dense_dp: return "dense_dp";
    case Group::pp: return "pp";
    case Group::expert_dp: return "expert_dp";
    case Group::etp: return "etp";
  }
  return "?";
}

bool holds_head(const Scenario& s, int stage) {
  for (int c = 0; c < pipeline_chunks(s); ++c)
    if (virtual_stage(s, stage, c) == virtual_stages(s) - 1) return true;
  return false;
}

bool holds_embedding(const Scenario& s, int stage) {
  for (int c = 0; c < pipeline_chunks(s); ++c)
    if (virtual_stage(s, stage, c) == 0) return true;
  // A stage that runs the head without virtual stage 0 holds a copy of the table too: for the
  // trained MTP modules (which look tokens up in it) and for a head tied to the embedding.
  return ((s.train_mtp && s.model.mtp_layers > 0) || s.model.tie_embeddings) && holds_head(s, stage);
}

void place_stragglers(Scenario& s) {
  const int64_t per = job_gpus_per_domain(s.system, s.gpus);
  for (Straggler& x : s.stragglers)
    if (x.rack >= 0) {
      x.gpu = x.rack * per;
      x.count = std::max<int64_t>(0, std::min(per, s.gpus - x.gpu));
    }
}

std::string straggler_problem(const Scenario& s, size_t* index) {
  const int64_t pp = s.parallelism.pp;
  if (pp < 1 || s.gpus % pp != 0) return "";  // the mesh check reports this
  const int64_t stage = s.gpus / pp;
  std::map<int64_t, int64_t> slow;  // stage -> straggler GPUs in it
  for (size_t i = 0; i < s.stragglers.size(); ++i) {
    const Straggler& x = s.stragglers[i];
    if (index) *index = i;
    const std::string what = x.rack >= 0 ? "rack " + std::to_string(x.rack) : "GPU " + std::to_string(x.gpu);
    if (x.count < 1 || x.gpu + x.count > s.gpus)
      return what + " is not in this " + std::to_string(s.gpus) + "-GPU job";
    if (x.gpu / stage != (x.gpu + x.count - 1) / stage)
      return what + " (GPUs " + std::to_string(x.gpu) + "-" + std::to_string(x.gpu + x.count - 1) +
             ") spans two pipeline stages of " + std::to_string(stage) + " GPUs; a straggler must lie inside one";
    for (size_t j = 0; j < i; ++j) {
      const Straggler& o = s.stragglers[j];
      if (x.gpu < o.gpu + o.count && o.gpu < x.gpu + x.count)
        return "GPUs " + std::to_string(x.gpu) + "-" + std::to_string(x.gpu + x.count - 1) + " overlap an earlier entry's " +
               std::to_string(o.gpu) + "-" + std::to_string(o.gpu + o.count - 1) + "; stragglers must not overlap";
    }
    if ((slow[x.gpu / stage] += x.count) >= stage)
      return "every GPU of pipeline stage " + std::to_string(x.gpu / stage) + " (" + std::to_string(stage) +
             " GPUs) would be a straggler: nobody is left to be slower than";
  }
  return "";
}

}  // namespace moeperf
