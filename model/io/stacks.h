// Software stacks as data (stacks/*.json, built into the binary): each mechanism of a framework a
// typed field with its source or, where it is an assumption, why. A scenario names a stack
// ("stack": "maxtext-te-2026-09"), gives a path to a stack file, or overrides one
// ({"base": "megatron-core", "cuda_graphs": []}); the stack's ablation says which fields each of its
// optimizations switched, in the order they were added (compare --ablate).
//
//   for (const auto& [name, text] : io::builtin_stacks()) ...
//   std::vector<NamedState> states = io::ablation_states(scenario);   // compare --ablate
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/specs.h"
#include "model/study/study.h"

namespace moeperf::io {

// The shipped stacks: name and file text.
const std::vector<std::pair<std::string, std::string>>& builtin_stacks();

// compare --ablate on a scenario whose stack has an ablation (StackOptions::ablation): the scenario with
// every step off, then after each step (the later steps' "off" values applied, the earliest winning
// where two switch one field). A step with nothing to switch (unmapped) still gets its state, equal
// to the one before. Empty when the scenario's stack has no ablation.
// The first state is named "start".
std::vector<NamedState> ablation_states(const Scenario& s);

}  // namespace moeperf::io
