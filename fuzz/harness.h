// One input through one of moeperf's loaders, for the fuzzers (fuzz/fuzz_main.cpp, libFuzzer) and
// for the replay of their findings in CI (tests/fuzz/replay_test.cpp). The invariant every loader
// keeps: it returns a value or throws InputError whose message names the file (and the JSON path
// where there is one); nothing else escapes, nothing crashes, nothing hangs.
//
//   fuzz::Outcome o = fuzz::run_one("scenario", bytes, size);   // throws only on a broken invariant
//
// The input is written to a staging folder that mirrors the repository's examples/, topologies/,
// calibration/ and stacks/ through symbolic links, so the relative references of a seed file
// ("../../topologies/gb300-nvl72.json") resolve and the fuzzer reaches past them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace moeperf::fuzz {

// The loader entry points: scenario, predict (a scenario loaded, then predicted when small),
// model (moeperf JSON or a Hugging Face config.json), system,
// stack, calibration (profile), measurements (parts for calibrate), accuracy (published cases),
// grid (a sweep's --grid file), set (one `--set PATH=VALUE` per line of the input, applied to a
// shipped scenario) and sweep (`vary PATH=...` and `derive PATH=EXPR` lines, sweep's arguments).
const std::vector<std::string>& targets();

struct Outcome {
  bool loaded = false;  // the loader returned a value
  std::string error;    // else its InputError message
};

// A broken invariant: an exception other than InputError, or an InputError that names no file.
class InvariantBroken : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

Outcome run_one(const std::string& target, const uint8_t* data, size_t size);

}  // namespace moeperf::fuzz
