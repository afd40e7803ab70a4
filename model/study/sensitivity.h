// Which assumption matters most: the step time's change when each hardware figure, efficiency
// parameter and numeric stack setting moves by -/+ a relative step (10 %), and when each on/off
// stack mechanism is flipped; sorted by the larger change. Every term is a full predict() of the
// scenario with one thing changed, so overlap and contention are in it (a faster link that only
// carries hidden traffic changes nothing).
//
//   for (const SensitivityTerm& t : sensitivity(s, 0.10)) std::cout << t.name << " " << t.plus_s << "\n";
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "model/specs.h"

namespace moeperf {

struct SensitivityTerm {
  std::string name;   // "GPU dense FLOP rate (every format)", "param ib_fraction", "stack.fsdp_prefetch"
  std::string kind;   // "hardware", "efficiency" or "stack"
  std::string value;  // the scenario's value, as text with its unit
  bool flip = false;  // an on/off mechanism: minus_s is unused, plus_s is the flipped state's change
  // Step-time change (s) at value x (1 - step) and x (1 + step); NaN where not computed (see note).
  double minus_s = std::numeric_limits<double>::quiet_NaN(), plus_s = std::numeric_limits<double>::quiet_NaN();
  std::string note;   // why a side is missing (a range end, or the changed scenario is invalid)
  std::string minus_note, plus_note;  // the same per side
  double largest() const;  // max |change|
};

struct SensitivityResult {
  double step_s = 0;
  double rel = 0.1;
  std::vector<SensitivityTerm> terms;  // largest change first
};

// `run` maps a list of independent jobs onto threads (serial when not given).
SensitivityResult sensitivity(const Scenario& s, double rel = 0.10,
                              const std::function<void(std::vector<std::function<void()>>&)>& run = {});

}  // namespace moeperf
