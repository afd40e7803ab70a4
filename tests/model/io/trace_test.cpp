// Profiles of real training steps read as op-class totals and measurement records
// (model/io/measured_trace.h), on fixtures the tests write (trace_fixtures.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "model/io/errors.h"
#include "model/io/measured_trace.h"
#include "model/io/parts.h"
#include "model/study/calibrate.h"
#include "tests/model/io/trace_fixtures.h"

#ifdef MOEPERF_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace moeperf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::KinetoFixture;

std::string temp(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("moeperf_trace_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

io::MeasuredTrace read(const json& j, const std::string& name = "k.json", io::TraceOptions o = {}) {
  const std::string p = temp(name);
  KinetoFixture::write(p, j);
  return io::read_measured_trace(p, io::builtin_kernel_patterns(), o);
}

const json* record(const io::MeasuredTrace& t, const std::string& op) {
  for (const json& r : t.records)
    if (r.at("op") == op) return &r;
  return nullptr;
}

TEST(KinetoTrace, MapsEveryKernelItShouldPerStepAndListsTheRest) {
  const io::MeasuredTrace t = read(KinetoFixture::build());
  EXPECT_EQ(t.format, "kineto");
  EXPECT_EQ(t.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.gpu_sms, 132);
  EXPECT_EQ(t.device, 0);
  EXPECT_EQ(t.devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.steps, 2);
  EXPECT_NEAR(t.step_s, 10e-3, 1e-12);  // the GPU-side ranges (10 ms), not the CPU-side ones (9.99 ms)
  using K = KinetoFixture;
  const std::map<std::string, std::pair<int64_t, double>> want{
      {"gemm", {4, K::gemm_us + K::splitk_us}},
      {"attention.fwd", {2, K::attn_fwd_us}},
      {"attention.bwd", {6, K::attn_bwd_us}},
      {"collective.all_gather", {2, K::allgather_us}},
      {"collective.all_to_all", {2, K::a2a_us}},  // a SendRecv kernel: its own args say all_to_allv
      {"memory", {2, K::add_us}},
      {"host.h2d", {2, K::h2d_us}},
  };
  ASSERT_EQ(t.classes.size(), want.size());
  for (const auto& [cls, w] : want) {
    ASSERT_TRUE(t.classes.count(cls)) << cls;
    EXPECT_EQ(t.classes.at(cls).kernels, w.first) << cls;
    EXPECT_NEAR(t.classes.at(cls).seconds, w.second * 1e-6, 1e-12) << cls;  // per step
  }
  ASSERT_EQ(t.unmapped.size(), 2u);
  EXPECT_EQ(t.unmapped[0].name, "my_custom_rope_kernel(float*, int)");  // longest first
  EXPECT_EQ(t.unmapped[0].count, 2);
  EXPECT_NEAR(t.unmapped[0].seconds, K::rope_us * 1e-6, 1e-12);
  EXPECT_NE(t.unmapped[1].name.find("fused_dropout_kernel"), std::string::npos);
  EXPECT_EQ(t.kernels, 24);  // device 1's two kernels are not counted
}

TEST(KinetoTrace, ShapesComeFromTheOpsAroundTheLaunch) {
  const io::MeasuredTrace t = read(KinetoFixture::build());
  ASSERT_EQ(t.records.size(), 7u);
  const json* g = record(t, "gemm");
  ASSERT_TRUE(g);
  // aten::mm inside aten::linear: the innermost op; its two kernels (GEMM + split-K reduce) are one instance.
  EXPECT_EQ(g->at("shape"), (json{{"m", 4096}, {"n", 14336}, {"k", 4096}}));
  EXPECT_EQ(g->at("dtype"), "bf16");
  EXPECT_EQ(g->at("measured"), "1220000 ns");
  EXPECT_EQ(g->at("quote"), "median of 2 instances (an instance: the kernels one op launched)");
  const json* f = record(t, "attention.fwd");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->at("shape"), (json{{"batch", 1}, {"heads", 32}, {"seq", 4096}, {"head_dim", 128}, {"causal", true}}));
  const json* b = record(t, "attention.bwd");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->at("measured"), "2080000 ns");
  const json* ag = record(t, "collective.all_gather");
  ASSERT_TRUE(ag);
  EXPECT_EQ(ag->at("gpus"), 8);
  EXPECT_EQ(ag->at("shape").at("bytes"), "16777216 B");  // 8 Mi BF16 elements gathered
  EXPECT_EQ(ag->at("algorithm"), "ring");                // from the kernel's name
  EXPECT_EQ(ag->at("confidence"), "medium");
  const json* a2a = record(t, "collective.all_to_all");
  ASSERT_TRUE(a2a);
  EXPECT_EQ(a2a->at("shape").at("bytes"), "4194304 B");
  const json* add = record(t, "memory.copy");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->at("shape").at("bytes"), std::to_string(3LL * 8192 * 4096 * 2) + " B");  // two inputs read, one output written
  const json* h2d = record(t, "host.h2d");
  ASSERT_TRUE(h2d);
  EXPECT_EQ(h2d->at("shape").at("bytes"), "67108864 B");
}

TEST(KinetoTrace, AScaledGemmsScalesNameItsRecipe) {
  // The fixture's aten::mm relaunched as aten::_scaled_mm on FP8 operands: scale_a's type and
  // shape say which FP8 recipe ran (4096 x 4096 x 14336; K / 128 = 32 blocks per row).
  auto recipe = [](const std::string& scale_type, const json& scale_dims) {
    json j = KinetoFixture::build();
    for (json& e : j["traceEvents"])
      if (e["name"] == "aten::mm") {
        e["name"] = "aten::_scaled_mm";
        e["args"]["Input Dims"] = json::array({{4096, 4096}, {4096, 14336}, scale_dims, json::array({1, 14336})});
        e["args"]["Input type"] = {"c10::Float8_e4m3fn", "c10::Float8_e4m3fn", scale_type, scale_type};
      }
    const io::MeasuredTrace t = read(j, "scaled.json");
    const json* g = record(t, "gemm");
    return g ? g->at("dtype").get<std::string>() : std::string("none");
  };
  EXPECT_EQ(recipe("float", json::array()), "fp8");                      // one scale per tensor
  EXPECT_EQ(recipe("float", json::array({4096, 1})), "fp8");             // row-wise
  EXPECT_EQ(recipe("float", json::array({4096, 32})), "fp8_block");      // 1 x 128 blocks along K
  EXPECT_EQ(recipe("c10::Float8_e8m0fnu", json::array({4096, 128})), "mxfp8");  // MX blocks of 32
}

TEST(KinetoTrace, RecordsFitLikePublishedOnes) {
  const io::MeasuredTrace t = read(KinetoFixture::build());
  const std::string sys = std::string(MOEPERF_SOURCE_DIR) + "/topologies/dgx-h100-cluster.json";
  std::vector<std::string> notes;
  const json doc = io::trace_records_document(t, "", sys, &notes);
  EXPECT_TRUE(notes.empty());
  const auto recs = io::parts_from_document(doc, t.file + " (records)");
  ASSERT_EQ(recs.size(), 7u);
  for (const PartRecord& r : recs) {
    EXPECT_EQ(r.generation, "hopper") << r.id;
    EXPECT_GT(predict_part(r, Calibration{}), 0) << r.id;
  }
  // The GEMM's measured 1.22 ms is 39.4 % of the H100's 989 TFLOP/s: the fit finds it.
  const FitReport f = fit_parts(recs, Calibration{}, "hopper");
  for (const ClassFit& c : f.classes)
    if (c.cls == PartClass::gemm) {
      ASSERT_EQ(c.records.size(), 1u);
      EXPECT_GT(std::abs(c.records[0].before), 0.3);
      EXPECT_LT(std::abs(c.records[0].after), 0.01);
    }
  // Without a system the collective and host-copy records are left out, and said so.
  notes.clear();
  const json gpu_only = io::trace_records_document(t, std::string(MOEPERF_SOURCE_DIR) + "/topologies/gpus/h100-sxm.json", "", &notes);
  EXPECT_EQ(gpu_only.at("records").size(), 4u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--system"), std::string::npos);
}

// A copy's class follows its CUPTI kind: within the device (DtoD, array kinds) memory.copy with
// a record of the bytes read and written; between two GPUs (PtoP) a transfer over the link,
// timed as send/recv and never priced as the device's own HBM; host to host unmapped, by name.
TEST(KinetoTrace, CopiesAreClassedByTheirKind) {
  json j = KinetoFixture::build();
  auto copy = [&](double ts, double dur, const std::string& name, int64_t bytes) {
    j["traceEvents"].push_back({{"ph", "X"}, {"cat", "gpu_memcpy"}, {"name", name}, {"pid", 0}, {"tid", 7}, {"ts", ts}, {"dur", dur},
                                {"args", {{"device", 0}, {"bytes", bytes}}}});
  };
  copy(7600, 100, "Memcpy DtoD (Device -> Device)", 1 << 20);
  copy(7700, 200, "Memcpy PtoP (Device -> Device)", 1 << 22);
  // The peer copy launched inside a collective's op (NCCL copying through cudaMemcpy): the op's
  // collective fields are the collective's, not the copy's, and make no record of it either.
  j["traceEvents"].push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", 1}, {"tid", 100}, {"ts", 7650}, {"dur", 40},
                              {"args", {{"External id", 99998}, {"Collective name", "all_to_all"}, {"dtype", "BFloat16"},
                                        {"In msg nelems", 8388608}, {"Out msg nelems", 8388608}, {"Group size", 8}}}});
  j["traceEvents"].push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaMemcpyAsync"}, {"pid", 1}, {"tid", 100}, {"ts", 7660},
                              {"dur", 3}, {"args", {{"correlation", 99999}}}});
  j["traceEvents"].back()["args"]["correlation"] = 99999;
  j["traceEvents"][j["traceEvents"].size() - 3]["args"]["correlation"] = 99999;  // the PtoP copy above
  copy(7900, 30, "Memcpy HtoH (Pinned -> Pinned)", 3000);
  copy(7950, 10, "Memcpy AtoD (Array -> Device)", 1 << 10);
  const io::MeasuredTrace t = read(j, "copies.json");
  EXPECT_NEAR(t.classes.at("memory.copy").seconds, 110e-6 / 2, 1e-12);  // two steps, the copies in the first
  EXPECT_NEAR(t.classes.at("collective.send_recv").seconds, 200e-6 / 2, 1e-12);
  bool hh = false;
  for (const auto& u : t.unmapped) hh = hh || u.name == "Memcpy HtoH (Pinned -> Pinned)";
  EXPECT_TRUE(hh);
  std::set<std::string> copies;
  for (const json& r : t.records) {
    EXPECT_NE(r.at("op"), "collective.send_recv");  // no record: the bytes alone do not say which link
    if (r.at("op").get<std::string>().rfind("collective.", 0) == 0) {  // nor the collective's fields around the copy, at its time
      EXPECT_NE(r.at("measured"), "200000 ns") << r;
    }
    if (r.at("op") == "memory.copy") copies.insert(r.at("shape").at("bytes"));
  }
  EXPECT_TRUE(copies.count("2097152 B"));  // the DtoD copy, read and written
  EXPECT_TRUE(copies.count("2048 B"));     // the AtoD copy
  EXPECT_FALSE(copies.count("8388608 B"));  // the PtoP copy is no local copy
  EXPECT_FALSE(copies.count("3000 B") || copies.count("6000 B"));  // nor the HtoH one
}

TEST(KinetoTrace, WithoutStepMarksTheKernelSpanIsTheStep) {
  json j = KinetoFixture::build();
  json kept = json::array();
  for (const json& e : j["traceEvents"])
    if (e["cat"] != "user_annotation" && e["cat"] != "gpu_user_annotation") kept.push_back(e);
  j["traceEvents"] = kept;
  io::TraceOptions o;
  o.device = 0;
  const io::MeasuredTrace t = read(j, "nosteps.json", o);
  EXPECT_EQ(t.steps, 0);
  // Device 0's kernels run from 100 us (first GEMM) to 10,000 + 7,400 + 25 us (second step's dropout).
  EXPECT_NEAR(t.step_s, (17425.0 - 100.0) * 1e-6, 1e-9);
  EXPECT_NE(t.step_source.find("span of the kernels"), std::string::npos);
  EXPECT_NEAR(t.classes.at("gemm").seconds, 2 * 1220e-6, 1e-12);  // one "step": both
  o.device = 1;
  const io::MeasuredTrace d1 = read(j, "nosteps.json", o);
  EXPECT_EQ(d1.kernels, 2);
  o.device = 5;
  EXPECT_THROW(read(j, "nosteps.json", o), io::SpecError);
}

TEST(KinetoTrace, AttentionWithoutItsMaskAndCollectivesWithoutSizesAreTimedNotRecorded) {
  json j = KinetoFixture::build();
  for (json& e : j["traceEvents"]) {
    if (e["name"] == "aten::_scaled_dot_product_flash_attention") e["args"].erase("Concrete Inputs");
    if (e["name"] == "record_param_comms") e["args"].erase("dtype");
  }
  const io::MeasuredTrace t = read(j, "partial.json");
  EXPECT_EQ(record(t, "attention.fwd"), nullptr);
  EXPECT_EQ(record(t, "collective.all_gather"), nullptr);
  EXPECT_NEAR(t.classes.at("attention.fwd").seconds, KinetoFixture::attn_fwd_us * 1e-6, 1e-12);  // still timed
  EXPECT_EQ(t.records.size(), 5u);
}

// aten::_flash_attention_forward records FlashAttention's window (window_size_left / _right): a
// causal window of left + 1 keys (the query's own included) is the record's "window", so its FLOPs
// are the window's, not the full causal square's (16x fewer for 128 keys of 4,096); -1 is no window;
// a window open on both sides is timed but not recorded.
TEST(KinetoTrace, ASlidingWindowIsRecordedAsTheKernelRanIt) {
  auto with_window = [](const std::string& left, const std::string& right, bool causal) {
    json j = KinetoFixture::build();
    for (json& e : j["traceEvents"])
      if (e["name"] == "aten::_scaled_dot_product_flash_attention") {
        e["name"] = "aten::_flash_attention_forward";
        const json qkv = {1, 4096, 32, 128};
        e["args"]["Input Dims"] = {qkv, qkv, qkv, json::array(), json::array(), json::array(), json::array(),
                                   json::array(), json::array(), json::array(), json::array(), json::array(), json::array()};
        e["args"]["Input type"] = {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "", "Scalar", "Scalar",
                                   "Scalar", "Scalar", "Scalar", "", "Scalar", "Scalar"};
        e["args"]["Concrete Inputs"] = {"", "", "", "", "", "4096", "4096", "0.", causal ? "True" : "False", "False", "", left, right};
      }
    return j;
  };
  const io::MeasuredTrace w = read(with_window("127", "0", false), "window.json");
  const json* r = record(w, "attention.fwd");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->at("shape"), (json{{"batch", 1}, {"heads", 32}, {"seq", 4096}, {"causal", true}, {"window", 128}, {"head_dim", 128}}));
  const io::MeasuredTrace full = read(with_window("-1", "-1", true), "full.json");
  ASSERT_TRUE(record(full, "attention.fwd"));
  EXPECT_FALSE(record(full, "attention.fwd")->at("shape").contains("window"));
  EXPECT_TRUE(record(full, "attention.fwd")->at("shape").at("causal").get<bool>());
  // (-1, 0) without is_causal is causal attention; a right bound alone is no form the model prices.
  const io::MeasuredTrace causal = read(with_window("-1", "0", false), "causal.json");
  ASSERT_TRUE(record(causal, "attention.fwd"));
  EXPECT_TRUE(record(causal, "attention.fwd")->at("shape").at("causal").get<bool>());
  EXPECT_FALSE(record(causal, "attention.fwd")->at("shape").contains("window"));
  EXPECT_EQ(record(read(with_window("-1", "64", false), "right.json"), "attention.fwd"), nullptr);
  const io::MeasuredTrace both = read(with_window("127", "127", false), "both.json");
  EXPECT_EQ(record(both, "attention.fwd"), nullptr);
  EXPECT_NEAR(both.classes.at("attention.fwd").seconds, KinetoFixture::attn_fwd_us * 1e-6, 1e-12);
}

void expect_error(const std::string& text, const std::string& path_part, const std::string& message_part) {
  const std::string p = temp("bad.json");
  std::ofstream(p) << text;
  try {
    io::read_measured_trace(p, io::builtin_kernel_patterns(), {});
    ADD_FAILURE() << "no error for " << text.substr(0, 80);
  } catch (const io::SpecError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find(p), std::string::npos) << w;
    EXPECT_NE(w.find(path_part), std::string::npos) << w;
    EXPECT_NE(w.find(message_part), std::string::npos) << w;
  }
}

// The host thread that launched the step's kernels: launches per step, its waits, and the time
// from one launch to the next where no wait lies between (a wait's gap is the GPU's, not the host's).
TEST(KinetoTrace, TheIssuingThreadsLaunchesAndTheGapsBetweenThem) {
  json ev = json::array();
  int corr = 0;
  auto call = [&](int tid, const char* name, double ts, double dur) {
    json args = {{"correlation", ++corr}};
    ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", name}, {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", dur}, {"args", args}});
    if (std::string(name).find("Launch") != std::string::npos)
      ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "void elementwise_kernel"}, {"pid", 0}, {"tid", 7},
                    {"ts", ts + 5}, {"dur", 3}, {"args", {{"device", 0}, {"stream", 7}, {"correlation", corr}}}});
  };
  ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 7}, {"ts", 0}, {"dur", 1000}});
  for (double ts : {10.0, 30.0, 50.0, 70.0}) call(7, "cudaLaunchKernel", ts, 2);
  call(7, "cudaStreamSynchronize", 80, 100);  // the host waits for the GPU
  for (double ts : {200.0, 225.0, 250.0}) call(7, "cuLaunchKernel", ts, 2);
  call(7, "cudaGraphLaunch", 265, 2);
  call(7, "cudaMemsetAsync", 270, 1);  // neither a launch nor a wait
  // Autograd's device thread takes its turn: 30 launches 10 us apart; a driver launch recorded
  // inside its runtime call is that launch, not another.
  for (int i = 0; i < 30; ++i) call(8, "cudaLaunchKernel", 300 + 10 * i, 2);
  call(8, "cuLaunchKernel", 300.5, 1);
  call(9, "cudaLaunchKernel", 100, 2);  // a thread with under 5 % of the busiest one's launches
  call(7, "cudaLaunchKernel", 700, 2);   // thread 7's turn again: its gap from 265 is thread 8's turn
  call(7, "cudaFree", 710, 20);          // frees synchronize: a wait
  call(7, "cudaLaunchKernel", 740, 2);
  call(7, "cudaLaunchKernel", 2000, 2);  // after the step
  const io::MeasuredTrace t = read(json{{"traceEvents", ev}}, "host.json");
  ASSERT_TRUE(t.host.has_value());
  const io::HostIssue& h = *t.host;
  EXPECT_EQ(h.tids, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(h.steps, 1);
  EXPECT_DOUBLE_EQ(h.launches, 9 + 30);
  EXPECT_DOUBLE_EQ(h.graph_launches, 1);
  EXPECT_DOUBLE_EQ(h.waits, 2);
  EXPECT_NEAR(h.wait_s, 120e-6, 1e-15);
  // Thread 7: gaps 20, 20, 20 before the wait; 25, 25 and 15 (to the graph launch) after it; none
  // across it, none across thread 8's turn (265 -> 700), none across the free (700 -> 740).
  // Thread 8: 29 gaps of 10; none between the two threads.
  EXPECT_EQ(h.gaps, 6 + 29);
  EXPECT_NEAR(h.median_gap_s, 10e-6, 1e-15);
  EXPECT_NEAR(h.mean_gap_s, (125e-6 + 290e-6) / 35, 1e-15);
  EXPECT_NEAR(h.median_call_s, 2e-6, 1e-15);
  {  // At epoch microseconds (Kineto's ts, about 1.7e15) the gaps are the same: kept from the
     // first event's ts, not scaled to seconds whole (2.4e-7 s apart at 1.7e9 s)
    json epoch = ev;
    for (json& x : epoch) x["ts"] = x["ts"].get<double>() + 1.7e15;
    const io::MeasuredTrace te = read(json{{"traceEvents", epoch}}, "host_epoch.json");
    ASSERT_TRUE(te.host.has_value());
    EXPECT_EQ(te.host->gaps, h.gaps);
    EXPECT_NEAR(te.host->median_gap_s, 10e-6, 1e-12);
    EXPECT_NEAR(te.host->mean_gap_s, h.mean_gap_s, 1e-12);
    EXPECT_NEAR(te.host->wait_s, h.wait_s, 1e-12);
  }
  // Without a step marked, the whole trace: the launch at 2 ms counts, its gap too.
  ev.erase(ev.begin());
  const io::MeasuredTrace w = read(json{{"traceEvents", ev}}, "host_unmarked.json");
  ASSERT_TRUE(w.host.has_value());
  EXPECT_EQ(w.host->steps, 0);
  EXPECT_DOUBLE_EQ(w.host->launches, 10 + 30);
  EXPECT_EQ(w.host->gaps, 7 + 29);  // the launch at 2 ms: 1,260 us after thread 7's at 740
  EXPECT_NEAR(w.host->mean_gap_s, (125e-6 + 1260e-6 + 290e-6) / 36, 1e-15);
  // Steps marked on the GPU side only (two of them): the whole trace over two steps.
  json gpu_marked = ev;
  for (const char* n : {"ProfilerStep#1", "ProfilerStep#2"})
    gpu_marked.push_back({{"ph", "X"}, {"cat", "gpu_user_annotation"}, {"name", n}, {"pid", 0}, {"tid", 7}, {"ts", 0}, {"dur", 2100}});
  const io::MeasuredTrace gm = read(json{{"traceEvents", gpu_marked}}, "host_gpu_marked.json");
  ASSERT_TRUE(gm.host.has_value());
  EXPECT_EQ(gm.host->steps, 2);
  EXPECT_DOUBLE_EQ(gm.host->launches, (10 + 30) / 2.0);
}

// Kineto writes a step's GPU-side range once per stream its kernels ran on (and per device): the
// ranges of one name on the counted device are one step, so the per-step classes are not divided
// by the streams. A kernel counts only when it starts inside a step: one in a gap between the
// chosen steps (a step left out, an evaluation between training steps) is not one of them.
TEST(KinetoTrace, AStepRangedPerStreamIsOneStepAndAKernelBetweenStepsIsLeftOut) {
  json j = KinetoFixture::build();
  json extra = json::array();
  for (const json& e : j["traceEvents"])
    if (e["cat"] == "gpu_user_annotation") {
      json stream = e;  // the all-gather's stream: its own range of the step, over its kernel only
      stream["tid"] = 20, stream["ts"] = e["ts"].get<double>() + 4600, stream["dur"] = 500;
      extra.push_back(stream);
      json other = e;  // device 1's range of the step
      other["pid"] = 1, other["ts"] = e["ts"].get<double>() + 7000;
      extra.push_back(other);
    }
  for (json& e : extra) j["traceEvents"].push_back(e);
  const io::MeasuredTrace t = read(j, "streams.json");
  EXPECT_EQ(t.steps, 2);
  EXPECT_NEAR(t.step_s, 10e-3, 1e-12);
  EXPECT_NEAR(t.classes.at("gemm").seconds, (KinetoFixture::gemm_us + KinetoFixture::splitk_us) * 1e-6, 1e-12);
  EXPECT_NEAR(t.classes.at("collective.all_gather").seconds, KinetoFixture::allgather_us * 1e-6, 1e-12);
  // The second step 10 ms later, and a GEMM in the gap: not counted.
  json g = KinetoFixture::build();
  for (json& e : g["traceEvents"])
    if (e["ts"].get<double>() >= 10000) e["ts"] = e["ts"].get<double>() + 10000;
  g["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_in_the_gap"}, {"pid", 0},
                              {"tid", 7}, {"ts", 15000}, {"dur", 700}, {"args", {{"device", 0}}}});
  const io::MeasuredTrace gap = read(g, "gap.json");
  EXPECT_EQ(gap.steps, 2);
  EXPECT_EQ(gap.kernels, 24);
  EXPECT_NEAR(gap.classes.at("gemm").seconds, (KinetoFixture::gemm_us + KinetoFixture::splitk_us) * 1e-6, 1e-12);
  // CPU-side ranges that only touch are two steps, also when the microseconds scaled to seconds
  // apart overlap by a rounding (8317213885.26 + 9989.12 = 8317223874.38 us, 1.8e-12 s over).
  const std::string gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64";
  json touch = {{"traceEvents", json::array()}};
  for (const double ts : {8317213885.26, 8317223874.38}) {
    touch["traceEvents"].push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", ts < 8317220000 ? "ProfilerStep#1" : "ProfilerStep#2"},
                                    {"pid", 1}, {"tid", 100}, {"ts", ts}, {"dur", 9989.12}});
    touch["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", gemm}, {"pid", 0}, {"tid", 7}, {"ts", ts + 20}, {"dur", 1000},
                                    {"args", {{"device", 0}}}});
  }
  const io::MeasuredTrace tt = read(touch, "touch.json");
  EXPECT_EQ(tt.steps, 2);
  EXPECT_NEAR(tt.classes.at("gemm").seconds, 1e-3, 1e-12);
  // A device id past int is refused, not wrapped onto another device.
  json big = KinetoFixture::build();
  big["traceEvents"].push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"pid", 0}, {"tid", 7}, {"ts", 1}, {"dur", 1},
                                {"args", {{"device", 4294967296LL}}}});
  const size_t at = big["traceEvents"].size() - 1;
  expect_error(big.dump(), "/traceEvents/" + std::to_string(at) + "/args/device", "expected a device id from 0, got 4294967296");
}

// aten::_scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp,
// dropout_p, is_causal, ...): its mask is the seventh input, so a record is made, causal or not.
TEST(KinetoTrace, EfficientAttentionIsRecordedWithItsMask) {
  for (const bool causal : {true, false}) {
    json j = KinetoFixture::build();
    for (json& e : j["traceEvents"])
      if (e["name"] == "aten::_scaled_dot_product_flash_attention") {
        e["name"] = "aten::_scaled_dot_product_efficient_attention";
        const json qkv = {1, 32, 4096, 128};
        e["args"]["Input Dims"] = {qkv, qkv, qkv, json::array(), json::array(), json::array(), json::array()};
        e["args"]["Input type"] = {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "Scalar", "Scalar", "Scalar"};
        e["args"]["Concrete Inputs"] = {"", "", "", "", "True", "0.", causal ? "True" : "False"};
      }
    const io::MeasuredTrace t = read(j, "efficient.json");
    const json* r = record(t, "attention.fwd");
    ASSERT_TRUE(r) << causal;
    EXPECT_EQ(r->at("shape").at("causal").get<bool>(), causal);
    EXPECT_EQ(r->at("shape").at("seq"), 4096);
  }
}

TEST(KinetoTrace, BadTracesSayWhatAndWhere) {
  const std::string good = KinetoFixture::build().dump();
  expect_error(good.substr(0, good.size() / 2), "", "malformed JSON");
  expect_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})", "/traceEvents", "no GPU kernels");
  expect_error(R"({"traceEvents": []})", "/traceEvents", "no GPU kernels");
  expect_error(R"({"displayTimeUnit": "s", "traceEvents": []})", "/displayTimeUnit", "unknown time unit \"s\"");
  expect_error(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": "2 us"}]})", "/traceEvents/0/dur",
               "expected a number of microseconds");
  expect_error(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -2}]})", "/traceEvents/0/dur", "expected a duration in [0, 1e12] microseconds, got -2");
  expect_error(R"({"traceEvents": {"a": 1}})", "/traceEvents", "expected an array");
}

// A collective's sizes that are written but malformed are refused where they are, in the op's
// args or the kernel's own: a negative or fractional element count, a group below one rank, a
// count written as text. Left out (the dtype above) is no error: the collective is timed only.
TEST(KinetoTrace, ACollectivesMalformedSizesAreRefusedWithTheirPath) {
  struct Case {
    const char* event;  // record_param_comms (the op) or the all-to-all's SendRecv kernel
    const char* key;
    json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"record_param_comms", "In msg nelems", -5, "expected a whole number >= 0 (_allgather_base), got -5"},
      {"record_param_comms", "Out msg nelems", 2.5, "expected a whole number >= 0 (_allgather_base), got 2.5"},
      {"record_param_comms", "Group size", 0, "expected a whole number >= 1 (_allgather_base), got 0"},
      {"ncclDevKernel_SendRecv", "In msg nelems", "2097152", "expected a whole number >= 0 (all_to_allv), got \"2097152\""},
      {"ncclDevKernel_SendRecv", "Group size", -8, "expected a whole number >= 1 (all_to_allv), got -8"},
  };
  for (const Case& c : cases) {
    json j = KinetoFixture::build();
    size_t at = 0;
    for (size_t i = 0; i < j["traceEvents"].size(); ++i) {
      const std::string name = j["traceEvents"][i].value("name", "");
      if (name.rfind(c.event, 0) == 0) {
        j["traceEvents"][i]["args"][c.key] = c.value;
        at = i;
        break;
      }
    }
    ASSERT_GT(at, 0u) << c.event;
    expect_error(j.dump(), "/traceEvents/" + std::to_string(at) + "/args/" + c.key, c.message);
  }
  // One rank's collective (Group size 1) is valid and makes no record.
  json j = KinetoFixture::build();
  for (json& e : j["traceEvents"])
    if (e.value("name", "") == "record_param_comms") e["args"]["Group size"] = 1;
  const io::MeasuredTrace t = read(j, "one_rank.json");
  EXPECT_EQ(record(t, "collective.all_gather"), nullptr);
  EXPECT_GT(t.classes.at("collective.all_gather").seconds, 0);
}

TEST(KernelPatterns, AFileOfOnesOwnMapsMoreAndBadOnesAreRefused) {
  const std::string p = temp("patterns.json");
  std::ofstream(p) << R"({"kind": "kernel-patterns", "source": "test", "patterns": [
    {"class": "memory", "match": "rope|dropout"},
    {"class": "gemm", "match": "gemm|splitKreduce"}]})";
  const io::KernelPatterns k = io::load_kernel_patterns(p);
  const std::string t = temp("k.json");
  KinetoFixture::write(t, KinetoFixture::build());
  const io::MeasuredTrace m = io::read_measured_trace(t, k, {});
  EXPECT_NEAR(m.classes.at("memory").seconds, (KinetoFixture::rope_us + KinetoFixture::dropout_us) * 1e-6, 1e-12);
  EXPECT_EQ(m.unmapped.size(), 7u);  // 4 attention, 2 NCCL and 1 elementwise kernel names: this file does not know them
  auto bad = [&](const std::string& text, const std::string& where, const std::string& what) {
    std::ofstream(p) << text;
    try {
      io::load_kernel_patterns(p);
      ADD_FAILURE() << text;
    } catch (const io::SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  bad(R"({"kind": "kernel-patterns", "source": "t", "patterns": [{"class": "gemmm", "match": "x"}]})", "/patterns/0/class",
      "did you mean \"gemm\"");
  bad(R"({"kind": "kernel-patterns", "source": "t", "patterns": [{"class": "gemm", "match": "(unclosed"}]})", "/patterns/0/match",
      "not a regular expression");
  bad(R"({"kind": "kernel-patterns", "source": "t", "patterns": []})", "/patterns", "non-empty");
}

TEST(KernelPatterns, TheShippedOnesKnowTheLibrariesKernels) {
  const auto& p = io::builtin_kernel_patterns();
  const std::map<std::string, std::string> names{
      {"ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE(ncclDevKernelArgsStorage<4096ul>)", "collective.all_reduce"},
      {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective.reduce_scatter"},
      {"void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)", "ep.dispatch"},
      {"void deep_ep::internode_ll::combine<false>(void*)", "ep.combine"},
      {"nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT", "gemm"},
      {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>(...)", "attention.fwd"},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0_0", "attention.bwd"},
      {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)", "attention.fwd"},
      {"triton_poi_fused_add_mul_0", "memory"},
      {"void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>(...)", "memory"},
      {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8>(...)", "gemm"},
      {"deep_gemm::sm90_m_grouped_fp8_gemm_contiguous_1d1d_impl", "grouped_gemm"},
      {"void transformer_engine::fused_rope_forward_kernel<__nv_bfloat16, __nv_bfloat16>(...)", "memory"},
      {"rotary_fwd_kv_kernel", "memory"},
  };
  for (const auto& [n, cls] : names) EXPECT_EQ(p.classify(n), cls) << n;
  EXPECT_EQ(p.classify("my_custom_rope_kernel"), "");
}

#ifdef MOEPERF_HAVE_SQLITE
// Runs SQL on the SQLite file at `path` (created when missing).
void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// An Nsight Systems export with the tables and columns read (docs/traces.md).
std::string write_nsys(bool with_kernels) {
  const std::string p = temp(with_kernels ? "report.sqlite" : "empty.sqlite");
  fs::remove(p);
  std::string sql =
      "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT);"
      "INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200');"
      "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER, text TEXT, textId INTEGER);"
      "INSERT INTO StringIds VALUES (1, 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64'),"
      " (2, 'ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)'), (3, 'custom_kernel'), (4, 'ProfilerStep#7');"
      "INSERT INTO NVTX_EVENTS VALUES (0, 4000000, 59, NULL, 4), (4000000, 8000000, 59, 'ProfilerStep#8', NULL),"
      " (0, 100, 59, 'other range', NULL);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, bytes INTEGER, copyKind INTEGER);"
      "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (100000, 400000, 0, 16777216, 2), (4100000, 4400000, 0, 16777216, 2);";
  if (with_kernels)
    sql +=
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, correlationId INTEGER,"
        " demangledName INTEGER, shortName INTEGER);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (500000, 1500000, 0, 7, 1, 1, 1), (1600000, 2100000, 0, 20, 2, 2, 2),"
        " (2200000, 2300000, 0, 7, 3, 3, 3), (4500000, 5500000, 0, 7, 4, 1, 1), (5600000, 6000000, 0, 20, 5, 2, 2);";
  exec_sql(p, sql);
  return p;
}

TEST(NsysTrace, KernelsPerClassStepsFromNvtxAndCopiesAsRecords) {
  const io::MeasuredTrace t = io::read_measured_trace(write_nsys(true), io::builtin_kernel_patterns(), {});
  EXPECT_EQ(t.format, "nsys-sqlite");
  EXPECT_EQ(t.gpu_name, "NVIDIA H200");
  EXPECT_EQ(t.steps, 2);  // ProfilerStep#7 (text in StringIds) and #8 (inline text)
  EXPECT_NEAR(t.step_s, 4e-3, 1e-12);
  EXPECT_NEAR(t.classes.at("gemm").seconds, 1e-3, 1e-12);
  EXPECT_NEAR(t.classes.at("collective.all_gather").seconds, 0.45e-3, 1e-12);
  EXPECT_NEAR(t.classes.at("host.d2h").seconds, 0.3e-3, 1e-12);
  ASSERT_EQ(t.unmapped.size(), 1u);
  EXPECT_EQ(t.unmapped[0].name, "custom_kernel");
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].at("op"), "host.d2h");
  EXPECT_EQ(t.records[0].at("shape").at("bytes"), "16777216 B");
  EXPECT_EQ(t.records[0].at("measured"), "300000 ns");
}

// A malformed export is named by table, column and row: NULL or text where nsys writes an integer,
// a range that ends before it starts, a name id StringIds lacks, text that is not UTF-8. None is
// read as 0, an empty name, or passed on to the JSON written.
TEST(NsysTrace, MalformedRowsAreNamedNotReadAsZero) {
  auto broken = [](const std::string& sql, const std::string& where, const std::string& what) {
    const std::string p = write_nsys(true);
    exec_sql(p, sql);
    try {
      io::read_measured_trace(p, io::builtin_kernel_patterns(), {});
      ADD_FAILURE() << "no error for " << sql;
    } catch (const io::SpecError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(p), std::string::npos) << w;
      EXPECT_NE(w.find(where), std::string::npos) << w;
      EXPECT_NE(w.find(what), std::string::npos) << w;
    }
  };
  broken("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ('abc', NULL, 0, 7, 9, 1, 1)", "CUPTI_ACTIVITY_KIND_KERNEL.start",
         "row 6: expected an integer, got text");
  broken("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, NULL, 0, 7, 9, 1, 1)", "CUPTI_ACTIVITY_KIND_KERNEL.end", "got NULL");
  broken("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (900, 100, 0, 7, 9, 1, 1)", "CUPTI_ACTIVITY_KIND_KERNEL.end",
         "ends (100 ns) before it starts (900 ns)");
  broken("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, NULL, 7, 9, 1, 1)", "CUPTI_ACTIVITY_KIND_KERNEL.deviceId", "got NULL");
  broken("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 0, 7, 9, 99, 99)", "CUPTI_ACTIVITY_KIND_KERNEL.demangledName",
         "a name id that StringIds does not hold");
  broken("INSERT INTO NVTX_EVENTS VALUES (9000000, 8000000, 59, 'ProfilerStep#9', NULL)", "NVTX_EVENTS.end", "before it starts");
  broken("UPDATE TARGET_INFO_GPU SET name = CAST(X'4EFF48313030' AS TEXT)", "TARGET_INFO_GPU.name", "not UTF-8 text (byte 2)");
  broken("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = NULL", "CUPTI_ACTIVITY_KIND_MEMCPY.bytes", "got NULL");
}

// An export of two ranks holds both ranks' step ranges, 1 ms apart: the steps are those of the
// process that launched the counted device's kernels (globalPid, globalTid's process); without
// those columns, the two ranks' ranges of one name are one step. Never one range chained over
// the whole trace, nor twice the steps.
TEST(NsysTrace, AnExportOfSeveralRanksCountsTheStepsOfTheKernelsProcess) {
  for (const bool with_pids : {true, false}) {
    const std::string p = write_nsys(true);
    std::string sql = "INSERT INTO NVTX_EVENTS VALUES (1000000, 5000000, 59, 'ProfilerStep#7', NULL), (5000000, 9000000, 59, 'ProfilerStep#8', NULL);";
    if (with_pids)  // process 100 ran the kernels; the two new ranges are process 200's
      sql += "ALTER TABLE NVTX_EVENTS ADD COLUMN globalTid INTEGER; ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN globalPid INTEGER;"
             "UPDATE NVTX_EVENTS SET globalTid = 100 * 16777216 + 7; UPDATE NVTX_EVENTS SET globalTid = 200 * 16777216 + 9 WHERE start IN (1000000, 5000000);"
             "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = 100 * 16777216;";
    exec_sql(p, sql);
    const io::MeasuredTrace t = io::read_measured_trace(p, io::builtin_kernel_patterns(), {});
    EXPECT_EQ(t.steps, 2) << with_pids;
    EXPECT_NEAR(t.step_s, with_pids ? 4e-3 : 5e-3, 1e-12) << with_pids;  // without: each step from rank 0's start to rank 1's end
    EXPECT_NEAR(t.classes.at("gemm").seconds, 1e-3, 1e-12) << with_pids;
  }
}

// copyKind is CUPTI's enum (cupti_activity.h): 3 HtoA a host-to-device copy, 8 DtoD within the
// device, 9 HtoH no GPU memory, 10 PtoP between GPUs (send/recv's row, no record), 0 unknown.
TEST(NsysTrace, CopiesAreClassedByCuptisKind) {
  const std::string p = write_nsys(true);
  exec_sql(p, "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (4500000, 4600000, 0, 1024, 3), (4600000, 4800000, 0, 4096, 8),"
              " (4800000, 4900000, 0, 64, 9), (4900000, 5300000, 0, 8388608, 10), (5300000, 5310000, 0, 64, 0);");
  const io::MeasuredTrace t = io::read_measured_trace(p, io::builtin_kernel_patterns(), {});
  EXPECT_NEAR(t.classes.at("host.h2d").seconds, 0.1e-3 / 2, 1e-12);
  EXPECT_NEAR(t.classes.at("memory.copy").seconds, 0.2e-3 / 2, 1e-12);
  EXPECT_NEAR(t.classes.at("collective.send_recv").seconds, 0.4e-3 / 2, 1e-12);
  std::set<std::string> unmapped;
  for (const auto& u : t.unmapped) unmapped.insert(u.name);
  EXPECT_TRUE(unmapped.count("Memcpy HtoH"));
  EXPECT_TRUE(unmapped.count("Memcpy Unknown"));
  std::map<std::string, std::string> rec;
  for (const json& r : t.records) rec[r.at("op")] = r.at("shape").at("bytes");
  EXPECT_EQ(rec.size(), 3u);  // h2d, d2h, memory.copy: no send/recv record
  EXPECT_EQ(rec["host.h2d"], "1024 B");
  EXPECT_EQ(rec["memory.copy"], "8192 B");  // read and written
  EXPECT_FALSE(rec.count("collective.send_recv"));
}

// Without --device, the device that ran the most kernel time counts: a stray kernel on device 0
// does not make a trace of device 1's work read as device 0's (and a busy device 0 still wins).
TEST(NsysTrace, TheDefaultDeviceIsTheBusiestOne) {
  for (const bool stray : {true, false}) {
    const std::string p = write_nsys(true);
    exec_sql(p, stray ? "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 1 WHERE start <> 2200000;"  // device 0 keeps one 0.1 ms kernel
                      : "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 1 WHERE start = 2200000;");
    const io::MeasuredTrace t = io::read_measured_trace(p, io::builtin_kernel_patterns(), {});
    EXPECT_EQ(t.device, stray ? 1 : 0);
    EXPECT_EQ(t.devices, (std::vector<int>{0, 1}));
    bool said = false;
    for (const auto& n : t.notes) said = said || n.find("device " + std::to_string(t.device) + " counted (the most kernel time") != std::string::npos;
    EXPECT_TRUE(said);
    io::TraceOptions o;
    o.device = 0;
    EXPECT_EQ(io::read_measured_trace(p, io::builtin_kernel_patterns(), o).device, 0);
  }
}

TEST(NsysTrace, AnExportWithoutKernelsSaysSo) {
  try {
    io::read_measured_trace(write_nsys(false), io::builtin_kernel_patterns(), {});
    ADD_FAILURE();
  } catch (const io::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("CUPTI_ACTIVITY_KIND_KERNEL"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace moeperf
