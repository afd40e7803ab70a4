// The moeperf binary as a user runs it: output, exit codes (0 ok, 1 failed, 2 bad input) and
// nothing written when the input is bad.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "../model/io/temp_dir.h"

namespace {

using moeperf::testing::source;
using moeperf::testing::TempDir;

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  const std::string cmd = std::string(MOEPERF_CLI) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
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
  EXPECT_FALSE(std::filesystem::exists(dot + ".tmp"));
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

}  // namespace
