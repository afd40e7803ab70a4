// Calibration profiles: writing a fit as a profile, and the shipped profiles built into the binary
// (calibration/profiles/*.json, embedded at configure time).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/io/detail/parsers.h"
#include "model/io/parts.h"
#include "model/study/calibrate.h"

namespace moeperf::io {

namespace {
// A bound as a person writes it (0.05, 1e-06), not std::to_string's six fixed decimals.
std::string shortest(double v) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", v);
  return out;
}
}  // namespace

namespace detail {

Calibration parse_calibration(const Node& n, const Calibration& base) {
  n.allow_only({"kind", "name", "source", "note", "description", "generation", "params", "residual_rms", "borrowed", "carried", "fit"});
  Calibration c = base;
  const Node p = n.at("params");
  p.expect_object();
  std::vector<std::string> names;
  for (const ParamDef& d : param_defs()) names.emplace_back(d.name);
  for (auto& [k, v] : p.raw().items()) {
    const Node x(v, p.file(), p.path() + "/" + k);
    const auto id = find_param(k);
    if (!id)
      x.fail("unknown parameter \"" + k + "\"" +
             (did_you_mean(k, names).empty() ? "; expected one of " + join_choices(names) : did_you_mean(k, names)));
    const ParamDef& d = param_def(*id);
    const double val = x.as_number();
    if (!std::isfinite(val) || val < d.min || val > d.max)
      x.fail("expected " + std::string(d.name) + " in [" + shortest(d.min) + ", " + shortest(d.max) + "] " +
             std::string(d.unit) + ", got " + v.dump());
    c.set(*id, val);
    c.borrowed.erase(*id);  // set here: borrowed (or carried) only if this file's own fields say so
    c.carried.erase(*id);
  }
  if (n.has("generation")) c.generation = n.at("generation").as_string();
  const std::string name = n.string_or("name", std::filesystem::path(n.file()).filename().string());
  // "(over BASE)" where the base still prices a parameter this file leaves out, or gives the band
  // its spreads; a file that sets every one and its spreads (a shipped profile inlined by `--set
  // calibration.params.X`) is named by itself.
  const bool complete = p.raw().size() == param_defs().size() && (n.has("residual_rms") || base.residual_rms.empty());
  c.profile = base.profile == "defaults" || complete ? name : name + " (over " + base.profile + ")";
  // A profile that stands alone takes its band's spreads from itself only (a class it has no
  // spread for has none), not from the base's.
  if (complete) c.residual_rms.clear();
  if (auto r = n.get("residual_rms")) {
    r->expect_object();
    for (auto& [k, v] : r->raw().items()) {
      const Node x(v, r->file(), r->path() + "/" + k);
      bool known = false;
      for (int i = 0; i < static_cast<int>(PartClass::kCount); ++i) known = known || k == to_string(static_cast<PartClass>(i));
      if (!known) x.fail("expected an op class (memory, host_copy, gemm, attention, collective, ep), got \"" + k + "\"");
      const double val = x.as_number();
      if (!std::isfinite(val) || val < 0) x.fail("expected a spread >= 0, got " + v.dump());
      c.residual_rms[k] = val;
    }
  }
  // Parameters the fit did not set from records of its own, each with a text: how it was borrowed,
  // or the profile it was carried from. Each must be one this file sets under params.
  auto read_notes = [&](const char* key, const char* what, const char* empty, std::map<Param, std::string>& into) {
    const auto b = n.get(key);
    if (!b) return;
    b->expect_object();
    for (auto& [k, v] : b->raw().items()) {
      const Node x(v, b->file(), b->path() + "/" + k);
      const auto id = find_param(k);
      if (!id) x.fail("unknown parameter \"" + k + "\"" + did_you_mean(k, names));
      if (!p.has(k.c_str()))
        x.fail(std::string("expected a parameter this file sets under params (a ") + what + " value is one of them), got \"" + k + "\"");
      const std::string text = x.as_string();
      if (text.empty()) x.fail(std::string("expected ") + empty + ", got an empty string");
      into[*id] = text;
    }
  };
  read_notes("borrowed", "borrowed", "how the value was borrowed", c.borrowed);
  read_notes("carried", "carried", "the name of the profile the value was carried from", c.carried);
  return c;
}

std::vector<Calibration::EndToEndCase> parse_end_to_end(const Node& n) {
  n.expect_object();
  n.allow_only({"kind", "description", "note", "cases_file", "mape", "cases"});
  if (!n.has("kind") || n.at("kind").as_string() != "end_to_end")
    n.fail("expected end-to-end errors (\"kind\": \"end_to_end\", from moeperf accuracy --out)");
  const Node cs = n.at("cases");
  if (!cs.is_array() || cs.size() == 0) cs.fail("expected a non-empty array of cases (moeperf accuracy --out writes one per published case)");
  std::vector<Calibration::EndToEndCase> out;
  for (size_t i = 0; i < cs.size(); ++i) {
    const Node c = cs[i];
    c.allow_only({"name", "scenario", "stack", "stack_overrides", "profile", "metric", "published", "predicted", "error", "step_ratio",
                  "source"});
    Calibration::EndToEndCase x;
    x.name = c.at("name").as_string();
    x.stack = c.at("stack").as_string();
    if (auto o = c.get("stack_overrides")) {
      if (!o->is_array()) o->fail("expected an array of \"field=value\" strings (the case's overrides of its stack)");
      x.overrides.emplace();
      for (size_t k = 0; k < o->size(); ++k) x.overrides->push_back((*o)[k].as_string());
    }
    x.step_ratio = c.at("step_ratio").as_positive_number();
    if (!std::isfinite(x.step_ratio)) c.at("step_ratio").fail("expected a finite ratio of measured to predicted step time");
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace detail

namespace {


const std::vector<std::pair<std::string, std::string>> kBuiltin = {
#include "builtin_profiles.inc"
};

const std::vector<std::pair<std::string, std::string>> kBuiltinEndToEnd = {
#include "builtin_end_to_end.inc"
};

}  // namespace

double round_sig(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

std::string calibration_profile_json(const FitReport& f, const std::vector<std::string>& files, const std::string& name,
                                     const std::string& start_name) {
  nlohmann::ordered_json j;
  j["kind"] = "calibration";
  j["name"] = name;
  const std::string gen = f.classes.empty() ? "" : f.classes.front().generation;
  j["generation"] = gen;
  j["description"] =
      "Written by moeperf calibrate: the cost model's parameters fitted to measurements of parts, class by class "
      "(bounded Levenberg-Marquardt on log errors; a quarter of each class's records, those whose ids hash lowest, "
      "held back unless the others cannot identify as many parameters without it or it alone shows how a "
      "parameter's term varies). Parameters no record constrains keep the starting profile's value (" +
      start_name + "), but for a GEMM dtype no record measures, which borrows the median of the generation's fitted "
      "GEMM fractions (listed under borrowed). Values kept from a starting profile of another generation, not at their "
      "defaults, are listed under carried with the profile they came from.";
  for (const ParamDef& d : param_defs()) j["params"][std::string(d.name)] = round_sig(f.fitted[d.id]);
  for (auto& [k, v] : f.fitted.residual_rms) j["residual_rms"][k] = round_sig(v, 4);
  for (auto& [p, how] : f.fitted.borrowed) j["borrowed"][std::string(param_def(p).name)] = how;
  for (auto& [p, from] : f.fitted.carried) j["carried"][std::string(param_def(p).name)] = from;
  nlohmann::ordered_json fit;
  fit["measurements"] = files;
  fit["start"] = start_name;
  for (const ClassFit& c : f.classes) {
    nlohmann::ordered_json cj;
    cj["class"] = to_string(c.cls);
    cj["records_fitted"] = c.fitted;
    cj["records_held_back"] = c.held_back;
    cj["records_checked"] = c.checked;
    for (int which = 0; which < 3; ++which) {
      const char* key = which == 0 ? "fitted" : which == 1 ? "held_back" : "checked";
      const ErrorStats b = error_stats(c.records, false, which), a = error_stats(c.records, true, which);
      if (a.n == 0) continue;
      cj["error"][key] = {{"median_before", round_sig(b.median, 3)}, {"worst_before", round_sig(b.worst, 3)},
                          {"median_after", round_sig(a.median, 3)}, {"worst_after", round_sig(a.worst, 3)}};
    }
    cj["rms_log_error"] = round_sig(c.rms_log_after, 4);
    cj["spread"] = round_sig(c.spread, 4);
    for (const ParamFit& p : c.params) {
      const ParamDef& d = param_def(p.param);
      nlohmann::ordered_json pj;
      pj["value"] = round_sig(p.after);
      pj["start"] = round_sig(p.before);
      pj["bounds"] = {d.min, d.max};
      if (!p.borrowed.empty())
        pj["fitted_on"] = "none: no record of this class moves it; borrowed: " + p.borrowed;
      else if (p.fitted_on.empty())
        pj["fitted_on"] = p.movers > 0 ? "none: " + std::to_string(p.movers) + (p.movers == 1 ? " fitted record moves" : " fitted records move") +
                                             " it, but they cannot tell it from the terms freed before it (its sensitivities "
                                             "are a combination of theirs; the level terms are freed first); kept from the start"
                                       : std::string("none: no record of this class moves it; kept from the start");
      else pj["fitted_on"] = p.fitted_on;
      cj["params"][std::string(d.name)] = pj;
    }
    for (const RecordFit& r : c.records) {
      nlohmann::ordered_json rj;
      rj["id"] = r.record->id;
      rj["use"] = r.record->check_only ? "check" : r.held_back ? "held_back" : "fit";
      rj["error_before"] = round_sig(r.before, 3);
      rj["error_after"] = round_sig(r.after, 3);
      cj["records"].push_back(rj);
    }
    fit["classes"].push_back(cj);
  }
  j["fit"] = fit;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

const std::vector<std::pair<std::string, std::string>>& builtin_profiles() { return kBuiltin; }

std::optional<Calibration> builtin_profile_named(const std::string& generation) {
  for (const auto& [name, text] : kBuiltin) {
    if (name != generation) continue;
    const detail::json doc = detail::json::parse(text);
    const detail::Node root(doc, "calibration/profiles/" + name + ".json (built in)", "");
    Calibration c = detail::parse_calibration(root, Calibration{});
    c.profile = name + " (calibration/profiles/" + name + ".json)";
    return c;
  }
  return std::nullopt;
}

std::string builtin_profile_names() {
  std::string names;
  for (const auto& [name, text] : kBuiltin) names += (names.empty() ? "" : ", ") + name;
  return names;
}

Calibration builtin_profile(const GpuSpec& gpu) { return builtin_profile_named(gpu_generation(gpu)).value_or(Calibration{}); }

EndToEndErrors load_end_to_end(const std::string& path) {
  detail::Refs refs;
  const detail::Node root = refs.open(path);
  return {detail::parse_end_to_end(root), path};
}

EndToEndErrors builtin_end_to_end() {
  // Parsed once: plan and sweep load thousands of scenarios.
  static const EndToEndErrors shipped = [] {
    for (const auto& [name, text] : kBuiltinEndToEnd) {
      if (name != "end-to-end") continue;
      const detail::json doc = detail::json::parse(text);
      const std::string shown = "calibration/accuracy/end-to-end.json";
      return EndToEndErrors{detail::parse_end_to_end(detail::Node(doc, shown + " (built in)", "")), shown};
    }
    return EndToEndErrors{};
  }();
  return shipped;
}

}  // namespace moeperf::io
