// The scenario file's fields: what the loader accepts (parse_scenario takes each object's keys from
// here, so the two cannot drift) and the reference a user reads (`moeperf schema`, and
// docs/scenario.md, which a test keeps equal to it). Each field: its dotted path (as in --set;
// "stragglers[]" for every array entry), type, unit, default and what it changes in the model.
//
//   for (const FieldDoc& f : scenario_fields()) std::cout << f.path << "\n";
//   n.allow_only(scenario_keys("parallelism"));   // tp, cp, pp, vpp, ep, fsdp, dp, schedule, ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moeperf::io {

struct FieldDoc {
  std::string_view path;          // "parallelism.ep", "stack.overlap.fwd_bwd", "stragglers[].gpu"
  std::string_view type;          // "integer >= 1", "\"1f1b\" | \"interleaved\" | \"dualpipe\"", "object", ...
  std::string_view unit;          // "" when none
  std::string_view default_text;  // as a reader sees it; "required" when the field must be given
  std::string_view default_json;  // the default as a JSON value when it is a constant, else ""
  std::string_view effect;        // what it changes
};

const std::vector<FieldDoc>& scenario_fields();

// The keys an object of the scenario accepts: its direct children ("" is the file's root).
std::vector<std::string> scenario_keys(std::string_view object_path);

// The reference as Markdown (docs/scenario.md) or as JSON (an array of the fields).
std::string scenario_reference_markdown();
std::string scenario_reference_json();

}  // namespace moeperf::io
