// Stack files and the scenario's "stack" field: names resolve to the built-in stacks (stacks/ at
// build time), paths to files; an object's fields override its base field by field.
#include "model/io/stacks.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "model/io/detail/parsers.h"
#include "model/io/detail/stacks.h"
#include "model/io/scenario_schema.h"

namespace moeperf::io {
namespace {

namespace fs = std::filesystem;
using namespace detail;

const std::vector<std::pair<std::string, std::string>> kStacks = {
#include "builtin_stacks.inc"
};

const std::pair<std::string, std::string>* find_builtin(const std::string& name) {
  for (const auto& s : kStacks)
    if (s.first == name) return &s;
  return nullptr;
}

std::string builtin_names() {
  std::string out;
  for (const auto& s : kStacks) out += (out.empty() ? "" : ", ") + ("\"" + s.first + "\"");
  return out;
}

// A field's value: plain, or {"value": V, "source": "..."} / {"value": V, "assumption": "..."}.
Node unwrap(const Node& n) {
  if (!n.is_object()) return n;
  n.allow_only({"value", "source", "assumption", "note"});
  return n.at("value");
}

double as_seconds(const Node& n) {
  if (n.is_string() || n.is_object()) return n.as_time().value();
  const double v = n.as_number();
  if (v < 0) n.fail("expected a time >= 0 (\"5 us\" or seconds), got " + n.raw().dump());
  return v;
}

int small_int(const Node& n, int64_t min) {
  const int64_t v = n.as_int();
  if (v < min || v > 1'000'000) n.fail("expected an integer in [" + std::to_string(min) + ", 1000000], got " + n.raw().dump());
  return static_cast<int>(v);
}

unsigned parse_graph_scope(const Node& n) {
  unsigned bits = 0;
  for (size_t i = 0; i < n.size(); ++i)
    bits |= static_cast<unsigned>(n[i].as_enum<GraphScope>({{"attn", GraphScope::attn},
                                                            {"mlp", GraphScope::mlp},
                                                            {"moe_router", GraphScope::moe_router},
                                                            {"shared_expert", GraphScope::shared_expert},
                                                            {"moe", GraphScope::moe}}));
  return bits;
}

// The fields of a stack (file or scenario object) over `o`.
void apply_fields(const Node& n, StackOptions& o) {
  auto field = [&](const char* key) -> std::optional<Node> {
    auto x = n.get(key);
    if (!x) return std::nullopt;
    return unwrap(*x);
  };
  if (auto x = field("grouped_gemm")) o.expert_gemm = x->as_bool() ? ExpertGemm::grouped : ExpertGemm::per_expert_loop;
  if (auto x = field("expert_gemm")) {
    const ExpertGemm e = x->as_enum<ExpertGemm>({{"grouped", ExpertGemm::grouped},
                                                 {"per_expert_loop", ExpertGemm::per_expert_loop},
                                                 {"masked_dense", ExpertGemm::masked_dense}});
    // The older grouped_gemm beside it must say the same.
    if (n.has("grouped_gemm") && e != o.expert_gemm)
      n.at("grouped_gemm").fail("contradicts \"expert_gemm\" (" + x->as_string() + "): give one of the two");
    o.expert_gemm = e;
  }
  if (auto x = field("grouped_kernel"))
    o.grouped_kernel = parse_grouped_kernel(*x);
  if (auto x = field("dispatcher"))
    o.dispatcher = x->as_enum<Dispatcher>({{"allgather", Dispatcher::allgather}, {"alltoall", Dispatcher::alltoall},
                                           {"fused_dedup", Dispatcher::fused_dedup}});
  if (auto x = field("ragged_a2a")) o.ragged_a2a = x->as_enum<RaggedA2a>({{"nccl", RaggedA2a::nccl}, {"one_shot", RaggedA2a::one_shot}});
  if (auto x = field("one_shot_max_ranks")) o.one_shot_max_ranks = small_int(*x, 1);
  if (auto x = field("one_shot_scope"))
    o.one_shot_scope = x->as_enum<PeerScope>({{"process", PeerScope::process}, {"nvlink_domain", PeerScope::nvlink_domain}});
  if (auto x = field("one_shot_threads")) o.one_shot_threads = small_int(*x, 1);
  if (auto x = field("one_shot_copy_bytes")) o.one_shot_copy_bytes = small_int(*x, 1);
  if (auto x = field("one_shot_updates_per_peer")) o.one_shot_updates_per_peer = small_int(*x, 1);
  if (auto x = field("ragged_a2a_host_waits")) o.ragged_a2a_host_waits = small_int(*x, 0);
  if (auto x = field("dispatch_host_syncs")) o.dispatch_host_syncs = small_int(*x, 0);
  if (auto x = field("ep_sms")) o.ep_sms = small_int(*x, 0);
  if (auto x = field("ep_kernel")) o.ep_kernel = x->as_enum<EpKernel>({{"hybridep", EpKernel::hybridep}, {"deepep", EpKernel::deepep}});
  if (auto x = field("ep_buffer_copies")) o.ep_buffer_copies = x->as_bool();
  if (auto x = field("permute_after_dispatch")) o.permute_after_dispatch = x->as_bool();
  if (auto x = field("multistream_collectives")) o.multistream_collectives = x->as_bool();
  if (auto ov = n.get("overlap")) {
    ov->allow_only(scenario_keys("stack.overlap"));
    if (auto x = ov->get("fsdp_prefetch")) o.fsdp_prefetch = unwrap(*x).as_bool();
    if (auto x = ov->get("fsdp_prefetch_depth")) o.fsdp_prefetch_depth = static_cast<int>(unwrap(*x).as_positive_int());
    if (auto x = ov->get("a2a_with_shared_expert")) o.a2a_with_shared_expert = unwrap(*x).as_bool();
    if (auto x = ov->get("fwd_bwd")) o.fwd_bwd_overlap = unwrap(*x).as_bool();
    if (auto x = ov->get("grad_reduce")) o.grad_reduce_overlap = unwrap(*x).as_bool();
  }
  if (auto x = field("a2a_buffer_factor")) o.a2a_buffer_factor = x->as_number();
  if (auto x = field("a2a_zero_fill")) o.a2a_zero_fill = x->as_bool();
  if (auto x = field("remat_dispatch")) o.remat_dispatch = x->as_bool();
  if (auto x = field("host_op_s")) o.host_op_s = as_seconds(*x);
  if (auto x = field("host_ops_per_op")) {
    o.host_ops_per_op = x->as_number();
    if (o.host_ops_per_op < 1 || o.host_ops_per_op > 1000) x->fail("expected a number in [1, 1000], got " + x->raw().dump());
  }
  if (auto x = field("quantize_host_ops")) o.quantize_host_ops = small_int(*x, 1);
  if (auto x = field("router_fusion")) o.router_fusion = x->as_bool();
  if (auto x = field("unfused_router_ops")) o.unfused_router_ops = small_int(*x, 1);
  if (auto x = field("permute_fusion")) o.permute_fusion = x->as_bool();
  if (auto x = field("unfused_permute_ops")) o.unfused_permute_ops = small_int(*x, 1);
  if (auto x = field("cuda_graphs")) o.cuda_graphs = parse_graph_scope(*x);
  if (auto x = field("graph_launch_s")) o.graph_launch_s = as_seconds(*x);
  if (auto x = field("pdl_quantize")) o.pdl_quantize = x->as_bool();
  if (auto x = field("norm_quantize_fusion")) o.norm_quantize_fusion = x->as_bool();
  if (auto x = field("residual_fusion")) o.residual_fusion = x->as_bool();
  if (auto x = field("fused_qkv")) o.fused_qkv = x->as_bool();
  if (auto x = field("weight_quant_cache")) o.weight_quant_cache = x->as_bool();
}

// One "off" value of an ablation step onto the scenario: stack fields through the stack parser,
// precision and memory fields by name ("+offloaded" in memory.recompute is handled by the caller).
void apply_off(Scenario& s, const std::string& path, const std::string& value, const std::string& file,
               const std::string& at = "/ablation") {
  const json v = json::parse(value);
  if (path.rfind("stack.", 0) == 0) {
    json obj = json::object();
    json* cur = &obj;
    std::string rest = path.substr(6);
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) cur = &(*cur)[rest.substr(0, dot)];
    (*cur)[rest] = v;
    const Node n(obj, file, at);
    std::vector<std::string> keys = scenario_keys("stack");
    keys.erase(std::remove(keys.begin(), keys.end(), "base"), keys.end());
    n.allow_only(keys);
    apply_fields(n, s.stack);
    // The switched field joins the scenario's overrides of its stack, as a scenario would write it
    // ("overlap={...}" for a field inside "overlap"), so the state's band matches its configuration.
    auto& ov = s.stack.overrides;
    const std::string top = obj.begin().key();
    json switched = obj.begin().value();
    auto it = std::find_if(ov.begin(), ov.end(), [&](const std::string& o) { return o.rfind(top + "=", 0) == 0; });
    if (it != ov.end()) {
      if (switched.is_object()) {
        json merged = json::parse(it->substr(top.size() + 1));
        merged.merge_patch(switched);
        switched = merged;
      }
      ov.erase(it);
    }
    ov.push_back(top + "=" + switched.dump());
    std::sort(ov.begin(), ov.end());
    return;
  }
  const Node n(v, file, at);
  Precision& q = s.precision;
  if (path == "precision.dense_gemm") q.dense_gemm = parse_dtype(n);
  else if (path == "precision.expert_gemm") {
    q.expert_gemm = parse_dtype(n);
    if (q.expert_gemm == Dtype::bf16) q.combine_bwd = Dtype::bf16;  // its quantization was the expert GEMM's
  }
  else if (path == "precision.dispatch") q.dispatch = parse_dtype(n);
  else if (path == "precision.combine") q.combine = parse_dtype(n);
  else if (path == "precision.combine_bwd") q.combine_bwd = parse_dtype(n);
  else if (path == "memory.offload") s.memory.offload = parse_tensor_classes(n);
  else if (path == "memory.recompute") s.memory.recompute = parse_tensor_classes(n);
  else n.fail("an ablation may switch stack.*, precision.dense_gemm/expert_gemm/dispatch/combine/combine_bwd, memory.offload or memory.recompute");
}

std::vector<std::string> file_keys() {
  std::vector<std::string> k = scenario_keys("stack");
  k.erase(std::remove(k.begin(), k.end(), "base"), k.end());
  for (const char* x : {"kind", "name", "description", "note", "ablation"}) k.emplace_back(x);
  return k;
}

json parse_builtin(const std::string& name) { return json::parse(find_builtin(name)->second); }

}  // namespace

const std::vector<std::pair<std::string, std::string>>& builtin_stacks() { return kStacks; }

namespace detail {

const json* json_at(const json& doc, const std::string& path) {
  const json* cur = &doc;
  size_t a = 0;
  while (cur && a <= path.size()) {
    const size_t b = std::min(path.find('.', a), path.size());
    const std::string key = path.substr(a, b - a);
    cur = cur->is_object() && cur->contains(key) ? &(*cur)[key] : nullptr;
    if (cur && cur->is_object() && cur->contains("value")) cur = &(*cur)["value"];
    a = b + 1;
  }
  return cur;
}

json stack_field_json(const json& ref, const std::string& file, const std::string& path) {
  auto walk = [&](const json& doc) -> json {
    const json* cur = json_at(doc, path);
    return cur ? *cur : json();
  };
  auto base_doc = [&](const json& name) -> json {
    if (!name.is_string()) return json();
    const std::string v = name.get<std::string>();
    if (v.size() > 5 && v.compare(v.size() - 5, 5, ".json") == 0) return read_json_file((fs::path(file).parent_path() / v).string());
    return find_builtin(v) ? parse_builtin(v) : json();
  };
  if (ref.is_string()) return walk(base_doc(ref));
  if (!ref.is_object()) return json();
  if (json own = walk(ref); !own.is_null()) return own;
  return ref.contains("base") ? walk(base_doc(ref["base"])) : json();
}

StackOptions parse_stack_file(const Node& root) {
  if (root.has("base"))
    root.at("base").fail("a stack file stands alone: \"base\" belongs to a scenario's inline \"stack\" object "
                         "({\"base\": \"megatron-core\", ...fields it changes}); copy the base's fields here instead");
  root.allow_only(file_keys());
  if (auto k = root.get("kind"); !k || k->as_string() != "stack")
    root.fail("expected a stack file (\"kind\": \"stack\")");
  StackOptions o;
  o.name = root.string_or("name", fs::path(root.file()).stem().string());
  apply_fields(root, o);
  // Each ablation step: a name and the fields it switched with their earlier values, checked
  // here by applying them to a copy.
  if (auto a = root.get("ablation")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const Node st = (*a)[i];
      st.allow_only({"name", "off", "note", "source"});
      AblationStep step;
      step.name = st.at("name").as_string();
      step.note = st.string_or("note", "");
      const Node off = st.at("off");
      off.expect_object();
      Scenario probe;
      probe.stack = o;
      for (auto it = off.raw().begin(); it != off.raw().end(); ++it) {
        step.off.emplace_back(it.key(), it.value().dump());
        if (it.key() == "memory.recompute" && it.value() == "+offloaded") continue;
        apply_off(probe, it.key(), it.value().dump(), root.file(), off.path() + "/" + it.key());
      }
      o.ablation.push_back(std::move(step));
    }
  }
  return o;
}

StackOptions parse_stack_ref(Refs& refs, const Node& field) {
  auto base_of = [&](const Node& ref) -> StackOptions {
    const std::string v = ref.as_string();
    if (v.size() > 5 && v.compare(v.size() - 5, 5, ".json") == 0)
      return refs.follow(ref, "stack", [](const Node& x) { return parse_stack_file(x); });
    if (!find_builtin(v)) ref.fail("unknown stack \"" + v + "\": expected one of " + builtin_names() + ", or a path ending in .json");
    const json doc = parse_builtin(v);
    return parse_stack_file(Node(doc, "stacks/" + v + ".json", ""));
  };
  if (field.is_string()) return base_of(field);
  if (!field.is_object())
    field.fail("expected a stack name (" + builtin_names() + "), a path to a stack file or an object with a \"base\", got " +
               field.raw().dump());
  field.allow_only(scenario_keys("stack"));
  StackOptions base;
  if (auto b = field.get("base")) base = base_of(*b);
  StackOptions o = base;
  apply_fields(field, o);
  o.overrides.clear();
  // A field counts as an override only where it changes the base: one that restates the base's
  // value (or, inside "overlap", the members that do) leaves the configuration as shipped, and the
  // end-to-end band matches configurations by their overrides.
  Scenario as_shipped;
  as_shipped.stack = base;
  auto changes = [&](const std::string& key, const json& value) {
    const json one = {{key, value}};
    Scenario x = as_shipped;
    apply_fields(Node(one, field.file(), field.path()), x.stack);
    return !differing_fields(as_shipped, x).empty();
  };
  for (auto it = field.raw().begin(); it != field.raw().end(); ++it) {
    if (it.key() == "base") continue;
    json value = it.value();
    if (value.is_object() && it.key() == "overlap") {
      json kept = json::object();
      for (auto m = value.begin(); m != value.end(); ++m)
        if (changes(it.key(), json{{m.key(), m.value()}})) kept[m.key()] = m.value();
      if (kept.empty()) continue;
      value = kept;
    } else if (!changes(it.key(), value)) {
      continue;
    }
    o.overrides.push_back(it.key() + "=" + value.dump());
  }
  std::sort(o.overrides.begin(), o.overrides.end());  // one order, however they were written
  return o;
}

}  // namespace detail

std::vector<NamedState> ablation_states(const Scenario& s) {
  std::vector<NamedState> out;
  const std::vector<AblationStep>& steps = s.stack.ablation;
  if (steps.empty()) return out;
  const std::string file = "the ablation of stack " + s.stack.name;
  for (size_t k = 0; k <= steps.size(); ++k) {
    Scenario x = s;
    // The steps not yet switched on, the latest first so that the earliest's value wins; memory
    // offload is switched off before its tensors join the recompute set.
    for (size_t j = steps.size(); j-- > k;) {
      const auto& off = steps[j].off;
      for (const auto& [path, value] : off)
        if (path != "memory.recompute") apply_off(x, path, value, file);
      for (const auto& [path, value] : off)
        if (path == "memory.recompute") {
          if (value == "\"+offloaded\"") {
            for (TensorClass c : s.memory.offload)  // what the scenario offloads, recomputed instead
              if (std::find(x.memory.recompute.begin(), x.memory.recompute.end(), c) == x.memory.recompute.end())
                x.memory.recompute.push_back(c);
          } else {
            apply_off(x, path, value, file);
          }
        }
    }
    NamedState st;
    st.name = k == 0 ? "start" : steps[k - 1].name;
    st.note = k == 0 ? "" : steps[k - 1].note;
    x.name = s.name + (k == 0 ? " [every step of " + s.stack.name + "'s ablation off]" : " [after " + st.name + "]");
    st.scenario = std::move(x);
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace moeperf::io
