// Loading scenarios (with `--set` overrides, reaching into referenced files), calibration profiles
// and the consistency checks of a scenario; `validate` for any file. Systems are parsed in
// load_hardware.cpp and models in load_model.cpp (detail/parsers.h); references go through
// detail::Refs, which resolves paths relative to the naming file, caches parsed files and refuses
// reference cycles.
#include "model/io/load.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "model/hardware/topology.h"
#include "model/io/detail/parsers.h"
#include "model/io/detail/stacks.h"
#include "model/io/measured_trace.h"
#include "model/io/parts.h"
#include "model/io/scenario_schema.h"
#include "model/io/sweep.h"
#include "model/limits.h"
#include "model/workload/memory.h"
#include "model/workload/pipeline_layout.h"
#include "model/workload/step.h"

namespace moeperf::io {
namespace {

namespace fs = std::filesystem;
using namespace detail;

// ------------------------------------------------------------------ scenario
json parse_value(const std::string& v) {
  try {
    return json::parse(v, [&](int depth, json::parse_event_t, json&) {
      if (static_cast<size_t>(depth) > kMaxJsonDepth)
        throw SpecError("--set", "", "the value is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return true;
    });
  } catch (const json::parse_error&) {
    return json(v);
  } catch (const json::out_of_range&) {  // a JSON number outside double range (1e999)
    throw SpecError("--set", "", "a number in \"" + v + "\" is out of range (expected a finite number)");
  }
}

std::string fmt_count(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v < 1e15 ? "%.0f" : "%.3g", v);
  return b;
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
      // A relative path to a JSON file (or to anything there, a model's folder): a name ("blackwell",
      // a profile) and an absolute path stay as they are.
      const std::string rel = v.get<std::string>();
      std::error_code ec;
      const bool json_file = rel.size() > 5 && rel.compare(rel.size() - 5, 5, ".json") == 0;
      if (!rel.empty() && fs::path(rel).is_relative() && (json_file || fs::exists(from_dir / rel, ec)))
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
// The folder a scenario's references resolve from ("x.json": the working folder).
fs::path scenario_folder(const std::string& file) {
  const fs::path parent = fs::path(file).parent_path();
  return fs::absolute(parent.empty() ? fs::path(".") : parent);
}

// A reference field's path, `node`, replaced by the JSON file it names (resolved from
// `scenario_dir`; the file's own references rebased there). False, `node` untouched, when it names
// no file (a built-in name, a folder, nothing there).
bool inline_referenced_file(json& node, const fs::path& scenario_dir, const std::string& key) {
  const fs::path target = scenario_dir / node.get<std::string>();
  std::error_code ec;
  if (!fs::is_regular_file(target, ec)) {
    // A shipped profile by name, where no file of that name is there (as the loader reads it).
    if (key == "calibration")
      for (const auto& [name, text] : builtin_profiles())
        if (name == node.get<std::string>()) {
          // Inlined to take an edit (`--set calibration.params.X`): its name says so.
          node = json::parse(text);
          node["name"] = node.value("name", name) + " (shipped, edited)";
          return true;
        }
    return false;
  }
  json content = detail::read_json_file(target.lexically_normal().string());
  rebase_references(content, target.parent_path(), scenario_dir);
  node = std::move(content);
  return true;
}

void apply_override(json& root, const Override& o, const std::string& file) {
  json* cur = &root;
  std::stringstream ss(o.path);
  std::string part, walked;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  // Every reference along the path resolves from the scenario's folder: the content of a file read
  // in is rebased there (rebase_references) before the walk goes on into it.
  const fs::path scenario_dir = scenario_folder(file);
  // A file's kind says what it is: an override that changed it would make the file another one.
  if (!parts.empty() && parts.back() == "kind")
    throw SpecError("--set " + o.path + "=" + o.value, "", "a file's \"kind\" cannot be overridden (it says what the file is)");
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) throw SpecError("--set " + o.path + "=" + o.value, "", "empty path component");
    if (!cur->is_object())
      throw SpecError(file, walked, "--set " + o.path + ": " + walked.substr(1) + " is " +
                                        (cur->is_array() ? "an array" : "a " + std::string(cur->type_name())) +
                                        ", not an object with fields");
    walked += "/" + parts[i];
    if (i + 1 == parts.size()) {
      // A Hugging Face config keeps keys moeperf does not read, so a misspelt one would be ignored
      // silently: an override may only set a key the file has or one the loader reads.
      const auto& hf = hf_keys();
      // Llama 4's language model is in text_config: a key set beside it would never be read.
      if (cur->contains("model_type") && (*cur)["model_type"] == "llama4" && parts[i] != "text_config" &&
          parts[i] != "_name_or_path") {
        std::string to = o.path.substr(0, o.path.size() - parts[i].size()) + "text_config." + parts[i];
        throw SpecError(file, walked, "--set " + o.path + ": a llama4 config keeps its language model's keys in "
                                          "text_config, so this one would not be read; write --set " + to + "=" + o.value);
      }
      if (cur->contains("model_type") && !cur->contains("kind") && !cur->contains(parts[i]) &&
          std::find(hf.begin(), hf.end(), parts[i]) == hf.end())
        throw SpecError(file, walked, "--set " + o.path + ": the Hugging Face config has no key \"" + parts[i] +
                                          "\" and moeperf does not read one" + did_you_mean(parts[i], hf));
      (*cur)[parts[i]] = parse_value(o.value);
      break;
    }
    json& next = (*cur)[parts[i]];
    if (next.is_null()) next = json::object();
    // A named stack (or a stack file) becomes the base of an object the override can reach into.
    if (next.is_string() && i == 0 && parts[i] == "stack") next = json{{"base", next}};
    if (next.is_string() && is_reference_key(parts[i]) && !inline_referenced_file(next, scenario_dir, parts[i]))
      throw SpecError(file, walked, "--set " + o.path + ": referenced file \"" + next.get<std::string>() + "\" not found (looked for " +
                                        (scenario_dir / next.get<std::string>()).lexically_normal().string() + ")");
    cur = &next;
  }
}

std::vector<double> parse_histogram(const Node& n) {
  std::vector<double> h;
  for (size_t i = 0; i < n.size(); ++i) {
    const double v = n[i].as_number();
    if (v < 0) n[i].fail("expected a non-negative count, got " + n[i].raw().dump());
    h.push_back(v);
  }
  const double sum = std::accumulate(h.begin(), h.end(), 0.0);
  if (h.empty() || sum <= 0.0) n.fail("expected at least one positive count");
  if (!std::isfinite(sum)) n.fail("the counts add up past what a double holds: give them at a smaller scale (only their ratios matter)");
  return h;
}

Scenario parse_scenario(Refs& refs, const Node& n) {
  n.allow_only(scenario_keys(""));
  Scenario s;
  s.name = n.string_or("name", fs::path(n.file()).stem().string());
  s.description = n.string_or("description", "");
  s.model = refs.follow(n.at("model"), "model", parse_model_any);
  s.system = refs.follow(n.at("system"), "system", [&](const Node& x) { return parse_system(refs, x); });
  s.gpus = n.positive_int_or("gpus", s.system.default_gpus, limits::kGpus);
  s.train_mtp = n.bool_or("train_mtp", false);
  if (s.train_mtp && s.model.mtp_layers == 0)
    n.at("train_mtp").fail("expected false: model '" + s.model.name + "' has no MTP module (num_nextn_predict_layers 0)");

  const Node p = n.at("parallelism");
  p.allow_only(scenario_keys("parallelism"));
  Parallelism& par = s.parallelism;
  par.tp = p.positive_int_or("tp", 1, limits::kGpus);
  par.cp = p.positive_int_or("cp", 1, limits::kGpus);
  par.pp = p.positive_int_or("pp", 1, limits::kGpus);
  par.vpp = p.positive_int_or("vpp", 1, limits::kGpus);
  par.ep = p.positive_int_or("ep", 1, limits::kGpus);
  par.fsdp = p.positive_int_or("fsdp", 1, limits::kGpus);
  par.dp = p.positive_int_or("dp", 1, limits::kGpus);
  if (p.get("etp")) {
    par.folded = true;
    par.etp = p.positive_int_or("etp", 1, limits::kGpus);
  }
  if (auto sch = p.get("schedule"))
    par.schedule = sch->as_enum<PipelineSchedule>({{"1f1b", PipelineSchedule::one_f_one_b},
                                                   {"interleaved", PipelineSchedule::interleaved},
                                                   {"dualpipe", PipelineSchedule::dualpipe},
                                                   {"dualpipev", PipelineSchedule::dualpipev},
                                                   {"zbh1", PipelineSchedule::zb_h1}});
  par.sequence_parallel = p.bool_or("sequence_parallel", true);
  par.distributed_optimizer = p.bool_or("distributed_optimizer", false);
  if (auto lay = p.get("layout")) {
    // Megatron's layout string, or one entry per virtual stage: its letters ("Et", "tt", "L") or
    // its number of layers (the embedding then on the first, the loss on the last).
    try {
      if (lay->is_string() && lay->as_string() == "balanced") {
        par.balance_layout = true;
      } else if (lay->is_string()) {
        par.layout_spec = lay->as_string();
        par.layout = parse_pipeline_layout(par.layout_spec);
      } else if (lay->is_array() && lay->size() > 0) {
        bool counts = true;
        for (size_t i = 0; i < lay->size(); ++i) counts = counts && !(*lay)[i].is_string();
        for (size_t i = 0; i < lay->size(); ++i) {
          const Node e = (*lay)[i];
          if (counts) {
            VirtualStageLayout v;
            v.layers = static_cast<int>(e.as_nonneg_int(limits::kLayers));
            par.layout.push_back(v);
            par.layout_spec += (i ? "," : "") + std::to_string(v.layers);
            continue;
          }
          const std::string t = e.as_string();
          if (t.find('|') != std::string::npos) e.fail("expected one virtual stage (no '|'), got \"" + t + "\"");
          if (t.empty()) {
            par.layout.emplace_back();  // a virtual stage without layers
          } else {
            try {
              par.layout.push_back(parse_pipeline_layout(t).front());
            } catch (const std::invalid_argument& x) {
              e.fail(std::string("expected a virtual stage's letters: ") + x.what());
            }
          }
          par.layout_spec += (i ? "|" : "") + t;
        }
        if (counts) {
          par.layout.front().embedding = true;
          par.layout.back().loss = true;
        }
      } else {
        lay->fail("expected a Megatron layout string (\"Et|(tt|)*30L\"), \"balanced\", or a non-empty array with one "
                  "entry per virtual stage (its letters, or its number of layers)");
      }
    } catch (const std::invalid_argument& x) {
      lay->fail(std::string("expected a Megatron layout string or \"balanced\": ") + x.what());
    }
  }

  const Node b = n.at("batch");
  b.allow_only(scenario_keys("batch"));
  s.batch.seq_len = b.at("seq_len").as_positive_int(limits::kSeqLen);
  s.batch.micro_batch = b.at("micro_batch").as_positive_int(limits::kGlobalBatch);
  s.batch.global_batch = b.at("global_batch").as_positive_int(limits::kGlobalBatch);

  if (auto pr = n.get("precision")) {
    pr->allow_only(scenario_keys("precision"));
    Precision& q = s.precision;
    if (auto x = pr->get("dense_gemm")) q.dense_gemm = parse_dtype(*x);
    if (auto x = pr->get("expert_gemm")) q.expert_gemm = parse_dtype(*x);
    if (auto x = pr->get("dispatch")) q.dispatch = parse_dtype(*x);
    if (auto x = pr->get("combine")) q.combine = parse_dtype(*x);
    if (auto x = pr->get("combine_bwd")) {
      q.combine_bwd = parse_dtype(*x);
      // Its quantization is the one the expert FC2's FP8 dgrad runs on its input, moved before the
      // send; a BF16 expert GEMM has none, and a cast to the wire format is not priced.
      if (q.combine_bwd != Dtype::bf16 && q.expert_gemm == Dtype::bf16)
        x->fail("expected \"bf16\" while precision.expert_gemm is \"bf16\" (a low-precision combine gradient is quantized "
                "by the expert GEMM's FP8 backward; set expert_gemm to an FP8 format first), got " + x->raw().dump());
    }
    if (auto x = pr->get("weights")) q.weights = parse_dtype(*x);
    if (auto x = pr->get("grads")) q.grads = parse_dtype(*x);
    if (auto x = pr->get("optimizer_state")) q.optimizer_state = parse_dtype(*x);
    q.master_weights_fp32 = pr->bool_or("master_weights_fp32", false);
  }
  if (auto m = n.get("memory")) {
    m->allow_only(scenario_keys("memory"));
    if (auto x = m->get("recompute")) s.memory.recompute = parse_tensor_classes(*x);
    // A class in both lists offloads what its recompute keeps (the norm class's layer input, MLA's
    // latents under autograd: recomputed_class_kept_bytes), in the memory report and the copies alike.
    if (auto x = m->get("offload")) s.memory.offload = parse_tensor_classes(*x);
    // A cache list holds activation classes the format keeps in fewer bits: never the router's FP32
    // scores, and never a class the other format already keeps (a saved tensor has one format).
    const auto cache_list = [&](std::vector<TensorClass>& list, const char* key, const char* format,
                                const std::vector<TensorClass>& other, const char* other_key) {
      if (auto x = m->get(key)) {
        list = parse_tensor_classes(*x);
        for (size_t i = 0; i < list.size(); ++i) {
          const TensorClass c = list[i];
          if (c == TensorClass::router)
            (*x)[i].fail(std::string("\"router\" holds FP32 routing scores, not a BF16 activation to cache in ") + format);
          if (std::find(other.begin(), other.end(), c) != other.end())
            (*x)[i].fail("\"" + std::string(to_string(c)) + "\" is in memory." + other_key +
                         " too: a saved tensor is cached in one format");
        }
      }
    };
    cache_list(s.memory.fp8_cache, "fp8_cache", "FP8", {}, "");
    cache_list(s.memory.e5m6_cache, "e5m6_cache", "E5M6", s.memory.fp8_cache, "fp8_cache");
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
    // A distribution's parameter is required with it and checked whenever given: another
    // distribution keeps it unused (a sweep over distributions sets it once), and the report
    // says so (expert_load's notes).
    if (ro.distribution == RoutingDistribution::zipf || r->get("zipf_exponent"))
      ro.zipf_exponent = r->at("zipf_exponent").as_positive_number();
    if (ro.distribution == RoutingDistribution::dirichlet || r->get("dirichlet_alpha"))
      ro.dirichlet_alpha = r->at("dirichlet_alpha").as_positive_number();
    if (ro.distribution == RoutingDistribution::histogram || r->get("histogram")) {
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
      // Rows per expert: each token picks top_k distinct experts, so no expert takes more than
      // 1/top_k of the rows (draw_weights solves the rest).
      if (ro.distribution == RoutingDistribution::histogram) {
        // (Rows on fewer than top_k experts give one of them more than 1/top_k.)
        double sum = 0, most = 0;
        for (double x : ro.histogram) sum += x, most = std::max(most, x);
        const int k = s.model.top_k;
        auto pct = [](double v) {
          char out[32];
          std::snprintf(out, sizeof out, "%.1f", v);
          return std::string(out);
        };
        if (sum > 0 && most / sum * k > 1.0 + 1e-9)
          h.fail("expected rows per expert that a top-" + std::to_string(k) + " router can give: one expert has " +
                 pct(100 * most / sum) + " % of the rows, but a token picks an expert once, so at most " + pct(100.0 / k) + " %");
      }
    }
    if (auto sd = r->get("seed")) ro.seed = static_cast<uint64_t>(sd->as_nonneg_int(INT64_MAX));
    ro.group_limited = r->bool_or("group_limited", true);
  }
  if (auto st = n.get("stack")) s.stack = parse_stack_ref(refs, *st);
  // The shipped profile of the system's GPU generation, unless the scenario names a profile (whose
  // values override it, parameter by parameter).
  s.calibration = builtin_profile(s.system.gpu());
  if (auto c = n.get("calibration")) {
    // A shipped profile by its generation's name (a what-if: this system priced with another
    // generation's fit), else a profile file or an inline object over the system's own.
    // A file of that name beside the scenario wins over a shipped profile's name.
    std::optional<Calibration> named;
    std::error_code ec;
    const fs::path target = c->is_string() ? fs::path(c->file()).parent_path() / c->as_string() : fs::path();
    const bool file = c->is_string() && fs::is_regular_file(target, ec);
    if (c->is_string() && !file) named = builtin_profile_named(c->as_string());
    if (named) {
      s.calibration = std::move(*named);
    } else {
      if (c->is_string() && !file)
        c->fail("expected a calibration profile file (its path relative to this file; looked for " +
                target.lexically_normal().string() + ") or a shipped profile's name (" + builtin_profile_names() +
                "), got \"" + c->as_string() + "\"");
      const Calibration base = s.calibration;
      s.calibration = refs.follow(*c, "calibration", [&](const Node& x) { return parse_calibration(x, base); });
    }
  }
  // The end-to-end errors that widen the band: the shipped ones, another file's, or none.
  {
    EndToEndErrors e = builtin_end_to_end();
    if (auto x = n.get("end_to_end")) {
      if (x->is_string() && x->as_string() == "none") e = {};
      else e = {refs.follow(*x, "end_to_end", [](const Node& y) { return parse_end_to_end(y); }), x->is_string() ? x->as_string() : "the scenario"};
    }
    s.calibration.end_to_end = std::move(e.cases);
    s.calibration.end_to_end_source = std::move(e.source);
  }
  if (auto fl = n.get("fleet")) {
    fl->allow_only(scenario_keys("fleet"));
    if (auto sg = fl->get("speed_sigma")) {
      s.speed_sigma = sg->as_number();
      if (!(s.speed_sigma >= 0 && s.speed_sigma < 0.5))
        sg->fail("expected a relative standard deviation in [0, 0.5), e.g. 0.02 for 2 %, got " + std::to_string(s.speed_sigma));
    }
  }
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
        if (v < 1.0 || v > 1e6)
          f->fail("expected a slowdown factor in [1, 1e6] (a GPU a million times slower is a dead one), got " + f->raw().dump());
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

namespace detail {

void apply_scenario_override(json& root, const Override& o, const std::string& file) { apply_override(root, o, file); }

const json* scenario_field(json& root, const std::string& path, const std::string& file) {
  const fs::path scenario_dir = scenario_folder(file);
  json* cur = &root;
  for (size_t a = 0;;) {
    const size_t b = std::min(path.find('.', a), path.size());
    const std::string key = path.substr(a, b - a);
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    json* next = &(*cur)[key];
    // A step through a reference to a JSON file inlines it as apply_override does (a built-in name
    // or a folder is no file to read: nothing below it is found here).
    if (b < path.size() && next->is_string() && is_reference_key(key) && !inline_referenced_file(*next, scenario_dir, key)) return nullptr;
    if (next->is_object() && next->contains("value")) next = &(*next)["value"];
    if (b == path.size()) return next;
    cur = next;
    a = b + 1;
  }
}

}  // namespace detail

Calibration load_calibration(const std::string& path, const Calibration& base) {
  Refs refs;
  const Node root = refs.open(path);
  root.expect_object();
  if (!root.has("kind") || root.at("kind").as_string() != "calibration")
    root.fail("expected a calibration profile (\"kind\": \"calibration\")");
  return parse_calibration(root, base);
}

std::vector<AccuracyCase> load_accuracy_cases(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  root.expect_object();
  root.allow_only({"kind", "description", "cases"});
  if (!root.has("kind") || root.at("kind").as_string() != "accuracy_cases")
    root.fail("expected an accuracy cases file (\"kind\": \"accuracy_cases\")");
  const Node cs = root.at("cases");
  if (!cs.is_array() || cs.size() == 0) cs.fail("expected a non-empty array of cases");
  std::vector<AccuracyCase> out;
  for (size_t i = 0; i < cs.size(); ++i) {
    const Node c = cs[i];
    c.allow_only({"scenario", "metric", "published", "source", "note"});
    AccuracyCase x;
    const std::string rel = c.at("scenario").as_string();
    const fs::path target = fs::path(path).parent_path() / rel;
    std::error_code ec;  // a name the file system refuses (too long, bad bytes) is "not found" too
    if (!fs::is_regular_file(target, ec)) c.at("scenario").fail("scenario file \"" + rel + "\" not found (looked for " + target.lexically_normal().string() + ")");
    x.scenario = target.lexically_normal().string();
    x.metric = c.at("metric").as_string();
    if (x.metric != "tflops_per_gpu" && x.metric != "tokens_per_s_per_gpu" && x.metric != "step_time_s")
      c.at("metric").fail("expected \"tflops_per_gpu\", \"tokens_per_s_per_gpu\" or \"step_time_s\", got \"" + x.metric + "\"");
    x.published = c.at("published").as_positive_number();
    x.source = c.at("source").as_string();
    out.push_back(x);
  }
  return out;
}

Override parse_override(const std::string& arg, const char* origin) {
  // The value may become a JSON string: it must be text JSON can hold (a Latin-1 byte typed on a
  // command line is not).
  if (const size_t bad = first_invalid_utf8(arg); bad != std::string::npos)
    throw SpecError("--set", "", "the argument is not valid UTF-8 text (byte " + std::to_string(bad + 1) + " of \"" +
                                     json(arg).dump(-1, ' ', true, json::error_handler_t::replace) + "\")");
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw SpecError("--set " + arg, "", "expected PATH=VALUE, e.g. --set parallelism.ep=32");
  Override o{arg.substr(0, eq), arg.substr(eq + 1)};
  o.origin = origin;
  return o;
}

void check_scenario(const Scenario& s, const std::string& file) {
  const Parallelism& p = s.parallelism;
  const ModelSpec& m = s.model;
  auto fail = [&](const std::string& path, const std::string& msg) { throw SpecError(file, path, msg); };
  // The mesh's product in doubles first (exact here), so the integer products below cannot overflow.
  const double mesh = static_cast<double>(p.tp) * static_cast<double>(p.cp) * static_cast<double>(p.pp) *
                      static_cast<double>(p.dp) * (p.folded ? 1.0 : static_cast<double>(p.ep) * static_cast<double>(p.fsdp));
  if (mesh > static_cast<double>(limits::kGpus))
    fail("/parallelism", (p.folded ? "tp x cp x pp x dp = " : "tp x cp x pp x ep x fsdp x dp = ") + fmt_count(mesh) +
                             " GPUs, above moeperf's limit of " + std::to_string(limits::kGpus) + " GPUs in a job (gpus is " +
                             std::to_string(s.gpus) + ")");
  if (p.folded && p.etp * p.ep > limits::kGpus)
    fail("/parallelism/ep", "etp x ep = " + std::to_string(p.etp * p.ep) + " is above moeperf's limit of " +
                                std::to_string(limits::kGpus) + " GPUs in a job");
  if (p.folded) {
    // Megatron's MoE parallel folding: dense tp x cp x dp, experts etp x ep x edp, per stage.
    const std::string dims = std::to_string(p.tp) + " x " + std::to_string(p.cp) + " x " + std::to_string(p.pp) +
                             " x " + std::to_string(p.dp);
    if (p.world() != s.gpus)
      fail("/parallelism", "tp x cp x pp x dp = " + dims + " = " + std::to_string(p.world()) + ", but gpus is " +
                               std::to_string(s.gpus) + "; with etp given (MoE parallel folding) the layout rule is gpus = "
                               "tp x cp x pp x dp, and ep x etp divides the GPUs of a stage");
    if (p.fsdp > 1)
      fail("/parallelism/fsdp", "fsdp = " + std::to_string(p.fsdp) + " with etp given: MoE parallel folding is "
                                "modelled with data parallelism (and distributed_optimizer), not FSDP");
    const int64_t stage = p.stage_gpus();
    if (stage % (p.etp * p.ep) != 0)
      fail("/parallelism/ep", "etp x ep = " + std::to_string(p.etp) + " x " + std::to_string(p.ep) +
                                  " must divide the " + std::to_string(stage) + " GPUs of a pipeline stage (tp x cp x dp = " +
                                  std::to_string(p.tp) + " x " + std::to_string(p.cp) + " x " + std::to_string(p.dp) + ")");
    if (m.is_moe() && m.expert_ffn % p.etp != 0)
      fail("/parallelism/etp", "etp = " + std::to_string(p.etp) + " must divide the experts' FFN width " +
                                   std::to_string(m.expert_ffn));
  } else if (p.world() != s.gpus) {
    fail("/parallelism", "tp x cp x pp x ep x fsdp x dp = " + join_dims(p) + " = " + std::to_string(p.world()) +
                             ", but gpus is " + std::to_string(s.gpus) +
                             "; the layout rule is gpus = tp x cp x pp x ep x fsdp x dp (or, with etp given, "
                             "Megatron's MoE parallel folding: gpus = tp x cp x pp x dp, ep x etp dividing a stage)");
  }
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
  if (p.schedule == PipelineSchedule::zb_h1 && p.pp < 2)
    fail("/parallelism/pp", "the zbh1 schedule needs pp >= 2, got " + std::to_string(p.pp));
  if (p.schedule == PipelineSchedule::dualpipev && p.pp < 2)
    fail("/parallelism/pp", "the dualpipev schedule needs pp >= 2, got " + std::to_string(p.pp));
  if (p.schedule == PipelineSchedule::dualpipev && 2 * p.pp > m.layers && p.layout.empty())
    fail("/parallelism/pp", "dualpipev splits the model into 2 x pp = " + std::to_string(2 * p.pp) + " stages for " +
                                std::to_string(m.layers) + " layers: every stage needs at least one layer");
  if (p.pp * p.vpp > m.layers && p.layout.empty())
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
  // DualPipe's program (dualpipe.py, dualpipev.py) asserts at least two micro-batches per rank
  // and, bidirectional, an even count (half enter at each end).
  if (p.schedule == PipelineSchedule::dualpipe || p.schedule == PipelineSchedule::dualpipev) {
    const int64_t mbs = s.batch.global_batch / (s.batch.micro_batch * dp);
    const bool bi = p.schedule == PipelineSchedule::dualpipe;
    if (mbs < 2 * p.pp || (bi && mbs % 2 != 0))
      fail("/batch/global_batch", "the " + std::string(bi ? "dualpipe" : "dualpipev") + " schedule needs " +
                                      (bi ? "an even number of" : "at least") + " micro-batches per pipeline" +
                                      (bi ? ", at least" : "") + " 2 x pp = " + std::to_string(2 * p.pp) + "; global_batch = " +
                                      std::to_string(s.batch.global_batch) + " gives " + std::to_string(mbs) + " (" +
                                      std::to_string(s.batch.global_batch) + " / (micro_batch " +
                                      std::to_string(s.batch.micro_batch) + " x " + std::to_string(dp) +
                                      " data-parallel ranks))");
  }
  if (const std::string why = pipeline_layout_problem(s); !why.empty()) fail("/parallelism/layout", why);
  // The simulated step has a few dozen ops per micro-batch and layer on each pipeline rank: bound
  // their product so a prediction stays seconds, not hours (model/limits.h).
  // Every stage is simulated: the bound is on micro-batches times all the model's layers.
  {
    const int64_t mbs = s.batch.global_batch / (s.batch.micro_batch * dp);
    const int64_t layers = m.layers + (s.train_mtp ? m.mtp_layers : 0);
    if (mbs * layers > limits::kLayerPasses)
      fail("/batch/global_batch", std::to_string(mbs) + " micro-batches per pipeline x " + std::to_string(layers) +
                                      " layers = " + std::to_string(mbs * layers) +
                                      " layer passes per step, above moeperf's limit of " +
                                      std::to_string(limits::kLayerPasses) + " (raise micro_batch or the data-parallel ranks)");
    // The interleaved program runs micro-batches in groups of pp, chunk by chunk, as Megatron-LM's
    // interleaved schedule does; a partial last group has no order the stages agree on.
    if (p.schedule == PipelineSchedule::interleaved && mbs % p.pp != 0)
      fail("/batch/global_batch", "the interleaved schedule needs the micro-batches per pipeline to be a multiple of pp = " +
                                      std::to_string(p.pp) + "; global_batch = " + std::to_string(s.batch.global_batch) +
                                      " gives " + std::to_string(mbs) + " (" + std::to_string(s.batch.global_batch) +
                                      " / (micro_batch " + std::to_string(s.batch.micro_batch) + " x " + std::to_string(dp) +
                                      " data-parallel ranks))");
  }
  if (m.is_moe() && m.router.groups > 1 && m.experts % m.router.groups != 0)
    fail("/model", "the router's " + std::to_string(m.router.groups) + " groups must divide the " +
                       std::to_string(m.experts) + " experts");
  try {
    (void)Topology::build(s.system, s.gpus);
  } catch (const InputError& e) {
    fail("/gpus", e.what());
  }
  // A CUDA graph cannot capture a host wait: the "moe" scope would hold the dispatcher's copy of its
  // split sizes to the host, or the per-expert loop's copy of its counts (Megatron captures the MoE
  // block only where nothing goes to the host: counts padded to capacity).
  if (s.stack.captured(GraphScope::moe) && m.is_moe() && (s.stack.dispatch_host_syncs > 0 || s.stack.expert_gemm == ExpertGemm::per_expert_loop))
    fail("/stack/cuda_graphs",
         "a CUDA graph cannot capture a host wait, and the \"moe\" scope holds one: " +
             (s.stack.dispatch_host_syncs > 0 ? "stack.dispatch_host_syncs is " + std::to_string(s.stack.dispatch_host_syncs) +
                                                    " (the dispatcher copies its split sizes to the host)"
                                              : std::string("stack.expert_gemm is \"per_expert_loop\" (its counts go to the host)")) +
             "; drop \"moe\" from cuda_graphs, or set dispatch_host_syncs to 0 and grouped expert GEMMs (a dispatcher that "
             "sizes on the device)");
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
                    std::string(kind.find_first_of("aeiou") == 0 ? "this is an " : "this is a ") + kind + " file, not a scenario" +
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
        throw SpecError(e.file(), e.json_path(), e.detail() + " (set by " + o.origin + " " + o.path + "=" + o.value + ")", e.kind());
    }
    throw;
  }
}

std::string scenario_text_with_overrides(const std::string& path, const std::vector<Override>& sets,
                                         const std::string& out_dir) {
  json doc = detail::read_json_file(path);
  expect_scenario_file(doc, path);
  for (const Override& o : sets) apply_override(doc, o, path);
  if (!out_dir.empty()) {
    const fs::path parent = fs::path(path).parent_path();
    rebase_references(doc, fs::absolute(parent.empty() ? fs::path(".") : parent).lexically_normal(),
                      fs::absolute(out_dir).lexically_normal());
  }
  return doc.dump(2);
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
              "compute_tray, nvlink_domain, fat_tree, model, scenario, stack, histogram, calibration, measurements, accuracy_cases, end_to_end, sweep_grid, kernel-patterns) or a Hugging Face config.json");
  }
  const std::string kind = root.at("kind").as_string();
  Refs refs;
  refs.push(path);
  if (kind == "system") {
    const SystemSpec s = parse_system(refs, root);
    return {kind, s.name + ": " + std::to_string(s.default_gpus) + " GPUs by default, " +
                      std::to_string(s.domain.gpus()) + " per NVLink domain"};
  }
  if (kind == "stack") {
    const StackOptions st = parse_stack_file(root);
    const size_t steps = root.has("ablation") ? root.at("ablation").size() : 0;
    return {kind, st.name + ": a software stack" + (steps ? ", an ablation of " + std::to_string(steps) + " steps" : "")};
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
    const Calibration c = parse_calibration(root, Calibration{});
    int changed = 0;
    for (const ParamDef& d : param_defs()) changed += !c.is_default(d.id);
    return {kind, std::to_string(changed) + " of " + std::to_string(param_defs().size()) + " parameters set"};
  }
  if (kind == "end_to_end") {
    const auto cases = parse_end_to_end(root);
    return {kind, std::to_string(cases.size()) + " end-to-end errors of published runs (the band's end-to-end term)"};
  }
  if (kind == "accuracy_cases")
    return {kind, std::to_string(load_accuracy_cases(path).size()) + " end-to-end cases for moeperf accuracy"};
  if (kind == "measurements" && root.has("records")) {
    const auto recs = load_parts(path);
    int fit = 0;
    for (const auto& r : recs) fit += !r.check_only;
    return {kind, std::to_string(recs.size()) + " measurement records of parts (" + std::to_string(fit) + " to fit, " +
                      std::to_string(recs.size() - static_cast<size_t>(fit)) + " to check)"};
  }
  if (kind == "measurements") {
    root.allow_only({"kind", "scenario", "backend", "communicator", "ranks", "dims", "steps", "warmup", "layers", "machine",
                     "git_revision", "date", "ops", "expert_rows_histogram", "gates_passed", "notes"});
    root.at("ops").expect_object();
    load_parts(path);
    return {kind, std::to_string(root.at("ops").raw().size()) + " ops measured on " +
                      std::to_string(root.at("ranks").as_positive_int()) + " ranks (" + root.at("backend").as_string() + ")"};
  }
  if (kind == "histogram") {
    root.allow_only({"kind", "name", "source", "note", "counts"});
    return {kind, std::to_string(parse_histogram(root.at("counts")).size()) + " experts"};
  }
  if (kind == "sweep_grid") return {kind, std::to_string(load_sweep_grid(path).size()) + " points for moeperf sweep --grid"};
  if (kind == "kernel-patterns")
    return {kind, std::to_string(load_kernel_patterns(path).patterns.size()) +
                      " kernel-name patterns for reading traces (--patterns of calibrate and compare-trace)"};
  root.at("kind").fail("unknown kind \"" + kind + "\"");
}

namespace detail {

Dtype parse_dtype(const Node& n) {
  return n.as_enum<Dtype>({{"fp32", Dtype::fp32}, {"bf16", Dtype::bf16}, {"fp16", Dtype::fp16}, {"fp8", Dtype::fp8},
                           {"fp8_block", Dtype::fp8_block}, {"mxfp8", Dtype::mxfp8}, {"nvfp4", Dtype::nvfp4}});
}

GroupedKernel parse_grouped_kernel(const Node& n) {
  return n.as_enum<GroupedKernel>({{"ptr_array", GroupedKernel::ptr_array},
                                   {"contiguous", GroupedKernel::contiguous},
                                   {"multi_stream", GroupedKernel::multi_stream}});
}

std::vector<TensorClass> parse_tensor_classes(const Node& n) {
  std::vector<TensorClass> out;
  for (size_t i = 0; i < n.size(); ++i) {
    const TensorClass c = n[i].as_enum<TensorClass>({{"q_proj", TensorClass::q_proj}, {"kv_proj", TensorClass::kv_proj},
                                                     {"attn_out", TensorClass::attn_out}, {"out_proj", TensorClass::out_proj},
                                                     {"moe_mlpwi", TensorClass::moe_mlpwi},
                                                     {"moe_mlpwo", TensorClass::moe_mlpwo}, {"moe_act", TensorClass::moe_act},
                                                     {"mlp", TensorClass::mlp},
                                                     {"router", TensorClass::router}, {"norm", TensorClass::norm}});
    // Listed twice, a class would be cached twice or copied twice by one list and counted once by
    // another: the list is a set.
    if (std::find(out.begin(), out.end(), c) != out.end())
      n[i].fail(std::string("\"") + moeperf::to_string(c) + "\" is listed twice");
    out.push_back(c);
  }
  return out;
}

}  // namespace detail

}  // namespace moeperf::io
