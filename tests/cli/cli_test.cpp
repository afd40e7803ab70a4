// The moeperf binary as a user runs it: output, exit codes (0 ok, 1 failed, 2 bad input) and
// nothing written when the input is bad.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <stdexcept>
#include <functional>
#include <atomic>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <iterator>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "../model/io/temp_dir.h"
#include "cli/common.h"
#include "../model/io/trace_fixtures.h"

namespace {

using moeperf::testing::source;
using moeperf::testing::TempDir;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// A shell command's exit code and its stdout and stderr together.
Result sh(const std::string& cmd) {
  Result r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result run(const std::string& args) { return sh(std::string(MOEPERF_CLI) + " " + args); }
// stdout alone (a command's progress on stderr left out): for output parsed as JSON.
Result run_stdout(const std::string& args) { return sh("(" + std::string(MOEPERF_CLI) + " " + args + " 2>/dev/null)"); }

// Jobs on threads: a job that throws stops the hand-out, and the lowest-numbered failure is the one
// rethrown, whatever the thread count (a worker's exception must not end the process).
TEST(Cli, ThreadsRethrowTheFirstFailedJob) {
  for (int jobs : {1, 2, 4}) {
    std::vector<std::function<void()>> work;
    std::atomic<int> ran{0};
    for (int i = 0; i < 20; ++i)
      work.emplace_back([i, &ran] {
        ++ran;
        if (i == 7 || i == 12) throw std::runtime_error("job " + std::to_string(i));
      });
    try {
      moeperf::cli::run_on_threads(jobs, work);
      ADD_FAILURE() << "no exception with " << jobs << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "job 7") << jobs;
    }
    EXPECT_GE(ran.load(), 8) << jobs;  // jobs 0-7 ran
    if (jobs == 1) {
      EXPECT_EQ(ran.load(), 8);  // one thread stops at the failure
    }
  }
  std::vector<std::function<void()>> fine(5, [] {});
  EXPECT_EQ(moeperf::cli::run_on_threads(3, fine), 3);
}

// accuracy predicts its cases on threads and prints what one thread prints, in the file's order.
TEST(Cli, AccuracyOnThreadsPrintsWhatOneThreadPrints) {
  TempDir d;
  const std::string cases = d.path("cases.json");
  std::ofstream(cases) << R"({"kind": "accuracy_cases", "cases": [
    {"scenario": ")" << source("examples/executor/cpu-small.json") << R"(", "metric": "step_time_s", "published": 1.0, "source": "t"},
    {"scenario": ")" << source("examples/deepseek-v3/gb300-baseline.json") << R"(", "metric": "tflops_per_gpu", "published": 103, "source": "t"},
    {"scenario": ")" << source("examples/deepseek-v3/gb300-optimized.json") << R"(", "metric": "tflops_per_gpu", "published": 1068, "source": "t"}]})";
  const Result one = run_stdout("accuracy " + cases + " --format json --jobs 1");
  const Result three = run_stdout("accuracy " + cases + " --format json --jobs 3");
  ASSERT_EQ(one.code, 0) << one.out;
  ASSERT_EQ(three.code, 0) << three.out;
  EXPECT_EQ(one.out, three.out);
  const auto j = nlohmann::json::parse(three.out);
  ASSERT_EQ(j["cases"].size(), 3u);
  EXPECT_EQ(j["cases"][2]["published"], 1068);
  // Progress on stderr, the last line at 3/3.
  const Result all = run("accuracy " + cases + " --jobs 2");
  EXPECT_NE(all.out.find("accuracy: 3/3 cases"), std::string::npos) << all.out;
  EXPECT_EQ(run("accuracy " + cases + " --jobs 0").code, 2);  // a thread count is at least one
}

TEST(Cli, TopoGb200Nvl72) {
  const Result r = run("topo " + source("topologies/gb200-nvl72.json") + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], 72);
  EXPECT_EQ(j["vertices"]["nvswitch"], 18);
  EXPECT_DOUBLE_EQ(j["nvlink_bytes_per_s_per_gpu_per_direction"].get<double>(), 18 * 50e9);
}

TEST(Cli, TopoGb300At1024ReportsScaleOutAndBisection) {
  const Result r = run("topo " + source("topologies/gb300-nvl72.json") + " --gpus 1024");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("scale-out/GPU 800 Gb/s = 100 GB/s per direction"), std::string::npos) << r.out;
  // 1024 / 2 x 100 GB/s = 51.2 TB/s per direction
  EXPECT_NE(r.out.find("scale-out fabric 51.20 TB/s per direction"), std::string::npos) << r.out;
}

// `moeperf collective` prices as predict does: the shipped profile of the system's GPU generation
// (Hopper's fitted NVLink step, not the default 3.4 us), or the profile the user names.
TEST(Cli, CollectivePricesWithTheGenerationsProfileOrTheOneNamed) {
  const std::string sys = source("topologies/dgx-h100-cluster.json");
  const std::string cmd = "collective " + sys + " --op all_gather --gpus 8 --bytes 1GiB --format json";
  const Result r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto hopper = nlohmann::json::parse(std::ifstream(source("calibration/profiles/hopper.json")))["params"];
  EXPECT_NE(j["profile"].get<std::string>().find("hopper"), std::string::npos) << r.out;
  // A ring of 8 in one NVLink domain: the launch and 7 NVLink steps (each above the route's wire latency).
  EXPECT_NEAR(j["latency_s"].get<double>(), hopper["collective_launch_s"].get<double>() + 7 * hopper["nvlink_step_s"].get<double>(), 1e-12)
      << r.out;
  // Another generation's shipped profile by its name.
  const Result bw = run(cmd + " --calibration blackwell");
  ASSERT_EQ(bw.code, 0) << bw.out;
  const auto blackwell = nlohmann::json::parse(std::ifstream(source("calibration/profiles/blackwell.json")))["params"];
  EXPECT_NE(nlohmann::json::parse(bw.out)["profile"].get<std::string>().find("blackwell"), std::string::npos) << bw.out;
  EXPECT_NEAR(nlohmann::json::parse(bw.out)["latency_s"].get<double>(),
              blackwell["collective_launch_s"].get<double>() + 7 * blackwell["nvlink_step_s"].get<double>(), 1e-12)
      << bw.out;
  const Result d = run(cmd + " --calibration " + source("examples/calibration/defaults.json"));
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NEAR(nlohmann::json::parse(d.out)["latency_s"].get<double>(), 10e-6 + 7 * 3.4e-6, 1e-12) << d.out;
  TempDir t;
  std::ofstream(t.path("bad.json")) << R"({"kind": "calibration", "params": {"nvlink_step_s": "x"}})";
  const Result b = run("collective " + sys + " --calibration " + t.path("bad.json"));
  EXPECT_EQ(b.code, 2) << b.out;
  EXPECT_NE(b.out.find("bad.json: /params/nvlink_step_s: expected a number"), std::string::npos) << b.out;
  // A borrowed or carried value must be one the file sets, with how it was borrowed or the profile
  // it came from.
  const std::vector<std::pair<std::string, std::string>> notes = {
      {R"({"kind": "calibration", "params": {"nvlink_step_s": 4e-6}, "borrowed": {"gemm_fraction_bf16": "x"}})",
       "/borrowed/gemm_fraction_bf16: expected a parameter this file sets"},
      {R"({"kind": "calibration", "params": {"gemm_fraction_bf16": 0.7}, "borrowed": {"gemm_fraction_bf16": ""}})",
       "/borrowed/gemm_fraction_bf16: expected how the value was borrowed"},
      {R"({"kind": "calibration", "params": {"nvlink_step_s": 4e-6}, "carried": {"hbm_fraction": "hopper"}})",
       "/carried/hbm_fraction: expected a parameter this file sets"},
      {R"({"kind": "calibration", "params": {"hbm_fraction": 0.8}, "carried": {"hbm_fraction": ""}})",
       "/carried/hbm_fraction: expected the name of the profile"}};
  for (size_t i = 0; i < notes.size(); ++i) {
    const std::string name = "note" + std::to_string(i) + ".json";
    std::ofstream(t.path(name)) << notes[i].first;
    const Result n = run("collective " + sys + " --calibration " + t.path(name));
    EXPECT_EQ(n.code, 2) << n.out;
    EXPECT_NE(n.out.find(name + ": " + notes[i].second), std::string::npos) << n.out;
  }
}

TEST(Cli, TopoWritesDot) {
  TempDir d;
  const std::string dot = d.path("g.dot");
  const Result r = run("topo " + source("topologies/dgx-h100-cluster.json") + " --dot " + dot);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(std::filesystem::exists(dot));
  EXPECT_GT(std::filesystem::file_size(dot), 100u);
}

TEST(Cli, BadInputExitsTwoAndWritesNothing) {
  TempDir d;
  const std::string bad = d.write("bad.json", R"({"kind": "system", "name": "x", "nvlink_domain": "missing.json"})");
  const std::string dot = d.path("g.dot");
  const Result r = run("topo " + bad + " --dot " + dot);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(bad + ": /nvlink_domain: referenced file \"missing.json\" not found"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dot));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(d.path("")), std::filesystem::directory_iterator()), 1);  // bad.json alone
}

TEST(Cli, ValidateReportsEachFileAndExitsTwoIfAnyIsWrong) {
  TempDir d;
  const std::string bad = d.write("bad.json", "{ not json");
  const Result ok = run("validate " + source("topologies/gb300-nvl72.json"));
  EXPECT_EQ(ok.code, 0) << ok.out;
  const Result r = run("validate " + source("topologies/gb300-nvl72.json") + " " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("ok     " + source("topologies/gb300-nvl72.json")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(bad + ": malformed JSON at line 1, column 4: syntax error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 2 files failed"), std::string::npos) << r.out;
}

TEST(Cli, HelpOnEverySubcommandAndUsageErrorsExitTwo) {
  for (const char* sub : {"", "topo ", "validate "}) {
    const Result r = run(std::string(sub) + "--help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
  EXPECT_EQ(run("topo").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("topo " + source("topologies/gb300-nvl72.json") + " --gpus -3").code, 2);
  EXPECT_EQ(run("topo " + source("topologies/gb300-nvl72.json") + " --format yaml").code, 2);
}

TEST(Cli, MissingFileExitsTwo) {
  const Result r = run("topo /nonexistent/system.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent/system.json: cannot open file"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------- what a new user hit (issue: fresh machine)
const std::string kOptimized = source("examples/deepseek-v3/gb300-optimized.json");
const std::string kBaseline = source("examples/deepseek-v3/gb300-baseline.json");
const std::string kDualPipe = source("examples/deepseek-v3/h800-dualpipe.json");

nlohmann::json predict_json(const std::string& args) {
  const Result r = run("predict " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.out;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// --set follows a scenario's references into the system file and any file below it; the value is
// checked like any other (type, unit) and the error names the dotted path the user typed.
TEST(Cli, SetReachesFieldsOfReferencedFiles) {
  const double base = predict_json(kOptimized)["step_time_s"].get<double>();
  const double half_nic =
      predict_json(kOptimized + " --set 'system.nvlink_domain.tray.nic.port_bandwidth=400 Gb/s'")["step_time_s"].get<double>();
  EXPECT_GT(half_nic, base);  // half the scale-out bandwidth: FSDP collectives across racks take longer
  const Result bad = run("predict " + kOptimized + " --set 'system.nvlink_domain.tray.nic.port_bandwidth=4 parsecs'");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find(kOptimized + ": /system/nvlink_domain/tray/nic/port_bandwidth: expected a bandwidth"),
            std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("(set by --set system.nvlink_domain.tray.nic.port_bandwidth=4 parsecs)"), std::string::npos) << bad.out;
  // A file the reference chain does not reach, or a field inside a number, is an error, not a new key.
  const Result inside = run("predict " + kOptimized + " --set gpus.x=3");
  EXPECT_EQ(inside.code, 2) << inside.out;
  EXPECT_NE(inside.out.find("/gpus: --set gpus.x: gpus is a number, not an object with fields"), std::string::npos) << inside.out;
}

// A zero bandwidth anywhere would make transfers free (or infinite): every one is an error with its path.
TEST(Cli, ZeroBandwidthIsAnErrorWithItsPath) {
  for (const std::string field : {"system.nvlink_domain.tray.nic.port_bandwidth", "system.nvlink_domain.tray.gpu.hbm_bandwidth",
                                   "system.nvlink_domain.tray.gpu.nvlink.bandwidth_per_link",
                                   "system.nvlink_domain.tray.nic.host_link.bandwidth",
                                   "system.nvlink_domain.tray.cpu.gpu_link.bandwidth_bidirectional",
                                   "system.nvlink_domain.tray.cpu.memory_bandwidth"}) {
    const Result r = run("predict " + kOptimized + " --set '" + field + "=0 GB/s'");
    EXPECT_EQ(r.code, 2) << field << ": " << r.out;
    std::string ptr = "/" + field;
    std::replace(ptr.begin(), ptr.end(), '.', '/');
    EXPECT_NE(r.out.find(ptr + ": expected a positive bandwidth, got \"0 GB/s\""), std::string::npos) << r.out;
  }
  // The same in a system file handed to topo.
  TempDir d;
  const std::string nic = d.write("nic.json", R"({"kind": "nic", "name": "dead NIC", "port_bandwidth": "0 Gb/s",
                                                  "host_link": {"name": "PCIe", "bandwidth": "64 GB/s"}})");
  const Result v = run("validate " + nic);
  EXPECT_EQ(v.code, 2) << v.out;
  EXPECT_NE(v.out.find(nic + ": /port_bandwidth: expected a positive bandwidth"), std::string::npos) << v.out;
}

// predict says what it simulated: layout, micro-batches, racks and GPUs per rack, and the overrides.
TEST(Cli, PredictEchoesWhatItSimulated) {
  const Result r = run("predict " + kOptimized + " --set gpus=256 --set parallelism.fsdp=32 --set batch.global_batch=1536");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[--set gpus=256, parallelism.fsdp=32, batch.global_batch=1536]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layout                 tp 1 x cp 1 x pp 1 x ep 8 x fsdp 32 x dp 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1536 sequences x 4096 tokens; 1 micro-batch of 6 per data-parallel rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 NVLink domains (racks or nodes) used, 64 GPUs of each domain's 72"), std::string::npos) << r.out;
  const auto j = predict_json(kOptimized + " --set gpus=256 --set parallelism.fsdp=32 --set batch.global_batch=1536");
  EXPECT_EQ(j["parallelism"]["fsdp"], 32);
  EXPECT_EQ(j["parallelism"]["schedule"], "1f1b");
  EXPECT_EQ(j["micro_batches"], 1);
  EXPECT_EQ(j["nvlink_domains_used"], 4);
  EXPECT_EQ(j["gpus_per_domain_used"], 64);
  EXPECT_NE(j["name"].get<std::string>().find("--set gpus=256"), std::string::npos);
}

// The band: the parts' (the profile's fit spreads) and the end-to-end term (the shipped published
// cases of the scenario's stack, calibration/accuracy/end-to-end.json); "none" leaves the parts'.
TEST(Cli, PredictBandWidensByThePublishedCasesOfItsStack) {
  const auto e2e = nlohmann::json::parse(std::ifstream(source("calibration/accuracy/end-to-end.json")));
  double ratio = 0;
  for (const auto& c : e2e["cases"])
    if (c["stack"] == "maxtext-te-2026-09") ratio = std::max(ratio, c["step_ratio"].get<double>());
  ASSERT_GT(ratio, 0);
  const auto j = predict_json(kOptimized);
  const double step = j["step_time_s"].get<double>(), parts = j["band"].get<double>();
  EXPECT_EQ(j["band_end_to_end"]["stack"], "maxtext-te-2026-09");
  EXPECT_NEAR(j["band_high"].get<double>(), std::hypot(parts, std::max(0.0, ratio - 1)), 1e-9);
  EXPECT_NEAR(j["step_time_s_high"].get<double>(), step * (1 + j["band_high"].get<double>()), 1e-9);
  const Result r = run("predict " + kOptimized);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("      end to end         +"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of stack maxtext-te-2026-09 as configured here ran"), std::string::npos) << r.out;
  EXPECT_TRUE(j["band_end_to_end"]["same_config"].get<bool>());
  const auto none = predict_json(kOptimized + " --set end_to_end=none");
  EXPECT_FALSE(none.contains("band_end_to_end"));
  EXPECT_DOUBLE_EQ(none["step_time_s"].get<double>(), step);  // the step itself never moves
  EXPECT_NEAR(none["step_time_s_high"].get<double>(), step * (1 + parts), 1e-9);
}

// Under pipeline parallelism the step holds a bubble; the report names it and says that the sum of
// op times leaves it (and the overlap) out, so a step longer than that sum is explained.
TEST(Cli, PredictReportsThePipelineBubble) {
  const auto j = predict_json(kDualPipe);
  const double step = j["step_time_s"].get<double>(), bubble = j["pipeline_bubble_s"].get<double>();
  EXPECT_GT(bubble, 0.01 * step);
  EXPECT_LT(bubble, 0.2 * step);  // DualPipe: (PP/2 - 1)(F&B + B - 3W) of a 64 micro-batch step
  // 1F1B on the same mesh waits (pp - 1)(F + B): a larger bubble and a longer step.
  const auto ofob = predict_json(kDualPipe + " --set parallelism.schedule=1f1b");
  EXPECT_GT(ofob["pipeline_bubble_s"].get<double>(), 2 * bubble);
  EXPECT_GT(ofob["step_time_s"].get<double>(), step);
  EXPECT_NEAR(j["pipeline_bubble_fraction"].get<double>(), bubble / step, 1e-12);
  EXPECT_EQ(j["layout"], "tp 1 x cp 1 x pp 16 x ep 64 x fsdp 1 x dp 2, schedule dualpipe");
  EXPECT_EQ(predict_json(kOptimized)["pipeline_bubble_s"].get<double>(), 0.0);
  const Result t = run("predict " + kDualPipe + " --top 1");
  EXPECT_NE(t.out.find("  pipeline bubble        "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("  sum of op times        "), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("serial estimate"), std::string::npos) << t.out;
}

// The waterfall of scale: at a fixed global batch each point names what it lost; a folded mesh
// grows along dp only (exit 2 with the reason).
TEST(Cli, ScaleAtAFixedGlobalBatchNamesWhatEachPointLost) {
  // A global batch of 2,048 sequences, not the file's 8,192: 32 and 16 micro-batches per pipeline
  // rather than 128 and 64, the same fixed-batch losses at a quarter of the simulation.
  const std::string f = source("examples/deepseek-v3/gb200-strong-scaling.json") + " --set batch.global_batch=2048";
  const Result t = run("scale " + f + " --grow dp --batch global --gpus 512,1024");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("lost against the first point"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("(the reference)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("idle +"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("fixed global batch (strong scaling)"), std::string::npos) << t.out;
  const auto j = nlohmann::json::parse(run("scale " + f + " --grow dp --batch global --gpus 512,1024 --format json").out);
  EXPECT_EQ(j["points"][1]["global_batch"], 2048);
  EXPECT_EQ(j["points"][1]["micro_batches"], 16);
  EXPECT_GT(j["points"][1]["lost_s"]["idle"].get<double>(), 0.0);
  const Result folded = run("scale " + source("examples/layouts/qwen3-235b-h100-megatron-folded.json") +
                            " --grow ep --gpus 256,512");
  EXPECT_EQ(folded.code, 2);
  EXPECT_NE(folded.out.find("grows along dp only"), std::string::npos) << folded.out;
  // A micro-batch that the larger counts cannot split is bad input that names the one every count
  // runs (768 sequences: 6 per rank at 128 GPUs, 3 at 256), or says none does (1.5 at 512).
  const Result odd = run("scale " + source("examples/deepseek-v3/gb300-optimized.json") + " --batch global --gpus 128,256");
  EXPECT_EQ(odd.code, 2) << odd.out;
  EXPECT_NE(odd.out.find("micro-batches of 6 per data-parallel rank (256 ranks); --set batch.micro_batch=3 runs every "
                         "count of the curve"),
            std::string::npos)
      << odd.out;
  const Result none = run("scale " + source("examples/deepseek-v3/gb300-optimized.json") + " --batch global --gpus 128,512");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("the global batch must be a multiple of every count's data-parallel ranks"), std::string::npos)
      << none.out;
  // The micro-batch named passes the scenario's rules at every count, not only divides: DualPipe
  // needs an even count of at least 2 x pp micro-batches (at 6,144 GPUs 64 sequences per rank, at
  // 2,048 192: 64 divides both but gives 1 micro-batch; 2 gives 32 and 96).
  const std::string dualpipe = source("examples/deepseek-v3/h800-dualpipe.json") +
                               " --grow dp --batch global --set batch.global_batch=24576 --set batch.micro_batch=3 --gpus 6144,2048";
  const Result dp = run("scale " + dualpipe);
  EXPECT_EQ(dp.code, 2) << dp.out;
  EXPECT_NE(dp.out.find("; --set batch.micro_batch=2 runs every count of the curve"), std::string::npos) << dp.out;
}

// A scenario's "calibration" names a shipped profile by its generation, or a file (which wins when
// one of that name is beside the scenario); --set reaches into a named profile; any other name is
// bad input that lists the shipped ones.
TEST(Cli, ACalibrationNamesAShippedProfileOrAFile) {
  const std::string seed = source("examples/deepseek-v3/gb300-optimized.json");
  const Result hp = run("predict " + seed + " --set calibration=hopper --top 1");
  ASSERT_EQ(hp.code, 0) << hp.out;
  EXPECT_NE(hp.out.find("  profile                hopper (calibration/profiles/hopper.json)"), std::string::npos) << hp.out;
  const auto tflops = [](const Result& r) { return nlohmann::json::parse(r.out)["model_tflops_per_gpu"].get<double>(); };
  const Result named = run_stdout("predict " + seed + " --set calibration=hopper --format json");
  const Result slower = run_stdout("predict " + seed + " --set calibration=hopper --set calibration.params.gemm_fraction_mxfp8=0.3 --format json");
  ASSERT_EQ(slower.code, 0) << slower.out;
  EXPECT_LT(tflops(slower), 0.9 * tflops(named));
  // The edited profile is named as such, and by itself: it sets every parameter, so nothing of the
  // system's own profile (Blackwell Ultra) prices it.
  const std::string label = nlohmann::json::parse(slower.out)["profile"].get<std::string>();
  EXPECT_EQ(label, "hopper (shipped, edited)");
  // and its band's spreads are its own: Hopper's profile has no host-copy spread, so the edited
  // one has none either (Blackwell Ultra's stayed in before).
  EXPECT_FALSE(nlohmann::json::parse(slower.out)["band_terms"].contains("host_copy")) << slower.out.substr(0, 2000);
  EXPECT_EQ(nlohmann::json::parse(slower.out)["band_terms"].size(), nlohmann::json::parse(named.out)["band_terms"].size());
  // A file that sets some parameters is named over the profile that prices the rest.
  const Result part = run_stdout("predict " + seed + " --set calibration.params.gemm_fraction_mxfp8=0.3 --format json");
  ASSERT_EQ(part.code, 0) << part.out;
  EXPECT_EQ(nlohmann::json::parse(part.out)["profile"].get<std::string>(),
            "gb300-optimized.json (over blackwell-ultra (calibration/profiles/blackwell-ultra.json))");
  const Result typo = run("predict " + seed + " --set calibration=hoper");
  EXPECT_EQ(typo.code, 2) << typo.out;
  EXPECT_NE(typo.out.find("/calibration: expected a calibration profile file (its path relative to this file; looked for "),
            std::string::npos)
      << typo.out;
  EXPECT_NE(typo.out.find("or a shipped profile's name ("), std::string::npos) << typo.out;
  EXPECT_NE(typo.out.find("got \"hoper\""), std::string::npos) << typo.out;
  const Result lng = run("predict " + seed + " --set calibration=" + std::string(5000, 'x'));
  EXPECT_EQ(lng.code, 2) << lng.out.substr(0, 300);
  // A file named like a profile beside the scenario is the one read.
  TempDir d;
  nlohmann::json sc = nlohmann::json::parse(std::ifstream(seed));
  sc["model"] = source("examples/models/deepseek-v3/config.json");
  sc["system"] = source("topologies/gb300-nvl72.json");
  sc["calibration"] = "hopper";
  std::ofstream(d.path("s.json")) << sc.dump();
  std::ofstream(d.path("hopper")) << R"({"kind": "calibration", "name": "mine", "params": {"gemm_fraction_mxfp8": 0.3}})";
  const Result mine = run("predict " + d.path("s.json") + " --top 1");
  ASSERT_EQ(mine.code, 0) << mine.out;
  EXPECT_EQ(mine.out.find("  profile                hopper (calibration/profiles/hopper.json)"), std::string::npos) << mine.out;
  EXPECT_NE(mine.out.find("mine"), std::string::npos) << mine.out;
}

// `predict --serial`: the sum of op times, said so, and without the end-to-end term (its ratios are
// published steps over simulated ones); the parts' band stays.
TEST(Cli, PredictSerialSaysSoAndTakesNoEndToEndTerm) {
  const std::string seed = source("examples/deepseek-v3/gb300-optimized.json");
  const Result sim = run_stdout("predict " + seed + " --format json");
  const Result ser = run_stdout("predict " + seed + " --serial --format json");
  ASSERT_EQ(sim.code, 0) << sim.out;
  ASSERT_EQ(ser.code, 0) << ser.out;
  const auto a = nlohmann::json::parse(sim.out), b = nlohmann::json::parse(ser.out);
  EXPECT_TRUE(a["simulated"].get<bool>());
  EXPECT_FALSE(b["simulated"].get<bool>());
  EXPECT_TRUE(a.contains("band_end_to_end"));
  EXPECT_FALSE(b.contains("band_end_to_end"));
  EXPECT_DOUBLE_EQ(b["step_time_s"].get<double>(), b["serial_step_time_s"].get<double>());
  EXPECT_GT(b["band"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(b["band_high"].get<double>(), b["band"].get<double>());
  const Result text = run("predict " + seed + " --serial --top 1");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("(serial: every op back to back on one queue, no overlap; no end-to-end term)"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("(simulated: streams overlap"), std::string::npos) << text.out;
}

// The pipeline layout is reported: the spec, and per stage what each chunk holds (text and JSON).
TEST(Cli, PredictReportsThePipelineLayout) {
  // The ladder at 32 micro-batches per pipeline, not 64: the same layout, stages and rank classes,
  // half the simulation, and still enough that the fill and drain leave a middle stage idle for
  // less than a third of what the end stages wait (8 micro-batches for the folded mesh).
  const std::string ladder = source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json") + " --set batch.global_batch=1024";
  const Result folded = run("predict " + source("examples/layouts/qwen3-235b-h100-megatron-folded.json") + " --top 1 --set batch.global_batch=128");
  ASSERT_EQ(folded.code, 0) << folded.out;
  EXPECT_NE(folded.out.find("  layout                 tp 2 x cp 1 x pp 8 x dp 16; experts folded: etp 1 x ep 32 x edp 1, "
                            "schedule 1f1b\n"),
            std::string::npos)
      << folded.out;
  EXPECT_NE(folded.out.find("    stage 7              83-93 L\n"), std::string::npos) << folded.out;
  const Result t = run("predict " + ladder + " --top 1");
  ASSERT_EQ(t.code, 0) << t.out;
  // The model as loaded heads the report: which layers are MoE, the experts, hidden, attention.
  EXPECT_NE(t.out.find("\n  model                  deepseek-v3 (deepseek_v3): 61 layers (58 MoE from layer 3), 256 experts top-8 + 1 "
                       "shared, hidden 7168, MLA\n"),
            std::string::npos)
      << t.out;
  const Result every2 = run("predict " + ladder + " --top 1 --set model.moe_layer_freq=2");
  ASSERT_EQ(every2.code, 0) << every2.out;
  EXPECT_NE(every2.out.find("(29 MoE: 4, 6, 8 ... 60)"), std::string::npos) << every2.out;
  EXPECT_NE(t.out.find("  pipeline layout        Et|(tt|)*30L (32 virtual stages, 4 per stage;"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("\n    stage 0              E 0 | 15-16 | 31-32 | 47-48\n"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("\n    stage 7              13-14 | 29-30 | 45-46 | L\n"), std::string::npos) << t.out;
  const auto j = predict_json(ladder);
  EXPECT_EQ(j["pipeline_layout"]["spec"], "Et|(tt|)*30L");
  EXPECT_EQ(j["pipeline_layout"]["virtual_stages"], 32);
  EXPECT_EQ(j["pipeline_layout"]["stages"][7][3], "L");
  // Every stage's HBM, the fullest shown whole: text and JSON agree.
  ASSERT_EQ(j["memory"]["hbm_by_stage"].size(), 8u);
  const int fullest = j["memory"]["pp_stage"].get<int>();
  EXPECT_DOUBLE_EQ(j["memory"]["hbm_by_stage"][static_cast<size_t>(fullest)].get<double>(), j["peak_memory_bytes_per_gpu"].get<double>());
  EXPECT_NE(t.out.find("(pipeline stage " + std::to_string(fullest) + ", the fullest; below: its parts)\n    per stage (GB) "),
            std::string::npos)
      << t.out;
  // Each stage's time without a kernel: the reported stage's is the pipeline bubble; with the
  // uneven layout the lighter end stages (the embedding and one layer; the loss) wait longest, a
  // middle stage of eight MoE layers only for the fill and drain.
  // Eight stage classes (each stage's busiest EP rank under the uniform routing that Megatron's
  // forced load balancing draws), then each stage's typical ranks.
  ASSERT_EQ(j["rank_classes"].size(), 16u);
  double reported = -1;
  for (const auto& c : j["rank_classes"])
    if (c["finish_s"].get<double>() == j["step_time_s"].get<double>() && reported < 0) reported = c["idle_s"].get<double>();
  EXPECT_DOUBLE_EQ(reported, j["pipeline_bubble_s"].get<double>());
  EXPECT_GT(j["rank_classes"][0]["idle_s"].get<double>(), 3 * j["rank_classes"][4]["idle_s"].get<double>());
  EXPECT_GT(j["rank_classes"][7]["idle_s"].get<double>(), 3 * j["rank_classes"][4]["idle_s"].get<double>());
  EXPECT_NE(t.out.find("    pp stage 4, busiest EP rank (1 GPU): finishes at "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("    pp stage 4, typical EP rank (31 GPUs): finishes at "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" s, no kernel for "), std::string::npos) << t.out;
  EXPECT_FALSE(predict_json(kOptimized).contains("pipeline_layout"));  // pp 1
  const Result bad = run("predict " + ladder + " --set parallelism.layout='\"Et|(tt|)*29L\"'");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("/parallelism/layout"), std::string::npos) << bad.out;
}

// The host that issues the reported rank's program: what it spent (framework ops at host_op_s,
// graph launches at graph_launch_s: a closed form where no library loops) and what it costs the
// step (the step again under a host that issues at once); a host that costs nothing says nothing.
TEST(Cli, PredictSaysWhatTheHostSpentAndWhatItCostsTheStep) {
  // Eight micro-batches per pipeline, not the ladder's 64: the same program, an eighth of the ops
  // (the test predicts the ladder seven times, some twice for the host's cost).
  const std::string small = " --set batch.global_batch=256";
  const std::string ptr = " --set stack.grouped_kernel='\"ptr_array\"'" + small;  // no host loop over the groups
  const auto j = predict_json(source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json") + ptr);
  ASSERT_GT(j["host_framework_ops"].get<double>(), 0.0);
  ASSERT_GT(j["host_graph_launches"].get<double>(), 0.0);  // megatron-core captures attention, the router, the shared expert
  EXPECT_NEAR(j["host_busy_s"].get<double>(), j["host_framework_ops"].get<double>() * 10e-6 + j["host_graph_launches"].get<double>() * 10e-6,
              1e-9 * j["host_busy_s"].get<double>());
  EXPECT_NEAR(j["host_busy_fraction"].get<double>(), j["host_busy_s"].get<double>() / j["step_time_s"].get<double>(), 1e-12);
  // At 100 us per op the baseline's host costs it the difference to the host-free step, exactly.
  const std::string base = source("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json") + ptr;
  const auto fast = predict_json(base + " --set stack.host_op_s=0 --set stack.graph_launch_s=0");
  const auto slow = predict_json(base + " --set stack.host_op_s=1e-4");
  EXPECT_EQ(fast["host_busy_s"].get<double>(), 0.0);
  EXPECT_FALSE(fast.contains("host_cost_s"));
  ASSERT_TRUE(slow.contains("host_cost_s"));
  EXPECT_NEAR(slow["host_cost_s"].get<double>(), slow["step_time_s"].get<double>() - fast["step_time_s"].get<double>(), 1e-9);
  EXPECT_GT(slow["host_cost_s"].get<double>(), 0.3 * slow["step_time_s"].get<double>());  // 1.03 -> 1.89 s
  const Result t = run("predict " + base + " --set stack.host_op_s=1e-4");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("  host issuing           "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("framework ops at 100.0 us"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("  host's cost            "), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("libraries' host loops"), std::string::npos) << t.out;
  // The default stack's multi-stream grouped GEMM: a host loop over the groups even at 0 us per op.
  const Result loop = run("predict " + source("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json") + small +
                          " --set stack.host_op_s=0 --set stack.graph_launch_s=0");
  ASSERT_EQ(loop.code, 0) << loop.out;
  EXPECT_NE(loop.out.find("s of libraries' host loops"), std::string::npos) << loop.out;
  const Result n = run("predict " + base + " --set stack.host_op_s=0 --set stack.graph_launch_s=0");
  ASSERT_EQ(n.code, 0) << n.out;
  EXPECT_EQ(n.out.find("host issuing"), std::string::npos) << n.out;
}

// Exposed communication is attributed to ops: the shares add up to the exposed time, no op is
// exposed longer than it runs, the text names the largest; --top limits the op table.
TEST(Cli, ExposedCommunicationIsAttributedToOps) {
  const auto j = predict_json(kOptimized);
  double sum = 0;
  for (const auto& o : j["exposed_comm_by_op"]) {
    sum += o["seconds"].get<double>();
    const auto& op = j["ops"][o["name"].get<std::string>()];
    EXPECT_LE(o["seconds"].get<double>(), op["seconds"].get<double>() + 1e-12) << o;
    EXPECT_NE(op["category"], "gemm");
  }
  EXPECT_GT(j["exposed_comm_by_op"].size(), 1u);
  EXPECT_NEAR(sum, j["exposed_comm_s"].get<double>(), 1e-9);
  EXPECT_NEAR(j["exposed_comm_s"].get<double>() / j["step_time_s"].get<double>(), j["exposed_comm_fraction"].get<double>(), 1e-12);
  const std::string first = j["exposed_comm_by_op"][0]["name"];
  const Result r = run("predict " + kOptimized + " --top 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("    exposed by op: " + first + " "), std::string::npos) << r.out;
  const auto table = r.out.find("exposed_s      TFLOP    GB_HBM    GB_msg\n");
  ASSERT_NE(table, std::string::npos) << r.out;
  const std::string rows = r.out.substr(r.out.find('\n', table) + 1);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 3) << rows;
  EXPECT_NE(r.out.find("top 3 of "), std::string::npos) << r.out;
  EXPECT_EQ(run("predict " + kOptimized + " --top 0").code, 2);
}

// compare's "switched" column lists the fields that differ at each step; options equal in both
// scenarios make no row; different models or GPU counts are said.
TEST(Cli, CompareListsTheFieldsThatDiffer) {
  const Result r = run("compare " + kBaseline + " " + kOptimized + " --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> changes;
  for (const auto& st : j["steps"]) changes[st["name"]] = st["changes"];
  // Both stacks size the buffers at 2x and keep a2a_with_shared_expert off: the dispatcher and the
  // ragged all-to-all's implementation differ (maxtext-xla-2026-09 against maxtext-te-2026-09).
  EXPECT_EQ(changes["fused dedup dispatch"], "stack.dispatcher, stack.ragged_a2a");
  EXPECT_EQ(changes["grouped GEMM"], "stack.expert_gemm");
  EXPECT_EQ(changes.count("everything else"), 0u);  // same model, system, layout, batch
  for (const auto& st : j["steps"]) EXPECT_TRUE(st["name"] == "start" || st["changes"] != "") << st;
  EXPECT_TRUE(j["notes"].empty()) << j["notes"];
  // Same file twice: one row and a note; different GPU counts: a note naming both.
  const auto same = nlohmann::json::parse(run("compare " + kOptimized + " " + kOptimized + " --format json").out);
  EXPECT_EQ(same["steps"].size(), 1u);
  EXPECT_NE(same["notes"][0].get<std::string>().find("the same in every field"), std::string::npos);
  // A second scenario on 256 GPUs and one with another model, written beside the test.
  TempDir d;
  std::ifstream in(kOptimized);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto variant = [&](const std::string& name, std::vector<std::pair<std::string, std::string>> edits) {
    std::string t = text;
    edits.push_back({"\"../../topologies/gb300-nvl72.json\"", "\"" + source("topologies/gb300-nvl72.json") + "\""});
    for (const auto& [from, to] : edits) t.replace(t.find(from), from.size(), to);
    return d.write(name, t);
  };
  const std::string wide = variant("wide.json", {{"\"gpus\": 128", "\"gpus\": 256"},
                                                 {"\"fsdp\": 16", "\"fsdp\": 32"},
                                                 {"\"global_batch\": 768", "\"global_batch\": 1536"},
                                                 {"\"../models/deepseek-v3/config.json\"",
                                                  "\"" + source("examples/models/deepseek-v3/config.json") + "\""}});
  const std::string qwen = variant("qwen.json", {{"\"../models/deepseek-v3/config.json\"",
                                                  "\"" + source("examples/models/qwen3-30b-a3b/config.json") + "\""}});
  const Result g = run("compare " + kOptimized + " " + wide);
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("note: the two scenarios train different GPU counts (128 vs 256)"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("everything else"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("gpus, parallelism.fsdp, batch.global_batch\n"), std::string::npos) << g.out;
  const Result m = run("compare " + kOptimized + " " + qwen);
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("note: the two scenarios train different models ("), std::string::npos) << m.out;
  // Only the last row: the stack is the same in both files.
  EXPECT_EQ(std::count(m.out.begin(), m.out.end(), '\n'), 4) << m.out;
}

// compare A B prices each side with its own calibration and sees every field: a B that differs
// only in its calibration, in memory.fp8_cache or e5m6_cache or in a system figure the pricing reads (the fabric
// switch's latency) starts at A as predict gives it and ends at B as predict gives it (the
// start was priced with B's calibration, and such a B was "the same in every field").
TEST(Cli, CompareStartsAtTheFirstAndEndsAtTheSecondAsPredicted) {
  TempDir d;
  std::ifstream in(kOptimized);
  nlohmann::json base = nlohmann::json::parse(in);
  base["model"] = source("examples/models/deepseek-v3/config.json");
  base["system"] = source("topologies/gb300-nvl72.json");
  auto variant = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = base;
    edit(j);
    return d.write(name, j.dump());
  };
  const std::string a = variant("a.json", [](nlohmann::json&) {});
  auto step = [&](const std::string& f, const std::string& sets = "") {
    const Result p = run("predict " + f + sets + " --format json");
    EXPECT_EQ(p.code, 0) << p.out;
    return nlohmann::json::parse(p.out)["step_time_s"].get<double>();
  };
  const std::vector<std::pair<std::string, std::string>> bs = {
      {variant("cal.json", [](nlohmann::json& j) { j["calibration"] = {{"params", {{"gemm_fraction_mxfp8", 0.5}}}}; }), "calibration"},
      {variant("fp8.json", [](nlohmann::json& j) { j["memory"]["fp8_cache"] = {"moe_mlpwi"}; }), "memory.fp8_cache"},
      {variant("e5m6.json", [](nlohmann::json& j) { j["memory"]["e5m6_cache"] = {"attn_out"}; }), "memory.e5m6_cache"}};
  for (const auto& [b, field] : bs) {
    const Result r = run("compare " + a + " " + b + " --format json");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_GE(j["steps"].size(), 2u) << r.out;
    EXPECT_NEAR(j["steps"].front()["step_time_s"].get<double>(), step(a), 1e-9) << field;
    EXPECT_NEAR(j["steps"].back()["step_time_s"].get<double>(), step(b), 1e-9) << field;
    EXPECT_NE(j["steps"].back()["changes"].get<std::string>().find(field), std::string::npos) << r.out;
    EXPECT_TRUE(j["notes"].empty()) << j["notes"];
  }
}

// sensitivity's --step is a percentage above 0 and below 100 (a rate lowered by 100 % is no rate:
// the simulation never ended); sweep --out FILE.json is refused (exit 2, nothing written): the
// file would be JSON Lines, not one JSON document; with --format jsonl it is written as asked.
TEST(Cli, SensitivityStepsBelowAHundredAndSweepNamesItsJsonFormat) {
  for (const char* bad : {"100", "150", "0"}) {
    const Result r = run("sensitivity " + kOptimized + " --step " + bad);
    EXPECT_EQ(r.code, 2) << bad << r.out;
    EXPECT_NE(r.out.find("below 100"), std::string::npos) << r.out;
  }
  TempDir d;
  const std::string out = d.path("rows.json");
  const Result refused = run("sweep " + kOptimized + " --vary batch.micro_batch=6,3 --out " + out);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("name it .jsonl, or give --format jsonl"), std::string::npos) << refused.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  const Result r = run("sweep " + kOptimized + " --vary batch.micro_batch=6,3 --format jsonl --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f(out);
  std::string line;
  int rows = 0;
  while (std::getline(f, line)) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2);
}

// Without multistream collectives one queue carries every group's collectives; it is named so.
// (The baseline's one-shot all-to-all runs on the compute stream: the NCCL path puts it there.)
TEST(Cli, SingleCollectiveQueueIsNamedForWhatItCarries) {
  TempDir d;
  const std::string trace = d.path("t.json");
  const Result r = run("predict " + kBaseline + " --set stack.ragged_a2a=nccl --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(trace);
  const auto t = nlohmann::json::parse(in);
  std::vector<std::string> threads;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.push_back(e["args"]["name"]);
  EXPECT_NE(std::find(threads.begin(), threads.end(), "collectives: ep_comm + fsdp_dp_comm"), threads.end())
      << nlohmann::json(threads);
  EXPECT_EQ(std::find(threads.begin(), threads.end(), "ep_comm"), threads.end()) << nlohmann::json(threads);
  EXPECT_NE(r.out.find("  hardware queues        compute | collectives: ep_comm + fsdp_dp_comm | offload\n"),
            std::string::npos) << r.out;
  const Result m = run("predict " + kOptimized);
  EXPECT_NE(m.out.find("  hardware queues        compute | ep_comm | fsdp_dp_comm | tp_comm | pp_comm | offload\n"),
            std::string::npos) << m.out;
}

// Consecutive ops on a track never overlap in the trace (times are rounded to the nanosecond at
// each end, the duration is their difference).
TEST(Cli, TraceEventsOnATrackDoNotOverlap) {
  TempDir d;
  const std::string trace = d.path("t.json");
  ASSERT_EQ(run("predict " + kOptimized + " --trace " + trace).code, 0);
  std::ifstream in(trace);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Parse ts/dur as exact nanosecond integers ("12.345" -> 12345) to compare without float error.
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  auto ns = [](const nlohmann::json& v) { return static_cast<int64_t>(std::llround(v.get<double>() * 1000)); };
  const auto t = nlohmann::json::parse(text);
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X") tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ns(e["ts"]), ns(e["dur"])});
  size_t events = 0, overlaps = 0;
  for (auto& [k, v] : tracks) {
    std::sort(v.begin(), v.end());
    events += v.size();
    for (size_t i = 1; i < v.size(); ++i) overlaps += v[i - 1].first + v[i - 1].second > v[i].first;
  }
  EXPECT_GT(events, 1000u);
  EXPECT_EQ(overlaps, 0u);
}

// ---------------------------------------------------------------- bad input that slipped through
TEST(Cli, BadInputNamesFileAndPathAndWritesNothing) {
  TempDir d;
  std::ifstream in(kOptimized);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto absolute = [&](std::string t) {
    auto put = [&](const std::string& from, const std::string& to) { t.replace(t.find(from), from.size(), to); };
    put("\"../models/deepseek-v3/config.json\"", "\"" + source("examples/models/deepseek-v3/config.json") + "\"");
    put("\"../../topologies/gb300-nvl72.json\"", "\"" + source("topologies/gb300-nvl72.json") + "\"");
    return t;
  };
  const std::string good = absolute(text);
  auto variant = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return d.write(name, t);
  };
  struct Case {
    std::string args, expect;
  };
  const std::string trace = d.path("trace.json");
  const std::vector<Case> cases = {
      {"predict " + variant("big.json", "\"seq_len\": 4096", "\"seq_len\": 1e309"),
       "big.json: /batch/seq_len: the number 1e309 is out of range (expected a finite number)"},
      {"predict " + variant("dup.json", "\"seq_len\": 4096", "\"seq_len\": 4096, \"seq_len\": 8192"),
       "dup.json: /batch/seq_len: duplicate key \"seq_len\" in one object"},
      {"predict " + d.path("") + " --trace " + trace, ": is a directory; expected a JSON file"},
      {"predict " + source("topologies/gb300-nvl72.json") + " --trace " + trace,
       "gb300-nvl72.json: /kind: this is a system file, not a scenario"},
      {"predict " + source("examples/models/deepseek-v3/config.json") + " --trace " + trace,
       "config.json: this is a Hugging Face config.json (a model), not a scenario"},
      {"scale " + kOptimized + " --gpus 0", "--gpus: expected a GPU count (a whole number in [1, 16777216]), got 0"},
      {"topo " + source("topologies/gb300-nvl72.json") + " --gpus 0", "expected a GPU count (a whole number in [1, 16777216]), got 0"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("json.exception"), std::string::npos) << r.out;
    EXPECT_LT(r.out.size(), 400u) << r.out;
    EXPECT_FALSE(std::filesystem::exists(trace)) << c.args;
  }
  // An output path that is a directory: exit 2 before any work, nothing written in it.
  const std::string dir = d.path("out");
  std::filesystem::create_directories(dir);
  for (const std::string& args : {"predict " + kOptimized + " --trace " + dir, "topo " + source("topologies/gb300-nvl72.json") + " --dot " + dir,
                                  "calibrate " + source("examples/calibration/defaults.json") + " --out " + dir,
                                  "predict " + kOptimized + " --trace " + d.path("missing/t.json")}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(r.out.find(": is a directory; expected a file name to write") != std::string::npos ||
                r.out.find(": the folder ") != std::string::npos) << r.out;
    EXPECT_TRUE(std::filesystem::is_empty(dir));
  }
}

// An output that is one of the command's inputs, or an existing path that is no regular file (a
// device), is refused before any work (exit 2), the input untouched; a symbolic link is followed:
// its target is written and the link kept. sweep names a .json output's format rather than write
// JSON Lines into it.
TEST(Cli, AnOutputThatIsAnInputOrADeviceIsRefusedAndALinkIsFollowed) {
  TempDir d;
  const std::string in = d.write("in.json", "{\"kind\": \"scenario\"}");
  for (const std::string& args : {"predict " + in + " --trace " + in, "sweep " + in + " --vary parallelism.ep=4,8 --out " + in,
                                  "topo " + in + " --dot " + in, "accuracy " + in + " --out " + in}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(in + ", an input of this command"), std::string::npos) << r.out;
    std::ifstream f(in);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()), "{\"kind\": \"scenario\"}") << args;
  }
  const Result dev = run("topo " + source("topologies/gb300-nvl72.json") + " --dot /dev/null");
  EXPECT_EQ(dev.code, 2) << dev.out;
  EXPECT_NE(dev.out.find("not a regular file"), std::string::npos) << dev.out;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  const Result js = run("sweep " + kOptimized + " --vary parallelism.ep=4,8 --out " + d.path("s.json"));
  EXPECT_EQ(js.code, 2) << js.out;
  EXPECT_NE(js.out.find("name it .jsonl"), std::string::npos) << js.out;
  EXPECT_FALSE(std::filesystem::exists(d.path("s.json")));
  const std::string real = d.path("real.dot"), link = d.path("link.dot");
  std::filesystem::create_symlink(real, link);
  const Result l = run("topo " + source("topologies/gb300-nvl72.json") + " --gpus 8 --dot " + link);
  ASSERT_EQ(l.code, 0) << l.out;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_GT(std::filesystem::file_size(real), 100u);
  // Written again, the target keeps its mode (a private file stays private).
  std::filesystem::permissions(real, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  ASSERT_EQ(run("topo " + source("topologies/gb300-nvl72.json") + " --gpus 8 --dot " + link).code, 0);
  EXPECT_EQ(std::filesystem::status(real).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  for (const auto& e : std::filesystem::directory_iterator(d.path("")))  // no temporary left beside them
    EXPECT_TRUE(e.path().filename() == "in.json" || e.path().filename() == "real.dot" || e.path().filename() == "link.dot") << e.path();
  // A link into a folder that does not exist, and a loop of links: refused before any work.
  const std::string dangling = d.path("dangling.dot"), l1 = d.path("l1.dot"), l2 = d.path("l2.dot");
  std::filesystem::create_symlink(d.path("nofolder/x.dot"), dangling);
  std::filesystem::create_symlink(l2, l1);
  std::filesystem::create_symlink(l1, l2);
  for (const auto& [out, want] : std::vector<std::pair<std::string, std::string>>{{dangling, "does not exist"}, {l1, "a loop of symbolic links"}}) {
    const Result r = run("topo " + source("topologies/gb300-nvl72.json") + " --gpus 8 --dot " + out);
    EXPECT_EQ(r.code, 2) << out << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  EXPECT_TRUE(std::filesystem::is_symlink(l1));
  EXPECT_TRUE(std::filesystem::is_symlink(l2));
  // sweep streams its rows: a device takes them (where predict's --trace, renamed into place, is refused).
  EXPECT_EQ(run("sweep " + kOptimized + " --vary parallelism.ep=8 --out /dev/null").code, 0);
}

// The files a scenario names are inputs too: an output over one of them is refused (exit 2, the
// file untouched), as over the file given; so is a main input that is not a regular file (a
// device never ends); flags with a range say it; a model that cannot be priced fails validation.
TEST(Cli, ReferencedFilesDevicesAndRangesAreRefusedUpFront) {
  TempDir d;
  const std::string model_text = [] {
    std::ifstream f(source("examples/models/tiny-moe.moeperf.json"));
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }();
  const std::string model = d.write("model.json", model_text);
  nlohmann::json sc = nlohmann::json::parse(std::ifstream(source("examples/executor/cpu-small.json")));
  sc["model"] = "model.json";
  sc["system"] = source("topologies/dgx-h100-cluster.json");
  const std::string scen = d.write("s.json", sc.dump());
  // A system whose fabric file is a copy here (its switch named by its absolute path).
  nlohmann::json fab = nlohmann::json::parse(std::ifstream(source("topologies/fabrics/quantum-2-fat-tree.json")));
  fab["switch"] = source("topologies/switches/quantum-2.json");
  const std::string fabric = d.write("fabric.json", fab.dump(2));
  nlohmann::json sys = nlohmann::json::parse(std::ifstream(source("topologies/dgx-h100-cluster.json")));
  sys["nvlink_domain"] = source("topologies/domains/dgx-h100.json");
  sys["fabric"] = "fabric.json";
  const std::string system = d.write("sys.json", sys.dump());
  for (const auto& [args, file, text] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"predict " + scen + " --trace " + model, model, model_text},
           {"sweep " + scen + " --vary parallelism.ep=2,4 --out " + model, model, model_text},
           {"topo " + system + " --dot " + fabric, fabric, fab.dump(2)}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("a file this command read its input from"), std::string::npos) << r.out;
    std::ifstream f(file);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()), text) << args;
  }
  const Result zero = run("validate /dev/zero");
  EXPECT_EQ(zero.code, 2) << zero.out;
  EXPECT_NE(zero.out.find("not a regular file"), std::string::npos) << zero.out;
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"plan " + scen + " --gpus 4 --global-batch 999999999999", "[1, 16777216]"},
           {"run " + scen + " --dry-run-offsets -5", "a token count"},
           {"run " + scen + " --dry-run-offsets 99999999999999999", "a token count"},
           {"run " + scen + " --scale 0.5", "a number >= 1"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << "\n" << r.out;
  }
  // Models: top_k past the experts, KV heads that do not divide the heads, no MoE layer left.
  nlohmann::json m = nlohmann::json::parse(model_text);
  for (const auto& [edit, want] : std::vector<std::pair<std::string, std::string>>{
           {"/moe/top_k", "/moe/top_k: expected at most the expert count"},
           {"/attention/kv_heads", "/attention/kv_heads: expected a divisor of the 8 attention heads"},
           {"/dense_layers", "/dense_layers: expected fewer than the 4 layers"}}) {
    nlohmann::json x = m;
    x[nlohmann::json::json_pointer(edit)] = edit == "/moe/top_k" ? 17 : edit == "/dense_layers" ? 4 : 3;
    const Result r = run("validate " + d.write("bad.json", x.dump()));
    EXPECT_EQ(r.code, 2) << edit << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  // A file's kind is not an override; a file named twice to calibrate is refused (its records
  // would be fitted twice), as is a --gpu that is a system; kernel patterns validate.
  const std::string trace = d.path("rank0.json");
  moeperf::test::KinetoFixture::write(trace, moeperf::test::KinetoFixture::build());
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"predict " + scen + " --set kind=model", "a file's \"kind\" cannot be overridden"},
           {"calibrate " + source("calibration/published/attention.json") + " " + source("calibration/published/attention.json") +
                " --out " + d.path("p.json"),
            "is " + source("calibration/published/attention.json") + "'s too"},
           {"calibrate --trace " + trace + " --gpu " + source("topologies/dgx-h100-cluster.json") +
                " --out " + d.path("p.json"),
            "--gpu " + source("topologies/dgx-h100-cluster.json") + ": expected a \"gpu\" file, got a \"system\" file"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(d.path("p.json"))) << args;
  }
  const Result pat = run("validate " + source("calibration/kernels/patterns.json"));
  EXPECT_EQ(pat.code, 0) << pat.out;
  EXPECT_NE(pat.out.find("[kernel-patterns]"), std::string::npos) << pat.out;
  // Histogram counts whose sum overflows a double.
  nlohmann::json h = sc;
  for (auto& c : h["routing"]["histogram"]) c = 1e308;
  const Result big = run("validate " + d.write("h.json", h.dump()));
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("/routing/histogram: the counts add up past"), std::string::npos) << big.out;
}

// The planner stays light: the binary that runs predict links no CUDA, NCCL or MPI library
// (moeperf run is handed over to moeperf-run beside it).
TEST(Cli, PlannerLinksNoCudaNcclOrMpi) {
  const Result l = [] {
    Result r;
    const std::string cmd = "ldd " + std::string(MOEPERF_CLI) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf{};
    while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
    r.code = pclose(p);
    return r;
  }();
  ASSERT_NE(l.out.find("libc.so"), std::string::npos) << l.out;  // ldd ran
  for (const char* lib : {"libcuda", "libcublas", "libnccl", "libmpi"})
    EXPECT_EQ(l.out.find(lib), std::string::npos) << lib << "\n" << l.out;
  const Result h = run("run --help");
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_NE(h.out.find("moeperf run"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("--backend"), std::string::npos) << h.out;
}

// DGX B200 / B300 clusters: 8 GPUs per NVLink domain, per-GPU NVLink and scale-out bandwidth and
// the fat tree's bisection, from the files' own figures (18 x 50 GB/s; CX-7 400 Gb/s, CX-8 800 Gb/s).
TEST(Cli, DgxBlackwellSystemsFromTheirFiles) {
  struct Want {
    const char* file;
    double nic;  // bytes/s per GPU per direction
  };
  for (const Want& w : {Want{"topologies/dgx-b200-cluster.json", 50e9}, Want{"topologies/dgx-b300-cluster.json", 100e9}}) {
    const Result r = run("topo " + source(w.file) + " --gpus 256 --format json");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["gpus"], 256);
    EXPECT_EQ(j["gpus_per_domain"], 8);
    EXPECT_EQ(j["nvlink_domains"], 32);
    EXPECT_EQ(j["vertices"]["nvswitch"], 64);  // 2 NVLink 5 switch chips per node
    EXPECT_DOUBLE_EQ(j["nvlink_bytes_per_s_per_gpu_per_direction"].get<double>(), 18 * 50e9);
    EXPECT_DOUBLE_EQ(j["scaleout_bytes_per_s_per_gpu_per_direction"].get<double>(), w.nic);
    EXPECT_DOUBLE_EQ(j["scaleout_bisection_bytes_per_s"].get<double>(), 256 / 2 * w.nic);  // non-blocking
    EXPECT_EQ(run("validate " + source(w.file)).code, 0);
  }
}

// The comparison examples run, fit, and the racks are faster per GPU; energy lines appear exactly
// when the system states its power (DGX B200 does, GB200 NVL72 does not), cost lines exactly when
// it states a price.
TEST(Cli, RackOrNodeComparisonAndEnergyAndCostLines) {
  const std::string dir = source("examples/compare/");
  const Result c = run("compare " + dir + "deepseek-v3-gb200-nvl72.json " + dir + "deepseek-v3-dgx-b200.json --format json");
  ASSERT_EQ(c.code, 0) << c.out;
  const auto steps = nlohmann::json::parse(c.out)["steps"];
  EXPECT_GT(steps.back()["step_time_s"].get<double>(), steps.front()["step_time_s"].get<double>());
  for (const char* f : {"deepseek-v3-gb300-nvl72", "deepseek-v3-dgx-b300", "qwen3-235b-gb200-nvl72", "qwen3-235b-dgx-b200"}) {
    const auto j = predict_json(dir + f + ".json");
    EXPECT_TRUE(j["fits_in_memory"].get<bool>()) << f;
  }
  const Result dgx = run("predict " + dir + "deepseek-v3-dgx-b200.json --top 1");
  EXPECT_NE(dgx.out.find("  energy                 "), std::string::npos) << dgx.out;
  EXPECT_NE(dgx.out.find("(14.3 kW per node of 8 GPUs"), std::string::npos) << dgx.out;
  EXPECT_EQ(dgx.out.find("  cost "), std::string::npos) << dgx.out;
  const auto e = predict_json(dir + "deepseek-v3-dgx-b200.json");
  // 14.3 kW / 8 per GPU x 256 GPUs x the step; per million of the step's 1,024 x 4,096 tokens.
  EXPECT_NEAR(e["energy_per_step_j"].get<double>(), 14300.0 / 8 * 256 * e["step_time_s"].get<double>(), 1e-6);
  EXPECT_NEAR(e["energy_kwh_per_million_tokens"].get<double>(),
              e["energy_per_step_j"].get<double>() / 3.6e6 / (1024.0 * 4096) * 1e6, 1e-12);
  const Result rack = run("predict " + dir + "deepseek-v3-gb200-nvl72.json --top 1");
  EXPECT_EQ(rack.out.find("  energy "), std::string::npos) << rack.out;
  EXPECT_FALSE(predict_json(dir + "deepseek-v3-gb200-nvl72.json").contains("energy_per_step_j"));
  // A price (set through the scenario's reference to the system file): the cost line appears.
  const auto p = predict_json(dir + "deepseek-v3-dgx-b200.json --set system.price.usd_per_gpu_hour=4");
  EXPECT_NEAR(p["cost_usd_per_million_tokens"].get<double>(),
              4.0 * 256 * p["step_time_s"].get<double>() / 3600 / (1024.0 * 4096) * 1e6, 1e-9);
  const Result bad = run("predict " + dir + "deepseek-v3-dgx-b200.json --set 'system.power.per_node=14 parsecs'");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("/system/power/per_node: expected a power like"), std::string::npos) << bad.out;
}

}  // namespace

namespace moeperf {
namespace {

// `moeperf stacks` lists the built-in stacks; with a name it prints every field with its source or
// assumption and the ablation; an unknown name is bad input.
TEST(Cli, StacksListsAndPrintsTheirSources) {
  const Result all = run("stacks");
  ASSERT_EQ(all.code, 0) << all.out;
  for (const char* n : {"maxtext-te-2026-09", "maxtext-xla-2026-09", "megatron-core"})
    EXPECT_NE(all.out.find(std::string(n) + "\n"), std::string::npos) << n << "\n" << all.out;
  const Result m = run("stacks megatron-core");
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("  host_op_s = \"10 us\"\n      assumption: "), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("  overlap.fsdp_prefetch = true\n      source: "), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("7. CPU-side optimization: (nothing moeperf can switch)"), std::string::npos) << m.out;
  const auto j = nlohmann::json::parse(run("stacks maxtext-xla-2026-09 --format json").out);
  EXPECT_EQ(j["one_shot_threads"]["value"], 128);
  const Result bad = run("stacks maxtext-xla-2025");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("unknown stack \"maxtext-xla-2025\""), std::string::npos) << bad.out;
}

// Numbers a user can type: extreme but valid-looking values either predict in bounded time and
// memory or fail with an input error (exit 2) naming the limit (model/limits.h). One test per class.
const std::string kSeed = "examples/deepseek-v3/gb300-optimized.json";
const std::string kGpu = "system.nvlink_domain.tray.gpu";

Result predict_with(const std::string& set, const std::string& extra = "") {
  return run("predict " + source(kSeed) + " --set '" + set + "' " + extra);
}

// predict --format csv: one row per op with the JSON's figures; `bytes` is HBM bytes for compute
// and the message for communication, and the hbm_bytes and message_bytes columns name which.
TEST(Cli, PredictCsvHasTheJsonsFiguresPerOp) {
  const Result c = run_stdout("predict " + source(kSeed) + " --format csv");
  ASSERT_EQ(c.code, 0) << c.out;
  const auto j = nlohmann::json::parse(run_stdout("predict " + source(kSeed) + " --format json").out);
  std::istringstream in(c.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "name,category,count,seconds,serial_seconds,flops,bytes,hbm_bytes,message_bytes,exposed_seconds");
  size_t rows = 0, comm = 0, compute = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream cells(line);
    for (std::string x; std::getline(cells, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 10u) << line;
    ASSERT_TRUE(j["ops"].contains(f[0])) << f[0];
    const auto& o = j["ops"][f[0]];
    auto near = [&](const std::string& cell, const char* key) {
      const double v = o[key].get<double>();
      EXPECT_NEAR(std::stod(cell), v, 1e-5 * std::abs(v) + 1e-12) << f[0] << " " << key;
    };
    near(f[3], "seconds"), near(f[5], "flops"), near(f[6], "bytes"), near(f[7], "hbm_bytes"), near(f[8], "message_bytes");
    near(f[9], "exposed_seconds");
    comm += std::stod(f[8]) > 0 && f[6] == f[8];     // a message, in `bytes` as well
    compute += std::stod(f[7]) > 0 && f[6] == f[7];  // HBM bytes, in `bytes` as well
    ++rows;
  }
  EXPECT_EQ(rows, j["ops"].size());
  EXPECT_GT(comm, 0u);
  EXPECT_GT(compute, 0u);
}

TEST(CliLimits, GpuCounts) {
  Result r = predict_with("gpus=1e30");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/gpus: expected an integer, got 1e+30"), std::string::npos) << r.out;
  r = predict_with("gpus=1099511627776");  // 2^40
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/gpus: expected an integer up to 16777216"), std::string::npos) << r.out;
  // Each dimension within the limit, their product (2^27) not: refused before any integer product.
  r = predict_with("parallelism.fsdp=16777216");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("= 134217728 GPUs, above moeperf's limit of 16777216 GPUs in a job"), std::string::npos) << r.out;
}

TEST(CliLimits, Bandwidths) {
  Result r = predict_with(kGpu + ".hbm_bandwidth=\"1e-30 TB/s\"");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/hbm_bandwidth: expected a bandwidth of at least 1 B/s (moeperf's limit)"), std::string::npos) << r.out;
  r = predict_with(kGpu + ".hbm_bandwidth=\"1e300 PB/s\"");  // 1e315 B/s: past double range
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("that is a finite number"), std::string::npos) << r.out;
  // Absurdly fast HBM predicts: memory-bound ops cost nothing, the step stays finite and positive.
  r = predict_with(kGpu + ".hbm_bandwidth=\"1e30 TB/s\"", "--format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const double t = nlohmann::json::parse(r.out)["step_time_s"].get<double>();
  EXPECT_TRUE(std::isfinite(t) && t > 0) << t;
}

TEST(CliLimits, ByteSizes) {
  // 2^63 bytes of HBM, all of it usable: predicts, and everything fits.
  Result r = predict_with(kGpu + ".hbm_capacity=\"9223372036854775808 B\"",
                          "--set '" + kGpu + ".hbm_usable=\"9223372036854775808 B\"' --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["fits_in_memory"].get<bool>());
  EXPECT_GT(j["hbm_capacity_bytes"].get<double>(), 1e18);  // the usable share of it
  r = predict_with(kGpu + ".hbm_capacity=\"inf B\"");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/hbm_capacity: expected a byte size like"), std::string::npos) << r.out;
}

TEST(CliLimits, Experts) {
  // 2^20 experts (a million fits) predicts, in about a second (0.7 s, 193 MiB on the dev machine).
  Result r = predict_with("model.n_routed_experts=1048576", "--format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(nlohmann::json::parse(r.out)["step_time_s"].get<double>(), 0);
  r = predict_with("model.n_routed_experts=2000000");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/model/n_routed_experts: expected an integer up to 1048576"), std::string::npos) << r.out;
  // A model key a Hugging Face config does not have is not silently ignored.
  r = predict_with("model.experts=1000000");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the Hugging Face config has no key \"experts\""), std::string::npos) << r.out;
}

TEST(CliLimits, SequencesLayersAndSteps) {
  Result r = predict_with("batch.seq_len=1000000000");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/batch/seq_len: expected an integer up to 16777216"), std::string::npos) << r.out;
  r = predict_with("model.num_hidden_layers=1000000000");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/model/num_hidden_layers: expected an integer up to 4096"), std::string::npos) << r.out;
  r = predict_with("model.hidden_size=9223372036854775807");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/model/hidden_size: expected an integer up to 1048576"), std::string::npos) << r.out;
  // 768 x 4300 sequences: 4,300 micro-batches x 61 layers, past the simulated step's bound.
  r = predict_with("batch.global_batch=3302400");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("layer passes per step, above moeperf's limit of 32768"), std::string::npos) << r.out;
  // A sequence at the limit (16.8 M tokens) predicts.
  r = predict_with("batch.seq_len=16777216", "--format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::isfinite(nlohmann::json::parse(r.out)["step_time_s"].get<double>()));
  // Layout strings that would expand without bound, and repeat counts past int.
  r = predict_with("parallelism.layout=(((t*100000)*100000)*100000)*2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the layout expands past 16384 characters"), std::string::npos) << r.out;
  r = predict_with("parallelism.layout=t*99999999999999");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("repeat count 99999999999999 out of range"), std::string::npos) << r.out;
}

TEST(CliLimits, SetTextAndNesting) {
  // A Latin-1 byte from a terminal, a number past double range, nesting past 64 levels.
  Result r = predict_with("name=caf\xe9");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--set: the argument is not valid UTF-8 text (byte 9"), std::string::npos) << r.out;
  r = predict_with("batch.seq_len=8e9140");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("is out of range (expected a finite number)"), std::string::npos) << r.out;
  r = predict_with("description=" + std::string(100, '[') + std::string(100, ']'));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("nested deeper than 64 levels"), std::string::npos) << r.out;
}

TEST(CliLimits, InterleavedNeedsWholeGroupsOfMicroBatches) {
  // Found by the limits: 9 micro-batches on pp 8 deadlocked the interleaved program.
  const Result r = run("predict " + source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json") +
                       " --set batch.global_batch=288");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the interleaved schedule needs the micro-batches per pipeline to be a multiple of pp = 8; "
                       "global_batch = 288 gives 9"),
            std::string::npos)
      << r.out;
}

// moeperf sweep: the product of --vary axes, --derive keeping the layout, infeasible points as rows
// with their reason, the same bytes on any --jobs, and --resume continuing an interrupted file.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::string kSweep = " --vary parallelism.ep=8,16,3 --vary batch.micro_batch=6,3 --derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)'";

TEST(CliSweep, DerivesTheLayoutAndKeepsInfeasiblePointsAsRows) {
  TempDir d;
  const std::string out = d.path("s.csv");
  const Result r = run("sweep " + source(kSeed) + kSweep + " --jobs 2 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("sweep: 6 points in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 ok, 2 infeasible, 0 failed"), std::string::npos) << r.out;
  std::istringstream lines(slurp(out));
  std::vector<std::string> l;
  for (std::string x; std::getline(lines, x);) l.push_back(x);
  ASSERT_EQ(l.size(), 7u) << slurp(out);
  EXPECT_EQ(l[0].rfind("index,parallelism.ep,batch.micro_batch,parallelism.fsdp,status,step_time_s,", 0), 0u) << l[0];
  // The last axis varies fastest; fsdp = 128 / ep.
  EXPECT_EQ(l[1].rfind("0,8,6,16,ok,", 0), 0u) << l[1];
  EXPECT_EQ(l[2].rfind("1,8,3,16,ok,", 0), 0u) << l[2];
  EXPECT_EQ(l[3].rfind("2,16,6,8,ok,", 0), 0u) << l[3];
  // ep 3: fsdp = 128 / 3 is no integer; the row says why, in the loader's words.
  EXPECT_EQ(l[5].rfind("4,3,6,42.666666666666664,infeasible,,,", 0), 0u) << l[5];
  EXPECT_NE(l[5].find("/parallelism/fsdp: expected an integer"), std::string::npos) << l[5];
  // The point at ep 8 is the scenario itself: the same step time as predict.
  const Result p = run("predict " + source(kSeed) + " --format json");
  const double step = nlohmann::json::parse(p.out)["step_time_s"].get<double>();
  EXPECT_NEAR(std::stod(l[1].substr(std::string("0,8,6,16,ok,").size())), step, 1e-6);
}

// A stack field a derive rule reads is the scenario's stack's (its base, a stack file's {"value"}),
// not the schema's default: megatron-core's 3 host ops per op doubled is 6, and the point prices as
// predict --set of 6 does; a time ("2 us") reads in seconds; a scenario's own stack override wins.
TEST(CliSweep, DeriveReadsStackFieldsFromTheScenariosStack) {
  // 16 micro-batches per pipeline, not the ladder's 64: the same stack fields, a quarter of each simulation.
  const std::string ladder = source("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json") + " --set batch.global_batch=512";
  const Result r = run("sweep " + ladder + " --vary gpus=256 --derive 'stack.host_ops_per_op=stack.host_ops_per_op*2'");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t row = r.out.find("\n0,256,6,ok,");
  ASSERT_NE(row, std::string::npos) << r.out;
  const double step = std::stod(r.out.substr(row + std::string("\n0,256,6,ok,").size()));
  const Result p = run("predict " + ladder + " --set stack.host_ops_per_op=6 --format json");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NEAR(step, nlohmann::json::parse(p.out)["step_time_s"].get<double>(), 1e-6);
  // The first row of a one-point sweep starts with `expect` (index, the point's value, the derived one).
  auto first_row = [&](const std::string& file, const std::string& args, const std::string& expect) {
    const Result x = run("sweep " + file + " " + args);
    EXPECT_EQ(x.code, 0) << x.out;
    EXPECT_NE(x.out.find("\n" + expect), std::string::npos) << args << "\n" << x.out;
  };
  first_row(source(kSeed), "--vary gpus=128 --derive 'stack.host_op_s=stack.host_op_s*2'", "0,128,3.9999999999999998e-06,ok,");
  first_row(source(kSeed), "--vary gpus=128 --set stack.host_op_s=5us --derive 'stack.graph_launch_s=stack.host_op_s'",
            "0,128,4.9999999999999996e-06,ok,");
  // The point's overrides as the loader applies them: a new base, a stack object, a boolean.
  first_row(ladder, "--vary gpus=256 --set stack.base=maxtext-te-2026-09 --derive 'stack.host_ops_per_op=stack.host_ops_per_op*2'", "0,256,2,");
  first_row(source(kSeed), "--vary gpus=128 --set 'stack={\"base\":\"megatron-core\"}' --derive 'stack.host_ops_per_op=stack.host_ops_per_op*2'",
            "0,128,6,");
  first_row(source(kSeed), "--vary gpus=128 --set stack.permute_fusion=true --derive 'stack.unfused_permute_ops=stack.permute_fusion+1'",
            "0,128,2,ok,");
  // A scenario's own stack field written as a stack file writes it, {"value": ..., "source": ...}.
  TempDir d;
  auto j = nlohmann::json::parse(slurp(source(kSeed)));
  j["model"] = source("examples/models/deepseek-v3/config.json");
  j["system"] = source("topologies/gb300-nvl72.json");
  j["stack"] = {{"base", "maxtext-te-2026-09"}, {"host_op_s", {{"value", "3 us"}, {"source", "a test"}}}};
  std::ofstream(d.path("s.json")) << j.dump();
  first_row(d.path("s.json"), "--vary gpus=128 --derive 'stack.graph_launch_s=stack.host_op_s'", "0,128,3.0000000000000001e-06,ok,");
  // A field of a referenced file the point sets (the system's placement) reads as the point sets it.
  first_row(source(kSeed), "--vary system.placement.gpus_per_domain=64 --derive 'parallelism.ep=system.placement.gpus_per_domain/8'",
            "0,64,8,ok,");
  // ... and as the file says when no override steps through the reference (the file is read), also
  // through a reference the referenced file holds (relative to its own folder).
  first_row(source(kSeed), "--vary gpus=128 --derive 'parallelism.ep=system.placement.gpus_per_domain/8'", "0,128,8,ok,");
  first_row(source(kSeed), "--vary gpus=128 --derive 'parallelism.ep=system.nvlink_domain.tray.gpus*2'", "0,128,8,ok,");
  // A name nothing gives a value at any point (misspelt) is the sweep's error, not a row's: exit 2.
  const Result bad = run("sweep " + source(kSeed) + " --vary parallelism.ep=8,16 --derive 'parallelism.fsdp=gpus/(epp*tp)'");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("no value for \"epp\""), std::string::npos) << bad.out;
}

TEST(CliSweep, SameBytesOnAnyJobsAndResumeFinishesAnInterruptedFile) {
  TempDir d;
  const std::string one = d.path("one.csv"), two = d.path("two.jsonl"), cut = d.path("cut.csv"), jl = d.path("one.jsonl");
  ASSERT_EQ(run("sweep " + source(kSeed) + kSweep + " --jobs 1 --out " + one).code, 0);
  ASSERT_EQ(run("sweep " + source(kSeed) + kSweep + " --jobs 2 --out " + cut).code, 0);
  const std::string whole = slurp(one);
  EXPECT_EQ(slurp(cut), whole);
  ASSERT_EQ(run("sweep " + source(kSeed) + kSweep + " --jobs 1 --out " + jl).code, 0);
  ASSERT_EQ(run("sweep " + source(kSeed) + kSweep + " --jobs 2 --out " + two).code, 0);
  EXPECT_EQ(slurp(two), slurp(jl));
  // Interrupted after three rows and half of the fourth (as a kill mid-write leaves it).
  size_t pos = 0;
  for (int i = 0; i < 4; ++i) pos = whole.find('\n', pos) + 1;
  const size_t half = pos + (whole.find('\n', pos) - pos) / 2;
  std::ofstream(cut, std::ios::binary | std::ios::trunc) << whole.substr(0, half);
  const Result r = run("sweep " + source(kSeed) + kSweep + " --jobs 2 --resume --out " + cut);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("sweep: 3 of 6 points already in"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(cut), whole);
  // A file of another sweep is not continued.
  const Result other = run("sweep " + source(kSeed) + " --vary parallelism.ep=8,16 --derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)' --resume --out " + cut);
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find("is not this sweep's header"), std::string::npos) << other.out;
  EXPECT_EQ(slurp(cut), whole);
  // Nor one the same --vary values began under another --set (or scenario, grid, --derive): the
  // rows carry the sweep's fingerprint, and a file of two configurations is never made. In both
  // formats.
  for (const std::string& f : {cut, jl}) {
    const std::string full = slurp(f);
    std::ofstream(f, std::ios::binary | std::ios::trunc) << full.substr(0, half < full.size() ? full.find('\n', full.find('\n') + 1) + 1 : 0);
    const std::string begun = slurp(f);
    const Result mixed = run("sweep " + source(kSeed) + kSweep + " --set stack.overlap.fsdp_prefetch=false --resume --out " + f);
    EXPECT_EQ(mixed.code, 2) << f << mixed.out;
    EXPECT_NE(mixed.out.find("was written by another configuration of this sweep"), std::string::npos) << mixed.out;
    EXPECT_EQ(slurp(f), begun) << f;
  }
  EXPECT_NE(whole.substr(0, whole.find('\n')).find(",sweep"), std::string::npos);  // the CSV's last column
  // A row cut short and then ended with a newline is named as cut short (not as another sweep's),
  // in both formats; the file is left as it was.
  for (const std::string& f : {cut, jl}) {
    ASSERT_EQ(run("sweep " + source(kSeed) + kSweep + " --jobs 1 --out " + f).code, 0);
    const std::string full = slurp(f);
    size_t at = 0;
    for (int i = 0; i < 3; ++i) at = full.find('\n', at) + 1;
    const std::string chopped = full.substr(0, at + (full.find('\n', at) - at) / 2) + "\n";
    std::ofstream(f, std::ios::binary | std::ios::trunc) << chopped;
    const Result r2 = run("sweep " + source(kSeed) + kSweep + " --resume --out " + f);
    EXPECT_EQ(r2.code, 2) << f << r2.out;
    EXPECT_NE(r2.out.find("line 4 is cut short"), std::string::npos) << f << r2.out;
    EXPECT_EQ(slurp(f), chopped) << f;
  }
}

// A sweep killed (SIGKILL) while it writes, then resumed, ends with the uninterrupted file's bytes.
TEST(CliSweep, KilledMidwayAndResumedEqualsAnUninterruptedRun) {
  TempDir d;
  const std::string whole = d.path("whole.csv"), killed = d.path("killed.csv");
  const std::string args = " --vary gpus=512,1024,2048 --vary parallelism.ep=8,16,32,64,128 --vary batch.micro_batch=6,3 "
                           "--derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)' --derive 'batch.global_batch=6*gpus' --jobs 1";
  ASSERT_EQ(run("sweep " + source(kSeed) + args + " --out " + whole).code, 0);
  // Started in the background from a script (the derive rules hold quotes of their own), killed
  // once four lines are written; the wait ends too if the sweep exits first.
  const std::string script = d.path("kill.sh");
  std::ofstream(script) << MOEPERF_CLI << " sweep " << source(kSeed) << args << " --out " << killed << " 2>/dev/null &\n"
                        << "pid=$!\n"
                        << "while kill -0 $pid 2>/dev/null && [ $(cat " << killed << " 2>/dev/null | wc -l) -lt 4 ]; do sleep 0.01; done\n"
                        << "kill -9 $pid\nwait $pid\nexit 0\n";
  ASSERT_EQ(std::system(("sh " + script).c_str()), 0);
  const std::string cut = slurp(killed), full = slurp(whole);
  ASSERT_LT(cut.size(), full.size()) << "the sweep finished before it was killed";
  EXPECT_EQ(full.compare(0, cut.size(), cut), 0);  // a prefix, perhaps ending mid-line
  const Result r = run("sweep " + source(kSeed) + args + " --resume --out " + killed);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(slurp(killed), full);
}

// Across processes (mpirun, Open MPI from Debian, on loopback): moeperf execs moeperf-mpi, ranks
// take every size-th point and rank 0 writes; the files equal one process's byte for byte, a
// resumed file too, and plan returns the same best layouts.
std::string mpirun(int np) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 mpirun -np " +
         std::to_string(np) + " --oversubscribe --mca btl self,vader ";
}

bool have_mpi_cli() {
  return std::system("command -v mpirun >/dev/null 2>&1") == 0 &&
         std::filesystem::exists(std::filesystem::path(MOEPERF_CLI).parent_path() / "moeperf-mpi");
}

// Rows finished ahead of the writer wait in a window (4,096 points; 8 MB for a sweep of millions):
// with a window of 3 (MOEPERF_SWEEP_WINDOW, for tests) the workers wait for the writer, and the
// file has the same bytes as one thread's, in one process and on MPI ranks.
TEST(CliSweep, AFullWriteWindowHoldsTheWorkersAndKeepsTheBytes) {
  TempDir d;
  const std::string args = "sweep " + source("examples/executor/cpu-small.json") +
                           " --vary batch.global_batch=16..400+16 --vary batch.seq_len=16,32,48,64 --out ";
  ASSERT_EQ(run(args + d.path("one.csv") + " --jobs 1").code, 0);
  ASSERT_EQ(sh("MOEPERF_SWEEP_WINDOW=3 " + std::string(MOEPERF_CLI) + " " + args + d.path("four.csv") + " --jobs 4 2>&1").code, 0);
  const std::string one = slurp(d.path("one.csv"));
  EXPECT_EQ(slurp(d.path("four.csv")), one);
  EXPECT_EQ(std::count(one.begin(), one.end(), '\n'), 101);  // the header and 100 rows
  if (have_mpi_cli()) {
    const Result r = sh("MOEPERF_SWEEP_WINDOW=2 " + mpirun(3) + "-x MOEPERF_SWEEP_WINDOW " + MOEPERF_CLI + " " + args + d.path("mpi.csv") + " --jobs 2");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(slurp(d.path("mpi.csv")), one);
  }
}

TEST(CliMpi, SweepOnRanksEqualsOneProcessByteForByteAndResumes) {
  if (!have_mpi_cli()) GTEST_SKIP() << "mpirun or moeperf-mpi (built when MPI is found) is not available";
  TempDir d;
  const std::string args = " --vary parallelism.ep=1,2,4,8,16,32,64,3 --vary batch.micro_batch=6,3 "
                           "--derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)' --jobs 1";
  for (const char* ext : {".csv", ".jsonl"}) {
    const std::string one = d.path(std::string("one") + ext), many = d.path(std::string("many") + ext);
    ASSERT_EQ(run("sweep " + source(kSeed) + args + " --out " + one).code, 0);
    for (int np : {2, 3}) {
      const Result r = sh(mpirun(np) + MOEPERF_CLI + " sweep " + source(kSeed) + args + " --out " + many);
      ASSERT_EQ(r.code, 0) << r.out;
      EXPECT_NE(r.out.find("on " + std::to_string(np) + " processes x 1 thread"), std::string::npos) << r.out;
      EXPECT_EQ(slurp(many), slurp(one)) << ext << " on " << np << " ranks";
    }
    // Cut after five rows and part of the sixth, then resumed on 3 ranks.
    const std::string whole = slurp(one);
    size_t pos = 0;
    for (int i = 0; i < 6; ++i) pos = whole.find('\n', pos) + 1;
    std::ofstream(many, std::ios::binary | std::ios::trunc) << whole.substr(0, pos + 7);
    const Result r = sh(mpirun(3) + MOEPERF_CLI + " sweep " + source(kSeed) + args + " --resume --out " + many);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(slurp(many), whole) << ext << " resumed";
  }
  // Bad input on every rank: exit 2 with the message, no hang.
  const Result bad = sh(mpirun(2) + MOEPERF_CLI + " sweep " + source(kSeed) + " --vary parallelism.ep=8 --out /nonexistent-dir/x.csv");
  EXPECT_NE(bad.code, 0) << bad.out;
  EXPECT_NE(bad.out.find("the folder /nonexistent-dir does not exist"), std::string::npos) << bad.out;
}

TEST(CliMpi, PlanOnRanksFindsTheSameBestLayouts) {
  if (!have_mpi_cli()) GTEST_SKIP() << "mpirun or moeperf-mpi (built when MPI is found) is not available";
  const std::string args = " plan " + source(kSeed) + " --gpus 4 --top 3 --format json --jobs 1 --set model=../models/qwen3-30b-a3b/config.json";
  const Result one = run_stdout(args);
  ASSERT_EQ(one.code, 0) << one.out;
  const Result many = sh("(" + mpirun(3) + MOEPERF_CLI + args + " 2>/dev/null)");
  ASSERT_EQ(many.code, 0) << many.out;
  auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(many.out.substr(many.out.find('{')));
  EXPECT_EQ(b["searched"]["processes"], 3);
  EXPECT_EQ(a["searched"]["candidates"], b["searched"]["candidates"]);
  a.erase("searched"), b.erase("searched");
  EXPECT_EQ(a.dump(), b.dump());
}

TEST(CliSweep, RangesGridsAndBadArguments) {
  TempDir d;
  const std::string grid = d.write("grid.json", R"({"kind": "sweep_grid", "points": [
    {"parallelism.ep": 8, "parallelism.fsdp": 16}, {"parallelism.ep": 32, "parallelism.fsdp": 4}]})");
  Result r = run("sweep " + source(kSeed) + " --grid " + grid + " --vary 'gpus=64..256*2' --derive 'parallelism.fsdp=gpus/ep' --format jsonl");
  ASSERT_EQ(r.code, 0) << r.out;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> rows;
  for (std::string x; std::getline(lines, x);)
    if (!x.empty() && x[0] == '{') rows.push_back(nlohmann::json::parse(x));
  ASSERT_EQ(rows.size(), 6u) << r.out;  // 2 grid points x gpus 64, 128, 256
  EXPECT_EQ(rows[1]["point"]["gpus"], "128");
  EXPECT_EQ(rows[4]["point"]["parallelism.ep"], "32");
  EXPECT_EQ(rows[4]["derived"]["parallelism.fsdp"], "4");
  EXPECT_EQ(rows[1]["status"], "ok") << rows[1];
  // Bad arguments: exit 2 with the argument named, nothing written.
  const std::string out = d.path("never.csv");
  const std::vector<std::string> bads = {"--vary parallelism.ep", "--vary 'gpus=256..64*2'", "--vary gpus=64 --derive 'parallelism.fsdp=gpus/(ep'",
                                         "--grid " + d.write("g.json", R"({"kind": "sweep_grid", "points": []})")};
  for (const std::string& bad : bads) {
    r = run("sweep " + source(kSeed) + " " + bad + " --out " + out);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << bad;
  }
  r = run("sweep " + source(kSeed) + " --vary parallelism.ep");
  EXPECT_NE(r.out.find("--vary parallelism.ep: expected PATH=V1,V2,..."), std::string::npos) << r.out;
  r = run("sweep " + source(kSeed) + " --vary gpus=64 --derive 'parallelism.fsdp=gpus/(ep'");
  EXPECT_NE(r.out.find("--derive parallelism.fsdp=gpus/(ep: missing ')'"), std::string::npos) << r.out;
  // Ranges counted before they are made (a fuzzer's 1e90..4e200+2 spun for minutes): too many
  // values, and a step below the precision of the values it steps, are refused at once.
  r = run("sweep " + source(kSeed) + " --vary 'gpus=1e90..4e200+2' --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--vary gpus=1e90..4e200+2: more than 100000 values in the range"), std::string::npos) << r.out;
  r = run("sweep " + source(kSeed) + " --vary 'gpus=1e16..10000000000000004+0.5' --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the step 0.5 is below the precision of the values it steps (10000000000000000)"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  // What fails every point alike is the sweep's own bad input (a misspelt path of --vary, --set or
  // --derive; a malformed or incomplete scenario file): exit 2 before a row is written, not a file
  // of rows with one reason. A value that fails some points stays their rows.
  const std::string no_model = d.write("no-model.json", R"({"kind": "scenario"})");
  const std::vector<std::pair<std::string, std::string>> every = {
      {source(kSeed) + " --vary parallelism.epp=4,8", "(set by --vary parallelism.epp=4) (every point of the sweep has it)"},
      {source(kSeed) + " --vary parallelism.ep=4,8 --set parallelism.fsdpp=2", "/parallelism/fsdpp: unknown key \"fsdpp\""},
      {source(kSeed) + " --vary parallelism.ep=4,8 --derive 'parallelism.fsdpp=gpus/ep'", "/parallelism/fsdpp: unknown key \"fsdpp\" (did you mean \"fsdp\"?) (set by --derive parallelism.fsdpp="},
      {no_model + " --vary gpus=64,128", "no-model.json: missing required field \"model\" (every point of the sweep has it)"},
      {d.write("cut.json", "{\"kind\": \"scenario\",") + " --vary gpus=64,128", "cut.json: malformed JSON"}};
  for (const auto& [args, want] : every) {
    r = run("sweep " + args + " --out " + out);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
  // A varied value wrong whatever the others are (its type or range: an unknown dtype, a count of
  // "abc" or -8, in --vary or a grid) is a typo: exit 2 naming it, nothing written. A value that
  // fails some points by a rule between fields (EP 3 of 128 GPUs) stays their rows.
  const std::string bad_grid = d.write("bad-grid.json", R"({"kind": "sweep_grid", "points": [{"parallelism.ep": 8}, {"parallelism.ep": "x"}]})");
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--vary 'precision.dense_gemm=fp3,bf16' --vary parallelism.ep=8", "got \"fp3\""},
           {"--vary parallelism.ep=abc,8", "/parallelism/ep: expected a positive integer, got \"abc\" (set by --vary parallelism.ep=abc)"},
           {"--vary parallelism.ep=8,-8", "got -8 (set by --vary parallelism.ep=-8)"},
           {"--grid " + bad_grid, "got \"x\" (set by --grid parallelism.ep=x) (the grid's point 1, /points/1)"}}) {
    r = run("sweep " + source(kSeed) + " " + args + " --out " + out);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
  r = run("sweep " + source(kSeed) + " --vary parallelism.ep=3,8 --derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)' --out " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  const std::string csv = slurp(out);
  EXPECT_NE(csv.find("0,3,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("infeasible"), std::string::npos) << csv;
  EXPECT_NE(csv.find("1,8,16,ok"), std::string::npos) << csv;
}

// moeperf sensitivity: each term is predict with that one thing changed, minus the scenario's step.
TEST(CliSensitivity, TermsArePredictionsWithOneThingChanged) {
  const Result r = run_stdout("sensitivity " + source(kSeed) + " --format json --jobs 2");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const double step = j["step_time_s"].get<double>();
  std::map<std::string, nlohmann::json> by;
  double last = 1e300;
  for (const auto& t : j["terms"]) {
    by[t["name"].get<std::string>()] = t;
    // Largest change first.
    double big = 0;
    for (const char* k : {"minus_s", "plus_s"})
      if (!t[k].is_null()) big = std::max(big, std::abs(t[k].get<double>()));
    EXPECT_LE(big, last + 1e-12) << t;
    last = big;
  }
  auto step_with = [&](const std::string& set) {
    const Result p = run("predict " + source(kSeed) + " --set '" + set + "' --format json");
    EXPECT_EQ(p.code, 0) << p.out;
    return nlohmann::json::parse(p.out)["step_time_s"].get<double>();
  };
  // HBM at 8 TB/s x 1.1 and x 0.9, and the FSDP prefetch switched off, through --set.
  ASSERT_TRUE(by.count("HBM bandwidth"));
  EXPECT_NEAR(by["HBM bandwidth"]["plus_s"].get<double>(), step_with(kGpu + ".hbm_bandwidth=\"8.8 TB/s\"") - step, 1e-9);
  EXPECT_NEAR(by["HBM bandwidth"]["minus_s"].get<double>(), step_with(kGpu + ".hbm_bandwidth=\"7.2 TB/s\"") - step, 1e-9);
  EXPECT_LT(by["HBM bandwidth"]["plus_s"].get<double>(), 0);  // faster memory, shorter step
  ASSERT_TRUE(by.count("stack.overlap.fsdp_prefetch"));
  EXPECT_TRUE(by["stack.overlap.fsdp_prefetch"]["flip"].get<bool>());
  EXPECT_NEAR(by["stack.overlap.fsdp_prefetch"]["plus_s"].get<double>(), step_with("stack.overlap.fsdp_prefetch=false") - step, 1e-9);
  // Every efficiency parameter but the tile shapes and the memory reserve is a term.
  EXPECT_TRUE(by.count("param ib_fraction"));
  EXPECT_FALSE(by.count("param gemm_tile_m"));
  // A parameter at 0 (Blackwell's gemm_k_half) has no relative change: no figure, the reason once.
  ASSERT_TRUE(by.count("param gemm_k_half"));
  EXPECT_TRUE(by["param gemm_k_half"]["minus_s"].is_null()) << by["param gemm_k_half"];
  EXPECT_TRUE(by["param gemm_k_half"]["plus_s"].is_null()) << by["param gemm_k_half"];
  EXPECT_EQ(by["param gemm_k_half"]["note"], "at 0, which a relative change leaves at 0") << by["param gemm_k_half"];
  // So has a hardware figure at 0 (an NVLink latency of "0 s", as the executor's suite writes it).
  const Result z = run_stdout("sensitivity " + source(kSeed) + " --set 'system.nvlink_domain.nvlink_latency=\"0 s\"' --format json");
  ASSERT_EQ(z.code, 0) << z.out;
  bool zero_named = false;
  const auto zj = nlohmann::json::parse(z.out);  // kept: a range over a temporary's member would dangle
  for (const auto& t : zj["terms"])
    if (t["name"] == "NVLink latency") {
      zero_named = true;
      EXPECT_TRUE(t["minus_s"].is_null() && t["plus_s"].is_null()) << t;
      EXPECT_EQ(t["note"], "at 0, which a relative change leaves at 0") << t;
    }
  EXPECT_TRUE(zero_named) << z.out.substr(0, 2000);
  // The text names the largest term first.
  const Result t = run("sensitivity " + source(kSeed) + " --top 3");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("  1    " + j["terms"][0]["name"].get<std::string>()), std::string::npos) << t.out;
}

// Capacity figures: the job's tokens/s, the GPUs it holds (whole racks or nodes), and a token
// budget's time, energy and cost.
TEST(CliCapacity, ClusterThroughputGpusHeldAndTimeToTrain) {
  Result r = run("predict " + source(kSeed) + " --tokens 15T --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["cluster_tokens_per_s"].get<double>(), 128 * j["tokens_per_s_per_gpu"].get<double>(), 1e-6);
  EXPECT_EQ(j["gpus_bought"], 144);  // 2 GB300 NVL72 racks, 64 of each rack's 72 used
  EXPECT_NEAR(j["time_to_train_s"].get<double>(), 15e12 / j["cluster_tokens_per_s"].get<double>(), 1e-6);
  EXPECT_FALSE(j.contains("energy_to_train_mwh"));  // the GB300 system file gives no power
  r = run("predict " + source(kSeed) + " --tokens 15T --top 1");
  EXPECT_NE(r.out.find("GPUs; 144 GPUs held (2 NVLink domains of 72)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  time to train          "), std::string::npos) << r.out;
  // Energy and cost where the system gives power and a price: per million tokens x the budget.
  const std::string dgx = source("examples/compare/deepseek-v3-dgx-b200.json");
  r = run("predict " + dgx + " --tokens 300B --set system.price.usd_per_gpu_hour=4 --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["energy_to_train_mwh"].get<double>(), j["energy_kwh_per_million_tokens"].get<double>() * 3e5 / 1e3, 1e-6);
  EXPECT_NEAR(j["cost_to_train_usd"].get<double>(), j["cost_usd_per_million_tokens"].get<double>() * 3e5, 1e-3);
  EXPECT_EQ(j["gpus_bought"], 256);  // 32 DGX nodes of 8
  // sweep --tokens: per point the days, the GPU-hours of the domains held and (with a price) the
  // cost of the job's GPUs, as predict gives them; the cost column empty without a price.
  for (const bool priced : {false, true}) {
    const std::string price = priced ? " --set system.price.usd_per_gpu_hour=3" : "";
    const Result sw = run_stdout("sweep " + source(kSeed) + " --vary gpus=128,256 --derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)' "
                                 "--derive 'batch.global_batch=6*gpus' --tokens 15T" + price);
    ASSERT_EQ(sw.code, 0) << sw.out;
    std::istringstream lines(sw.out);
    std::string header, row;
    std::getline(lines, header);
    EXPECT_NE(header.find(",gpus_bought,time_to_train_days,gpu_hours_held,cost_to_train_usd,reason"), std::string::npos) << header;
    int n = 0;
    while (std::getline(lines, row)) {
      std::vector<std::string> c;
      std::stringstream cells(row);
      for (std::string x; std::getline(cells, x, ',');) c.push_back(x);
      ASSERT_GE(c.size(), 18u) << row;
      const double gpus = std::stod(c[1]), held = std::stod(c[15]), days = std::stod(c[16]), hours = std::stod(c[17]);
      EXPECT_EQ(held, gpus == 128 ? 144 : 288) << row;
      EXPECT_NEAR(hours, days * 24 * held, 0.01 * 24 * held) << row;  // days printed to 0.01
      if (priced) EXPECT_NEAR(std::stod(c.at(18)), 3 * days * 24 * gpus, 0.01 * 24 * gpus * 3) << row;
      else EXPECT_TRUE(c.size() == 18 || c[18].empty()) << row;
      ++n;
    }
    EXPECT_EQ(n, 2) << sw.out;
  }
  r = run("predict " + source(kSeed) + " --tokens 15X");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--tokens 15X: expected a token count like 15T"), std::string::npos) << r.out;
}

// moeperf plan: the best layout's figures are predict's for its --set list; the counts add up;
// best first. Qwen3-30B-A3B on 4 GB300 keeps the search small enough for the sanitizer pass.
TEST(CliPlan, BestLayoutsArePredictionsAndTheSearchAddsUp) {
  const std::string small = " --set model=../models/qwen3-30b-a3b/config.json";
  const Result r = run_stdout("plan " + source(kSeed) + " --gpus 4 --top 3 --format json" + small);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& n = j["searched"];
  EXPECT_EQ(n["candidates"].get<size_t>(), n["invalid"].get<size_t>() + n["too_many_passes"].get<size_t>() +
                                               n["do_not_fit"].get<size_t>() + n["pruned_by_bound"].get<size_t>() +
                                               n["pruned_by_compute_bound"].get<size_t>() + n["pruned_by_comm_bound"].get<size_t>() +
                                               n["pruned_by_schedule_bound"].get<size_t>() + n["predicted"].get<size_t>() + n["failed"].get<size_t>());
  // How many are simulated moves with the threads' timing (a bound found sooner prunes more): 13
  // alone here, 10 once under ctest -j2; the search must still simulate more than the best three.
  EXPECT_GT(n["predicted"].get<size_t>(), 5u);
  ASSERT_EQ(j["best"].size(), 3u);
  double last = 0;
  for (const auto& b : j["best"]) {
    EXPECT_GT(b["cluster_tokens_per_s"].get<double>(), 0.0);
    if (last > 0) {
      EXPECT_LE(b["cluster_tokens_per_s"].get<double>(), last);
    }
    last = b["cluster_tokens_per_s"].get<double>();
  }
  std::string sets = small;
  for (const auto& x : j["best"][0]["set"]) sets += " --set '" + x.get<std::string>() + "'";
  const Result p = run("predict " + source(kSeed) + sets + " --format json");
  ASSERT_EQ(p.code, 0) << p.out;
  const auto pj = nlohmann::json::parse(p.out);
  EXPECT_NEAR(pj["step_time_s"].get<double>(), j["best"][0]["step_time_s"].get<double>(), 1e-9);
  EXPECT_TRUE(pj["fits_in_memory"].get<bool>());
  // The bounds lose nothing: without pruning the same layouts come out, with the same figures, and
  // more of them were simulated.
  const Result all = run_stdout("plan " + source(kSeed) + " --gpus 4 --top 3 --format json --no-prune" + small);
  ASSERT_EQ(all.code, 0) << all.out;
  const auto aj = nlohmann::json::parse(all.out);
  ASSERT_EQ(aj["best"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(aj["best"][i]["layout"], j["best"][i]["layout"]);
    EXPECT_DOUBLE_EQ(aj["best"][i]["step_time_s"].get<double>(), j["best"][i]["step_time_s"].get<double>());
  }
  EXPECT_EQ(aj["searched"]["pruned_by_bound"].get<size_t>() + aj["searched"]["pruned_by_compute_bound"].get<size_t>() +
                aj["searched"]["pruned_by_comm_bound"].get<size_t>() + aj["searched"]["pruned_by_schedule_bound"].get<size_t>(),
            0u);
  EXPECT_GT(aj["searched"]["predicted"].get<size_t>(), n["predicted"].get<size_t>());
  // MoE parallel folding is searched (ETP 1 across TP ranks, 2, 4): among the best 20 unpruned
  // layouts (the 15th on 2026-12-01) is a folded one with ETP 2, and its --set list predicts its step.
  const Result every = run_stdout("plan " + source(kSeed) + " --gpus 4 --top 20 --format json --no-prune" + small);
  ASSERT_EQ(every.code, 0) << every.out;
  const auto ej = nlohmann::json::parse(every.out);
  EXPECT_EQ(ej["best"].size(), 20u);
  const nlohmann::json* folded = nullptr;
  for (const auto& b : ej["best"])
    if (b["layout"].get<std::string>().find("etp 2 x") != std::string::npos) folded = &b;
  ASSERT_NE(folded, nullptr) << every.out.substr(0, 2000);
  std::string fsets = small;
  for (const auto& x : (*folded)["set"]) fsets += " --set '" + x.get<std::string>() + "'";
  const Result fp = run("predict " + source(kSeed) + fsets + " --format json");
  ASSERT_EQ(fp.code, 0) << fp.out;
  EXPECT_NEAR(nlohmann::json::parse(fp.out)["step_time_s"].get<double>(), (*folded)["step_time_s"].get<double>(), 1e-9);
  // The text names the runner-up's loss and how to predict the best.
  const Result t = run("plan " + source(kSeed) + " --gpus 4 --top 2" + small);
  EXPECT_NE(t.out.find("the runner-up loses"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("predict the best: moeperf predict"), std::string::npos) << t.out;
  // Progress on stderr (not a terminal here: a line at each tenth), ending with every candidate done.
  const std::string all_done = "plan: " + std::to_string(n["candidates"].get<size_t>()) + "/" +
                               std::to_string(n["candidates"].get<size_t>()) + " layouts, ";
  EXPECT_NE(t.out.find(all_done), std::string::npos) << t.out;
  // On the scenario's own GPU count and batch, its own layout is predicted too: the same step as
  // predict gives it, and no faster than the best (it is one of the layouts searched).
  const std::string own = small + " --set gpus=4 --set parallelism.ep=4 --set parallelism.fsdp=1 --set batch.global_batch=24";
  const Result o = run_stdout("plan " + source(kSeed) + " --gpus 4 --top 1 --format json" + own);
  ASSERT_EQ(o.code, 0) << o.out;
  const auto oj = nlohmann::json::parse(o.out);
  ASSERT_TRUE(oj.contains("scenario_layout")) << o.out;
  const Result op = run("predict " + source(kSeed) + own + " --format json");
  ASSERT_EQ(op.code, 0) << op.out;
  EXPECT_DOUBLE_EQ(oj["scenario_layout"]["step_time_s"].get<double>(), nlohmann::json::parse(op.out)["step_time_s"].get<double>());
  EXPECT_LE(oj["best"][0]["step_time_s"].get<double>(), oj["scenario_layout"]["step_time_s"].get<double>() * (1 + 1e-9));
  EXPECT_EQ(oj["scenario_layout"]["layout"], "tp 1 x cp 1 x pp 1 x ep 4 x fsdp 1 x dp 1");
  EXPECT_FALSE(j.contains("scenario_layout"));  // 4 GPUs planned for a 128-GPU scenario
  const Result ot = run("plan " + source(kSeed) + " --gpus 4 --top 1" + own);
  EXPECT_NE(ot.out.find("  the scenario's own layout (tp 1 x cp 1 x pp 1 x ep 4 x fsdp 1 x dp 1): step "), std::string::npos) << ot.out;
  // An objective the system cannot price is bad input.
  const Result c = run("plan " + source(kSeed) + " --gpus 4 --objective cost" + small);
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.out.find("gives no price per GPU-hour"), std::string::npos) << c.out;
  // A token budget is time_to_train's: with another objective it would change nothing, and says so.
  const Result tk = run("plan " + source(kSeed) + " --gpus 4 --tokens 15T" + small);
  EXPECT_EQ(tk.code, 2) << tk.out;
  EXPECT_NE(tk.out.find("--tokens is the budget of --objective time_to_train"), std::string::npos) << tk.out;
}

// plan --balance: each pipelined candidate runs its balanced layout (its --set list says
// parallelism.layout=balanced, and predict with that list gives the same step); candidates
// without a pipeline are untouched; a pipelined layout is faster balanced than split evenly
// (Qwen3-30B-A3B on 4 GB300, PP 2 x VPP 2: the embedding and the head on the end stages).
// The plan's FLOP bound counts the attention core at the fastest rate attention is priced at, not
// at the GEMMs': under a calibration that prices attention faster than BF16 GEMMs (attention 1.0,
// GEMMs 0.25) the pruned search finds the same three best as --no-prune (it dropped faster
// layouts when attention FLOPs were bounded at the GEMM rate).
TEST(CliPlan, TheFlopBoundHoldsWhenAttentionIsPricedFasterThanGemms) {
  TempDir d;
  std::ifstream in(kOptimized);
  nlohmann::json j = nlohmann::json::parse(in);
  j["model"] = source("examples/models/qwen3-30b-a3b/config.json");
  j["system"] = source("topologies/gb300-nvl72.json");
  j["gpus"] = 8;
  j["parallelism"] = {{"tp", 1}, {"cp", 1}, {"pp", 1}, {"ep", 8}, {"fsdp", 1}, {"dp", 1}, {"schedule", "1f1b"}};
  j["batch"] = {{"seq_len", 65536}, {"micro_batch", 1}, {"global_batch", 8}};
  for (const char* k : {"dense_gemm", "expert_gemm", "dispatch", "combine"}) j["precision"][k] = "bf16";
  j["calibration"] = {{"params", {{"gemm_fraction_bf16", 0.25}, {"gemm_fraction_fp8", 0.25}, {"gemm_fraction_mxfp8", 0.25},
                                  {"attention_fwd_fraction", 1.0}, {"attention_bwd_fraction", 1.0}}}};
  const std::string f = d.write("attn-fast.json", j.dump());
  // The same long-sequence case with the shipped profile (attention is a large share there: a bound
  // that counted its FLOPs three times over once pruned the second best).
  j.erase("calibration");
  const std::string shipped = d.write("shipped.json", j.dump());
  auto best = [&](const std::string& file, const std::string& extra) {
    const Result r = run_stdout("plan " + file + " --gpus 8 --top 3 --schedules all --format json" + extra);
    EXPECT_EQ(r.code, 0) << r.out;
    std::vector<std::string> out;
    const auto parsed = nlohmann::json::parse(r.out);
    for (const auto& e : parsed["best"]) out.push_back(e["layout"].get<std::string>());
    return out;
  };
  for (const std::string& file : {f, shipped}) {
    const std::vector<std::string> pruned = best(file, ""), all = best(file, " --no-prune");
    ASSERT_EQ(pruned.size(), 3u) << file;
    EXPECT_EQ(pruned, all) << file;
  }
  // The runner-up line names the four largest terms by size, gains too, and what the others add
  // up to: its figures sum to the difference it states.
  const Result t = run("plan " + f + " --gpus 8 --top 2 --schedules all");
  ASSERT_EQ(t.code, 0) << t.out;
  const auto line_at = t.out.find("the runner-up loses ");
  ASSERT_NE(line_at, std::string::npos) << t.out;
  const std::string line = t.out.substr(line_at, t.out.find('\n', line_at) - line_at);
  double total = 0, sum = 0;
  ASSERT_EQ(std::sscanf(line.c_str(), "the runner-up loses %lf", &total), 1) << line;
  for (size_t at = line.find(": ") + 2; at < line.size();) {
    const size_t sign = line.find_first_of("+-", line.find(' ', at));
    sum += std::stod(line.substr(sign));
    const size_t next = line.find(", ", sign);
    if (next == std::string::npos) break;
    at = next + 2;
  }
  EXPECT_NEAR(sum, total, 0.0025) << line;
}

// A pruned search over every schedule, in text, of a scenario planned on its own GPU count (its own
// layout's line) and one of a 65,536-token sequence (context-parallel candidates), small enough to
// run under the sanitizers, where the three searches above (pruned beside --no-prune) do not.
TEST(CliPlan, APrunedSearchOverEveryScheduleSaysItsOwnLayout) {
  const std::string small = " --set model=../models/qwen3-30b-a3b/config.json --set gpus=4 --set parallelism.ep=4 "
                            "--set parallelism.fsdp=1 --set batch.global_batch=24";
  const Result t = run("plan " + source(kSeed) + " --gpus 4 --top 2 --schedules all" + small);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("the runner-up loses "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("the scenario's own layout (tp 1 x cp 1 x pp 1 x ep 4 x fsdp 1 x dp 1): step "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" by their uncontended schedule"), std::string::npos) << t.out;
  const Result j = run_stdout("plan " + source(kSeed) + " --gpus 8 --top 2 --format json --set model=../models/qwen3-30b-a3b/config.json "
                              "--set gpus=8 --set parallelism.ep=8 --set parallelism.fsdp=1 --set batch.seq_len=65536 "
                              "--set batch.micro_batch=1 --set batch.global_batch=8");
  ASSERT_EQ(j.code, 0) << j.out;
  const auto pj = nlohmann::json::parse(j.out);
  EXPECT_EQ(pj["best"].size(), 2u);
  EXPECT_GT(pj["searched"]["pruned_by_compute_bound"].get<size_t>() + pj["searched"]["pruned_by_schedule_bound"].get<size_t>(), 0u);
  EXPECT_TRUE(pj.contains("scenario_layout")) << j.out.substr(0, 2000);
}

TEST(CliPlan, BalanceRunsEveryPipelinedLayoutBalanced) {
  const std::string small = " --set model=../models/qwen3-30b-a3b/config.json";
  const std::string args = "plan " + source(kSeed) + " --gpus 4 --top 20 --format json --no-prune" + small;
  const Result e = run_stdout(args), b = run_stdout(args + " --balance");
  ASSERT_EQ(e.code, 0) << e.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const auto ej = nlohmann::json::parse(e.out), bj = nlohmann::json::parse(b.out);
  std::map<std::string, double> even;
  for (const auto& x : ej["best"]) even[x["layout"].get<std::string>()] = x["step_time_s"].get<double>();
  const std::string pipelined = "tp 1 x cp 1 x pp 2 (vpp 2) x ep 2 x fsdp 1 x dp 1, schedule interleaved";
  const std::string tail = ", micro-batch 6, memory: the scenario's";
  const nlohmann::json* bal = nullptr;
  int unpiped = 0;
  for (const auto& x : bj["best"]) {
    const std::string lay = x["layout"].get<std::string>();
    const bool piped = lay.find("x pp 1 x") == std::string::npos;
    bool says = false;
    for (const auto& s : x["set"]) says = says || s.get<std::string>() == "parallelism.layout=balanced";
    // A balanced candidate says so in its --set list and the text names the split: "..., balanced
    // Et*12|(t*13|)*2t*10L, micro-batch ..."; the even splits stay candidates beside them, as
    // without --balance.
    EXPECT_EQ(lay.find(", balanced E") != std::string::npos, says) << lay;
    if (says) {
      EXPECT_TRUE(piped) << lay;
    } else {
      ASSERT_TRUE(even.count(lay)) << lay;
      EXPECT_DOUBLE_EQ(x["step_time_s"].get<double>(), even[lay]) << lay;
      ++unpiped;
    }
    if (lay.rfind(pipelined + ", balanced ", 0) == 0 && lay.size() > tail.size() &&
        lay.compare(lay.size() - tail.size(), tail.size(), tail) == 0)
      bal = &x;
  }
  EXPECT_GT(unpiped, 5);
  ASSERT_NE(bal, nullptr) << b.out.substr(0, 3000);
  ASSERT_TRUE(even.count(pipelined + tail)) << e.out.substr(0, 3000);
  EXPECT_LT((*bal)["step_time_s"].get<double>(), even[pipelined + tail]);
  std::string sets = small;
  for (const auto& x : (*bal)["set"]) sets += " --set '" + x.get<std::string>() + "'";
  const Result p = run("predict " + source(kSeed) + sets + " --format json");
  ASSERT_EQ(p.code, 0) << p.out;
  const auto pj = nlohmann::json::parse(p.out);
  EXPECT_NEAR(pj["step_time_s"].get<double>(), (*bal)["step_time_s"].get<double>(), 1e-9);
  EXPECT_TRUE(pj["pipeline_layout"]["balanced"].get<bool>());
  const std::string spec = pj["pipeline_layout"]["spec"].get<std::string>();
  EXPECT_NE(spec, "even");
  EXPECT_EQ((*bal)["layout"].get<std::string>(), pipelined + ", balanced " + spec + tail);
}

// plan --schedules: the pipelined meshes are searched under each schedule asked (the rest once);
// every pipelined layout found names one of them and its --set list predicts its step; the
// bounds lose nothing under schedules whose bubble they do not count; an unknown name is bad input.
TEST(CliPlan, SchedulesAreSearchedAsAsked) {
  const std::string small = " --set model=../models/qwen3-30b-a3b/config.json";
  const std::string args = "plan " + source(kSeed) + " --gpus 4 --format json" + small;
  auto searched = [&](const std::string& schedules) {
    const Result r = run_stdout(args + " --top 3 --schedules '" + schedules + "'");
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out);
  };
  // N unpipelined meshes, searched once, and each schedule's pipelined ones: the list's count is
  // N plus each schedule's own (N from 1f1b, interleaved and the two together). ZB-H1 drops the
  // FSDP meshes (there it is 1F1B).
  std::map<std::string, size_t> alone;
  for (const char* s : {"1f1b", "interleaved", "zbh1", "dualpipe", "dualpipev"}) alone[s] = searched(s)["searched"]["candidates"];
  const auto two = searched("1f1b,interleaved"), every = searched(" all ");
  const size_t c2 = two["searched"]["candidates"], c5 = every["searched"]["candidates"];
  const size_t n = alone["1f1b"] + alone["interleaved"] - c2;
  ASSERT_GT(c2, alone["1f1b"]);
  size_t sum = n;
  for (const auto& [name, c] : alone) sum += c - n;
  EXPECT_EQ(c5, sum);
  EXPECT_LT(alone["zbh1"], alone["1f1b"]);
  EXPECT_EQ(every["schedules"], nlohmann::json({"1f1b", "interleaved", "zbh1", "dualpipe", "dualpipev"}));
  EXPECT_EQ(searched("zbh1 , dualpipev")["schedules"], nlohmann::json({"zbh1", "dualpipev"}));  // spaces are not names
  // --vpp: the interleaved meshes once per VPP (here every pipeline has room for 4 per GPU).
  const Result v24 = run_stdout(args + " --top 60 --no-prune --schedules interleaved --vpp 2,4");
  ASSERT_EQ(v24.code, 0) << v24.out;
  const auto vj = nlohmann::json::parse(v24.out);
  EXPECT_EQ(vj["vpps"], nlohmann::json({2, 4}));
  EXPECT_EQ(vj["searched"]["candidates"].get<size_t>(), 2 * alone["interleaved"] - n);
  bool four = false;
  for (const auto& x : vj["best"]) four = four || x["layout"].get<std::string>().find("(vpp 4)") != std::string::npos;
  EXPECT_TRUE(four) << v24.out.substr(0, 3000);
  // --max-passes: a lower bound on micro-batch x layer passes leaves more layouts out, and says so.
  const Result few = run("plan " + source(kSeed) + " --gpus 4 --top 1 --max-passes 100" + small);
  ASSERT_EQ(few.code, 0) << few.out;
  EXPECT_NE(few.out.find("micro-batch x layer passes left out"), std::string::npos) << few.out;
  EXPECT_NE(few.out.find("with over 100 micro-batch"), std::string::npos) << few.out;
  const Result fewj = run_stdout(args + " --top 1 --max-passes 100");
  ASSERT_EQ(fewj.code, 0) << fewj.out;
  EXPECT_GT(nlohmann::json::parse(fewj.out)["searched"]["too_many_passes"].get<size_t>(),
            two["searched"]["too_many_passes"].get<size_t>());
  const Result v1 = run("plan " + source(kSeed) + " --gpus 4 --vpp 1" + small);
  EXPECT_EQ(v1.code, 2) << v1.out;
  EXPECT_NE(v1.out.find("--vpp: expected a virtual stage count (a whole number >= 2), got 1"), std::string::npos) << v1.out;
  const Result d = run_stdout(args + " --top 3");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_EQ(nlohmann::json::parse(d.out)["searched"]["candidates"], c2);  // the default: 1f1b and interleaved
  // Every layout that fits, under ZB-H1 and DualPipeV only.
  const Result all = run_stdout(args + " --top 400 --no-prune --schedules zbh1,dualpipev");
  ASSERT_EQ(all.code, 0) << all.out;
  const auto aj = nlohmann::json::parse(all.out);
  std::map<std::string, int> seen;
  const nlohmann::json* dual = nullptr;
  for (const auto& x : aj["best"]) {
    const std::string lay = x["layout"].get<std::string>();
    if (lay.find("x pp 1 x") != std::string::npos) continue;
    const bool zb = lay.find("schedule zbh1,") != std::string::npos, dv = lay.find("schedule dualpipev,") != std::string::npos;
    EXPECT_TRUE(zb || dv) << lay;
    ++seen[zb ? "zbh1" : "dualpipev"];
    if (dv && !dual) dual = &x;
  }
  EXPECT_GT(seen["zbh1"], 0) << all.out.substr(0, 3000);
  ASSERT_NE(dual, nullptr) << all.out.substr(0, 3000);
  std::string sets = small;
  for (const auto& x : (*dual)["set"]) sets += " --set '" + x.get<std::string>() + "'";
  EXPECT_NE(sets.find("parallelism.schedule=dualpipev"), std::string::npos) << sets;
  const Result p = run("predict " + source(kSeed) + sets + " --format json");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NEAR(nlohmann::json::parse(p.out)["step_time_s"].get<double>(), (*dual)["step_time_s"].get<double>(), 1e-9);
  // Pruned, the same best (the FLOP bound counts no fill for ZB-H1 and DualPipe(V)).
  const Result pruned = run_stdout(args + " --top 5 --schedules zbh1,dualpipev");
  ASSERT_EQ(pruned.code, 0) << pruned.out;
  const auto pj = nlohmann::json::parse(pruned.out);
  ASSERT_EQ(pj["best"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(pj["best"][i]["layout"], aj["best"][i]["layout"]) << i;
  const Result bad = run("plan " + source(kSeed) + " --gpus 4 --schedules 1f1b,gpipe" + small);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--schedules 1f1b,gpipe: unknown schedule \"gpipe\" (expected a comma-separated list of 1f1b, "
                         "interleaved, zbh1, dualpipe, dualpipev, or all)"),
            std::string::npos)
      << bad.out;
}

}  // namespace
}  // namespace moeperf

// calibrate --require-held-back: exit 1 unless every class's held-back records come out within
// the bound after the fit (issue 19's bar for the suite), each class's verdict printed.
TEST(Cli, CalibrateRequireHeldBackIsAVerdict) {
  const std::string gemm = source("calibration/published/gemm.json");
  const Result ok = run("calibrate " + gemm + " --generation hopper --require-held-back 0.10");
  ASSERT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("held-back check (median after the fit <= 10.0 %"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find(": holds"), std::string::npos) << ok.out;
  const Result tight = run("calibrate " + gemm + " --generation hopper --require-held-back 0.001");
  EXPECT_EQ(tight.code, 1) << tight.out;
  EXPECT_NE(tight.out.find("FAILS (above the bound)"), std::string::npos) << tight.out;
  const Result bad = run("calibrate " + gemm + " --require-held-back -1");
  EXPECT_EQ(bad.code, 2) << bad.out;
}

// calibrate --carry PROFILE:PARAM: the parameter starts at the profile's value; where no record of
// the fitted generation moves it, the profile keeps it and lists it as carried from that profile
// (HybridEP's torch-API copies on Hopper, whose records are all RDMA); one a record moves is
// fitted and not listed. A malformed flag, an unknown parameter or a missing profile exits 2 and
// writes nothing.
TEST(Cli, CalibrateCarryKeepsAnotherGenerationsValueWhereNoRecordMovesIt) {
  TempDir d;
  const std::string ep = source("calibration/published/ep.json"), gemm = source("calibration/published/gemm.json");
  const std::string bw = source("calibration/profiles/blackwell.json");
  const Result r = run("calibrate " + ep + " --generation hopper --carry " + bw + ":ep_api_copy_passes,ep_sm_half --out " + d.path("h.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("starts at ep_api_copy_passes = 3.90982 from blackwell"), std::string::npos) << r.out;
  const auto h = nlohmann::json::parse(std::ifstream(d.path("h.json")));
  const auto b = nlohmann::json::parse(std::ifstream(bw));
  EXPECT_EQ(h["params"]["ep_api_copy_passes"], b["params"]["ep_api_copy_passes"]);
  EXPECT_EQ(h["carried"]["ep_api_copy_passes"], "blackwell");
  // Hopper's RDMA records fit the SMs' term (3.2 against Blackwell's 0): fitted, not carried.
  EXPECT_FALSE(h["carried"].contains("ep_sm_half")) << h["carried"];
  EXPECT_GT(h["params"]["ep_sm_half"].get<double>(), 1.0);
  EXPECT_EQ(h["fit"]["start"], "defaults, with ep_api_copy_passes, ep_sm_half carried from blackwell");
  // Without the flag the parameter stays at its default and nothing is carried.
  ASSERT_EQ(run("calibrate " + ep + " --generation hopper --out " + d.path("h0.json")).code, 0);
  const auto h0 = nlohmann::json::parse(std::ifstream(d.path("h0.json")));
  EXPECT_EQ(h0["params"]["ep_api_copy_passes"], 0.0);
  EXPECT_FALSE(h0.contains("carried"));
  for (const auto& [flag, want] : std::vector<std::pair<std::string, std::string>>{
           {bw, "expected PROFILE.json:PARAM[,PARAM...]"},
           {bw + ":", "expected PROFILE.json:PARAM[,PARAM...]"},
           {bw + ":ep_api_copy_passes,no_such", "unknown parameter \"no_such\""},
           {d.path("missing.json") + ":ep_api_copy_passes", "missing.json"},
           {gemm + ":ep_api_copy_passes", gemm},
           {bw + ":ep_api_copy_passes,ep_sm_half,ep_api_copy_passes", "ep_api_copy_passes is carried twice"},
           {source("calibration/profiles/hopper.json") + ":ep_api_copy_passes",
            "is a hopper profile, the generation being fitted: name it with --start"}}) {
    const Result bad = run("calibrate " + ep + " --generation hopper --carry " + flag + " --out " + d.path("bad.json"));
    EXPECT_EQ(bad.code, 2) << flag << "\n" << bad.out;
    EXPECT_NE(bad.out.find(want), std::string::npos) << flag << "\n" << bad.out;
    EXPECT_FALSE(std::filesystem::exists(d.path("bad.json"))) << flag;
  }
  const Result all = run("calibrate " + ep + " --carry " + bw + ":ep_api_copy_passes --out " + d.path("bad.json"));
  EXPECT_EQ(all.code, 2) << all.out;
  EXPECT_NE(all.out.find("--carry needs --generation"), std::string::npos) << all.out;
  EXPECT_FALSE(std::filesystem::exists(d.path("bad.json")));
  // A value the source profile carried from the generation being fitted, or borrowed, is refused.
  for (const auto& [gen, flag, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"hopper", bw + ":hbm_fraction", "blackwell.json's hbm_fraction is carried there from the hopper profile"},
           {"blackwell", source("calibration/profiles/hopper.json") + ":gemm_fraction_bf16",
            "hopper.json's gemm_fraction_bf16 is borrowed there, not fitted"}}) {
    const Result bad = run("calibrate " + ep + " " + gemm + " --generation " + gen + " --carry " + flag + " --out " + d.path("bad.json"));
    EXPECT_EQ(bad.code, 2) << flag << "\n" << bad.out;
    EXPECT_NE(bad.out.find(want), std::string::npos) << flag << "\n" << bad.out;
    EXPECT_FALSE(std::filesystem::exists(d.path("bad.json")));
  }
}

// Profiles of real training steps: compare-trace and calibrate --trace on the fixture the trace
// tests write (tests/model/io/trace_fixtures.h).
namespace {

TEST(CliTrace, CompareTracePutsEachClassBesideThePrediction) {
  TempDir d;
  const std::string trace = d.path("rank0.json");
  moeperf::test::KinetoFixture::write(trace, moeperf::test::KinetoFixture::build());
  const std::string scenario = source("examples/executor/cpu-small.json");  // an H100 scenario, fast under the sanitizers
  const Result r = run("compare-trace " + scenario + " " + trace);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* want : {"unmapped: 4 kernels of 2 names, 0.065 ms per step", "my_custom_rope_kernel(float*, int)",
                           "7 measurement records from kernels with a shape", "GEMMs", "attention", "all-gather", "all-to-all",
                           "host copies", "unmapped kernels"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  const Result j = run("compare-trace " + scenario + " " + trace + " --format json");
  ASSERT_EQ(j.code, 0) << j.out;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_DOUBLE_EQ(doc["step"]["measured_s"].get<double>(), 0.010);
  std::map<std::string, double> measured;
  for (const auto& c : doc["classes"]) measured[c["class"]] = c["measured_s"];
  EXPECT_NEAR(measured["GEMMs"], 1220e-6, 1e-12);
  EXPECT_NEAR(measured["attention"], (800 + 2080) * 1e-6, 1e-12);
  EXPECT_NEAR(measured["memory-bound kernels"], 60e-6, 1e-12);
  EXPECT_NEAR(measured["host copies"], 1500e-6, 1e-12);
  // Predicted side: the scenario's own prediction, summed per class.
  const auto p = nlohmann::json::parse(run("predict " + scenario + " --format json").out);
  EXPECT_NEAR(doc["step"]["predicted_s"].get<double>(), p["step_time_s"].get<double>(), 1e-12);
  // The host: the fixture's launching thread, 13 launches per step; the traced host time is the
  // launches at their mean gap, and the host_op_s that gives the prediction's framework ops that time.
  const auto& th = doc["trace"]["host"];
  EXPECT_EQ(th["tids"], nlohmann::json::array({100}));
  EXPECT_DOUBLE_EQ(th["launches_per_step"].get<double>(), 13.0);
  const auto& h = doc["host"];
  EXPECT_NEAR(h["traced_s"].get<double>(), 13.0 * th["mean_gap_s"].get<double>(), 1e-15);
  ASSERT_GT(h["framework_ops"].get<double>(), 0.0);
  ASSERT_TRUE(h.contains("matching_host_op_s")) << h.dump();
  EXPECT_EQ(h["gpu_paced"], false);
  const double rest = h["predicted_busy_s"].get<double>() - h["stack_host_op_s"].get<double>() * h["framework_ops"].get<double>();
  EXPECT_NEAR(h["matching_host_op_s"].get<double>(), (h["traced_s"].get<double>() - rest) / h["framework_ops"].get<double>(), 1e-15);
  for (const char* want : {"host: thread 100 issued 13 kernel launches and 0 graph launches per step",
                           "host, per step: predicted", "--set stack.host_op_s="})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(CliTrace, CalibrateFromATraceAndBadTracesExitTwoWritingNothing) {
  TempDir d;
  const std::string trace = d.path("rank0.json");
  moeperf::test::KinetoFixture::write(trace, moeperf::test::KinetoFixture::build());
  const std::string sys = source("topologies/dgx-h100-cluster.json");
  const Result r = run("calibrate --trace " + trace + " --system " + sys + " --out " + d.path("p.json") + " --records-out " + d.path("r.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("7 records from the trace enter the fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gemm (hopper): 1 fitted"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(d.path("p.json")));
  const auto recs = nlohmann::json::parse(std::ifstream(d.path("r.json")));
  EXPECT_EQ(recs["records"].size(), 7u);
  // The records file is a measurements file like any other.
  EXPECT_EQ(run("calibrate " + d.path("r.json")).code, 0);
  // A run refused after reading the trace (no record of the generation asked) writes no records file.
  const Result g = run("calibrate --trace " + trace + " --system " + sys + " --generation blackwell --records-out " + d.path("r2.json"));
  EXPECT_EQ(g.code, 2) << g.out;
  EXPECT_NE(g.out.find("--generation blackwell: no record is of that GPU generation"), std::string::npos) << g.out;
  EXPECT_FALSE(std::filesystem::exists(d.path("r2.json")));
  const std::string good = moeperf::test::KinetoFixture::build().dump();
  struct Bad {
    std::string name, text, expect;
  };
  for (const Bad& b : {Bad{"trunc.json", good.substr(0, good.size() / 3), "malformed JSON"},
                       Bad{"nokernels.json", R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})",
                           "/traceEvents: no GPU kernels"},
                       Bad{"unit.json", R"({"displayTimeUnit": "furlongs", "traceEvents": []})", "/displayTimeUnit: unknown time unit"},
                       Bad{"forever.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1e300}]})",
                           "/traceEvents/0/dur: expected a duration in [0, 1e12] microseconds"}}) {
    const std::string f = d.path(b.name), out = d.path("bad-" + b.name);
    std::ofstream(f) << b.text;
    for (const std::string& args : {"calibrate --trace " + f + " --system " + sys + " --out " + out, "compare-trace " +
                                    source("examples/executor/cpu-small.json") + " " + f}) {
      const Result x = run(args);
      EXPECT_EQ(x.code, 2) << args << "\n" << x.out;
      EXPECT_NE(x.out.find(f), std::string::npos) << x.out;
      EXPECT_NE(x.out.find(b.expect), std::string::npos) << x.out;
      EXPECT_LT(x.out.size(), 400u) << x.out;
    }
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

// A scenario named without a folder (run from its own folder) takes --set overrides like any
// other: its folder is the working one (it was "filesystem error: cannot make absolute path").
TEST(CliSet, AScenarioInTheWorkingFolderTakesOverrides) {
  const std::string dir = source("examples/deepseek-v3");
  const Result r = sh("cd " + dir + " && " + std::string(MOEPERF_CLI) +
                      " predict gb300-optimized.json --set calibration=../calibration/defaults.json --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(nlohmann::json::parse(r.out)["profile"].get<std::string>().find("defaults"), std::string::npos) << r.out;
}

}  // namespace
