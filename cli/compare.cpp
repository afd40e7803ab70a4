// moeperf compare: the waterfall between two scenarios, or of one scenario's stack options (--ablate).
#include "cli/commands.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include "model/error.h"
#include "model/io/stacks.h"
#include "model/study/study.h"

namespace moeperf::cli {
namespace {

void print_waterfall(const std::vector<WaterfallStep>& steps, const std::string& format,
                     const std::vector<std::string>& notes = {}) {
  if (format == "json") {
    nlohmann::json j;
    j["notes"] = notes;
    for (const auto& st : steps)
      j["steps"].push_back({{"name", st.name}, {"changes", st.changes}, {"step_time_s", st.report.step_time.value()},
                            {"tokens_per_s_per_gpu", st.report.tokens_per_s_per_gpu},
                            {"model_tflops_per_gpu", st.report.model_tflops_per_gpu},
                            {"comm_fraction_of_kernel_time", st.report.comm_fraction_of_kernel_time},
                            {"exposed_comm_fraction", st.report.exposed_comm_fraction},
                            {"fits_in_memory", st.report.memory.fits}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("%-26s %10s %10s %9s %8s %8s %7s  %s\n", "step", "step_s", "TFLOPS/GPU", "gain_s", "x_start", "comm%",
              "fits", "switched");
  const double t0 = steps.front().report.step_time.value();
  double prev = t0;
  for (const auto& st : steps) {
    const double t = st.report.step_time.value();
    std::printf("%-26s %10.3f %10.1f %9.3f %8.2f %8.1f %7s  %s\n", st.name.c_str(), t, st.report.model_tflops_per_gpu,
                prev - t, t0 / t, 100 * st.report.comm_fraction_of_kernel_time, st.report.memory.fits ? "yes" : "NO",
                st.changes.c_str());
    prev = t;
  }
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
}

int cmd_compare(const std::vector<std::string>& files, bool ablate, const std::vector<std::string>& sets,
                const std::string& format) {
  if (ablate) {
    if (files.size() != 1) throw InputError("compare --ablate takes one scenario");
    const Scenario s = load_named(files[0], sets);
    // The stack's own ablation when it has one (its optimizations in the order they were added),
    // else the post's options switched off together.
    const std::vector<NamedState> states = io::ablation_states(s);
    std::vector<std::string> notes;
    if (states.empty())
      notes.push_back("the scenario's stack" + (s.stack.name.empty() ? std::string() : " (" + s.stack.name + ")") +
                      " has no ablation: every optimization of NVIDIA's post switched off, then on in the post's order");
    else
      notes.push_back("the ablation of stack " + s.stack.name + ": each step switches the fields it names");
    print_waterfall(states.empty() ? waterfall(baseline_of(s), s) : walk(states, s.calibration, threads_with_progress("compare", 0)),
                    format, notes);
    return kExitOk;
  }
  if (files.size() != 2) throw InputError("compare takes two scenarios (or one with --ablate)");
  const Scenario a = load_named(files[0], sets);
  const Scenario b = load_named(files[1], sets);
  print_waterfall(waterfall(a, b), format, comparison_notes(a, b));
  return kExitOk;
}

}  // namespace

Command add_compare(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files, sets;
    bool ablate = false;
    std::string format = "text";
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("compare", "Waterfall between two scenarios, or of one scenario's stack options (--ablate)");
  sub->add_option("SCENARIOS", o->files, "A B, or S with --ablate")->required();
  sub->add_flag("--ablate", o->ablate, "switch the stack options on one by one from everything off, in the post's order");
  sub->add_option("--set", o->sets, "override a field of every scenario: PATH=VALUE");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_compare(o->files, o->ablate, o->sets, o->format); }};
}

}  // namespace moeperf::cli
