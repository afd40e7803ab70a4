// Loaders for systems, models and scenarios. Each parse_* function reads one kind of object and
// declares the keys it accepts; references to other files go through Refs, which resolves paths
// relative to the naming file, caches parsed files and refuses reference cycles.
#include "model/io/load.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>

#include "model/io/detail/json_node.h"
#include "model/io/scenario_schema.h"
#include "model/step.h"
#include "model/topology.h"

namespace moeperf::io {
namespace {

namespace fs = std::filesystem;
using detail::json;
using detail::Node;

class Refs {
 public:
  // The root node of a file opened directly (not through a reference).
  Node open(const std::string& path) {
    const std::string key = canonical(path);
    return Node(doc(path, key), path, "");
  }

  // Follows `field`: a path (relative to the file holding the field) or an inline object.
  // Calls parse(node) with the referenced root while the file is on the stack.
  template <class F>
  auto follow(const Node& field, const char* kind, F parse) {
    if (field.is_object()) {
      check_kind(field, kind, /*required=*/false);
      return parse(field);
    }
    if (!field.is_string())
      field.fail(std::string("expected a path to a \"") + kind + "\" file or an inline object, got " +
                 field.raw().dump());
    const std::string rel = field.as_string();
    const fs::path base = fs::path(field.file()).parent_path();
    const fs::path target = base / rel;
    std::error_code ec;
    if (!fs::is_regular_file(target, ec))
      field.fail("referenced file \"" + rel + "\" not found (looked for " + target.lexically_normal().string() + ")");
    const std::string key = canonical(target.string());
    if (std::find(stack_.begin(), stack_.end(), key) != stack_.end()) {
      std::string chain;
      auto it = std::find(stack_.begin(), stack_.end(), key);
      for (; it != stack_.end(); ++it) chain += fs::path(*it).filename().string() + " -> ";
      field.fail("reference cycle: " + chain + fs::path(key).filename().string());
    }
    const std::string shown = target.lexically_normal().string();
    Node root(doc(shown, key), shown, "");
    check_kind(root, kind, /*required=*/true, &field);
    stack_.push_back(key);
    struct Pop {
      std::vector<std::string>& s;
      ~Pop() { s.pop_back(); }
    } pop{stack_};
    return parse(root);
  }

  // Marks a file as being loaded (the top-level file), for cycle detection.
  void push(const std::string& path) { stack_.push_back(canonical(path)); }

 private:
  static std::string canonical(const std::string& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p : c.string();
  }
  const json& doc(const std::string& shown, const std::string& key) {
    auto it = cache_.find(key);
    if (it == cache_.end())
      it = cache_.emplace(key, std::make_unique<json>(detail::read_json_file(shown))).first;
    return *it->second;
  }
  // A mismatch is reported at the referencing field when there is one (the user's mistake is there).
  static void check_kind(const Node& n, const char* kind, bool required, const Node* referrer = nullptr) {
    n.expect_object();
    auto k = n.get("kind");
    if (!k) {
      const bool hf_model = std::string(kind) == "model" && n.has("model_type");
      if (required && !hf_model) n.fail(std::string("missing required field \"kind\" (expected \"") + kind + "\")");
      return;
    }
    if (k->as_string() != kind && referrer)
      referrer->fail("expected a path to a \"" + std::string(kind) + "\" file, but \"" + referrer->as_string() +
                     "\" is a \"" + k->as_string() + "\"");
    if (k->as_string() != kind)
      k->fail(std::string("expected a \"") + kind + "\" here, got a \"" + k->as_string() + "\"");
  }
  std::map<std::string, std::unique_ptr<json>> cache_;
  std::vector<std::string> stack_;
};

// ------------------------------------------------------------------ hardware
std::pair<int, int> parse_cc(const Node& n) {
  const std::string s = n.as_string();
  int major = 0, minor = 0;
  char dot = 0;
  std::istringstream in(s);
  if (!(in >> major >> dot >> minor) || dot != '.' || major <= 0 || minor < 0)
    n.fail("expected a compute capability like \"9.0\", got \"" + s + "\"");
  return {major, minor};
}

GpuSpec parse_gpu(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "compute_capability", "sms", "dense_flops", "hbm_capacity",
                "hbm_usable", "hbm_bandwidth", "nvlink"});
  GpuSpec g;
  g.name = n.at("name").as_string();
  std::tie(g.cc_major, g.cc_minor) = parse_cc(n.at("compute_capability"));
  g.sms = static_cast<int>(n.at("sms").as_positive_int());
  const Node f = n.at("dense_flops");
  f.allow_only({"bf16", "fp16", "fp8", "mxfp8", "nvfp4"});
  g.dense_bf16 = f.at("bf16").as_flop_rate();
  g.dense_fp8 = f.at("fp8").as_flop_rate();
  if (auto x = f.get("mxfp8")) g.dense_mxfp8 = x->as_flop_rate();
  if (auto x = f.get("nvfp4")) g.dense_nvfp4 = x->as_flop_rate();
  g.hbm_capacity = n.at("hbm_capacity").as_bytes();
  g.hbm_usable = n.at("hbm_usable").as_bytes();
  if (g.hbm_usable > g.hbm_capacity)
    n.at("hbm_usable").fail("usable HBM exceeds the nominal capacity (hbm_capacity)");
  g.hbm_bandwidth = n.at("hbm_bandwidth").as_bandwidth();
  const Node nv = n.at("nvlink");
  nv.allow_only({"generation", "links", "bandwidth_per_link"});
  g.nvlink_generation = static_cast<int>(nv.at("generation").as_positive_int());
  g.nvlink_links = static_cast<int>(nv.at("links").as_nonneg_int());
  g.nvlink_bandwidth_per_link = nv.at("bandwidth_per_link").as_bandwidth();
  return g;
}

CpuSpec parse_cpu(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "memory", "memory_bandwidth", "gpu_link"});
  CpuSpec c;
  c.name = n.at("name").as_string();
  c.memory = n.at("memory").as_bytes();
  c.memory_bandwidth = n.at("memory_bandwidth").as_bandwidth();
  const Node l = n.at("gpu_link");
  l.allow_only({"name", "bandwidth_bidirectional"});
  c.gpu_link_name = l.at("name").as_string();
  c.gpu_link_bidirectional = l.at("bandwidth_bidirectional").as_bandwidth();
  return c;
}

NicSpec parse_nic(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "port_bandwidth", "host_link"});
  NicSpec c;
  c.name = n.at("name").as_string();
  c.port_bandwidth = n.at("port_bandwidth").as_bandwidth();
  const Node l = n.at("host_link");
  l.allow_only({"name", "bandwidth"});
  c.host_link_name = l.at("name").as_string();
  c.host_link_bandwidth = l.at("bandwidth").as_bandwidth();
  return c;
}

SwitchSpec parse_switch(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "ports", "port_bandwidth", "latency"});
  SwitchSpec s;
  s.name = n.at("name").as_string();
  s.ports = static_cast<int>(n.at("ports").as_positive_int());
  s.port_bandwidth = n.at("port_bandwidth").as_bandwidth();
  s.latency = n.at("latency").as_time();
  return s;
}

ComputeTraySpec parse_tray(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "gpu", "gpus", "cpu", "cpus", "nic", "nics"});
  ComputeTraySpec t;
  t.name = n.at("name").as_string();
  t.gpu = refs.follow(n.at("gpu"), "gpu", parse_gpu);
  t.gpus = static_cast<int>(n.at("gpus").as_positive_int());
  t.cpus = static_cast<int>(n.positive_int_or("cpus", 0));
  if (t.cpus > 0) t.cpu = refs.follow(n.at("cpu"), "cpu", parse_cpu);
  if (auto nics = n.get("nics")) {
    t.nics = static_cast<int>(nics->as_nonneg_int());
    if (t.nics != 0 && t.nics != t.gpus)
      nics->fail("expected one NIC per GPU (" + std::to_string(t.gpus) + "), got " + std::to_string(t.nics));
    if (t.nics > 0) t.nic = refs.follow(n.at("nic"), "nic", parse_nic);
  }
  if (t.cpus > 0 && t.gpus % t.cpus != 0)
    n.at("cpus").fail("expected a CPU count that divides the tray's " + std::to_string(t.gpus) + " GPUs");
  return t;
}

NvlinkDomainSpec parse_domain(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "tray", "trays", "switch", "switch_chips", "gpu_links_per_chip",
                "nvlink_latency"});
  NvlinkDomainSpec d;
  d.name = n.at("name").as_string();
  d.tray = refs.follow(n.at("tray"), "compute_tray", [&](const Node& x) { return parse_tray(refs, x); });
  d.trays = static_cast<int>(n.at("trays").as_positive_int());
  d.switch_chips = static_cast<int>(n.at("switch_chips").as_nonneg_int());
  if (d.switch_chips > 0) {
    d.nvswitch = refs.follow(n.at("switch"), "switch", parse_switch);
    const Node l = n.at("gpu_links_per_chip");
    if (l.is_array()) {
      if (l.size() != static_cast<size_t>(d.switch_chips))
        l.fail("expected one entry per switch chip (" + std::to_string(d.switch_chips) + "), got " +
               std::to_string(l.size()));
      for (size_t i = 0; i < l.size(); ++i) d.gpu_links_per_chip.push_back(static_cast<int>(l[i].as_nonneg_int()));
    } else {
      d.gpu_links_per_chip.assign(static_cast<size_t>(d.switch_chips), static_cast<int>(l.as_positive_int()));
    }
    const int sum = std::accumulate(d.gpu_links_per_chip.begin(), d.gpu_links_per_chip.end(), 0);
    if (sum != d.tray.gpu.nvlink_links)
      l.fail("the links per chip add up to " + std::to_string(sum) + ", but the GPU (" + d.tray.gpu.name + ") has " +
             std::to_string(d.tray.gpu.nvlink_links) + " NVLink links");
    d.nvlink_latency = n.at("nvlink_latency").as_time();
  }
  return d;
}

FatTreeSpec parse_fat_tree(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "switch", "tiers", "rail_optimized", "nic_to_leaf_latency"});
  FatTreeSpec f;
  f.name = n.at("name").as_string();
  f.sw = refs.follow(n.at("switch"), "switch", parse_switch);
  if (f.sw.ports < 2 || f.sw.ports % 2 != 0) n.at("switch").fail("a fat-tree switch needs an even port count");
  if (auto t = n.get("tiers")) {
    if (t->is_string()) {
      if (t->as_string() != "auto") t->fail("expected 2, 3 or \"auto\", got \"" + t->as_string() + "\"");
      f.tiers = FatTreeTiers::automatic;
    } else {
      const int64_t v = t->as_positive_int();
      if (v != 2 && v != 3) t->fail("expected 2, 3 or \"auto\", got " + std::to_string(v));
      f.tiers = v == 2 ? FatTreeTiers::two : FatTreeTiers::three;
    }
  }
  f.rail_optimized = n.bool_or("rail_optimized", true);
  f.nic_to_leaf_latency = n.at("nic_to_leaf_latency").as_time();
  return f;
}

SystemSpec parse_system(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "description", "nvlink_domain", "fabric", "gpus", "placement"});
  SystemSpec s;
  s.name = n.at("name").as_string();
  s.description = n.string_or("description", "");
  s.domain = refs.follow(n.at("nvlink_domain"), "nvlink_domain", [&](const Node& x) { return parse_domain(refs, x); });
  if (auto f = n.get("fabric"))
    s.fabric = refs.follow(*f, "fat_tree", [&](const Node& x) { return parse_fat_tree(refs, x); });
  s.default_gpus = n.positive_int_or("gpus", s.domain.gpus());
  s.gpus_per_domain_when_spanning = s.domain.gpus();
  if (auto p = n.get("placement")) {
    p->allow_only({"gpus_per_domain", "note"});
    if (auto g = p->get("gpus_per_domain")) {
      const int64_t v = g->as_positive_int();
      if (v > s.domain.gpus())
        g->fail("expected at most the domain's " + std::to_string(s.domain.gpus()) + " GPUs, got " + std::to_string(v));
      s.gpus_per_domain_when_spanning = static_cast<int>(v);
    }
  }
  if (s.default_gpus > s.domain.gpus() && !s.fabric)
    n.at("gpus").fail("expected at most the domain's " + std::to_string(s.domain.gpus()) +
                      " GPUs: this system has no fabric");
  return s;
}

// ------------------------------------------------------------------ models
ModelSpec parse_own_model(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "description", "hidden", "layers", "dense_layers", "dense_ffn",
                "vocab", "tie_embeddings", "attention", "moe", "mtp_layers"});
  ModelSpec m;
  m.name = n.at("name").as_string();
  m.hidden = n.at("hidden").as_positive_int();
  m.layers = static_cast<int>(n.at("layers").as_positive_int());
  m.vocab = n.at("vocab").as_positive_int();
  m.tie_embeddings = n.bool_or("tie_embeddings", false);
  m.mtp_layers = n.get("mtp_layers") ? static_cast<int>(n.at("mtp_layers").as_nonneg_int()) : 0;
  const Node a = n.at("attention");
  a.expect_object();
  m.attention.kind = a.at("type").as_enum<AttentionKind>({{"mla", AttentionKind::mla}, {"gqa", AttentionKind::gqa}});
  m.attention.heads = static_cast<int>(a.at("heads").as_positive_int());
  if (m.attention.kind == AttentionKind::mla) {
    a.allow_only({"type", "heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    m.attention.q_lora_rank = a.get("q_lora_rank") ? static_cast<int>(a.at("q_lora_rank").as_nonneg_int()) : 0;
    m.attention.kv_lora_rank = static_cast<int>(a.at("kv_lora_rank").as_positive_int());
    m.attention.qk_nope_head_dim = static_cast<int>(a.at("qk_nope_head_dim").as_positive_int());
    m.attention.qk_rope_head_dim = static_cast<int>(a.at("qk_rope_head_dim").as_positive_int());
    m.attention.v_head_dim = static_cast<int>(a.at("v_head_dim").as_positive_int());
  } else {
    a.allow_only({"type", "heads", "kv_heads", "head_dim", "qk_norm", "sliding_window", "sliding_layers", "sinks"});
    m.attention.kv_heads = static_cast<int>(a.at("kv_heads").as_positive_int());
    m.attention.head_dim = static_cast<int>(a.positive_int_or("head_dim", m.hidden / m.attention.heads));
    m.attention.qk_norm = a.bool_or("qk_norm", false);
    m.attention.sinks = a.bool_or("sinks", false);
    if (auto w = a.get("sliding_window")) m.attention.sliding_window = static_cast<int>(w->as_nonneg_int());
    if (auto l = a.get("sliding_layers")) {
      if (l->size() != static_cast<size_t>(m.layers))
        l->fail("expected one entry per layer (" + std::to_string(m.layers) + "), got " + std::to_string(l->size()));
      for (size_t i = 0; i < l->size(); ++i) m.attention.sliding_layers.push_back((*l)[i].as_bool());
    }
  }
  if (auto moe = n.get("moe")) {
    moe->allow_only({"experts", "top_k", "shared_experts", "expert_ffn", "router"});
    m.experts = static_cast<int>(moe->at("experts").as_positive_int());
    m.top_k = static_cast<int>(moe->at("top_k").as_positive_int());
    m.shared_experts = moe->get("shared_experts") ? static_cast<int>(moe->at("shared_experts").as_nonneg_int()) : 0;
    m.expert_ffn = moe->at("expert_ffn").as_positive_int();
    if (auto r = moe->get("router")) {
      r->allow_only({"score", "bias", "groups", "topk_groups"});
      if (auto sc = r->get("score"))
        m.router.score = sc->as_enum<RouterScore>({{"softmax", RouterScore::softmax}, {"sigmoid", RouterScore::sigmoid}});
      m.router.bias = r->bool_or("bias", false);
      m.router.groups = static_cast<int>(r->positive_int_or("groups", 1));
      m.router.topk_groups = static_cast<int>(r->positive_int_or("topk_groups", 1));
    }
    m.dense_layers = n.get("dense_layers") ? static_cast<int>(n.at("dense_layers").as_nonneg_int()) : 0;
    if (m.dense_layers > 0) m.dense_ffn = n.at("dense_ffn").as_positive_int();
  } else {
    m.dense_layers = m.layers;
    m.dense_ffn = n.at("dense_ffn").as_positive_int();
  }
  return m;
}

// A Hugging Face config.json as published. Keys we do not use are allowed (the file is the
// publisher's); the keys we need must be there with the right types.
ModelSpec parse_hf_model(const Node& n) {
  ModelSpec m;
  const std::string type = n.at("model_type").as_string();
  m.name = n.has("_name_or_path") ? n.at("_name_or_path").as_string() : type;
  m.hidden = n.at("hidden_size").as_positive_int();
  m.layers = static_cast<int>(n.at("num_hidden_layers").as_positive_int());
  m.vocab = n.at("vocab_size").as_positive_int();
  m.tie_embeddings = n.bool_or("tie_word_embeddings", false);
  AttentionSpec& a = m.attention;
  a.heads = static_cast<int>(n.at("num_attention_heads").as_positive_int());
  auto gqa = [&] {
    a.kind = AttentionKind::gqa;
    a.kv_heads = static_cast<int>(n.positive_int_or("num_key_value_heads", a.heads));
    a.head_dim = static_cast<int>(n.positive_int_or("head_dim", m.hidden / a.heads));
  };
  auto moe_checks = [&] {
    if (m.top_k > m.experts) n.at("num_experts_per_tok").fail("expected at most the expert count");
  };
  if (type == "deepseek_v3" || type == "kimi_k2") {
    a.kind = AttentionKind::mla;
    a.q_lora_rank = n.get("q_lora_rank") ? static_cast<int>(n.at("q_lora_rank").as_nonneg_int()) : 0;
    a.kv_lora_rank = static_cast<int>(n.at("kv_lora_rank").as_positive_int());
    a.qk_nope_head_dim = static_cast<int>(n.at("qk_nope_head_dim").as_positive_int());
    a.qk_rope_head_dim = static_cast<int>(n.at("qk_rope_head_dim").as_positive_int());
    a.v_head_dim = static_cast<int>(n.at("v_head_dim").as_positive_int());
    m.experts = static_cast<int>(n.at("n_routed_experts").as_positive_int());
    m.top_k = static_cast<int>(n.at("num_experts_per_tok").as_positive_int());
    m.shared_experts = n.get("n_shared_experts") ? static_cast<int>(n.at("n_shared_experts").as_nonneg_int()) : 0;
    m.expert_ffn = n.at("moe_intermediate_size").as_positive_int();
    m.dense_layers = static_cast<int>(n.at("first_k_dense_replace").as_nonneg_int());
    m.dense_ffn = n.at("intermediate_size").as_positive_int();
    if (n.positive_int_or("moe_layer_freq", 1) != 1)
      n.at("moe_layer_freq").fail("only moe_layer_freq 1 (every layer after the dense ones is MoE) is supported");
    m.router.score = n.at("scoring_func").as_enum<RouterScore>({{"softmax", RouterScore::softmax},
                                                                {"sigmoid", RouterScore::sigmoid}});
    m.router.bias = n.string_or("topk_method", "") == "noaux_tc";
    m.router.groups = static_cast<int>(n.positive_int_or("n_group", 1));
    m.router.topk_groups = static_cast<int>(n.positive_int_or("topk_group", 1));
    m.mtp_layers = n.get("num_nextn_predict_layers") ? static_cast<int>(n.at("num_nextn_predict_layers").as_nonneg_int()) : 0;
    moe_checks();
  } else if (type == "qwen3_moe" || type == "qwen2_moe") {
    gqa();
    a.qk_norm = type == "qwen3_moe";
    m.experts = static_cast<int>(n.at("num_experts").as_positive_int());
    m.top_k = static_cast<int>(n.at("num_experts_per_tok").as_positive_int());
    m.expert_ffn = n.at("moe_intermediate_size").as_positive_int();
    if (n.positive_int_or("decoder_sparse_step", 1) != 1)
      n.at("decoder_sparse_step").fail("only decoder_sparse_step 1 (every layer MoE) is supported");
    if (auto mlp = n.get("mlp_only_layers"); mlp && mlp->size() != 0)
      mlp->fail("dense layers inside an MoE stack (mlp_only_layers) are not supported; expected []");
    m.router.score = RouterScore::softmax;
    moe_checks();
  } else if (type == "mixtral" || type == "gpt_oss") {
    gqa();
    m.experts = static_cast<int>(n.at("num_local_experts").as_positive_int());
    const char* k = n.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
    m.top_k = static_cast<int>(n.at(k).as_positive_int());
    m.expert_ffn = n.at("intermediate_size").as_positive_int();
    m.router.score = RouterScore::softmax;
    if (type == "gpt_oss") {
      a.sinks = true;
      a.sliding_window = static_cast<int>(n.at("sliding_window").as_positive_int());
      const Node lt = n.at("layer_types");
      if (lt.size() != static_cast<size_t>(m.layers))
        lt.fail("expected one entry per layer (" + std::to_string(m.layers) + "), got " + std::to_string(lt.size()));
      for (size_t i = 0; i < lt.size(); ++i)
        a.sliding_layers.push_back(lt[i].as_enum<bool>({{"sliding_attention", true}, {"full_attention", false}}));
    } else if (auto w = n.get("sliding_window")) {
      a.sliding_window = static_cast<int>(w->as_nonneg_int());
      a.sliding_layers.assign(static_cast<size_t>(m.layers), a.sliding_window > 0);
    }
    moe_checks();
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3") {
    gqa();
    a.qk_norm = type == "qwen3";
    m.dense_layers = m.layers;
    m.dense_ffn = n.at("intermediate_size").as_positive_int();
  } else {
    n.at("model_type").fail("unsupported model_type \"" + type +
                            "\"; expected one of deepseek_v3, kimi_k2, qwen3_moe, qwen2_moe, mixtral, gpt_oss, "
                            "llama, mistral, qwen2, qwen3 (or write a moeperf model file with \"kind\": \"model\")");
  }
  return m;
}

bool is_hf(const Node& n) { return n.is_object() && n.has("model_type") && !n.has("kind"); }

ModelSpec parse_model_any(const Node& n) { return is_hf(n) ? parse_hf_model(n) : parse_own_model(n); }

// ------------------------------------------------------------------ calibration
// {"kind": "calibration", "params": {"gemm_peak_fraction": 0.72, ...}}: any subset of the cost
// model's named parameters, each within its documented range.
Calibration parse_calibration(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "description", "params", "fit"});
  Calibration c;
  const Node p = n.at("params");
  p.expect_object();
  std::vector<std::string> names;
  for (const ParamDef& d : param_defs()) names.emplace_back(d.name);
  for (auto& [k, v] : p.raw().items()) {
    const Node x(v, p.file(), p.path() + "/" + k);
    const auto id = find_param(k);
    if (!id) x.fail("unknown parameter \"" + k + "\"" + (detail::did_you_mean(k, names).empty() ? "; expected one of " + detail::join_choices(names) : detail::did_you_mean(k, names)));
    const ParamDef& d = param_def(*id);
    const double val = x.as_number();
    if (val < d.min || val > d.max)
      x.fail("expected " + std::string(d.name) + " in [" + std::to_string(d.min) + ", " + std::to_string(d.max) + "] " +
             std::string(d.unit) + ", got " + v.dump());
    c.set(*id, val);
  }
  return c;
}

// ------------------------------------------------------------------ scenario
json parse_value(const std::string& v) {
  try {
    return json::parse(v);
  } catch (const json::parse_error&) {
    return json(v);
  }
}

std::string pointer_of(const std::string& dotted) {
  std::string p = "/" + dotted;
  std::replace(p.begin(), p.end(), '.', '/');
  return p;
}

// Fields that name another file (relative to the file holding them) instead of an inline object.
bool is_reference_key(const std::string& key) {
  static const char* const keys[] = {"model", "system", "nvlink_domain", "fabric", "tray", "gpu",
                                     "cpu",   "nic",    "switch",        "histogram", "calibration"};
  return std::any_of(std::begin(keys), std::end(keys), [&](const char* k) { return key == k; });
}

// Rewrites the file references inside `j` (a document read from `from_dir`) so that they resolve
// from `to_dir`, the folder of the scenario it is inlined into.
void rebase_references(json& j, const fs::path& from_dir, const fs::path& to_dir) {
  if (j.is_array()) {
    for (json& x : j) rebase_references(x, from_dir, to_dir);
    return;
  }
  if (!j.is_object()) return;
  for (auto& [k, v] : j.items()) {
    if (v.is_string() && is_reference_key(k)) {
      const std::string rel = v.get<std::string>();
      if (rel.size() > 5 && rel.compare(rel.size() - 5, 5, ".json") == 0)
        v = (from_dir / rel).lexically_normal().lexically_relative(to_dir).string();
    } else {
      rebase_references(v, from_dir, to_dir);
    }
  }
}

// `--set a.b.c=V`: walks the dotted path through the scenario and, where a step goes through a
// reference to another file (system -> nvlink_domain -> tray -> nic), replaces the reference by
// that file's content, so the override reaches any field the scenario uses; the loader then checks
// it like any other value (the error names the scenario file and the dotted path).
void apply_override(json& root, const Override& o, const std::string& file) {
  json* cur = &root;
  std::stringstream ss(o.path);
  std::string part, walked;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  const fs::path scenario_dir = fs::absolute(fs::path(file).parent_path());
  fs::path dir = scenario_dir;  // where the references in *cur resolve from
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) throw SpecError("--set " + o.path + "=" + o.value, "", "empty path component");
    if (!cur->is_object())
      throw SpecError(file, walked, "--set " + o.path + ": " + walked.substr(1) + " is " +
                                        (cur->is_array() ? "an array" : "a " + std::string(cur->type_name())) +
                                        ", not an object with fields");
    walked += "/" + parts[i];
    if (i + 1 == parts.size()) {
      (*cur)[parts[i]] = parse_value(o.value);
      break;
    }
    json& next = (*cur)[parts[i]];
    if (next.is_null()) next = json::object();
    if (next.is_string() && is_reference_key(parts[i])) {
      const fs::path target = dir / next.get<std::string>();
      std::error_code ec;
      if (!fs::is_regular_file(target, ec))
        throw SpecError(file, walked, "--set " + o.path + ": referenced file \"" + next.get<std::string>() +
                                          "\" not found (looked for " + target.lexically_normal().string() + ")");
      json content = detail::read_json_file(target.lexically_normal().string());
      dir = target.parent_path();
      rebase_references(content, dir, scenario_dir);
      dir = scenario_dir;
      next = std::move(content);
    }
    cur = &next;
  }
}

Dtype parse_dtype(const Node& n) {
  return n.as_enum<Dtype>({{"fp32", Dtype::fp32}, {"bf16", Dtype::bf16}, {"fp16", Dtype::fp16}, {"fp8", Dtype::fp8},
                           {"mxfp8", Dtype::mxfp8}, {"nvfp4", Dtype::nvfp4}});
}

std::vector<TensorClass> parse_tensor_classes(const Node& n) {
  std::vector<TensorClass> out;
  for (size_t i = 0; i < n.size(); ++i)
    out.push_back(n[i].as_enum<TensorClass>({{"q_proj", TensorClass::q_proj}, {"kv_proj", TensorClass::kv_proj},
                                              {"attn_out", TensorClass::attn_out}, {"out_proj", TensorClass::out_proj},
                                              {"moe_mlpwi", TensorClass::moe_mlpwi},
                                              {"moe_mlpwo", TensorClass::moe_mlpwo}, {"mlp", TensorClass::mlp},
                                              {"router", TensorClass::router}, {"norm", TensorClass::norm}}));
  return out;
}

std::vector<double> parse_histogram(const Node& n) {
  std::vector<double> h;
  for (size_t i = 0; i < n.size(); ++i) {
    const double v = n[i].as_number();
    if (v < 0) n[i].fail("expected a non-negative count, got " + n[i].raw().dump());
    h.push_back(v);
  }
  if (h.empty() || std::accumulate(h.begin(), h.end(), 0.0) <= 0.0) n.fail("expected at least one positive count");
  return h;
}

Scenario parse_scenario(Refs& refs, const Node& n) {
  n.allow_only(scenario_keys(""));
  Scenario s;
  s.name = n.string_or("name", fs::path(n.file()).stem().string());
  s.description = n.string_or("description", "");
  s.model = refs.follow(n.at("model"), "model", parse_model_any);
  s.system = refs.follow(n.at("system"), "system", [&](const Node& x) { return parse_system(refs, x); });
  s.gpus = n.positive_int_or("gpus", s.system.default_gpus);
  s.train_mtp = n.bool_or("train_mtp", false);
  if (s.train_mtp && s.model.mtp_layers == 0)
    n.at("train_mtp").fail("expected false: model '" + s.model.name + "' has no MTP module (num_nextn_predict_layers 0)");

  const Node p = n.at("parallelism");
  p.allow_only(scenario_keys("parallelism"));
  Parallelism& par = s.parallelism;
  par.tp = p.positive_int_or("tp", 1);
  par.cp = p.positive_int_or("cp", 1);
  par.pp = p.positive_int_or("pp", 1);
  par.vpp = p.positive_int_or("vpp", 1);
  par.ep = p.positive_int_or("ep", 1);
  par.fsdp = p.positive_int_or("fsdp", 1);
  par.dp = p.positive_int_or("dp", 1);
  if (auto sch = p.get("schedule"))
    par.schedule = sch->as_enum<PipelineSchedule>({{"1f1b", PipelineSchedule::one_f_one_b},
                                                   {"interleaved", PipelineSchedule::interleaved},
                                                   {"dualpipe", PipelineSchedule::dualpipe}});
  par.sequence_parallel = p.bool_or("sequence_parallel", true);
  par.distributed_optimizer = p.bool_or("distributed_optimizer", false);

  const Node b = n.at("batch");
  b.allow_only(scenario_keys("batch"));
  s.batch.seq_len = b.at("seq_len").as_positive_int();
  s.batch.micro_batch = b.at("micro_batch").as_positive_int();
  s.batch.global_batch = b.at("global_batch").as_positive_int();

  if (auto pr = n.get("precision")) {
    pr->allow_only(scenario_keys("precision"));
    Precision& q = s.precision;
    if (auto x = pr->get("dense_gemm")) q.dense_gemm = parse_dtype(*x);
    if (auto x = pr->get("expert_gemm")) q.expert_gemm = parse_dtype(*x);
    if (auto x = pr->get("dispatch")) q.dispatch = parse_dtype(*x);
    if (auto x = pr->get("combine")) q.combine = parse_dtype(*x);
    if (auto x = pr->get("weights")) q.weights = parse_dtype(*x);
    if (auto x = pr->get("grads")) q.grads = parse_dtype(*x);
    if (auto x = pr->get("optimizer_state")) q.optimizer_state = parse_dtype(*x);
    q.master_weights_fp32 = pr->bool_or("master_weights_fp32", false);
  }
  if (auto m = n.get("memory")) {
    m->allow_only(scenario_keys("memory"));
    if (auto x = m->get("recompute")) s.memory.recompute = parse_tensor_classes(*x);
    if (auto x = m->get("offload")) s.memory.offload = parse_tensor_classes(*x);
    if (auto x = m->get("usable_hbm_fraction")) s.memory.usable_hbm_fraction = x->as_fraction();
    if (auto x = m->get("host_offload_limit")) s.memory.host_offload_limit = x->as_bytes();
  }
  if (auto r = n.get("routing")) {
    r->allow_only(scenario_keys("routing"));
    Routing& ro = s.routing;
    if (auto d = r->get("distribution"))
      ro.distribution = d->as_enum<RoutingDistribution>(
          {{"uniform", RoutingDistribution::uniform}, {"balanced", RoutingDistribution::balanced},
           {"zipf", RoutingDistribution::zipf}, {"dirichlet", RoutingDistribution::dirichlet},
           {"histogram", RoutingDistribution::histogram}});
    if (ro.distribution == RoutingDistribution::zipf) ro.zipf_exponent = r->at("zipf_exponent").as_positive_number();
    if (ro.distribution == RoutingDistribution::dirichlet)
      ro.dirichlet_alpha = r->at("dirichlet_alpha").as_positive_number();
    if (ro.distribution == RoutingDistribution::histogram) {
      const Node h = r->at("histogram");
      if (h.is_array()) {
        ro.histogram = parse_histogram(h);
      } else {
        ro.histogram = refs.follow(h, "histogram", [](const Node& x) {
          x.allow_only({"kind", "name", "source", "note", "counts"});
          return parse_histogram(x.at("counts"));
        });
      }
      if (ro.histogram.size() != static_cast<size_t>(s.model.experts))
        h.fail("expected one count per routed expert (" + std::to_string(s.model.experts) + "), got " +
               std::to_string(ro.histogram.size()));
    }
    if (auto sd = r->get("seed")) ro.seed = static_cast<uint64_t>(sd->as_nonneg_int());
    ro.group_limited = r->bool_or("group_limited", true);
  }
  if (auto st = n.get("stack")) {
    st->allow_only(scenario_keys("stack"));
    StackOptions& o = s.stack;
    o.grouped_gemm = st->bool_or("grouped_gemm", o.grouped_gemm);
    if (auto d = st->get("dispatcher"))
      o.dispatcher = d->as_enum<Dispatcher>({{"allgather", Dispatcher::allgather}, {"alltoall", Dispatcher::alltoall},
                                             {"fused_dedup", Dispatcher::fused_dedup}});
    o.multistream_collectives = st->bool_or("multistream_collectives", o.multistream_collectives);
    if (auto ov = st->get("overlap")) {
      ov->allow_only(scenario_keys("stack.overlap"));
      o.fsdp_prefetch = ov->bool_or("fsdp_prefetch", o.fsdp_prefetch);
      o.fsdp_prefetch_depth = static_cast<int>(ov->positive_int_or("fsdp_prefetch_depth", o.fsdp_prefetch_depth));
      o.a2a_with_shared_expert = ov->bool_or("a2a_with_shared_expert", o.a2a_with_shared_expert);
      o.fwd_bwd_overlap = ov->bool_or("fwd_bwd", o.fwd_bwd_overlap);
    }
    if (auto f = st->get("a2a_buffer_factor")) o.a2a_buffer_factor = f->as_positive_number();
  }
  if (auto c = n.get("calibration")) s.calibration = refs.follow(*c, "calibration", parse_calibration);
  if (auto st = n.get("stragglers")) {
    for (size_t i = 0; i < st->size(); ++i) {
      const Node x = (*st)[i];
      x.allow_only(scenario_keys("stragglers[]"));
      Straggler g;
      if (x.get("gpu") && x.get("rack")) x.at("rack").fail("expected either \"gpu\" or \"rack\", not both");
      if (auto r = x.get("rack")) {
        // Every GPU of one NVLink domain, laid out as the topology does (place_stragglers).
        const int64_t per = job_gpus_per_domain(s.system, s.gpus);
        const int64_t racks = (s.gpus + per - 1) / per;
        g.rack = r->as_nonneg_int();
        if (g.rack >= racks)
          r->fail("expected a rack index below " + std::to_string(racks) + " (the job's NVLink domains), got " +
                  std::to_string(g.rack));
      } else {
        g.gpu = x.at("gpu").as_nonneg_int();
        if (g.gpu >= s.gpus) x.at("gpu").fail("expected a GPU index below gpus (" + std::to_string(s.gpus) + "), got " + std::to_string(g.gpu));
      }
      auto factor = [&](const char* key) {
        auto f = x.get(key);
        if (!f) return 1.0;
        const double v = f->as_positive_number();
        if (v < 1.0) f->fail("expected a slowdown factor >= 1, got " + f->raw().dump());
        return v;
      };
      g.compute_slowdown = factor("compute_slowdown");
      g.nvlink_slowdown = factor("nvlink_slowdown");
      g.network_slowdown = factor("network_slowdown");
      s.stragglers.push_back(g);
    }
    place_stragglers(s);
  }
  return s;
}

std::string join_dims(const Parallelism& p) {
  return std::to_string(p.tp) + " x " + std::to_string(p.cp) + " x " + std::to_string(p.pp) + " x " +
         std::to_string(p.ep) + " x " + std::to_string(p.fsdp) + " x " + std::to_string(p.dp);
}

}  // namespace

SystemSpec load_system(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  refs.push(path);
  root.expect_object();
  if (!root.has("kind") || root.at("kind").as_string() != "system")
    root.fail("expected a system file (\"kind\": \"system\")");
  return parse_system(refs, root);
}

ModelSpec load_model(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  root.expect_object();
  if (!is_hf(root) && (!root.has("kind") || root.at("kind").as_string() != "model"))
    root.fail("expected a model file: a Hugging Face config.json (with \"model_type\") or \"kind\": \"model\"");
  return parse_model_any(root);
}

Calibration load_calibration(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  root.expect_object();
  if (!root.has("kind") || root.at("kind").as_string() != "calibration")
    root.fail("expected a calibration profile (\"kind\": \"calibration\")");
  return parse_calibration(root);
}

Override parse_override(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw SpecError("--set " + arg, "", "expected PATH=VALUE, e.g. --set parallelism.ep=32");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

void check_scenario(const Scenario& s, const std::string& file) {
  const Parallelism& p = s.parallelism;
  const ModelSpec& m = s.model;
  auto fail = [&](const std::string& path, const std::string& msg) { throw SpecError(file, path, msg); };
  if (p.world() != s.gpus)
    fail("/parallelism", "tp x cp x pp x ep x fsdp x dp = " + join_dims(p) + " = " + std::to_string(p.world()) +
                             ", but gpus is " + std::to_string(s.gpus) +
                             "; the layout rule is gpus = tp x cp x pp x ep x fsdp x dp");
  if (!m.is_moe() && p.ep > 1)
    fail("/parallelism/ep", "ep = " + std::to_string(p.ep) + " needs an MoE model; " + m.name + " has no experts");
  if (m.is_moe() && m.experts % p.ep != 0)
    fail("/parallelism/ep", "ep = " + std::to_string(p.ep) + " must divide the model's " + std::to_string(m.experts) +
                                " routed experts");
  if (m.attention.heads % p.tp != 0)
    fail("/parallelism/tp", "tp = " + std::to_string(p.tp) + " must divide the model's " +
                                std::to_string(m.attention.heads) + " attention heads");
  if (m.attention.kind == AttentionKind::gqa && m.attention.kv_heads % p.tp != 0 && p.tp % m.attention.kv_heads != 0)
    fail("/parallelism/tp", "tp = " + std::to_string(p.tp) + " must divide the " + std::to_string(m.attention.kv_heads) +
                                " KV heads or be a multiple of them");
  if (p.vpp > 1 && p.schedule != PipelineSchedule::interleaved)
    fail("/parallelism/vpp", "vpp = " + std::to_string(p.vpp) + " needs \"schedule\": \"interleaved\"");
  if (p.schedule == PipelineSchedule::dualpipe && (p.pp < 2 || p.pp % 2 != 0))
    fail("/parallelism/pp", "the dualpipe schedule needs an even pp >= 2, got " + std::to_string(p.pp));
  if (p.pp * p.vpp > m.layers)
    fail("/parallelism/pp", "pp x vpp = " + std::to_string(p.pp * p.vpp) + " stages for " + std::to_string(m.layers) +
                                " layers: every stage needs at least one layer");
  if (p.cp > 1 && s.batch.seq_len % (2 * p.cp) != 0)
    fail("/batch/seq_len", "seq_len = " + std::to_string(s.batch.seq_len) + " must be a multiple of 2 x cp = " +
                               std::to_string(2 * p.cp) + " (causal load-balanced context parallelism)");
  const int64_t dp = p.dense_data_parallel();
  if (s.batch.global_batch % (s.batch.micro_batch * dp) != 0)
    fail("/batch/global_batch", "global_batch = " + std::to_string(s.batch.global_batch) +
                                    " sequences must be a multiple of micro_batch x data-parallel ranks (ep x fsdp x dp) = " +
                                    std::to_string(s.batch.micro_batch) + " x " + std::to_string(dp) + " = " +
                                    std::to_string(s.batch.micro_batch * dp));
  if (m.is_moe() && m.router.groups > 1 && m.experts % m.router.groups != 0)
    fail("/model", "the router's " + std::to_string(m.router.groups) + " groups must divide the " +
                       std::to_string(m.experts) + " experts");
  try {
    (void)Topology::build(s.system, s.gpus);
  } catch (const InputError& e) {
    fail("/gpus", e.what());
  }
  size_t bad = 0;
  if (const std::string why = straggler_problem(s, &bad); !why.empty()) {
    const Straggler& x = s.stragglers[bad];
    fail("/stragglers/" + std::to_string(bad) + (x.rack >= 0 ? "/rack" : "/gpu"), why);
  }
}

// A scenario command handed another kind of moeperf file (a system, a model, a HF config.json):
// say what the file is and where it belongs, before any key is found "unknown".
void expect_scenario_file(const json& doc, const std::string& path) {
  if (!doc.is_object()) return;  // expect_object() reports it
  if (doc.contains("kind") && doc["kind"].is_string() && doc["kind"] != "scenario") {
    const std::string kind = doc["kind"].get<std::string>();
    const bool part = kind == "system" || kind == "model" || kind == "calibration" || kind == "histogram";
    throw SpecError(path, "/kind",
                    "this is a " + kind + " file, not a scenario" +
                        (part ? "; a scenario names it in its \"" + kind + "\" field (see examples/deepseek-v3/)"
                              : "; expected a scenario (\"kind\": \"scenario\", with \"model\", \"system\" and "
                                "\"parallelism\")"));
  }
  if (!doc.contains("kind") && doc.contains("model_type"))
    throw SpecError(path, "", "this is a Hugging Face config.json (a model), not a scenario; a scenario names it in "
                              "its \"model\" field (see examples/deepseek-v3/)");
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& sets) {
  json doc = detail::read_json_file(path);
  expect_scenario_file(doc, path);
  for (const Override& o : sets) apply_override(doc, o, path);
  Refs refs;
  refs.push(path);
  const Node root(doc, path, "");
  root.expect_object();
  try {
    Scenario s = parse_scenario(refs, root);
    check_scenario(s, path);
    return s;
  } catch (const SpecError& e) {
    // Say when the failing value came from the command line.
    for (const Override& o : sets) {
      const std::string ptr = pointer_of(o.path);
      if (e.file() == path && (e.json_path() == ptr || e.json_path().rfind(ptr + "/", 0) == 0))
        throw SpecError(e.file(), e.json_path(), e.detail() + " (set by --set " + o.path + "=" + o.value + ")");
    }
    throw;
  }
}

Validated validate_file(const std::string& path) {
  const json doc = detail::read_json_file(path);
  const Node root(doc, path, "");
  root.expect_object();
  if (is_hf(root)) {
    const ModelSpec m = parse_hf_model(root);
    return {"model (Hugging Face " + root.at("model_type").as_string() + ")",
            std::to_string(m.layers) + " layers, hidden " + std::to_string(m.hidden) + ", " +
                (m.is_moe() ? std::to_string(m.experts) + " experts top-" + std::to_string(m.top_k) : "dense")};
  }
  if (!root.has("kind")) {
    if (root.has("model") && root.has("system")) {
      const Scenario s = load_scenario(path);
      return {"scenario", s.name + ": " + std::to_string(s.gpus) + " GPUs of " + s.system.name};
    }
    root.fail("cannot tell what this file is: expected a \"kind\" field (system, gpu, cpu, nic, switch, "
              "compute_tray, nvlink_domain, fat_tree, model, scenario, histogram, calibration, measurements) or a Hugging Face config.json");
  }
  const std::string kind = root.at("kind").as_string();
  Refs refs;
  refs.push(path);
  if (kind == "system") {
    const SystemSpec s = parse_system(refs, root);
    return {kind, s.name + ": " + std::to_string(s.default_gpus) + " GPUs by default, " +
                      std::to_string(s.domain.gpus()) + " per NVLink domain"};
  }
  if (kind == "scenario") {
    const Scenario s = load_scenario(path);
    return {kind, s.name + ": " + std::to_string(s.gpus) + " GPUs of " + s.system.name};
  }
  if (kind == "model") return {kind, parse_own_model(root).name};
  if (kind == "gpu") return {kind, parse_gpu(root).name};
  if (kind == "cpu") return {kind, parse_cpu(root).name};
  if (kind == "nic") return {kind, parse_nic(root).name};
  if (kind == "switch") return {kind, parse_switch(root).name};
  if (kind == "compute_tray") return {kind, parse_tray(refs, root).name};
  if (kind == "nvlink_domain") return {kind, parse_domain(refs, root).name};
  if (kind == "fat_tree") return {kind, parse_fat_tree(refs, root).name};
  if (kind == "calibration") {
    const Calibration c = parse_calibration(root);
    int changed = 0;
    for (const ParamDef& d : param_defs()) changed += !c.is_default(d.id);
    return {kind, std::to_string(changed) + " of " + std::to_string(param_defs().size()) + " parameters set"};
  }
  if (kind == "measurements") {
    root.allow_only({"kind", "scenario", "backend", "communicator", "ranks", "dims", "steps", "warmup", "layers", "machine",
                     "git_revision", "date", "ops", "expert_rows_histogram", "gates_passed", "notes"});
    root.at("ops").expect_object();
    return {kind, std::to_string(root.at("ops").raw().size()) + " ops measured on " +
                      std::to_string(root.at("ranks").as_positive_int()) + " ranks (" + root.at("backend").as_string() + ")"};
  }
  if (kind == "histogram") {
    root.allow_only({"kind", "name", "source", "note", "counts"});
    return {kind, std::to_string(parse_histogram(root.at("counts")).size()) + " experts"};
  }
  root.at("kind").fail("unknown kind \"" + kind + "\"");
}

}  // namespace moeperf::io
