// FNV-1a, 64 bits: a hash that is the same on every machine and build, for choices that must be
// reproducible (calibrate's held-back records, a sweep's fingerprint). Not for security.
#pragma once

#include <cstdint>
#include <string_view>

namespace moeperf {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

// The hash of `bytes`, continuing from `h` (kFnv1aOffset to start).
inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (const unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace moeperf
