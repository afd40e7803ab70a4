#include "model/io/sweep.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "model/error.h"
#include "model/io/detail/json_node.h"
#include "model/io/detail/stacks.h"
#include "model/io/errors.h"
#include "model/io/scenario_schema.h"
#include "model/study/predict.h"

namespace moeperf::io {
namespace {

using detail::json;

// Points a sweep may have: beyond this a study is a plan (search), not an enumeration.
constexpr size_t kMaxPoints = 10'000'000;
// Values one range axis may have: a range is a study's knob (a few to a few hundred values); a
// hundred thousand is already past any sweep that finishes, and each value is a string held in memory.
constexpr size_t kMaxAxisValues = 100'000;

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::pair<std::string, std::string> split_assignment(const std::string& arg, const char* flag, const char* example) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw SpecError(std::string(flag) + " " + arg, "", std::string("expected PATH=") + example);
  return {trim(arg.substr(0, eq)), trim(arg.substr(eq + 1))};
}

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string number_text(double v) {
  char b[40];
  if (std::floor(v) == v && std::fabs(v) < 9e15)
    std::snprintf(b, sizeof b, "%.0f", v);
  else
    std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// ---- derive expressions: + - * / ( ), numbers, names (recursive descent)
class Expr {
 public:
  Expr(const std::string& text, std::function<double(const std::string&)> lookup) : t_(text), look_(std::move(lookup)) {}
  double eval() {
    const double v = sum();
    skip();
    if (i_ != t_.size()) throw std::invalid_argument("unexpected '" + t_.substr(i_, 1) + "' at character " + std::to_string(i_ + 1));
    return v;
  }

 private:
  void skip() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  double sum() {
    double v = product();
    for (;;) {
      skip();
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) {
        const char op = t_[i_++];
        const double r = product();
        v = op == '+' ? v + r : v - r;
      } else {
        return v;
      }
    }
  }
  double product() {
    double v = factor();
    for (;;) {
      skip();
      if (i_ < t_.size() && (t_[i_] == '*' || t_[i_] == '/')) {
        const char op = t_[i_++];
        const double r = factor();
        if (op == '/' && r == 0) throw std::invalid_argument("division by zero");
        v = op == '*' ? v * r : v / r;
      } else {
        return v;
      }
    }
  }
  double factor() {
    skip();
    if (i_ >= t_.size()) throw std::invalid_argument("the expression ends where a value was expected");
    if (++depth_ > 64) throw std::invalid_argument("nested deeper than 64 levels");
    double v = 0;
    const char c = t_[i_];
    if (c == '(') {
      ++i_;
      v = sum();
      skip();
      if (i_ >= t_.size() || t_[i_] != ')') throw std::invalid_argument("missing ')'");
      ++i_;
    } else if (c == '-') {
      ++i_;
      v = -factor();
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      // strtod, not stod: a number past double range ("1e999") is an input error, not out_of_range.
      const char* b = t_.c_str() + i_;
      char* e = nullptr;
      errno = 0;
      v = std::strtod(b, &e);
      if (e == b) throw std::invalid_argument("a malformed number at character " + std::to_string(i_ + 1));
      if (!std::isfinite(v) || errno == ERANGE) {
        errno = 0;
        throw std::invalid_argument("a number out of range at character " + std::to_string(i_ + 1));
      }
      i_ += static_cast<size_t>(e - b);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t a = i_;
      while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_' || t_[i_] == '.')) ++i_;
      v = look_(t_.substr(a, i_ - a));
    } else {
      throw std::invalid_argument("unexpected '" + std::string(1, c) + "' at character " + std::to_string(i_ + 1));
    }
    --depth_;
    return v;
  }
  const std::string& t_;
  std::function<double(const std::string&)> look_;
  size_t i_ = 0;
  int depth_ = 0;
};

// The short names of derive expressions.
std::string field_of(const std::string& name) {
  static const std::map<std::string, std::string> alias = {
      {"tp", "parallelism.tp"},   {"cp", "parallelism.cp"},     {"pp", "parallelism.pp"},
      {"vpp", "parallelism.vpp"}, {"ep", "parallelism.ep"},     {"etp", "parallelism.etp"},
      {"fsdp", "parallelism.fsdp"}, {"dp", "parallelism.dp"},   {"micro_batch", "batch.micro_batch"},
      {"global_batch", "batch.global_batch"}, {"seq_len", "batch.seq_len"}};
  const auto it = alias.find(name);
  return it == alias.end() ? name : it->second;
}

// A name of a derive expression that nothing gives a value (a misspelt name, or a field with no
// numeric default): the same at every point unless a grid row or axis sets it.
struct UnknownName : std::invalid_argument {
  UnknownName(const std::string& what, std::string p) : std::invalid_argument(what), path(std::move(p)) {}
  std::string path;
};

// A value as a number: a number, a boolean as 1 or 0, a time ("10 us") in seconds.
std::optional<double> numeric(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_string()) {
    if (const auto x = number(v.get<std::string>())) return *x;
    try {
      return detail::Node(v, where, "").as_time().value();
    } catch (const InputError&) {
    }
  }
  return std::nullopt;
}

// A field's number: in `eff`, the scenario file with the point's overrides applied as the loader
// applies them (the last one wins; a step through a file reference inlines the file; a named stack
// becomes the base of an object they reach into), a field of a referenced file read through its
// reference, a stack file's {"value": V, ...} unwrapped; else (a stack field) the stack the
// scenario names or builds on; else the schema's default.
double field_value(const std::string& file, json& eff, const std::string& name) {
  const std::string path = field_of(name);
  if (const json* cur = detail::scenario_field(eff, path, file); cur && !cur->is_null()) {
    if (const auto v = numeric(*cur, file)) return *v;
    throw std::invalid_argument(path + " is " + cur->dump() + ", not a number");
  }
  // A stack field the scenario does not set itself is its stack's (a name or base it builds on),
  // not the schema's default.
  if (path.rfind("stack.", 0) == 0) {
    const json ref = eff.contains("stack") ? eff["stack"] : json();
    if (const json v = detail::stack_field_json(ref, file, path.substr(6)); !v.is_null()) {
      if (const auto x = numeric(v, file)) return *x;
      throw std::invalid_argument(path + " of the scenario's stack is " + v.dump() + ", not a number");
    }
  }
  for (const FieldDoc& f : scenario_fields())
    if (f.path == path && !f.default_json.empty()) {
      const json d = json::parse(f.default_json);
      if (d.is_number()) return d.get<double>();
    }
  throw UnknownName("no value for \"" + name + "\": neither the point nor " + file + " gives " + path +
                        ", and it has no numeric default",
                    path);
}

std::string fixed(double v, int prec) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

// Appends ",value" (two appends: GCC 12 warns falsely on "," + std::string under -Werror=restrict).
void cell(std::string& line, const std::string& v) {
  line += ',';
  line += v;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The columns naming a point: every path a grid point or an axis sets, in order of appearance.
std::vector<std::string> point_columns(const SweepSpec& sp) {
  std::vector<std::string> cols;
  auto add = [&](const std::string& p) {
    if (std::find(cols.begin(), cols.end(), p) == cols.end()) cols.push_back(p);
  };
  for (const auto& g : sp.grid)
    for (const auto& o : g) add(o.path);
  for (const auto& a : sp.axes) add(a.path);
  return cols;
}

std::string value_at(const std::vector<Override>& os, const std::string& path) {
  std::string v;
  for (const auto& o : os)
    if (o.path == path) v = o.value;
  return v;
}

}  // namespace

SweepAxis parse_vary(const std::string& arg) {
  const auto [path, rhs] = split_assignment(arg, "--vary", "V1,V2,... or PATH=A..B*F or PATH=A..B+S");
  SweepAxis a{path, {}};
  const auto dots = rhs.find("..");
  const auto op = rhs.find_first_of("*+", dots == std::string::npos ? 0 : dots);
  if (dots != std::string::npos && op != std::string::npos) {
    const auto lo = number(rhs.substr(0, dots)), hi = number(rhs.substr(dots + 2, op - dots - 2)),
               by = number(rhs.substr(op + 1));
    const bool geo = rhs[op] == '*';
    if (!lo || !hi || !by || (geo && (*by <= 1 || *lo <= 0)) || (!geo && *by <= 0) || *hi < *lo)
      throw SpecError("--vary " + arg, "", std::string("expected a range A..B") + (geo ? "*F with 0 < A <= B and F > 1" : "+S with A <= B and S > 0") +
                                               ", e.g. gpus=128..4096*2 or parallelism.ep=8..64+8");
    // Count the values before making them: a range of 10^200 steps is refused at once, not after
    // ten million strings; and the i-th value is A + i*S, so a step below the precision of A
    // (1e90..1e91+2) cannot spin in place.
    const double steps = geo ? std::log(*hi / *lo) / std::log(*by) : (*hi - *lo) / *by;
    if (!(steps < static_cast<double>(kMaxAxisValues)))
      throw SpecError("--vary " + arg, "", "more than " + std::to_string(kMaxAxisValues) + " values in the range");
    const auto n = static_cast<size_t>(steps * (1 + 1e-12) + 1e-9) + 1;
    double v = *lo;
    for (size_t i = 0; i < n; ++i, v = geo ? v * *by : *lo + static_cast<double>(i) * *by) {
      if (v > *hi * (1 + 1e-12)) break;
      std::string text = number_text(v);
      if (!a.values.empty() && text == a.values.back())
        throw SpecError("--vary " + arg, "", "the step " + number_text(*by) + " is below the precision of the values it steps (" + text + ")");
      a.values.push_back(std::move(text));
    }
    return a;
  }
  size_t s = 0;
  for (;;) {
    const size_t e = rhs.find(',', s);
    const std::string v = trim(rhs.substr(s, e == std::string::npos ? std::string::npos : e - s));
    if (v.empty()) throw SpecError("--vary " + arg, "", "an empty value in the list");
    a.values.push_back(v);
    if (e == std::string::npos) break;
    s = e + 1;
  }
  return a;
}

DeriveRule parse_derive(const std::string& arg) {
  const auto [path, expr] = split_assignment(arg, "--derive", "EXPRESSION, e.g. parallelism.fsdp=gpus/(ep*tp*pp*dp)");
  try {
    (void)Expr(expr, [](const std::string&) { return 1.0; }).eval();  // the syntax, with every name 1
  } catch (const std::invalid_argument& e) {
    throw SpecError("--derive " + arg, "", e.what());
  }
  return {path, expr};
}

std::vector<std::vector<Override>> load_sweep_grid(const std::string& path) {
  const json doc = detail::read_json_file(path);
  const detail::Node root(doc, path, "");
  root.expect_object();
  root.allow_only({"kind", "description", "points"});
  if (root.at("kind").as_string() != "sweep_grid") root.at("kind").fail("expected \"sweep_grid\"");
  const detail::Node pts = root.at("points");
  if (!pts.is_array() || pts.size() == 0) pts.fail("expected a non-empty array of points ({\"parallelism.ep\": 8, ...})");
  std::vector<std::vector<Override>> out;
  for (size_t i = 0; i < pts.size(); ++i) {
    const detail::Node p = pts[i];
    p.expect_object();
    std::vector<Override> os;
    for (const auto& [k, v] : p.raw().items()) {
      if (v.is_object() || v.is_array()) p.at(k.c_str()).fail("expected a value (a number, string or boolean) for --set " + k);
      os.push_back({k, v.is_string() ? v.get<std::string>() : v.dump(), "--grid"});
    }
    out.push_back(std::move(os));
  }
  return out;
}

size_t sweep_size(const SweepSpec& sp) {
  size_t n = std::max<size_t>(sp.grid.size(), 1);
  for (const auto& a : sp.axes) {
    if (a.values.empty()) return 0;
    if (n > kMaxPoints / a.values.size())
      throw SpecError("--vary", "", "the sweep has more than " + std::to_string(kMaxPoints) + " points");
    n *= a.values.size();
  }
  return n;
}

std::vector<Override> sweep_point(const SweepSpec& sp, size_t i) {
  size_t per_grid = 1;
  for (const auto& a : sp.axes) per_grid *= a.values.size();
  std::vector<Override> out;
  if (!sp.grid.empty()) out = sp.grid[i / per_grid];
  size_t rem = i % per_grid;
  std::vector<Override> axes(sp.axes.size());
  for (size_t k = sp.axes.size(); k-- > 0;) {
    const auto& a = sp.axes[k];
    axes[k] = {a.path, a.values[rem % a.values.size()], "--vary"};
    rem /= a.values.size();
  }
  out.insert(out.end(), axes.begin(), axes.end());
  return out;
}

namespace {

// Point i's overrides in r (its values, what the derive rules set) and as the loader takes them:
// the --set list, the values, the derived ones. Empty with r infeasible when a rule cannot be
// evaluated; a base file that cannot be read throws.
std::optional<std::vector<Override>> point_overrides(const SweepSpec& sp, SweepRow& r, bool unknown_names_throw = false) {
  r.point = sweep_point(sp, r.index);
  std::vector<Override> sets = sp.sets;
  sets.insert(sets.end(), r.point.begin(), r.point.end());
  if (sp.derive.empty()) return sets;
  // The scenario as this point loads it, built once: each rule reads it, and what a rule sets is
  // applied to it before the next rule reads.
  json eff = detail::read_json_file(sp.scenario);
  for (const Override& o : sets) detail::apply_scenario_override(eff, o, sp.scenario);
  for (const DeriveRule& d : sp.derive) {
    double v = 0;
    try {
      v = Expr(d.expr, [&](const std::string& n) { return field_value(sp.scenario, eff, n); }).eval();
    } catch (const std::invalid_argument& e) {
      if (unknown_names_throw && dynamic_cast<const UnknownName*>(&e)) throw;
      r.status = "infeasible";
      r.reason = "--derive " + d.path + "=" + d.expr + ": " + e.what();
      return std::nullopt;
    }
    r.derived.push_back({d.path, number_text(v), "--derive"});
    sets.push_back(r.derived.back());
    detail::apply_scenario_override(eff, sets.back(), sp.scenario);
  }
  return sets;
}

}  // namespace

void check_sweep(const SweepSpec& sp) {
  if (sweep_size(sp) == 0) return;
  SweepRow r;
  try {
    const auto sets = point_overrides(sp, r, /*unknown_names_throw=*/true);
    if (sets) load_scenario(sp.scenario, *sets);
  } catch (const UnknownName& e) {
    // A name no point can give a value (no grid row or axis sets its path): every row would say so.
    bool somewhere = false;
    for (const auto& g : sp.grid)
      for (const auto& o : g) somewhere = somewhere || o.path == e.path;
    for (const auto& a : sp.axes) somewhere = somewhere || a.path == e.path;
    if (!somewhere) throw SpecError(sp.scenario, "", std::string("--derive: ") + e.what() + " (every point of the sweep has it)", SpecError::Kind::shape);
  } catch (const SpecError& e) {
    // The same for every point: the paths are every point's, only values change (an unknown key
    // is a misspelt path; a missing top-level field no override sets stays missing).
    if (e.kind() == SpecError::Kind::shape ||
        (e.kind() == SpecError::Kind::missing && e.file() == sp.scenario && e.json_path().empty()))
      throw SpecError(e.file(), e.json_path(), e.detail() + " (every point of the sweep has it)", e.kind());
    // Otherwise a value of the base (or of a file it names) that no point changes: when the other
    // points fail with the same error at the same place, it is the base's, not a row's (every point
    // up to 256, else 256 spread over the sweep).
    const size_t n = sweep_size(sp), tries = std::min<size_t>(n, 256);
    bool alike = true;
    for (size_t k = 1; k < tries && alike; ++k) {
      SweepRow other;
      other.index = n <= 256 ? k : k * (n - 1) / (tries - 1);
      try {
        const auto sets = point_overrides(sp, other);
        if (!sets) {
          alike = false;
          break;
        }
        load_scenario(sp.scenario, *sets);
        alike = false;
      } catch (const SpecError& o) {
        alike = o.file() == e.file() && o.json_path() == e.json_path() && o.detail() == e.detail();
      } catch (const std::exception&) {
        alike = false;
      }
    }
    if (alike)
      throw SpecError(e.file(), e.json_path(),
                      e.detail() + (n <= 256 ? " (every point of the sweep has it)" : " (the 256 points checked have it)"), e.kind());
  } catch (const InputError&) {
    // A value of this point (a layout rule): a row of its own, as run_point gives it.
  }
  // A varied value that is wrong whatever the others are (its type or range: "abc" or -8 for a
  // count, a schedule no stack knows) is the user's typo: exit 2 naming it, not a row of the sweep
  // marked infeasible. Each value is loaded alone over the --set list (a rule between it and other
  // fields is left to its rows). An axis of more than 64 values (a generated range) has its first,
  // last, smallest and largest checked; a grid's first 4,096 points.
  auto check_alone = [&](const std::vector<Override>& point) {
    std::vector<Override> sets = sp.sets;
    sets.insert(sets.end(), point.begin(), point.end());
    try {
      load_scenario(sp.scenario, sets);
    } catch (const SpecError& e) {
      if (e.kind() != SpecError::Kind::type) return;
      for (const Override& o : point) {
        std::string pointer = "/" + o.path;
        std::replace(pointer.begin(), pointer.end(), '.', '/');
        if (e.json_path() == pointer || e.json_path().rfind(pointer + "/", 0) == 0) throw;
      }
    } catch (const InputError&) {
    }
  };
  for (const SweepAxis& a : sp.axes) {
    std::vector<std::string> vals = a.values;
    if (vals.size() > 64) {
      auto num = [](const std::string& v) {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        return end && *end == '\0' ? x : std::numeric_limits<double>::quiet_NaN();
      };
      auto lo = a.values.begin(), hi = a.values.begin();
      for (auto it = a.values.begin(); it != a.values.end(); ++it) {
        if (num(*it) < num(*lo)) lo = it;
        if (num(*it) > num(*hi)) hi = it;
      }
      vals = {a.values.front(), a.values.back(), *lo, *hi};
    }
    for (const std::string& v : vals) check_alone({Override{a.path, v, "--vary"}});
  }
  for (size_t g = 0; g < sp.grid.size() && g < 4096; ++g) {
    try {
      check_alone(sp.grid[g]);
    } catch (const SpecError& e) {
      throw SpecError(e.file(), e.json_path(), e.detail() + " (the grid's point " + std::to_string(g) + ", /points/" + std::to_string(g) + ")", e.kind());
    }
  }
}

SweepRow run_point(const SweepSpec& sp, size_t i) {
  SweepRow r;
  r.index = i;
  try {
    const std::optional<std::vector<Override>> ov = point_overrides(sp, r);
    if (!ov) return r;
    const std::vector<Override>& sets = *ov;
    const Scenario s = load_scenario(sp.scenario, sets);
    const StepReport rep = predict(s, s.calibration);
    r.predicted = true;
    r.step_time_s = rep.step_time.value();
    r.step_time_low_s = rep.step_low();
    r.step_time_high_s = rep.step_high();
    r.tokens_per_s_per_gpu = rep.tokens_per_s_per_gpu;
    r.model_tflops_per_gpu = rep.model_tflops_per_gpu;
    r.mfu = rep.mfu;
    r.exposed_comm_fraction = rep.exposed_comm_fraction;
    r.peak_memory_gb = rep.memory.hbm_total.value() / 1e9;
    r.hbm_capacity_gb = rep.memory.hbm_capacity.value() / 1e9;
    r.cluster_tokens_per_s = rep.cluster_tokens_per_s;
    r.gpus_bought = rep.gpus_bought;
    if (sp.train_tokens > 0) {
      const TrainingBudget b = training_budget(rep, sp.train_tokens);
      r.time_to_train_days = b.seconds / 86400;
      r.gpu_hours_held = b.seconds / 3600 * static_cast<double>(rep.gpus_bought);
      r.cost_to_train_usd = b.usd;
    }
    if (rep.memory.fits) {
      r.status = "ok";
    } else {
      r.status = "infeasible";
      r.reason = !rep.memory.fits_hbm ? "memory: needs " + fixed(r.peak_memory_gb, 1) + " GB of HBM per GPU, " +
                                            fixed(r.hbm_capacity_gb, 1) + " GB usable (short by " +
                                            fixed(rep.memory.hbm_shortfall.value() / 1e9, 1) + " GB)"
                                      : "memory: host offload short by " + fixed(rep.memory.host_shortfall.value() / 1e9, 1) + " GB";
    }
  } catch (const InputError& e) {
    r.status = "infeasible";
    r.reason = e.what();
  } catch (const std::exception& e) {
    r.status = "failed";
    r.reason = e.what();
  }
  return r;
}

std::string sweep_csv_header(const SweepSpec& sp) {
  std::string h = "index";
  for (const auto& c : point_columns(sp)) cell(h, csv_field(c));
  for (const auto& d : sp.derive) cell(h, csv_field(d.path));
  h += ",status,step_time_s,step_time_low_s,step_time_high_s,tokens_per_s_per_gpu,model_tflops_per_gpu,mfu,"
       "exposed_comm_fraction,peak_memory_gb,hbm_capacity_gb,cluster_tokens_per_s,gpus_bought";
  if (sp.train_tokens > 0) h += ",time_to_train_days,gpu_hours_held,cost_to_train_usd";
  h += ",reason\n";
  return h;
}

std::string sweep_csv_key(const SweepSpec& sp, size_t i) {
  const std::vector<Override> point = sweep_point(sp, i);
  std::string l = std::to_string(i);
  for (const auto& c : point_columns(sp)) cell(l, csv_field(value_at(point, c)));
  return l + ",";
}

std::string sweep_csv_row(const SweepSpec& sp, const SweepRow& r) {
  std::string l = std::to_string(r.index);
  for (const auto& c : point_columns(sp)) cell(l, csv_field(value_at(r.point, c)));
  for (const auto& d : sp.derive) cell(l, csv_field(value_at(r.derived, d.path)));
  cell(l, r.status);
  if (r.predicted) {
    for (double v : {r.step_time_s, r.step_time_low_s, r.step_time_high_s}) cell(l, fixed(v, 6));
    cell(l, fixed(r.tokens_per_s_per_gpu, 1) + "," + fixed(r.model_tflops_per_gpu, 1) + "," + fixed(r.mfu, 4) + "," +
         fixed(r.exposed_comm_fraction, 4) + "," + fixed(r.peak_memory_gb, 2) + "," + fixed(r.hbm_capacity_gb, 2) + "," +
         fixed(r.cluster_tokens_per_s, 0) + "," + std::to_string(r.gpus_bought));
    if (sp.train_tokens > 0) {
      cell(l, fixed(r.time_to_train_days, 2));
      cell(l, fixed(r.gpu_hours_held, 2));
      cell(l, r.cost_to_train_usd ? fixed(*r.cost_to_train_usd, 2) : std::string());
    }
  } else {
    l += std::string(sp.train_tokens > 0 ? 14 : 11, ',');
  }
  return l + "," + csv_field(r.reason) + "\n";
}

std::string sweep_jsonl_row(const SweepRow& r) {
  json j = json::object();
  j["index"] = r.index;
  json p = json::object(), d = json::object();
  for (const auto& o : r.point) p[o.path] = o.value;
  for (const auto& o : r.derived) d[o.path] = o.value;
  j["point"] = p;
  j["derived"] = d;
  j["status"] = r.status;
  if (r.predicted) {
    auto num = [](double v, int prec) { return std::isfinite(v) ? json::parse(fixed(v, prec)) : json(nullptr); };
    j["step_time_s"] = num(r.step_time_s, 6);
    j["step_time_low_s"] = num(r.step_time_low_s, 6);
    j["step_time_high_s"] = num(r.step_time_high_s, 6);
    j["tokens_per_s_per_gpu"] = num(r.tokens_per_s_per_gpu, 1);
    j["model_tflops_per_gpu"] = num(r.model_tflops_per_gpu, 1);
    j["mfu"] = num(r.mfu, 4);
    j["exposed_comm_fraction"] = num(r.exposed_comm_fraction, 4);
    j["peak_memory_gb"] = num(r.peak_memory_gb, 2);
    j["hbm_capacity_gb"] = num(r.hbm_capacity_gb, 2);
    j["cluster_tokens_per_s"] = num(r.cluster_tokens_per_s, 0);
    j["gpus_bought"] = r.gpus_bought;
    if (r.time_to_train_days > 0) j["time_to_train_days"] = num(r.time_to_train_days, 2);
    if (r.time_to_train_days > 0) j["gpu_hours_held"] = num(r.gpu_hours_held, 2);
    if (r.cost_to_train_usd) j["cost_to_train_usd"] = num(*r.cost_to_train_usd, 2);
  }
  if (!r.reason.empty()) j["reason"] = r.reason;
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace moeperf::io
