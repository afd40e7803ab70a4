// The step's error band: the parts' term (each op class's share of the step times its fit spread,
// in quadrature) and the end-to-end term (the measured-over-predicted step ratios of the published
// cases run on the scenario's stack), which widens each side in quadrature and never moves the step.
#include <gtest/gtest.h>

#include <cstdio>
#include "model/io/report_io.h"
#include "model/io/stacks.h"

#include <algorithm>
#include <cmath>

#include "model/error.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/parts.h"
#include "model/study/predict.h"

namespace moeperf {
namespace {

std::string source(const char* rel) { return std::string(MOEPERF_SOURCE_DIR) + "/" + rel; }

Scenario optimized() { return io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json")); }

TEST(Band, PartsAreEachClassShareOfTheStepTimesItsSpread) {
  Scenario s = optimized();
  s.calibration.end_to_end.clear();
  s.calibration.residual_rms = {{"gemm", 0.10}};
  const StepReport a = predict(s, s.calibration);
  const double gemm_share = a.breakdown[static_cast<size_t>(Category::gemm)].value() / a.step_time.value();
  ASSERT_GT(gemm_share, 0.2);
  EXPECT_NEAR(a.band, std::min(1.0, gemm_share) * 0.10, 1e-12);
  EXPECT_DOUBLE_EQ(a.band_low, a.band);
  EXPECT_DOUBLE_EQ(a.band_high, a.band);
  EXPECT_FALSE(a.end_to_end.has_value());
  // A second class adds in quadrature.
  s.calibration.residual_rms["attention"] = 0.20;
  const StepReport b = predict(s, s.calibration);
  const double attn_share = b.breakdown[static_cast<size_t>(Category::attention)].value() / b.step_time.value();
  EXPECT_NEAR(b.band, std::hypot(std::min(1.0, gemm_share) * 0.10, std::min(1.0, attn_share) * 0.20), 1e-12);
  EXPECT_NEAR(b.band_terms.at("attention"), std::min(1.0, attn_share) * 0.20, 1e-12);
}

TEST(Band, EndToEndWidensEachSideByTheCasesOfTheScenariosStack) {
  Scenario s = optimized();
  ASSERT_EQ(s.stack.name, "maxtext-te-2026-09");
  s.calibration.end_to_end.clear();
  const StepReport parts = predict(s, s.calibration);
  ASSERT_GT(parts.band, 0);  // the shipped profile's fit spread

  // Two cases of its stack (one slower than predicted, one faster) and one of another stack.
  s.calibration.end_to_end = {{"a", "maxtext-te-2026-09", 1.30, std::nullopt}, {"b", "maxtext-te-2026-09", 0.90, std::nullopt}, {"c", "megatron-core", 3.0, std::nullopt}};
  s.calibration.end_to_end_source = "test";
  const StepReport r = predict(s, s.calibration);
  EXPECT_DOUBLE_EQ(r.step_time.value(), parts.step_time.value());  // tests, never fitted: the step does not move
  EXPECT_DOUBLE_EQ(r.band, parts.band);
  EXPECT_NEAR(r.band_high, std::hypot(parts.band, 0.30), 1e-12);
  EXPECT_NEAR(r.band_low, std::hypot(parts.band, 0.10), 1e-12);
  EXPECT_NEAR(r.step_high(), r.step_time.value() * (1 + std::hypot(parts.band, 0.30)), 1e-9);
  ASSERT_TRUE(r.end_to_end.has_value());
  EXPECT_TRUE(r.end_to_end->own_stack);
  EXPECT_EQ(r.end_to_end->cases, 2);
  EXPECT_DOUBLE_EQ(r.end_to_end->slowest, 1.30);
  EXPECT_DOUBLE_EQ(r.end_to_end->fastest, 0.90);

  // Every case slower than predicted: the low side stays the parts' band.
  s.calibration.end_to_end = {{"a", "maxtext-te-2026-09", 1.5, std::nullopt}, {"b", "maxtext-te-2026-09", 1.2, std::nullopt}};
  const StepReport slow = predict(s, s.calibration);
  EXPECT_NEAR(slow.band_high, std::hypot(parts.band, 0.5), 1e-12);
  EXPECT_NEAR(slow.band_low, parts.band, 1e-12);

  // No case ran on its stack: every case's ratios, and the report says so.
  s.calibration.end_to_end = {{"c", "megatron-core", 2.0, std::nullopt}, {"d", "", 0.8, std::nullopt}};
  const StepReport other = predict(s, s.calibration);
  ASSERT_TRUE(other.end_to_end.has_value());
  EXPECT_FALSE(other.end_to_end->own_stack);
  EXPECT_EQ(other.end_to_end->cases, 2);
  EXPECT_NEAR(other.band_high, std::hypot(parts.band, 1.0), 1e-12);
  EXPECT_NEAR(other.band_low, std::hypot(parts.band, 0.2), 1e-12);

  // A run far faster than predicted cannot take the low end to zero or below.
  s.calibration.end_to_end = {{"a", "maxtext-te-2026-09", 0.001, std::nullopt}};
  EXPECT_LE(predict(s, s.calibration).band_low, 0.99);
}

TEST(Band, TheShippedEndToEndErrorsAreEveryAccuracyCaseWithItsStack) {
  const io::EndToEndErrors e = io::builtin_end_to_end();
  const auto cases = io::load_accuracy_cases(source("examples/accuracy/cases.json"));
  ASSERT_EQ(e.cases.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Scenario s = io::load_scenario(cases[i].scenario);
    EXPECT_EQ(e.cases[i].stack, s.stack.name) << cases[i].scenario;
    EXPECT_GT(e.cases[i].step_ratio, 0.1);
  }
  // A scenario gets them unless it says "none" (or names another file).
  EXPECT_EQ(optimized().calibration.end_to_end.size(), cases.size());
  const Scenario none = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"), {io::parse_override("end_to_end=\"none\"")});
  EXPECT_TRUE(none.calibration.end_to_end.empty());
  const StepReport r = predict(none, none.calibration);
  EXPECT_DOUBLE_EQ(r.band_high, r.band);
}

// The cases of the scenario's very configuration of its stack (name and overrides) come first: the
// ladder's last step is megatron-core as named, its first step megatron-core with the mechanisms
// of the later steps switched off; a scenario as configured as neither takes every case of the name.
TEST(Band, EndToEndPrefersTheCasesOfTheSameStackConfiguration) {
  const Scenario last = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"));
  EXPECT_TRUE(last.stack.overrides.empty());
  const Scenario first = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json"));
  EXPECT_EQ(first.stack.overrides.size(), 10u);
  EXPECT_NE(std::find(first.stack.overrides.begin(), first.stack.overrides.end(), "dispatcher=\"alltoall\""), first.stack.overrides.end());
  EXPECT_TRUE(std::is_sorted(first.stack.overrides.begin(), first.stack.overrides.end()));

  Scenario s = last;
  s.calibration.end_to_end = {{"a", "megatron-core", 1.4, std::vector<std::string>{}},
                              {"b", "megatron-core", 2.5, first.stack.overrides},
                              {"c", "megatron-core", 1.9, std::nullopt}};  // a file that does not say: the name alone
  s.calibration.end_to_end_source = "test";
  const StepReport r = predict(s, s.calibration);
  ASSERT_TRUE(r.end_to_end.has_value());
  EXPECT_TRUE(r.end_to_end->same_config);
  EXPECT_EQ(r.end_to_end->cases, 1);
  EXPECT_DOUBLE_EQ(r.end_to_end->slowest, 1.4);
  EXPECT_NE(io::band_terms_text(r).back().second.find("the published case of stack megatron-core as configured here ran 1.40x"),
            std::string::npos) << io::band_terms_text(r).back().second;

  Scenario b = first;
  b.calibration = s.calibration;
  const StepReport rb = predict(b, b.calibration);
  EXPECT_TRUE(rb.end_to_end->same_config);
  EXPECT_DOUBLE_EQ(rb.end_to_end->slowest, 2.5);

  // Configured as no case was (--set stack.ep_sms=24): every case of the name, and the text says so.
  Scenario other = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"),
                                     {io::parse_override("stack.ep_sms=24")});
  EXPECT_EQ(other.stack.overrides, std::vector<std::string>{"ep_sms=24"});
  other.calibration = s.calibration;
  const StepReport ro = predict(other, other.calibration);
  EXPECT_FALSE(ro.end_to_end->same_config);
  EXPECT_TRUE(ro.end_to_end->own_stack);
  EXPECT_EQ(ro.end_to_end->cases, 3);
  EXPECT_DOUBLE_EQ(ro.end_to_end->slowest, 2.5);
  EXPECT_NE(io::band_terms_text(ro).back().second.find("(none as configured here)"), std::string::npos);

  // A field that restates the base's value (megatron-core ships HybridEP and router fusion; inside
  // "overlap" grad_reduce is on) is no override: the stack as shipped, matched as such. The member
  // of "overlap" that does change the base stays, alone.
  Scenario same = io::load_scenario(
      source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"),
      {io::parse_override("stack.ep_kernel=\"hybridep\""), io::parse_override("stack.router_fusion=true"),
       io::parse_override("stack.overlap.grad_reduce=true")});
  EXPECT_TRUE(same.stack.overrides.empty()) << ::testing::PrintToString(same.stack.overrides);
  same.calibration = s.calibration;
  const StepReport rs = predict(same, same.calibration);
  EXPECT_TRUE(rs.end_to_end->same_config);
  EXPECT_DOUBLE_EQ(rs.end_to_end->slowest, 1.4);
  const Scenario mixed = io::load_scenario(
      source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"),
      {io::parse_override("stack.overlap.grad_reduce=true"), io::parse_override("stack.overlap.fwd_bwd=true")});
  EXPECT_EQ(mixed.stack.overrides, std::vector<std::string>{"overlap={\"fwd_bwd\":true}"});

  // compare --ablate's states carry the fields their steps switched: the ablation's start is
  // configured as the ladder's first step (the fields the ladder's steps map to switched off).
  const auto states = io::ablation_states(last);
  ASSERT_FALSE(states.empty());
  EXPECT_FALSE(states.front().scenario.stack.overrides.empty());
  EXPECT_TRUE(states.back().scenario.stack.overrides.empty());
}

// A fitted profile that leaves a rate at its default (Hopper's attention backward: no Hopper
// backward record in calibration/published/; below 5 % of this step, so not named here), or borrows it from the generation's other fitted
// rates (Hopper's BF16 GEMMs: no Hopper BF16 GEMM record, so the median of its FP8 and block-scaled
// fractions), says so when that rate prices a share of the step; a fitted value, or a step priced
// with the defaults throughout, says nothing.
TEST(Band, ARateNoMeasurementSetIsNamed) {
  auto notes_on = [](const Scenario& s, const std::string& what) {
    const StepReport r = predict(s, s.calibration);
    int n = 0;
    for (const std::string& x : r.notes) n += x.rfind(what, 0) == 0;
    return n;
  };
  // 8 micro-batches, not 64: the notes depend on the GEMMs' share of the step, not on its length
  // (and the test runs in seconds under the sanitizers, not a minute).
  Scenario h = io::load_scenario(source("examples/layouts/qwen3-235b-h100-megatron-folded.json"), {{"batch.global_batch", "128"}});
  ASSERT_NE(h.calibration.profile.find("hopper"), std::string::npos);
  ASSERT_EQ(h.calibration.borrowed.count(Param::gemm_fraction_bf16), 1u);
  const double fp8 = h.calibration[Param::gemm_fraction_fp8], mx = h.calibration[Param::gemm_fraction_mxfp8];
  EXPECT_NEAR(h.calibration[Param::gemm_fraction_bf16], (fp8 + mx) / 2, 1e-5);
  char named[128];
  std::snprintf(named, sizeof named, "gemm_fraction_bf16 = %g is borrowed", h.calibration[Param::gemm_fraction_bf16]);
  EXPECT_EQ(notes_on(h, named), 1) << named;
  // A scenario that sets the rate itself has not borrowed it, whatever the profile under it did.
  const Scenario own = io::load_scenario(source("examples/layouts/qwen3-235b-h100-megatron-folded.json"),
                                         {{"batch.global_batch", "128"}, {"calibration", R"({"params": {"gemm_fraction_bf16": 0.75}})"}});
  EXPECT_EQ(own.calibration.borrowed.count(Param::gemm_fraction_bf16), 0u);
  EXPECT_EQ(own.calibration[Param::gemm_fraction_bf16], 0.75);
  EXPECT_EQ(notes_on(own, "gemm_fraction_bf16"), 0);
  h.calibration.borrowed.clear();  // as a fit of its own would
  EXPECT_EQ(notes_on(h, "gemm_fraction_bf16"), 0);
  h.calibration.set(Param::gemm_fraction_bf16, 0.8);  // back at the default, no borrowing: named so
  EXPECT_EQ(notes_on(h, "gemm_fraction_bf16 = 0.8 is its default, not a fit"), 1);
  h.calibration.profile = "defaults";  // no profile: every rate is a default, nothing to single out
  h.calibration.set(Param::gemm_fraction_bf16, 0.8);
  EXPECT_EQ(notes_on(h, "gemm_fraction_bf16"), 0);
  // Blackwell Ultra's GEMM and attention rates are Blackwell's fit: no B300 record sets them (its
  // two GEMM and two attention records are checks), and predict says so, naming the profile.
  const Scenario g = optimized();
  ASSERT_EQ(g.calibration.carried.count(Param::gemm_fraction_mxfp8), 1u);
  EXPECT_EQ(g.calibration.carried.at(Param::gemm_fraction_mxfp8), "blackwell");
  std::snprintf(named, sizeof named, "gemm_fraction_mxfp8 = %g is carried from the blackwell profile",
                g.calibration[Param::gemm_fraction_mxfp8]);
  EXPECT_EQ(notes_on(g, named), 1) << named;
  EXPECT_EQ(notes_on(g, "attention_bwd_fraction"), 1);
  // Set by the scenario, it is no longer carried.
  const Scenario set = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"),
                                         {{"calibration", R"({"params": {"gemm_fraction_mxfp8": 0.7}})"}});
  EXPECT_EQ(set.calibration.carried.count(Param::gemm_fraction_mxfp8), 0u);
  EXPECT_EQ(notes_on(set, "gemm_fraction_mxfp8"), 0);
  // A shape term carried across generations is named too: attention's head-dim term, fitted on
  // Hopper's FlashAttention-3 records, bends Blackwell Ultra's attention, whose exp units differ.
  ASSERT_EQ(g.calibration.carried.count(Param::attention_hd_half), 1u);
  std::snprintf(named, sizeof named, "attention_hd_half = %g is carried from the %s profile", g.calibration[Param::attention_hd_half],
                g.calibration.carried.at(Param::attention_hd_half).c_str());
  EXPECT_EQ(notes_on(g, named), 1) << named;
  const Scenario hd = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"),
                                        {{"calibration", R"({"params": {"attention_hd_half": 40}})"}});
  EXPECT_EQ(notes_on(hd, "attention_hd_half"), 0);  // set by the scenario: no longer carried
}

TEST(Band, ABadEndToEndFileNamesTheFileAndPath) {
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string p = dir + "/" + name;
    FILE* f = std::fopen(p.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return p;
  };
  const std::string neg = write("e2e-neg.json", R"({"kind": "end_to_end", "cases": [{"name": "x", "stack": "", "step_ratio": -1}]})");
  try {
    io::load_end_to_end(neg);
    FAIL() << "a negative ratio loaded";
  } catch (const io::SpecError& e) {
    EXPECT_EQ(e.json_path(), "/cases/0/step_ratio");
    EXPECT_NE(std::string(e.what()).find("e2e-neg.json"), std::string::npos) << e.what();
  }
  const std::string kind = write("e2e-kind.json", R"({"kind": "calibration", "cases": []})");
  try {
    io::load_end_to_end(kind);
    FAIL() << "a calibration profile loaded as end-to-end errors";
  } catch (const io::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("end_to_end"), std::string::npos) << e.what();
  }
  const std::string missing = write("e2e-missing.json", R"({"kind": "end_to_end", "cases": [{"name": "x", "step_ratio": 1.2}]})");
  try {
    io::load_end_to_end(missing);
    FAIL() << "a case without its stack loaded";
  } catch (const io::SpecError& e) {
    EXPECT_EQ(e.json_path(), "/cases/0");
  }
}

}  // namespace
}  // namespace moeperf
