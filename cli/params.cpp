// moeperf params: the cost model's named parameters (default, unit, range, reasoning), and `schema`: every scenario field.
#include "cli/commands.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include "model/io/scenario_schema.h"
#include "model/params.h"

namespace moeperf::cli {
namespace {

int cmd_params(const std::string& format) {
  if (format == "json") {
    nlohmann::json j;
    for (const ParamDef& d : param_defs())
      j.push_back({{"name", d.name}, {"default", d.value}, {"unit", d.unit}, {"min", d.min}, {"max", d.max},
                   {"reasoning", d.reasoning}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (const ParamDef& d : param_defs())
    std::cout << d.name << " = " << d.value << " " << d.unit << "  [" << d.min << ", " << d.max << "]\n    "
              << d.reasoning << "\n";
  return kExitOk;
}

}  // namespace

Command add_params(CLI::App& app) {
  auto format = std::make_shared<std::string>("text");
  auto* sub = app.add_subcommand("params", "List the cost model's named parameters: default, unit, range, reasoning");
  sub->add_option("--format", *format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [format] { return cmd_params(*format); }};
}

Command add_schema(CLI::App& app) {
  auto format = std::make_shared<std::string>("markdown");
  auto* sub = app.add_subcommand("schema", "Print the scenario file reference: every field, type, unit, default, effect");
  sub->add_option("--format", *format, "markdown or json")->check(CLI::IsMember({"markdown", "json"}));
  return {sub, [format] {
            std::cout << (*format == "json" ? io::scenario_reference_json() + "\n" : io::scenario_reference_markdown());
            return kExitOk;
          }};
}

}  // namespace moeperf::cli
