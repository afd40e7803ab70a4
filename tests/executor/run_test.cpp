// The executor as a user runs it: under mpirun with 4 ranks (EP 4, skewed routing with idle
// experts) it passes its gates and writes measurements; a rank that exits, hangs, is killed or
// announces wrong counts mid-step ends the job with a message naming it in bounded time; a writer
// killed mid-write leaves the previous file whole; 64-bit offsets past 2^31.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <map>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "../model/io/temp_dir.h"
#include "executor/run.h"
#include "model/io/load.h"
#include "model/io/parts.h"
#include "model/study/calibrate.h"

namespace {

using moeperf::testing::source;
using moeperf::testing::TempDir;

struct Result {
  int code = -1;
  std::string out;
  double seconds = 0;
};

Result sh(const std::string& cmd) {
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string mpirun(int np) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 120 mpirun -np " +
         std::to_string(np) + " --oversubscribe --mca btl self,vader ";
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0 && moeperf::exec::built_with_mpi(); }

TEST(Executor, FourRanksPassTheGatesAndWriteMeasurements) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  const std::string out = d.path("m.json");
  const std::string cmd = mpirun(4) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") +
                          " --backend cpu --steps 2 --warmup 1 --out " + out;
  Result r = sh(cmd);
  // Once in many CI runs Open MPI's launcher failed within a second, before moeperf printed anything
  // (the output was not kept). A launcher failure is retried once and its output logged; a failure
  // of moeperf itself (it printed its communicator line) is not.
  if (r.code != 0 && r.out.find("communicator") == std::string::npos) {
    std::cerr << "mpirun failed before moeperf started (exit " << r.code << ", " << r.seconds
              << " s); retrying once. Its output:\n" << r.out << "\n";
    r = sh(cmd);
  }
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("communicator mpi, 4 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate ok: multi-rank output equals the single-rank FP32 reference"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate ok: payload"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate ok: dropless on every step"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(j["ranks"], 4);
  EXPECT_EQ(j["communicator"], "mpi");
  // Histogram: T x k rows per rank per step, 2 timed steps, 4 ranks; experts 5, 6, 11 have share 0.
  double sum = 0;
  for (double v : j["expert_rows_histogram"]) sum += v;
  EXPECT_DOUBLE_EQ(sum, 1024.0 * 4 * 4 * 2);
  for (int e : {5, 6, 11}) EXPECT_EQ(j["expert_rows_histogram"][static_cast<size_t>(e)].get<double>(), 0.0) << e;
  EXPECT_NE(r.out.find("experts 5, 6, 11 got no tokens"), std::string::npos) << r.out;
  for (const char* op : {"moe.dispatch", "moe.expert_fc1", "moe.expert_fc1.wgrad", "moe.combine", "moe.unpermute"}) {
    ASSERT_TRUE(j["ops"].contains(op)) << op;
    EXPECT_EQ(j["ops"][op]["calls"], 2) << op;
    EXPECT_GT(j["ops"][op]["median_s"].get<double>(), 0.0) << op;
    EXPECT_GE(j["ops"][op]["max_s"].get<double>(), j["ops"][op]["min_s"].get<double>()) << op;
  }
  // GEMM rate against this machine's own measured peak, beside each GEMM.
  EXPECT_GT(j["machine"]["gemm_peak_flops_measured"].get<double>(), 0.0);
  // The peak says what it measured (the CPU backend: Eigen), and a CPU run describes no GPU.
  EXPECT_NE(j["machine"]["gemm_peak_method"].get<std::string>().find("Eigen"), std::string::npos) << j["machine"];
  EXPECT_NE(r.out.find("(measured: 1024^3 FP32 Eigen GEMM"), std::string::npos) << r.out;
  EXPECT_FALSE(j["machine"].contains("gpu"));
  EXPECT_NE(j["communicator_detail"].get<std::string>().find("every exchange: mpi"), std::string::npos) << j["communicator_detail"];
  EXPECT_GT(j["ops"]["moe.expert_fc1"]["fraction_of_measured_peak"].get<double>(), 0.0);
  EXPECT_FALSE(j["git_revision"].get<std::string>().empty());
  // Each GEMM says its shape as the cost model prices it: the grouped FC1 has one group per local
  // expert, and its shape's work is the FLOPs it is rated by.
  const auto& fc1 = j["ops"]["moe.expert_fc1"];
  ASSERT_TRUE(fc1.contains("shape")) << fc1;
  const auto& sh1 = fc1["shape"];
  EXPECT_EQ(sh1["groups"].get<double>(), j["dims"]["experts"].get<double>() / 4);
  EXPECT_TRUE(sh1["ragged"].get<bool>());
  EXPECT_NEAR(2 * sh1["m"].get<double>() * sh1["n"].get<double>() * sh1["k"].get<double>() * sh1["groups"].get<double>(),
              fc1["flops_per_call"].get<double>(), 1e-6 * fc1["flops_per_call"].get<double>());
  EXPECT_FALSE(j["ops"]["moe.dispatch"].contains("shape"));
  // The file is measurements of parts for calibrate as it stands.
  const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + out);
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("gemm ("), std::string::npos) << c.out;
}

TEST(Executor, ARankThatExitsMidStepEndsTheJob) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  const Result r = sh("MOEPERF_FAULT=1:1 " + mpirun(4) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") +
                      " --steps 3 --warmup 0 --timeout 20");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "timed out instead of ending: " << r.out;  // `timeout` would say 124 after 120 s
  EXPECT_LT(r.seconds, 60.0);
  EXPECT_NE(r.out.find("rank 1: fault injected in step 1: exiting in the dispatch"), std::string::npos) << r.out;
}

TEST(Executor, ARankThatHangsEndsTheJobAtTheTimeout) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  const Result r = sh("MOEPERF_FAULT=2:1:hang " + mpirun(4) + MOEPERF_CLI + " run " +
                      source("examples/executor/cpu-small.json") + " --steps 3 --warmup 0 --timeout 5");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.seconds, 60.0) << r.out;
  EXPECT_NE(r.out.find("did not finish within 5 s (--timeout): a peer failed or hangs"), std::string::npos) << r.out;
}

TEST(Executor, ARankKilledMidDispatchEndsTheJobNamingIt) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  const Result r = sh("MOEPERF_FAULT=1:1:kill " + mpirun(4) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") +
                      " --steps 3 --warmup 0 --timeout 20");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "timed out instead of ending: " << r.out;
  EXPECT_LT(r.seconds, 60.0);
  EXPECT_NE(r.out.find("rank 1: fault injected in step 1: killed (SIGKILL) in the dispatch"), std::string::npos) << r.out;
  // Open MPI's launcher names the rank and the signal: "process rank 1 with PID ... exited on signal 9 (Killed)".
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("signal 9"), std::string::npos) << r.out;
}

TEST(Executor, ARankThatAnnouncesWrongCountsIsNamed) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  // Rank 1 announces one row too many to rank 2 and sends the true rows: rank 2 ends the job
  // before the all-to-all, naming rank 1.
  const Result r = sh("MOEPERF_FAULT=1:1:counts " + mpirun(4) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") +
                      " --steps 3 --warmup 0 --timeout 20");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << "timed out instead of ending: " << r.out;
  EXPECT_LT(r.seconds, 60.0);
  EXPECT_NE(r.out.find("rank 2: correctness gate failed: count exchange in step 1: rank 1 announced"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("but its dispatch carries"), std::string::npos) << r.out;
}

TEST(Executor, WrongCountsOnLoopbackFailTheGate) {
  const Result r = sh("MOEPERF_FAULT=0:0:counts " + std::string(MOEPERF_CLI) + " run " + source("examples/executor/cpu-small.json") +
                      " --steps 1 --warmup 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("count exchange in step 0: rank 0 announced"), std::string::npos) << r.out;
}

TEST(Executor, AMeasurementFileIsNeverSeenHalfWritten) {
  TempDir d;
  const std::string out = d.path("m.json");
  const std::string cmd = std::string(MOEPERF_CLI) + " run " + source("examples/executor/cpu-small.json") + " --steps 1 --warmup 0 --out " + out;
  ASSERT_EQ(sh(cmd).code, 0);
  std::ifstream f1(out);
  const std::string first((std::istreambuf_iterator<char>(f1)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(first.empty());
  // The writer is killed halfway through: the file in place is still the whole first one (the
  // writer writes a temporary and renames it into place); the half-written temporary is left.
  const Result killed = sh("MOEPERF_FAULT_WRITE=kill " + cmd);
  EXPECT_NE(killed.code, 0) << killed.out;
  std::ifstream f2(out);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(f2)), std::istreambuf_iterator<char>()), first);
  ASSERT_TRUE(std::filesystem::exists(out + ".tmp"));
  // A truncated file handed to calibrate: an input error naming it, exit 2.
  const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + out + ".tmp");
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.out.find(out + ".tmp: malformed JSON"), std::string::npos) << c.out;
}

TEST(Executor, SixtyFourBitOffsetsPastTwoToThe31) {
  // DeepSeek-V3 sizes: 300,000 tokens x k = 8 rows of 7,168 floats; rows x hidden = 1.7e10 > 2^31.
  const int64_t tokens = 300000, hidden = 7168;
  const int64_t off = moeperf::exec::dry_run_last_row_offset(tokens, 8, hidden);
  EXPECT_EQ(off, (tokens * 8 - 1) * hidden * 4);
  EXPECT_GT((tokens * 8 - 1) * hidden, int64_t{1} << 31);
  const Result r = sh(std::string(MOEPERF_CLI) + " run " + source("examples/deepseek-v3/gb300-optimized.json") +
                      " --dry-run-offsets 300000");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("last row at byte " + std::to_string(off)), std::string::npos) << r.out;
}

TEST(Executor, LoopbackRunsWithoutMpi) {
  const Result r = sh(std::string(MOEPERF_CLI) + " run " + source("examples/executor/cpu-small.json") + " --steps 1 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("communicator loopback, 1 rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the EP group is the 1 launched ranks (the scenario says ep = 4)"), std::string::npos) << r.out;
}

// The calibration suite (executor/suite.h): every op class the model prices, as records that
// `moeperf calibrate` fits, and this machine as a system file that loads.
TEST(Suite, TwoRanksMeasureEveryClassAndTheFitImprovesTheGemms) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  const std::string out = d.path("suite.json"), sys = d.path("cpu-system.json");
  const Result r = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --backend cpu --budget 25 --out " + out + " --write-system " + sys);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 ranks (mpi)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(out));
  EXPECT_EQ(j["kind"], "measurements");
  std::map<std::string, int> per_op;
  for (const auto& x : j["records"]) {
    per_op[x["op"]] += 1;
    if (std::string(x["op"]).rfind("collective.", 0) == 0) {
      EXPECT_EQ(x["gpus"], 2);
    }
  }
  for (const char* op : {"gemm", "grouped_gemm", "attention.fwd", "attention.bwd", "memory.copy", "collective.all_to_all",
                         "collective.all_gather", "collective.reduce_scatter", "collective.all_reduce"})
    EXPECT_GT(per_op[op], 0) << op << "\n" << r.out;
  // The system file: 2 devices joined by the measured shared-memory link.
  const Result t = sh(std::string(MOEPERF_CLI) + " topo " + sys + " --format json");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(nlohmann::json::parse(t.out)["gpus"], 2);
  // The fit: GEMMs (a flat Eigen rate over the measured peak) are reproduced far better after it.
  const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + out + " --out " + d.path("cpu.json"));
  ASSERT_EQ(c.code, 0) << c.out;
  const auto g = c.out.find("\ngemm (");
  ASSERT_NE(g, std::string::npos) << c.out;
  double fb = 0, fa = 0;
  ASSERT_EQ(std::sscanf(c.out.c_str() + c.out.find("fitted", c.out.find("|error|", g)), "fitted %lf %% %lf %%", &fb, &fa), 2) << c.out;
  EXPECT_LT(fa, fb) << c.out;
  EXPECT_LT(fa, 15.0) << c.out;
  EXPECT_TRUE(std::filesystem::exists(d.path("cpu.json")));
}

// The closed loop: fit on the suite's microbenchmarks, then predict the MoE layer the executor
// runs, op by op. The layer's ops are never fitted: they are the held-back set. GEMMs are most of
// the layer's compute on the CPU.
TEST(Suite, FittedOnTheSuiteItPredictsTheLayersOps) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  const std::string suite = d.path("suite.json"), profile = d.path("cpu.json"), layer = d.path("layer.json");
  Result r = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --budget 20 --out " + suite);
  ASSERT_EQ(r.code, 0) << r.out;
  r = sh(std::string(MOEPERF_CLI) + " calibrate " + suite + " --out " + profile);
  ASSERT_EQ(r.code, 0) << r.out;
  r = sh(mpirun(2) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") + " --steps 3 --out " + layer);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto recs = moeperf::io::load_parts(layer);
  const moeperf::Calibration fitted = moeperf::io::load_calibration(profile), defaults{};
  const auto j = nlohmann::json::parse(std::ifstream(layer));
  const double steps = j["steps"].get<double>();
  std::vector<double> err_default, err_fitted;
  double measured = 0, predicted_default = 0, predicted_fitted = 0;
  for (const moeperf::PartRecord& x : recs) {
    const std::string name = x.id.substr(x.id.find('/') + 1);
    const double per_step = j["ops"][name]["calls"].get<double>() / steps;
    const double a = moeperf::predict_part(x, defaults), b = moeperf::predict_part(x, fitted);
    measured += x.value * per_step, predicted_default += a * per_step, predicted_fitted += b * per_step;
    if (x.cls == moeperf::PartClass::gemm) {
      err_default.push_back(std::abs(a / x.value - 1));
      err_fitted.push_back(std::abs(b / x.value - 1));
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  ASSERT_GE(err_fitted.size(), 10u);
  const double md = med(err_default), mf = med(err_fitted);
  std::printf("layer GEMMs: median |error| %.1f %% at the defaults, %.1f %% fitted on the suite; compute ops per step: measured %.1f ms, "
              "predicted %.1f ms (defaults) and %.1f ms (fitted)\n",
              100 * md, 100 * mf, 1e3 * measured, 1e3 * predicted_default, 1e3 * predicted_fitted);
  EXPECT_LT(mf, md);
  EXPECT_LT(mf, 0.12);
  EXPECT_LT(std::abs(predicted_fitted / measured - 1), 0.15);
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
