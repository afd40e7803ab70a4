// moeperf params: the cost model's named parameters (default, unit, range, reasoning); `schema`: every scenario field; `stacks`: the built-in software stacks and their sources.
#include "cli/commands.h"

#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/scenario_schema.h"
#include "model/io/stacks.h"
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

// A stack's fields in file order with where each comes from, then its ablation.
void print_stack(const nlohmann::ordered_json& j) {
  std::cout << j.value("name", std::string("?")) << "\n  " << j.value("description", std::string()) << "\n\n";
  std::function<void(const nlohmann::ordered_json&, const std::string&)> walk = [&](const nlohmann::ordered_json& o,
                                                                                  const std::string& at) {
    for (auto it = o.begin(); it != o.end(); ++it) {
      const std::string k = it.key();
      if (at.empty() && (k == "kind" || k == "name" || k == "description" || k == "note" || k == "ablation")) continue;
      const auto& v = it.value();
      if (v.is_object() && !v.contains("value")) {
        walk(v, at + k + ".");
        continue;
      }
      const auto& value = v.is_object() ? v["value"] : v;
      std::cout << "  " << at << k << " = " << value.dump() << "\n";
      if (v.is_object() && v.contains("source")) std::cout << "      source: " << v["source"].get<std::string>() << "\n";
      if (v.is_object() && v.contains("assumption"))
        std::cout << "      assumption: " << v["assumption"].get<std::string>() << "\n";
    }
  };
  walk(j, "");
  if (j.contains("ablation")) {
    std::cout << "\nablation (compare --ablate), each step with the fields it switched and their values before it:\n";
    int n = 0;
    for (const auto& st : j["ablation"]) {
      std::cout << "  " << ++n << ". " << st.value("name", std::string()) << ": "
                << (st["off"].empty() ? std::string("(nothing moeperf can switch)") : st["off"].dump());
      if (st.contains("note")) std::cout << "  - " << st["note"].get<std::string>();
      std::cout << "\n";
    }
  }
}

int cmd_stacks(const std::string& name, const std::string& format) {
  if (name.empty()) {
    if (format == "json") {
      nlohmann::ordered_json j = nlohmann::ordered_json::array();
      for (const auto& [n, text] : io::builtin_stacks()) {
        const auto s = nlohmann::ordered_json::parse(text);
        j.push_back({{"name", n}, {"description", s.value("description", "")},
                     {"ablation_steps", s.contains("ablation") ? s["ablation"].size() : 0}});
      }
      std::cout << j.dump(2) << "\n";
      return kExitOk;
    }
    for (const auto& [n, text] : io::builtin_stacks()) {
      const auto s = nlohmann::ordered_json::parse(text);
      std::cout << n << "\n  " << s.value("description", std::string()) << "\n";
    }
    std::cout << "\nmoeperf stacks NAME prints a stack's fields with their sources; a scenario names one with \"stack\": NAME.\n";
    return kExitOk;
  }
  nlohmann::ordered_json j;
  const bool path = name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
  if (path) {
    io::validate_file(name);  // throws SpecError naming the file and JSON path
    std::ifstream in(name);
    j = nlohmann::ordered_json::parse(in);
    if (j.value("kind", "") != "stack") throw io::SpecError(name, "/kind", "expected a stack file (\"kind\": \"stack\")");
  } else {
    bool found = false;
    std::string names;
    for (const auto& [n, text] : io::builtin_stacks()) {
      names += (names.empty() ? "" : ", ") + n;
      if (n == name) j = nlohmann::ordered_json::parse(text), found = true;
    }
    if (!found) throw InputError("unknown stack \"" + name + "\": expected one of " + names + ", or a path to a stack file");
  }
  if (format == "json") std::cout << j.dump(2) << "\n";
  else print_stack(j);
  return kExitOk;
}

}  // namespace

Command add_stacks(CLI::App& app) {
  struct Opts {
    std::string name, format = "text";
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("stacks", "List the built-in software stacks, or print one's fields with their sources");
  sub->add_option("NAME", o->name, "a stack name (or a stack file); none: list them");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_stacks(o->name, o->format); }};
}

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
