// moeperf calibrate: the cost model's efficiency parameters fitted to measurements of parts
// (published records under calibration/published/, or moeperf run --out), class by class, with
// the errors before and after, the fitted values with their bounds and the records still far off.
#include <algorithm>
#include <tuple>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "cli/commands.h"
#include "cli/trace.h"
#include "model/error.h"
#include "model/io/parts.h"
#include "model/study/calibrate.h"

namespace moeperf::cli {
namespace {

std::string pct(double v) { return fmt(100 * v, 1) + " %"; }
std::string signed_pct(double v) { return (v > 0 ? "+" : "") + pct(v); }

void print_class(const ClassFit& c, double far) {
  std::printf("\n%s (%s): %d fitted, %d held back, %d checked only; %d iterations\n", to_string(c.cls), c.generation.c_str(),
              c.fitted, c.held_back, c.checked, c.iterations);
  std::printf("  %-10s %9s %9s %9s %9s\n", "|error|", "median", "-> after", "worst", "-> after");
  for (int which = 0; which < 3; ++which) {
    const ErrorStats b = error_stats(c.records, false, which), a = error_stats(c.records, true, which);
    if (a.n == 0) continue;
    std::printf("  %-10s %9s %9s %9s %9s\n", which == 0 ? "fitted" : which == 1 ? "held back" : "checked", pct(b.median).c_str(),
                pct(a.median).c_str(), pct(b.worst).c_str(), pct(a.worst).c_str());
  }
  std::printf("  %-24s %11s %11s  %-20s %s\n", "parameter", "start", "fitted", "bounds", "fitted on");
  for (const ParamFit& p : c.params) {
    const ParamDef& d = param_def(p.param);
    char bounds[64];
    std::snprintf(bounds, sizeof bounds, "[%g, %g] %s", d.min, d.max, std::string(d.unit).c_str());
    std::string on = !p.borrowed.empty()  ? "- (borrowed: " + p.borrowed + ")"
                     : !p.fitted_on.empty() ? std::to_string(p.fitted_on.size()) + " records"
                     : p.movers > 0    ? "- (kept: the fitted records cannot tell it from the terms before it)"
                                       : "- (no record moves it)";
    const bool at_bound = !p.fitted_on.empty() && (p.after <= d.min || p.after >= d.max);
    std::printf("  %-24s %11.4g %11.4g  %-20s %s%s\n", std::string(d.name).c_str(), p.before, p.after, bounds, on.c_str(),
                at_bound ? " (at its bound)" : "");
  }
  std::vector<const RecordFit*> off;
  for (const RecordFit& r : c.records)
    if (std::abs(r.after) > far) off.push_back(&r);
  std::sort(off.begin(), off.end(), [](const RecordFit* a, const RecordFit* b) { return std::abs(a->after) > std::abs(b->after); });
  if (off.empty()) {
    std::printf("  every record within %s after the fit\n", pct(far).c_str());
    return;
  }
  std::printf("  far off after the fit (|error| > %s): the form cannot reach them\n", pct(far).c_str());
  for (const RecordFit* r : off)
    std::printf("    %-52s %9s  %s%s%s\n", r->record->id.c_str(), signed_pct(r->after).c_str(),
                r->record->check_only ? "checked only" : r->held_back ? "held back" : "fitted",
                r->record->why.empty() ? "" : ": ", r->record->why.c_str());
}

struct TraceInputs {
  std::vector<std::string> files;
  TraceFlags flags;
  std::string gpu, system, records_out;
};

// --require-held-back: every class with held-back records must predict them within `bound`
// (median error after the fit) and better than before it. Prints each class's verdict.
bool held_back_holds(const FitReport& f, double bound) {
  bool ok = true;
  std::printf("\nheld-back check (median after the fit <= %s and below the median before):\n", pct(bound).c_str());
  for (const ClassFit& c : f.classes) {
    const ErrorStats b = error_stats(c.records, false, 1), a = error_stats(c.records, true, 1);
    if (a.n == 0) {
      std::printf("  %-12s no held-back record\n", to_string(c.cls));
      continue;
    }
    const bool holds = a.median <= bound && a.median < b.median;
    ok = ok && holds;
    std::printf("  %-12s %s -> %s over %d record%s: %s\n", to_string(c.cls), pct(b.median).c_str(), pct(a.median).c_str(), a.n,
                a.n == 1 ? "" : "s", holds ? "holds" : a.median > bound ? "FAILS (above the bound)" : "FAILS (the fit did not lower it)");
  }
  return ok;
}

// --carry PROFILE:PARAM[,PARAM...]: the profile file (read here, before the records) and the
// parameters taken from it, each once over all the flags; a profile of the generation being
// fitted carries nothing (--start starts from it).
struct Carry {
  std::string file;
  Calibration from;
  std::vector<Param> params;
};
std::vector<Carry> parse_carry(const std::vector<std::string>& flags, const std::string& generation) {
  std::vector<Carry> v;
  std::set<Param> seen;
  if (!flags.empty() && generation.empty())
    throw InputError("--carry needs --generation: a carried value starts the fit of one GPU generation");
  for (const std::string& c : flags) {
    const size_t colon = c.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == c.size())
      throw InputError("--carry " + c + ": expected PROFILE.json:PARAM[,PARAM...] (e.g. calibration/profiles/blackwell.json:ep_api_copy_passes)");
    Carry x;
    x.file = c.substr(0, colon);
    std::string list = c.substr(colon + 1);
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string n = list.substr(at, comma - at);
      const std::optional<Param> p = find_param(n);
      if (!p) throw InputError("--carry " + c + ": unknown parameter \"" + n + "\" (moeperf params lists them)");
      if (!seen.insert(*p).second) throw InputError("--carry " + c + ": " + n + " is carried twice");
      x.params.push_back(*p);
      at = comma + 1;
    }
    x.from = io::load_calibration(x.file);
    if (x.from.generation == generation)
      throw InputError("--carry " + c + ": " + x.file + " is a " + generation +
                       " profile, the generation being fitted: name it with --start to start from it");
    // What the profile itself took from elsewhere: carried from the generation being fitted is that
    // generation's own value, and a borrowed one is no measurement to carry.
    for (Param p : x.params) {
      const std::string n(param_def(p).name);
      if (auto it = x.from.carried.find(p); it != x.from.carried.end() && it->second == generation)
        throw InputError("--carry " + c + ": " + x.file + "'s " + n + " is carried there from the " + generation +
                         " profile, the generation being fitted");
      if (x.from.borrowed.count(p))
        throw InputError("--carry " + c + ": " + x.file + "'s " + n + " is borrowed there, not fitted: there is no measurement to carry");
    }
    v.push_back(std::move(x));
  }
  return v;
}

int cmd_calibrate(const std::vector<std::string>& files, const TraceInputs& traces, const std::string& generation,
                  const std::string& start_file, const std::vector<std::string>& carry_flags, const std::string& out,
                  const std::string& name, double far, double require_held_back) {
  std::vector<Carry> carries = parse_carry(carry_flags, generation);
  std::vector<std::string> inputs = files;
  inputs.insert(inputs.end(), traces.files.begin(), traces.files.end());
  inputs.insert(inputs.end(), {start_file, traces.gpu, traces.system});
  for (const Carry& c : carries) inputs.push_back(c.file);
  if (!out.empty()) check_output_path("--out", out, inputs);
  if (!traces.records_out.empty()) check_output_path("--records-out", traces.records_out, inputs);
  if (!out.empty() && !traces.records_out.empty() && std::filesystem::weakly_canonical(std::filesystem::absolute(out)) ==
                                                         std::filesystem::weakly_canonical(std::filesystem::absolute(traces.records_out)))
    throw InputError("--out and --records-out name the same file: " + out);
  if (files.empty() && traces.files.empty()) throw InputError("nothing to fit: name measurements files, or a profile with --trace");
  // --gpu and --system are read into the trace's records later: say here when one is the other kind.
  for (const auto& [flag, file, kind] : {std::tuple<const char*, std::string, const char*>{"--gpu", traces.gpu, "gpu"},
                                         {"--system", traces.system, "system"}}) {
    if (file.empty()) continue;
    const io::Validated v = io::validate_file(file);
    if (v.kind != kind)
      throw InputError(std::string(flag) + " " + file + ": expected a \"" + kind + "\" file, got a \"" + v.kind + "\" file");
  }
  if (!traces.records_out.empty() && traces.files.size() != 1) throw InputError("--records-out writes the records of one --trace");
  Calibration start;
  std::string start_name = "defaults";
  if (!start_file.empty()) {
    start = io::load_calibration(start_file);
    start_name = start.profile;
  }
  std::vector<PartRecord> records;
  std::map<std::string, Calibration> start_of;  // a file's own "calibration", for its records' generation
  std::map<std::string, std::string> id_file;  // a record id -> the file that gave it first
  for (const auto& f : files) {
    auto r = io::load_parts(f);
    for (const PartRecord& x : r)
      if (const auto [it, fresh] = id_file.emplace(x.id, f); !fresh)
        throw InputError(f + ": record id \"" + x.id + "\" is " + it->second + "'s too (a file named twice, or two files "
                         "with the same record): each record must be fitted once");
    if (auto c = io::parts_calibration(f, start); c && !r.empty()) {
      const std::string g = r.front().generation;
      if (start_of.count(g)) throw InputError(f + ": a second file with a \"calibration\" for " + g + "; fit them apart");
      start_of[g] = *c;
      std::printf("%s: its \"calibration\" (%s) starts the fit of %s\n", f.c_str(), c->profile.c_str(), g.c_str());
    }
    std::move(r.begin(), r.end(), std::back_inserter(records));
  }
  // Traces: their kernels with a shape, as records of the same format (--records-out: written
  // with the profile, once every check has passed: a refused run writes nothing).
  std::string records_text;
  for (const std::string& f : traces.files) {
    TraceFlags tf = traces.flags;
    tf.file = f;
    const io::MeasuredTrace t = read_trace(tf);
    print_trace_summary(t, 20);
    std::vector<std::string> notes;
    const nlohmann::json doc = io::trace_records_document(t, traces.gpu, traces.system, &notes);
    for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
    auto r = io::parts_from_document(doc, f + " (records)");
    std::printf("  %zu record%s from the trace enter the fit\n\n", r.size(), r.size() == 1 ? "" : "s");
    if (!traces.records_out.empty()) records_text = doc.dump(2) + "\n";
    std::move(r.begin(), r.end(), std::back_inserter(records));
  }
  if (records.empty())
    throw InputError(traces.files.empty() ? "no record to fit in the files given"
                                          : "no record to fit: the trace's kernels carry no shape the model can price (see above)");
  std::map<std::string, int> per_gen;
  for (const PartRecord& r : records) per_gen[r.generation] += 1;
  std::vector<std::string> gens;
  if (!generation.empty()) {
    if (!per_gen.count(generation)) {
      std::string have;
      for (auto& [g, n] : per_gen) have += (have.empty() ? "" : ", ") + g;
      throw InputError("--generation " + generation + ": no record is of that GPU generation (the files hold " + have + ")");
    }
    gens = {generation};
  } else {
    for (auto& [g, n] : per_gen) gens.push_back(g);
  }
  if (!out.empty() && gens.size() != 1)
    throw InputError("--out writes the profile of one GPU generation; the records are of " + std::to_string(gens.size()) +
                     ": name one with --generation");
  // Carried values start the fit as the start's own would: a parameter no record of the fitted
  // generation moves keeps the value, and the profile lists it as carried from the other one.
  auto apply_carries = [&](Calibration& cal) {
    for (const Carry& c : carries)
      for (Param p : c.params) {
        cal.set(p, c.from[p]);
        const auto it = c.from.carried.find(p);
        cal.carried[p] = it != c.from.carried.end() ? it->second : c.from.profile;
      }
  };
  apply_carries(start);
  for (auto& [g, c] : start_of) apply_carries(c);
  for (size_t i = 0; i < carries.size(); ++i) {
    std::string names;
    for (Param p : carries[i].params) names += (names.empty() ? "" : ", ") + std::string(param_def(p).name);
    start_name += (i == 0 ? ", with " : "; ") + names + " carried from " + carries[i].from.profile;
  }
  std::printf("calibrate: %zu records from %zu file%s; start: %s\n", records.size(), files.size() + traces.files.size(),
              files.size() + traces.files.size() > 1 ? "s" : "", start_name.c_str());
  for (const Carry& c : carries)
    for (Param p : c.params)
      std::printf("  starts at %s = %g from %s (%s): kept, and listed as carried, where no record moves it\n",
                  std::string(param_def(p).name).c_str(), c.from[p], c.from.profile.c_str(), c.file.c_str());
  FitReport last;
  bool held = true;
  for (const std::string& g : gens) {
    std::printf("\n== GPU generation %s: %d records ==\n", g.c_str(), per_gen[g]);
    last = fit_parts(records, start_of.count(g) ? start_of[g] : start, g);
    for (const ClassFit& c : last.classes) print_class(c, far);
    if (require_held_back > 0) held = held_back_holds(last, require_held_back) && held;
  }
  if (!traces.records_out.empty()) {
    write_atomically(traces.records_out, records_text);
    std::printf("\nthe trace's records written to %s\n", traces.records_out.c_str());
  }
  if (!out.empty()) {
    std::vector<std::string> shown;
    for (const auto& f : files) shown.push_back(std::filesystem::path(f).lexically_normal().generic_string());
    for (const auto& f : traces.files) shown.push_back("trace " + std::filesystem::path(f).lexically_normal().generic_string());
    write_atomically(out, io::calibration_profile_json(last, shown, name.empty() ? gens.front() : name, start_name) + "\n");
    std::printf("\nprofile written to %s\n", out.c_str());
  }
  return held ? kExitOk : kExitFailed;
}

}  // namespace

Command add_calibrate(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    std::string generation, start, out, name;
    std::vector<std::string> carry;
    double far = 0.30, require_held_back = 0;
    TraceInputs traces;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand(
      "calibrate", "Fit the cost model's efficiency parameters to measurements of parts (calibration/published/*.json, moeperf run --out)");
  sub->add_option("MEASUREMENTS", o->files, "measurements files (records of parts, or the executor's output)");
  sub->add_option("--trace", o->traces.files,
                  "a profile of a real training step (PyTorch profiler JSON, or nsys export --type sqlite): its kernels with a shape "
                  "become records (repeatable)");
  sub->add_option("--gpu", o->traces.gpu, "the traced GPU's file (e.g. topologies/gpus/h100-sxm.json): prices the trace's compute records");
  sub->add_option("--system", o->traces.system,
                  "the traced system's file: prices the trace's collectives and host copies (and its compute records without --gpu)");
  sub->add_option("--records-out", o->traces.records_out, "write the trace's records as a measurements file (one --trace)");
  add_trace_flags(sub, o->traces.flags);
  sub->add_option("--generation", o->generation, "fit only the records of this GPU generation (hopper, blackwell, blackwell-ultra)");
  sub->add_option("--start", o->start, "starting profile: parameters no record moves keep its values (default: the defaults)");
  sub->add_option("--carry", o->carry,
                  "PROFILE.json:PARAM[,PARAM...]: start these parameters at that profile's values (a fit of another GPU "
                  "generation); where no record moves one it keeps the value and the profile lists it as carried (repeatable)");
  sub->add_option("--out", o->out, "write the fitted profile (one generation)");
  sub->add_option("--name", o->name, "the profile's name (default: the generation)");
  sub->add_option("--far", o->far, "list records whose error after the fit exceeds this fraction")
      ->check(positive_number("--far"))
      ->default_val(0.30);
  sub->add_option("--require-held-back", o->require_held_back,
                  "exit 1 unless every class's held-back records come out within this fraction (median, after the fit) "
                  "and better than before it, e.g. 0.10 (issue 19's bar for the executor's suite)")
      ->check(positive_number("--require-held-back"));
  return {sub, [o] {
            return cmd_calibrate(o->files, o->traces, o->generation, o->start, o->carry, o->out, o->name, o->far,
                                 o->require_held_back);
          }};
}

}  // namespace moeperf::cli
