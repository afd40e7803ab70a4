// moeperf calibrate: the cost model's efficiency parameters fitted to measurements of parts
// (published records under calibration/published/, or moeperf run --out), class by class, with
// the errors before and after, the fitted values with their bounds and the records still far off.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli/commands.h"
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
    std::string on = p.fitted_on.empty() ? "- (no record moves it)" : std::to_string(p.fitted_on.size()) + " records";
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

int cmd_calibrate(const std::vector<std::string>& files, const std::string& generation, const std::string& start_file,
                  const std::string& out, const std::string& name, double far) {
  if (!out.empty()) check_output_path("--out", out);
  Calibration start;
  std::string start_name = "defaults";
  if (!start_file.empty()) {
    start = io::load_calibration(start_file);
    start_name = start.profile;
  }
  std::vector<PartRecord> records;
  for (const auto& f : files) {
    auto r = io::load_parts(f);
    std::move(r.begin(), r.end(), std::back_inserter(records));
  }
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
  std::printf("calibrate: %zu records from %zu file%s; start: %s\n", records.size(), files.size(), files.size() > 1 ? "s" : "",
              start_name.c_str());
  FitReport last;
  for (const std::string& g : gens) {
    std::printf("\n== GPU generation %s: %d records ==\n", g.c_str(), per_gen[g]);
    last = fit_parts(records, start, g);
    for (const ClassFit& c : last.classes) print_class(c, far);
  }
  if (!out.empty()) {
    std::vector<std::string> shown;
    for (const auto& f : files) shown.push_back(std::filesystem::path(f).lexically_normal().generic_string());
    write_atomically(out, io::calibration_profile_json(last, shown, name.empty() ? gens.front() : name, start_name) + "\n");
    std::printf("\nprofile written to %s\n", out.c_str());
  }
  return kExitOk;
}

}  // namespace

Command add_calibrate(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    std::string generation, start, out, name;
    double far = 0.30;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand(
      "calibrate", "Fit the cost model's efficiency parameters to measurements of parts (calibration/published/*.json, moeperf run --out)");
  sub->add_option("MEASUREMENTS", o->files, "measurements files (records of parts, or the executor's output)")->required();
  sub->add_option("--generation", o->generation, "fit only the records of this GPU generation (hopper, blackwell, blackwell-ultra)");
  sub->add_option("--start", o->start, "starting profile: parameters no record moves keep its values (default: the defaults)");
  sub->add_option("--out", o->out, "write the fitted profile (one generation)");
  sub->add_option("--name", o->name, "the profile's name (default: the generation)");
  sub->add_option("--far", o->far, "list records whose error after the fit exceeds this fraction")
      ->check(positive_number("--far"))
      ->default_val(0.30);
  return {sub, [o] { return cmd_calibrate(o->files, o->generation, o->start, o->out, o->name, o->far); }};
}

}  // namespace moeperf::cli
