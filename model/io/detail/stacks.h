// Internal to model/io: the scenario's "stack" field (a built-in name, a path, or an object over a
// base) parsed into StackOptions.
#pragma once

#include "model/io/detail/refs.h"
#include "model/io/load.h"
#include "model/specs.h"

namespace moeperf::io::detail {

StackOptions parse_stack_ref(Refs& refs, const Node& field);

// A stack file's root ({"kind": "stack", ...}), its ablation checked and kept.
StackOptions parse_stack_file(const Node& root);

// The value a scenario's "stack" field (`ref`: a built-in name, a path relative to `file`, or an
// object over a "base") gives the stack field `path` (below "stack.", e.g. "host_op_s" or
// "overlap.fsdp_prefetch_depth"): the object's own key first, then its base; a stack file's
// {"value": V, "source": ...} unwrapped. Null when neither sets it.
json stack_field_json(const json& ref, const std::string& file, const std::string& path);

// The value at a dotted path of a JSON document, a {"value": V, "source": ...} along it unwrapped
// (a stack file's fields); null when the path is not there.
const json* json_at(const json& doc, const std::string& path);

// `--set a.b.c=V` applied to a scenario's JSON as the loader applies it (load.cpp: a step through
// a reference to another file inlines that file, a named stack becomes the base of an object), so
// a sweep's --derive reads what the point's overrides set; throws SpecError as the loader would.
void apply_scenario_override(json& root, const Override& o, const std::string& file);

// The value at a dotted path of a scenario's JSON (`root`, read from `file`), a step through a
// reference to another JSON file ("system": "../topologies/x.json") inlining that file into `root`
// as apply_scenario_override does, a {"value": V, ...} along the path unwrapped; null when the
// path is not there (or passes through a built-in name or a folder).
const json* scenario_field(json& root, const std::string& path, const std::string& file);

}  // namespace moeperf::io::detail
