// The calibration suite (executor/suite.h) as a user runs it, and the closed loop: fitted on the
// suite's microbenchmarks, the model predicts the executor's MoE layer op by op. Timing tests: they
// run alone (RUN_SERIAL), since a test beside them on the same cores would be measured too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "../model/io/temp_dir.h"
#include "model/io/load.h"
#include "model/io/parts.h"
#include "model/study/calibrate.h"
#include "tests/executor/run_helpers.h"

namespace {

using moeperf::testing::have_mpirun;
using moeperf::testing::mpirun;
using moeperf::testing::Result;
using moeperf::testing::sh;
using moeperf::testing::source;
using moeperf::testing::TempDir;

// The calibration suite (executor/suite.h): every op class the model prices, as records that
// `moeperf calibrate` fits, and this machine as a system file that loads.
TEST(Suite, TwoRanksMeasureEveryClassAndTheFitLowersTheirErrors) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  const std::string out = d.path("suite.json"), sys = d.path("cpu-system.json");
  const Result r = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --backend cpu --budget 15 --out " + out + " --write-system " + sys);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 ranks (mpi)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(j["kind"], "measurements");
  std::map<std::string, int> per_op;
  for (const auto& x : j["records"]) {
    per_op[x["op"]] += 1;
    if (std::string(x["op"]).rfind("collective.", 0) == 0) {
      EXPECT_EQ(x["gpus"], 2);
      // The executor's own algorithms (executor/comm.h), priced as those: rings, and a direct all-to-all.
      EXPECT_EQ(x.value("algorithm", ""), x["op"] == "collective.all_to_all" ? "direct" : "ring") << x.dump();
    } else {
      // A compute record says how it was timed (Backend::time_work; on the CPU the host's clock).
      EXPECT_NE(x.value("library", "").find("timed by host clock"), std::string::npos) << x.dump();
    }
  }
  // The ranks' link is host memory (reductions on the cores, caches), the step latency the fit's
  // start: measured, with no kernel launch.
  EXPECT_EQ(j["systems"]["this-machine"]["nvlink_domain"]["transport"], "host_memory");
  EXPECT_GT(j["calibration"]["params"]["nvlink_step_s"].get<double>(), 0.0);
  EXPECT_EQ(j["calibration"]["params"]["collective_launch_s"].get<double>(), 0.0);
  for (const char* op : {"gemm", "grouped_gemm", "attention.fwd", "attention.bwd", "memory.copy", "collective.all_to_all",
                         "collective.all_gather", "collective.reduce_scatter", "collective.all_reduce"})
    EXPECT_GT(per_op[op], 0) << op << "\n" << r.out;
  // The system file: 2 devices joined by the measured shared-memory link.
  const Result t = sh(std::string(MOEPERF_CLI) + " topo " + sys + " --format json");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(nlohmann::json::parse(t.out)["gpus"], 2);
  // The fit: on the measure it lowers (the root mean square of its fitted records' log errors,
  // weighted) no class comes out farther after it, and over the classes the squares at least
  // halve (a no-op fit fails here; seen: 0.63 -> 0.15, collectives and attention most, a memory
  // class that the start already priced about as well as the form can stayed at 0.267); and the
  // GEMMs (a flat Eigen rate over the measured peak) within 15 % (median) after it.
  // The GEMMs' median itself need not fall: since the suite takes the median of its peak
  // measurements the defaults' median came out at 3-10 % in most suites (47 % in another), within
  // this VM's noise between suites; the collectives' at 17-58 %.
  // A timing test on a shared 2-core machine: a suite measured while something else ran can miss
  // the bar, so up to three suites are measured and one that holds passes.
  auto before_after = [](const std::string& text, const char* cls, double& before, double& after) {
    const auto g = text.find(std::string("\n") + cls + " (");
    if (g == std::string::npos) return false;
    return std::sscanf(text.c_str() + text.find("fitted", text.find("|error|", g)), "fitted %lf %% %lf %%", &before, &after) == 2;
  };
  std::string last;
  bool held = false;
  for (int attempt = 1; attempt <= 3 && !held && !HasFailure(); ++attempt) {
    const std::string suite = attempt == 1 ? out : d.path("suite" + std::to_string(attempt) + ".json");
    if (attempt > 1) {
      const Result again = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --backend cpu --budget 15 --out " + suite);
      ASSERT_EQ(again.code, 0) << again.out;
    }
    const std::string profile = d.path("cpu" + std::to_string(attempt) + ".json");
    const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + suite + " --out " + profile);
    ASSERT_EQ(c.code, 0) << c.out;
    EXPECT_TRUE(std::filesystem::exists(profile));
    double fb = 0, fa = 0;
    ASSERT_TRUE(before_after(c.out, "gemm", fb, fa)) << c.out;
    // The fit as `calibrate` makes it (the suite's own "calibration" as its start), and its objective
    // before and after over the records it fitted (not the held-back nor the checked-only).
    const auto recs = moeperf::io::load_parts(suite);
    ASSERT_FALSE(recs.empty());
    const moeperf::Calibration start = moeperf::io::parts_calibration(suite, moeperf::Calibration{}).value_or(moeperf::Calibration{});
    const moeperf::FitReport rep = moeperf::fit_parts(recs, start, recs.front().generation);
    auto num = [](double v, int digits) {
      char b[32];
      std::snprintf(b, sizeof b, "%.*f", digits, v);
      return std::string(b);
    };
    std::string line = "attempt " + std::to_string(attempt) + ": GEMM median |error| " + num(fb, 1) + " % before the fit, " +
                       num(fa, 1) + " % after; rms log error of the fitted records before -> after:";
    held = fa < 15.0 && rep.classes.size() >= 4;
    double total_before = 0, total_after = 0;
    for (const moeperf::ClassFit& cf : rep.classes) {
      double sb = 0, sa = 0, w = 0;
      for (const moeperf::RecordFit& x : cf.records) {
        if (x.held_back || x.record->check_only) continue;
        const double a = std::log(1 + x.before), b = std::log(1 + x.after);
        sb += x.record->weight * a * a, sa += x.record->weight * b * b, w += x.record->weight;
      }
      if (w == 0) continue;
      const double before = std::sqrt(sb / w), after = std::sqrt(sa / w);
      line += std::string(" ") + moeperf::to_string(cf.cls) + " " + num(before, 3) + " -> " + num(after, 3);
      held = held && after <= before * (1 + 1e-12);
      total_before += before * before, total_after += after * after;
    }
    held = held && total_after < 0.5 * total_before;
    std::printf("%s\n", line.c_str());
    last = line + "\n" + c.out;
  }
  EXPECT_TRUE(held) << last;
}

// A budget spent before a section starts (here: all of it, at once) cuts each class to its
// cheapest case, never to none: the fit needs a record of every op class the model prices. Seen
// before the rule: a suite whose compute sections overran their shares started its collectives at
// "15 s of 15 s" and wrote no collective record at all.
TEST(Suite, ABudgetSpentEarlyStillMeasuresEveryClassOnce) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  const std::string out = d.path("tiny.json");
  const Result r = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --backend cpu --budget 0.01 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  std::map<std::string, int> per_op;
  const auto j = nlohmann::json::parse(std::ifstream(out));
  for (const auto& x : j["records"]) per_op[x["op"]] += 1;
  for (const char* op : {"gemm", "grouped_gemm", "attention.fwd", "attention.bwd", "collective.all_gather",
                         "collective.reduce_scatter", "collective.all_reduce"})
    EXPECT_EQ(per_op[op], 1) << op << "\n" << r.out;
  // The even and the ragged all-to-all, one each; the memory section's smallest size, its widths
  // and orders (3 x 2).
  EXPECT_EQ(per_op["collective.all_to_all"], 2) << r.out;
  EXPECT_EQ(per_op["memory.copy"], 6) << r.out;
  EXPECT_NE(r.out.find("skipped: budget"), std::string::npos) << r.out;
}

// The closed loop: fit on the suite's microbenchmarks, then predict the MoE layer the executor
// runs, op by op. The layer's ops are never fitted: they are the held-back set. GEMMs are most of
// the layer's compute on the CPU.
struct Loop {
  double md = 0, mf = 0;                // median |error| of the layer's GEMMs: defaults, fitted
  double ad = 0, af = 0;                // the same of its attention cores (forward and backward)
  double measured = 0, predicted = 0;   // the layer's compute ops per step, fitted
  double comm_measured = 0, comm_predicted = 0;  // its exchanges per step, priced on the suite's system, fitted
  std::string text;
};

Loop closed_loop(const TempDir& d, int attempt) {
  const std::string n = std::to_string(attempt);
  const std::string suite = d.path("suite" + n + ".json"), profile = d.path("cpu" + n + ".json"), layer = d.path("layer" + n + ".json"),
                    machine = d.path("machine" + n + ".json");
  Result r = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --budget 20 --out " + suite + " --write-system " + machine);
  EXPECT_EQ(r.code, 0) << r.out;
  r = sh(std::string(MOEPERF_CLI) + " calibrate " + suite + " --out " + profile);
  EXPECT_EQ(r.code, 0) << r.out;
  r = sh(mpirun(2) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") + " --steps 5 --machine " + machine + " --out " + layer);
  EXPECT_EQ(r.code, 0) << r.out;
  Loop l;
  if (::testing::Test::HasFailure()) return l;
  const auto recs = moeperf::io::load_parts(layer);
  const moeperf::Calibration fitted = moeperf::io::load_calibration(profile), defaults{};
  const auto j = nlohmann::json::parse(std::ifstream(layer));
  const double steps = j["steps"].get<double>();
  std::vector<double> err_default, err_fitted, attn_default, attn_fitted;
  double predicted_default = 0;
  for (const moeperf::PartRecord& x : recs) {
    const std::string name = x.id.substr(x.id.find('/') + 1);
    const double per_step = j["ops"][name]["calls"].get<double>() / steps;
    const double a = moeperf::predict_part(x, defaults), b = moeperf::predict_part(x, fitted);
    if (x.cls == moeperf::PartClass::collective) {
      l.comm_measured += x.value * per_step, l.comm_predicted += b * per_step;
      continue;
    }
    l.measured += x.value * per_step, predicted_default += a * per_step, l.predicted += b * per_step;
    if (x.cls == moeperf::PartClass::gemm) {
      err_default.push_back(std::abs(a / x.value - 1));
      err_fitted.push_back(std::abs(b / x.value - 1));
    }
    if (x.cls == moeperf::PartClass::attention) {
      attn_default.push_back(std::abs(a / x.value - 1));
      attn_fitted.push_back(std::abs(b / x.value - 1));
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 1.0 : v[v.size() / 2];
  };
  EXPECT_GE(err_fitted.size(), 10u);
  l.md = med(err_default), l.mf = med(err_fitted);
  EXPECT_EQ(attn_fitted.size(), 2u) << "the layer's attention core, forward and backward";
  l.ad = med(attn_default), l.af = med(attn_fitted);
  EXPECT_GT(l.comm_measured, 0.0) << "the layer's exchanges as collective records (run with --machine)";
  char b[800];
  std::snprintf(b, sizeof b,
                "attempt %d: layer GEMMs median |error| %.1f %% at the defaults, %.1f %% fitted on the suite; attention cores %.1f %% "
                "and %.1f %%; compute ops per step: measured %.1f ms, predicted %.1f ms (defaults) and %.1f ms (fitted); exchanges "
                "per step on the suite's system: measured %.1f ms, predicted %.1f ms (fitted)",
                attempt, 100 * l.md, 100 * l.mf, 100 * l.ad, 100 * l.af, 1e3 * l.measured, 1e3 * predicted_default, 1e3 * l.predicted,
                1e3 * l.comm_measured, 1e3 * l.comm_predicted);
  l.text = b;
  return l;
}

// This 2-core VM's speed drifts by 15 % over minutes, and the suite and the layer run minutes
// apart: an attempt may see the machine at two speeds. Up to five attempts; one that holds
// passes. Without the fit (fitted = defaults) no attempt can: its attention median equals the defaults'.
TEST(Suite, FittedOnTheSuiteItPredictsTheLayersOps) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  std::string log;
  bool held = false;
  for (int attempt = 1; attempt <= 5 && !held && !HasFailure(); ++attempt) {
    const Loop l = closed_loop(d, attempt);
    std::printf("%s\n", l.text.c_str());
    log += l.text + "\n";
    // The attention cores fall from about 55 % at the defaults to 15-23 % fitted (the layer's head
    // dim, 32, is at the edge of the suite's 32-128). The GEMM median came out at 5-23 % fitted in 14
    // of 16 attempts on two machines (32 % and 50 % in the others, the second in a run whose whole
    // layer came out 27 % off), 4-23 % at the defaults (2026-12-03): the suite times each shape
    // on one rank with its operands hot in cache, the layer once per step beside the other rank
    // (one run's wgrads of one shape at 0.62 and 0.87 of the peak), a spread the GEMM form has no
    // term for, and its own residual on the suite's records is ~16 %. So the GEMMs are held to a
    // bound that a broken fit misses by far (a fraction at its bound, a wrong shape: 50 %+), not
    // to the defaults; the attention cores are what the fit must improve.
    // When the machine slows during the layer run after it measured its peak, every op of it is
    // slower than priced and the total moves with it (seen: -31 %, -35 %), fit or no fit: hence
    // the attempts. Since the layer's run measures its peak on every rank at once (as its ops run),
    // the first attempt held in 3 of 4 runs (2026-12-02); before, the lone core's peak priced the
    // layer's GEMMs ~20 % fast and it took up to five. Since 2026-12-03 both sides take the median
    // of several peak measurements (the layer's run before its timed steps and after each, the
    // suite after each section): one taken at a passing spell priced a whole layer 19-30 % off.
    // The layer end to end, compute and exchanges (the exchanges priced on the suite's system by the
    // fitted collective model), within 15 % of the measured.
    const double layer_error = (l.predicted + l.comm_predicted) / (l.measured + l.comm_measured) - 1;
    std::printf("  the layer per step: measured %.1f ms, predicted %.1f ms (%+.1f %%)\n", 1e3 * (l.measured + l.comm_measured),
                1e3 * (l.predicted + l.comm_predicted), 100 * layer_error);
    held = l.mf < 0.25 && l.af < 0.75 * l.ad && l.af < 0.30 && std::abs(layer_error) < 0.15;
  }
  EXPECT_TRUE(held) << log;
}

TEST(Suite, OneRankSaysCollectivesNeedMoreAndBadOptionsExitTwo) {
  TempDir d;
  const Result r = sh(std::string(MOEPERF_CLI) + " run --suite calibrate --budget 4 --out " + d.path("s.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("collectives: one rank (run under mpirun -np 2 or more to measure them)"), std::string::npos) << r.out;
  const Result b = sh(std::string(MOEPERF_CLI) + " run " + source("examples/executor/cpu-small.json") + " --suite calibrate");
  EXPECT_EQ(b.code, 2) << b.out;
  EXPECT_NE(b.out.find("--suite measures this machine and runs no scenario"), std::string::npos) << b.out;
  const Result n = sh(std::string(MOEPERF_CLI) + " run");
  EXPECT_EQ(n.code, 2) << n.out;
  EXPECT_NE(n.out.find("SCENARIO is required (or --suite calibrate)"), std::string::npos) << n.out;
}

}  // namespace
