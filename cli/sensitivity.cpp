// moeperf sensitivity: the step time's change per -/+ 10 % of each hardware figure, efficiency
// parameter and numeric stack setting, and per on/off stack mechanism flipped, largest first.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/study/sensitivity.h"

namespace moeperf::cli {
namespace {

struct SensitivityOpts {
  std::string file, format = "text";
  std::vector<std::string> sets;
  double step_pct = 10;
  int top = 25, jobs = 0;
};

std::string change(double d, double step) {
  if (!std::isfinite(d)) return "n/a";
  char b[48];
  std::snprintf(b, sizeof b, "%+.3f s (%+.1f%%)", d, 100 * d / step);
  return b;
}

int cmd_sensitivity(const SensitivityOpts& o) {
  const Scenario s = load_named(o.file, o.sets);
  const SensitivityResult r = sensitivity(s, o.step_pct / 100, threads_with_progress("sensitivity", o.jobs));
  if (o.format == "json") {
    nlohmann::json j;
    j["name"] = s.name;
    j["step_time_s"] = r.step_s;
    j["relative_step"] = r.rel;
    j["terms"] = nlohmann::json::array();
    auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    for (const auto& t : r.terms)
      j["terms"].push_back({{"name", t.name}, {"kind", t.kind}, {"value", t.value}, {"flip", t.flip},
                            {"minus_s", t.flip ? nlohmann::json(nullptr) : num(t.minus_s)}, {"plus_s", num(t.plus_s)},
                            {"note", t.note}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("sensitivity of %s\n  step %.3f s; each figure at -/+%.0f %%, each on/off mechanism flipped; the step's change, largest first\n",
              s.name.c_str(), r.step_s, o.step_pct);
  const std::string pct = fmt(o.step_pct, 0);
  std::printf("  %-4s %-38s %-10s %-22s %-21s %-21s\n", "rank", "what", "kind", "value", ("-" + pct + " %").c_str(),
              ("+" + pct + " % / flipped").c_str());
  int shown = 0;
  for (const auto& t : r.terms) {
    if (shown++ >= o.top) break;
    std::printf("  %-4d %-38s %-10s %-22s %-21s %-21s%s%s\n", shown, t.name.c_str(), t.kind.c_str(), t.value.c_str(),
                t.flip ? "" : change(t.minus_s, r.step_s).c_str(), change(t.plus_s, r.step_s).c_str(), t.note.empty() ? "" : "  ",
                t.note.c_str());
  }
  if (static_cast<int>(r.terms.size()) > o.top)
    std::printf("  (%zu more with smaller changes: --top %zu or --format json)\n", r.terms.size() - static_cast<size_t>(o.top), r.terms.size());
  return kExitOk;
}

}  // namespace

Command add_sensitivity(CLI::App& app) {
  auto o = std::make_shared<SensitivityOpts>();
  auto* sub = app.add_subcommand("sensitivity", "Which assumption matters most: the step's change per -/+10 % of each hardware figure, "
                                                "efficiency parameter and stack setting, largest first");
  sub->add_option("SCENARIO", o->file, "scenario file")->required();
  sub->add_option("--set", o->sets, "override a scenario field: PATH=VALUE");
  // Below 100: at 100 a rate perturbed down is 0 (the simulation never ends), above it negative.
  sub->add_option("--step", o->step_pct, "relative change in percent, above 0 and below 100 (default 10)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              size_t used = 0;
              const double x = std::stod(v, &used);
              if (used == v.size() && x > 0 && x < 100) return {};
            } catch (const std::exception&) {
            }
            return "expected a percentage above 0 and below 100 (a rate lowered by 100 % or more is no rate), got " + v;
          },
          "0 < percent < 100"));
  sub->add_option("--top", o->top, "rows shown (text)")->check(whole_at_least_one("a row count"));
  sub->add_option("--jobs", o->jobs, "threads (default: every core)")->check(whole_at_least_one("a thread count"));
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_sensitivity(*o); }};
}

}  // namespace moeperf::cli
