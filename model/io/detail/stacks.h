// Internal to model/io: the scenario's "stack" field (a built-in name, a path, or an object over a
// base) parsed into StackOptions.
#pragma once

#include "model/io/detail/refs.h"
#include "model/specs.h"

namespace moeperf::io::detail {

StackOptions parse_stack_ref(Refs& refs, const Node& field);

// A stack file's root ({"kind": "stack", ...}), its ablation checked and kept.
StackOptions parse_stack_file(const Node& root);

}  // namespace moeperf::io::detail
