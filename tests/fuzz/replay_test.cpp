// Every input the fuzzers found a bug with (fuzz/corpus/<target>/) replayed through its loader in
// every build, so a fixed bug stays fixed: each must load or end in an input error naming a file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "fuzz/harness.h"

namespace {
namespace fs = std::filesystem;
using moeperf::fuzz::run_one;

std::vector<uint8_t> bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
moeperf::fuzz::Outcome run_text(const std::string& target, const std::string& text) {
  return run_one(target, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

TEST(FuzzReplay, EveryCommittedFindingLoadsOrFailsWithAnInputError) {
  const fs::path corpus = fs::path(MOEPERF_SOURCE_DIR) / "fuzz" / "corpus";
  const auto& targets = moeperf::fuzz::targets();
  size_t replayed = 0;
  for (const auto& dir : fs::directory_iterator(corpus)) {
    if (!dir.is_directory()) continue;
    const std::string target = dir.path().filename().string();
    ASSERT_NE(std::find(targets.begin(), targets.end(), target), targets.end()) << "fuzz/corpus/" << target << " is no target";
    for (const auto& f : fs::directory_iterator(dir.path())) {
      const std::vector<uint8_t> b = bytes(f.path());
      EXPECT_NO_THROW(run_one(target, b.data(), b.size())) << f.path();
      ++replayed;
    }
  }
  EXPECT_GE(replayed, 1u) << "no committed findings under " << corpus;
}

// The harness itself: a seed loads, a broken file is an input error naming the staged file, and an
// unknown target is not silently accepted.
TEST(FuzzHarness, ASeedLoadsAndAMalformedFileIsAnInputError) {
  const fs::path seed = fs::path(MOEPERF_SOURCE_DIR) / "examples" / "deepseek-v3" / "gb300-optimized.json";
  const std::vector<uint8_t> b = bytes(seed);
  const auto ok = run_one("scenario", b.data(), b.size());
  EXPECT_TRUE(ok.loaded) << ok.error;
  const auto bad = run_text("scenario", std::string(b.begin(), b.begin() + static_cast<long>(b.size() / 2)));
  EXPECT_FALSE(bad.loaded);
  EXPECT_NE(bad.error.find("input.json: malformed JSON"), std::string::npos) << bad.error;
  const auto set = run_text("set", "parallelism.ep=0\n");
  EXPECT_FALSE(set.loaded);
  EXPECT_NE(set.error.find("--set parallelism.ep=0"), std::string::npos) << set.error;
  EXPECT_THROW(run_text("nothing", "{}"), moeperf::fuzz::InvariantBroken);
}

TEST(FuzzHarness, EveryTargetReachesItsLoader) {
  // A seed per target that loads: the staging folder resolves the seeds' relative references.
  const fs::path src = MOEPERF_SOURCE_DIR;
  const std::vector<std::pair<std::string, fs::path>> seeds = {
      {"model", src / "examples/models/deepseek-v3/config.json"},
      {"system", src / "topologies/gb300-nvl72.json"},
      {"stack", src / "stacks/maxtext-te-2026-09.json"},
      {"calibration", src / "calibration/profiles/hopper.json"},
      {"measurements", src / "calibration/published/gemm.json"},
      {"measurements", src / "fuzz/corpus/measurements/kineto-one-step.json"},  // a profiler trace
      {"accuracy", src / "examples/accuracy/cases.json"}};
  for (const auto& [target, file] : seeds) {
    ASSERT_TRUE(fs::exists(file)) << file;
    const std::vector<uint8_t> b = bytes(file);
    const auto o = run_one(target, b.data(), b.size());
    EXPECT_TRUE(o.loaded) << target << " " << file << ": " << o.error;
  }
}

// The CI fuzzer's finding of 2026-12-02: a case naming a scenario longer than the file system allows
// threw std::filesystem::filesystem_error out of the loader; it is a "not found" input error now.
TEST(FuzzReplay, AScenarioNameTooLongForTheFileSystemIsNotFound) {
  const std::string text = "{\"kind\": \"accuracy_cases\", \"cases\": [{\"scenario\": \"" + std::string(300, 'x') +
                           ".json\", \"metric\": \"tflops_per_gpu\", \"published\": 1, \"source\": \"s\"}]}";
  const auto o = run_text("accuracy", text);
  EXPECT_FALSE(o.loaded);
  EXPECT_NE(o.error.find("/cases/0/scenario"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("not found"), std::string::npos) << o.error;
}

}  // namespace
