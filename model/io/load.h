// Loading moeperf's files: hardware systems (topologies/), models (moeperf JSON or a Hugging Face
// config.json, detected automatically) and scenarios, with `--set` overrides and consistency
// checks. Every failure throws SpecError naming the file, the JSON path and what was expected.
//
//   SystemSpec sys = io::load_system("topologies/gb300-nvl72.json");
//   Scenario s = io::load_scenario("examples/deepseek-v3/gb300-optimized.json",
//                                  {io::parse_override("parallelism.ep=32")});
#pragma once

#include <string>
#include <vector>

#include "model/specs.h"

namespace moeperf::io {

SystemSpec load_system(const std::string& path);
ModelSpec load_model(const std::string& path);

// One `--set PATH=VALUE`: a dotted path into the scenario and the value (parsed as JSON when it
// is valid JSON, otherwise taken as a string).
struct Override {
  std::string path;
  std::string value;
  const char* origin = "--set";  // how the user gave it (--set, --vary, --derive, --grid), for messages
};
Override parse_override(const std::string& arg, const char* origin = "--set");  // throws SpecError for "a.b" without "="
// How the desktop app names an override in messages: the user typed it into a form field.
inline constexpr const char* kEditOrigin = "the edit";

Scenario load_scenario(const std::string& path, const std::vector<Override>& sets = {});
// The scenario file's JSON (indented) with the overrides applied as load_scenario applies them (a
// named stack becomes {"base": NAME, ...}; a file referenced along an override's path is read in),
// its file references rewritten to resolve from `out_dir` when one is given: what a scenario file
// saved there with those edits holds. Not checked (load_scenario checks).
std::string scenario_text_with_overrides(const std::string& path, const std::vector<Override>& sets,
                                         const std::string& out_dir = "");

// A calibration profile file ({"kind": "calibration", "params": {...}}); the parameters it does
// not name keep `base`'s values.
Calibration load_calibration(const std::string& path, const Calibration& base = {});

// End-to-end published results for `moeperf accuracy` ({"kind": "accuracy_cases", "cases": [...]}):
// tests of the model, never inputs of a fit. Scenario paths resolve relative to the file.
struct AccuracyCase {
  std::string scenario;  // path
  std::string metric;    // tflops_per_gpu, tokens_per_s_per_gpu or step_time_s
  double published = 0;
  std::string source;
};
std::vector<AccuracyCase> load_accuracy_cases(const std::string& path);

// Consistency of a loaded scenario (layout, divisibility, batch). Throws SpecError against `file`.
void check_scenario(const Scenario& s, const std::string& file);

// What `moeperf validate` reports for one file that loaded and checked cleanly.
struct Validated {
  std::string kind;     // "system", "gpu", "model (Hugging Face deepseek_v3)", "scenario", ...
  std::string summary;  // one line
};
Validated validate_file(const std::string& path);

}  // namespace moeperf::io
