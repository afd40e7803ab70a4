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
#include "tests/executor/run_helpers.h"
#include "executor/run.h"
#include "executor/run_parts.h"

namespace {

using moeperf::testing::have_mpirun;
using moeperf::testing::mpirun;
using moeperf::testing::Result;
using moeperf::testing::sh;
using moeperf::testing::source;
using moeperf::testing::TempDir;


// A backend that computes nothing and counts how the recorder times: Backend::time_work (a device
// backend's events behind its flush) for compute ops, the host's clock between synchronizes for the
// host communicator's work (a barrier's wait, a host collective).
class CountingBackend final : public moeperf::exec::Backend {
 public:
  int time_work_calls = 0, synchronizes = 0;
  double time_work(const std::function<void()>& f) override {
    ++time_work_calls;
    f();
    return 1.0;  // a device time no host clock would read
  }
  std::string name() const override { return "counting"; }
  void synchronize() override { ++synchronizes; }
  bool host_memory() const override { return false; }
  void* alloc(size_t) override { return nullptr; }
  void release(void*) override {}
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
  void gather_rows(const float*, const int64_t*, int64_t, int64_t, float*) override {}
  void fill(float*, int64_t, float) override {}
  void copy(void*, const void*, size_t) override {}
  double measure_gemm_peak() override { return 1.0; }
  double measure_copy_bandwidth() override { return 1.0; }
  std::string gemm_peak_method() const override { return ""; }
  void gemm(const float*, const float*, float*, int64_t, int64_t, int64_t, bool, bool, bool) override {}
  void swiglu_fwd(const float*, int64_t, int64_t, float*) override {}
  void swiglu_bwd(const float*, const float*, int64_t, int64_t, float*) override {}
  void router_topk(const float*, const float*, const moeperf::ref::RouterParams&, int32_t*, float*) override {}
  void router_bwd(const float*, const int32_t*, const float*, const moeperf::ref::RouterParams&, float*) override {}
  void expert_counts(const int32_t*, int64_t, int, int64_t, int64_t*, int64_t*) override {}
  void permute_map(const int32_t*, int64_t, int, int64_t, const int64_t*, int64_t*, int64_t*) override {}
  void permute(const float*, int64_t, int64_t, int, const int64_t*, float*) override {}
  void unpermute(const float*, int64_t, int64_t, int, const int64_t*, const float*, float*) override {}
  void unpermute_bwd(const float*, const float*, int64_t, int64_t, int, const int64_t*, const float*, float*, float*) override {}
  void permute_bwd(const float*, int64_t, int64_t, int, const int64_t*, float*) override {}
};

TEST(Executor, TheRecorderTimesComputeOnTheDeviceAndHostWorkByTheHostsClock) {
  CountingBackend be;
  std::map<std::string, moeperf::exec::OpStats> ops;
  moeperf::exec::detail::Recorder rec{&ops, &be};
  rec.record = true;
  for (const char* compute : {"moe.expert_fc1", "moe.permute", "moe.regroup", "attn.q_proj"}) rec.time(compute, 0, 0, [] {});
  EXPECT_EQ(be.time_work_calls, 4);
  for (const char* compute : {"moe.expert_fc1", "moe.permute", "moe.regroup", "attn.q_proj"}) EXPECT_EQ(ops[compute].seconds.at(0), 1.0) << compute;
  for (const char* host : {"wait.moe.dispatch", "wait.moe.count_exchange", "fsdp.all_gather", "fsdp.reduce_scatter",
                           "moe.shared_grad.reduce_scatter"}) {
    const int before = be.synchronizes;
    rec.time(host, 0, 0, [] {});
    EXPECT_EQ(be.synchronizes, before + 2) << host << ": a synchronize before and after, around the host's clock";
    EXPECT_LT(ops[host].seconds.at(0), 1.0) << host;
  }
  EXPECT_EQ(be.time_work_calls, 4);
}

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
  // The layer's attention block ran before the MoE block, under the model's op names, and passed its gates.
  EXPECT_NE(r.out.find("gate ok: attention block (RMSNorm, Q/KV projections, RoPE, causal GQA core"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate ok: attention block backward"), std::string::npos) << r.out;
  for (const char* op : {"moe.dispatch", "moe.expert_fc1", "moe.expert_fc1.wgrad", "moe.combine", "moe.unpermute", "attn.norm", "attn.q_proj",
                         "attn.kv_proj", "attn.core", "attn.out_proj", "attn.out_proj.dgrad", "attn.core.bwd", "attn.q_proj.wgrad", "attn.norm.bwd"}) {
    ASSERT_TRUE(j["ops"].contains(op)) << op;
    EXPECT_EQ(j["ops"][op]["calls"], 2) << op;
    EXPECT_GT(j["ops"][op]["median_s"].get<double>(), 0.0) << op;
    EXPECT_GE(j["ops"][op]["max_s"].get<double>(), j["ops"][op]["min_s"].get<double>()) << op;
    // Two calls: the median is the faster one's time (a call that ran, written with its work).
    EXPECT_EQ(j["ops"][op]["median_s"].get<double>(), j["ops"][op]["min_s"].get<double>()) << op;
  }
  // GEMM rate against this machine's own measured peak, beside each GEMM.
  EXPECT_GT(j["machine"]["gemm_peak_flops_measured"].get<double>(), 0.0);
  // The peak says what it measured (the CPU backend: Eigen), and a CPU run describes no GPU.
  EXPECT_NE(j["machine"]["gemm_peak_method"].get<std::string>().find("Eigen"), std::string::npos) << j["machine"];
  EXPECT_NE(r.out.find("(measured: 1024^3 FP32 Eigen GEMM"), std::string::npos) << r.out;
  EXPECT_FALSE(j["machine"].contains("gpu"));
  // How the ops were timed, in the file and on the screen: the CPU backend computes on the host, so
  // its clock is the device's (the CUDA backend's events: CudaBackendGpu.TimeWorkIsTheDevicesTimeBehindAFlush).
  EXPECT_EQ(j["machine"]["timing_method"], "host clock from a synchronize through the one after the op") << j["machine"];
  EXPECT_NE(r.out.find("ops timed by: host clock from a synchronize"), std::string::npos) << r.out;
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
  EXPECT_EQ(sh1["kernel"], "ptr_array");  // the default stack's
  EXPECT_NEAR(2 * sh1["m"].get<double>() * sh1["n"].get<double>() * sh1["k"].get<double>() * sh1["groups"].get<double>(),
              fc1["flops_per_call"].get<double>(), 1e-6 * fc1["flops_per_call"].get<double>());
  EXPECT_FALSE(j["ops"]["moe.dispatch"].contains("shape"));
  // tiny-moe: 8 heads of 32 over 2 K/V heads, sequences of 256 (1,024 tokens: 4 of them); the core is
  // an attention record priced by its mean keys (causal: 128) and head dim, FLOPs as the model counts.
  const auto& core = j["ops"]["attn.core"];
  EXPECT_EQ(core["kind"], "attention");
  EXPECT_DOUBLE_EQ(core["attention"]["keys"].get<double>(), 128.0);
  EXPECT_DOUBLE_EQ(core["attention"]["head_dim"].get<double>(), 32.0);
  EXPECT_DOUBLE_EQ(core["flops_per_call"].get<double>(), 1024.0 * 2 * 128 * 8 * 2 * 32);
  EXPECT_TRUE(j["ops"]["attn.core.bwd"]["attention"]["backward"].get<bool>());
  EXPECT_DOUBLE_EQ(j["ops"]["attn.core.bwd"]["flops_per_call"].get<double>(), 2.5 * core["flops_per_call"].get<double>());
  EXPECT_EQ(j["dims"]["attention"]["seq"], 256);
  const auto& q = j["ops"]["attn.q_proj"]["shape"];
  EXPECT_EQ(q["m"].get<double>() * q["n"].get<double>() * q["k"].get<double>(), 1024.0 * 256 * 256) << q;
  // The file is measurements of parts for calibrate as it stands.
  const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + out);
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("gemm ("), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("attention ("), std::string::npos) << c.out;
}

// A sliding window and FSDP: the attention weights sharded over the 2 ranks, gathered before the
// forward and their gradients reduce-scattered, both under the model's names and checked by gates.
TEST(Executor, WindowedAttentionWithFsdpGathersAndReduceScattersItsWeights) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  auto model = nlohmann::json::parse(std::ifstream(source("examples/models/tiny-moe.moeperf.json")));
  model["attention"]["sliding_window"] = 64;
  model["attention"]["sliding_layers"] = {true, true, true, true};
  std::ofstream(d.path("model.json")) << model.dump();
  auto sc = nlohmann::json::parse(std::ifstream(source("examples/executor/cpu-small.json")));
  sc["model"] = d.path("model.json");
  sc["system"] = source("topologies/dgx-h100-cluster.json");
  sc["gpus"] = 4;  // ep 2 x fsdp 2; the run is one EP group of 2 ranks, the weights sharded over them
  sc["parallelism"] = {{"ep", 2}, {"fsdp", 2}};
  sc["batch"] = {{"seq_len", 256}, {"micro_batch", 2}, {"global_batch", 8}};
  // A stack whose experts are Transformer Engine's multi-stream GEMMs: the executor runs its own
  // loop over the groups, and writes them as the pointer-array kernel, not as that host loop.
  sc["stack"] = {{"grouped_kernel", "multi_stream"}};
  std::ofstream(d.path("s.json")) << sc.dump();
  const Result r = sh(mpirun(2) + MOEPERF_CLI + " run " + d.path("s.json") + " --steps 1 --warmup 0 --out " + d.path("m.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gate ok: attention block (RMSNorm, Q/KV projections, RoPE, windowed causal GQA core"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate ok: FSDP: the attention weights gathered from 2 shards equal the full weights"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(d.path("m.json")));
  for (const char* op : {"fsdp.all_gather", "fsdp.reduce_scatter"}) {
    ASSERT_TRUE(j["ops"].contains(op)) << op;
    EXPECT_EQ(j["ops"][op]["kind"], "communication") << op;
  }
  // A 64-token window over 256: (64 x 65 / 2 + 192 x 64) / 256 keys per query.
  EXPECT_DOUBLE_EQ(j["ops"]["attn.core"]["attention"]["keys"].get<double>(), (64.0 * 65 / 2 + 192.0 * 64) / 256);
  EXPECT_EQ(j["dims"]["attention"]["window"], 64);
  EXPECT_TRUE(j["dims"]["attention"]["fsdp"].get<bool>());
  EXPECT_EQ(j["ops"]["moe.expert_fc1"]["shape"]["kernel"], "ptr_array");
}

// DeepSeek-V3 scaled down 32 x on one process: its MLA block (low-rank Q, compressed K/V with the
// shared rope part) passes the same gates, under the same op names.
TEST(Executor, DeepSeekV3ScaledDownRunsItsMlaBlock) {
  TempDir d;
  const Result r = sh(std::string(MOEPERF_CLI) + " run " + source("examples/deepseek-v3/h800-dualpipe.json") +
                      " --scale 32 --steps 1 --warmup 0 --out " + d.path("m.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("gate ok: attention block (RMSNorm, Q/KV projections, RoPE, causal MLA (low-rank Q) core"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate ok: attention block backward"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(d.path("m.json")));
  const auto& a = j["dims"]["attention"];
  EXPECT_EQ(a["type"], "mla");
  EXPECT_EQ(a["heads"], 4);            // 128 / 32
  EXPECT_EQ(a["head_dim"], 192);       // nope 128 + rope 64, kept
  EXPECT_EQ(a["v_head_dim"], 128);
  EXPECT_EQ(a["q_lora_rank"], 48);     // 1536 / 32
  EXPECT_EQ(a["kv_lora_rank"], 16);    // 512 / 32
  // attn.kv_proj: the down projection to kv_lora + rope and the up projection to each head's K (nope) and V.
  const double T = j["dims"]["tokens_per_rank"].get<double>(), H = j["dims"]["hidden"].get<double>();
  EXPECT_DOUBLE_EQ(j["ops"]["attn.kv_proj"]["flops_per_call"].get<double>(), 2 * T * (H * (16 + 64) + 16.0 * 4 * (128 + 128)));
  EXPECT_EQ(j["ops"]["attn.core"]["attention"]["head_dim"].get<double>(), (192.0 + 128) / 2);
  // attn.rope: Q read and written, the up projection's K nope and V read with the shared rope part,
  // each head's K and V written (FP32), as the model counts the fused MLA rope pass (in BF16).
  const double qd = 4 * 192, kvw = 4 * (128 + 128), kd = 4 * 192, vd = 4 * 128;
  EXPECT_DOUBLE_EQ(j["ops"]["attn.rope"]["bytes_per_call"].get<double>(), 4 * T * (2 * qd + kvw + 64 + kd + vd));
  EXPECT_DOUBLE_EQ(j["ops"]["attn.rope.bwd"]["bytes_per_call"].get<double>(), 4 * T * (2 * qd + kvw + 64 + kd + vd));
}

// --machine: the exchanges priced on this machine's system (the suite's --write-system file) by the
// collective model; the file embeds the system, and calibrate reads the exchanges as collective records.
TEST(Executor, OnTheSuitesSystemTheExchangesAreCollectiveRecords) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun or MPI support is not available";
  TempDir d;
  Result r = sh(mpirun(2) + MOEPERF_CLI + " run --suite calibrate --budget 4 --write-system " + d.path("sys.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = sh(mpirun(2) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") + " --steps 1 --warmup 0 --machine " +
         d.path("sys.json") + " --out " + d.path("m.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(std::ifstream(d.path("m.json")));
  EXPECT_EQ(j["system"]["kind"], "system");
  for (const auto& [op, coll] : std::map<std::string, std::string>{{"moe.dispatch", "all_to_all"},
                                                                  {"moe.combine.bwd", "all_to_all"},
                                                                  {"moe.shared_grad.reduce_scatter", "reduce_scatter"}}) {
    EXPECT_EQ(j["ops"][op]["collective"], coll) << op;
    EXPECT_EQ(j["ops"][op]["group"], 2) << op;
    EXPECT_GT(j["ops"][op]["predicted_s"].get<double>(), 0.0) << op;
  }
  const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + d.path("m.json"));
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("collective ("), std::string::npos) << c.out;
  // A machine file that is not there: exit 2, naming it.
  const Result m = sh(mpirun(2) + MOEPERF_CLI + " run " + source("examples/executor/cpu-small.json") + " --steps 1 --warmup 0 --machine " +
                      source("examples/executor/no-such-machine.json"));
  EXPECT_EQ(m.code, 2) << m.out;
  EXPECT_NE(m.out.find("no-such-machine.json"), std::string::npos) << m.out;
}

TEST(Executor, MoeOnlyRunsNoAttention) {
  const Result r = sh(std::string(MOEPERF_CLI) + " run " + source("examples/executor/cpu-small.json") + " --steps 1 --warmup 0 --moe-only");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("attn."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--moe-only: the attention block is not run"), std::string::npos) << r.out;
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
  // The temporary has a name of its own (m.json.XXXXXX, mkstemp), never a user's "m.json.tmp".
  std::string tmp;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(out).parent_path()))
    if (e.path().filename().string().rfind("m.json.", 0) == 0) tmp = e.path().string();
  ASSERT_FALSE(tmp.empty());
  // A truncated file handed to calibrate: an input error naming it, exit 2.
  const Result c = sh(std::string(MOEPERF_CLI) + " calibrate " + tmp);
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.out.find(tmp + ": malformed JSON"), std::string::npos) << c.out;
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

}  // namespace
