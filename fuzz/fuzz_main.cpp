// A libFuzzer target for one loader entry point (MOEPERF_FUZZ_TARGET, fuzz/CMakeLists.txt): any
// exception other than moeperf's input error, a crash, a sanitizer report or a timeout is a finding.
#include <cstdio>
#include <cstdlib>

#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)moeperf::fuzz::run_one(MOEPERF_FUZZ_TARGET, data, size);
  } catch (const moeperf::fuzz::InvariantBroken& e) {
    std::fprintf(stderr, "moeperf fuzz (%s): %s\n", MOEPERF_FUZZ_TARGET, e.what());
    std::abort();
  }
  return 0;
}
