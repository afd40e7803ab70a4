// Internal to model/workload: the two small helpers the lowering, the FLOP count and the memory
// model share (one definition, so that no file keeps a copy of its own).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/specs.h"

namespace moeperf::detail {

// A count as a double, for the arithmetic of sizes and FLOPs.
inline double d(int64_t v) { return static_cast<double>(v); }
// Whether a recompute or offload list names a tensor class.
inline bool has(const std::vector<TensorClass>& v, TensorClass c) { return std::find(v.begin(), v.end(), c) != v.end(); }

}  // namespace moeperf::detail
