// Bad input, one test per kind of mistake: each gives one SpecError naming the file, the JSON
// path and what was expected.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/parts.h"
#include "model/io/write_file.h"
#include "temp_dir.h"

namespace moeperf::io {
namespace {

using moeperf::testing::source;
using moeperf::testing::TempDir;
using nlohmann::json;

// A complete system in one file (inline building blocks), small enough to mutate.
const char* kSystem = R"({
  "kind": "system", "name": "test DGX",
  "nvlink_domain": {
    "name": "d", "trays": 1, "switch_chips": 4, "gpu_links_per_chip": [5, 4, 4, 5], "nvlink_latency": "500 ns",
    "switch": {"name": "sw", "ports": 64, "port_bandwidth": "25 GB/s", "latency": "100 ns"},
    "tray": {"name": "t", "gpus": 8,
      "gpu": {"name": "g", "compute_capability": "9.0", "sms": 132,
              "dense_flops": {"bf16": "989 TFLOPS", "fp8": "1979 TFLOPS"},
              "hbm_capacity": "80 GiB", "hbm_usable": "81559 MiB", "hbm_bandwidth": "3.35 TB/s",
              "nvlink": {"generation": 4, "links": 18, "bandwidth_per_link": "25 GB/s"}}}
  },
  "gpus": 8
})";

struct Case {
  std::string file;
  SpecError error;
};

// Applies `edit` to the base system, writes it, and returns the error validate_file raises.
SpecError error_after(const TempDir& d, const std::function<void(json&)>& edit) {
  json j = json::parse(kSystem);
  edit(j);
  const std::string f = d.write("sys.json", j.dump(2));
  try {
    validate_file(f);
  } catch (const SpecError& e) {
    EXPECT_EQ(e.file(), f);
    return e;
  }
  ADD_FAILURE() << "no error";
  return SpecError("", "", "");
}

// A written file gets what the umask leaves of 0666 when it is new, and keeps its mode when it is
// replaced; the umask is read, not changed.
TEST(WriteFiles, ANewFileTakesTheUmaskAndAReplacedOneKeepsItsMode) {
  testing::TempDir d;
  const mode_t old = ::umask(027);
  const std::string fresh = d.path("fresh.json"), kept = d.path("kept.json");
  write_files_atomically({{fresh, "{}"}});
  struct stat st{};
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  d.write("kept.json", "old");
  ASSERT_EQ(::chmod(kept.c_str(), 0604), 0);
  write_files_atomically({{kept, "new"}});
  ASSERT_EQ(::stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  EXPECT_EQ(::umask(old), 027u);  // unchanged by the writes
}

TEST(BadInput, TheBaseSystemIsValid) {
  TempDir d;
  EXPECT_EQ(validate_file(d.write("sys.json", kSystem)).kind, "system");
}

TEST(BadInput, MalformedJsonNamesLineAndColumn) {
  TempDir d;
  const auto f = d.write("bad.json", "{\n  \"kind\": \"system\",\n  \"name\": \"x\",,\n}\n");
  try {
    validate_file(f);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.file(), f);
    EXPECT_EQ(e.detail().rfind("malformed JSON at line 3, column ", 0), 0u) << e.what();
  }
}

TEST(BadInput, WrongType) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) { j["nvlink_domain"]["tray"]["gpu"]["sms"] = "many"; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/tray/gpu/sms");
  EXPECT_EQ(e.detail(), "expected a positive integer, got \"many\"");
}

TEST(BadInput, MissingField) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) { j["nvlink_domain"]["tray"]["gpu"].erase("hbm_bandwidth"); });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/tray/gpu");
  EXPECT_EQ(e.detail(), "missing required field \"hbm_bandwidth\"");
}

TEST(BadInput, UnknownKeyWithDidYouMean) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) { j["nvlink_domain"]["tray"]["gpu"]["hbm_bandwith"] = "1 TB/s"; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/tray/gpu/hbm_bandwith");
  EXPECT_EQ(e.detail(), "unknown key \"hbm_bandwith\" (did you mean \"hbm_bandwidth\"?)");
}

TEST(BadInput, ZeroAndNegativeCounts) {
  TempDir d;
  SpecError e = error_after(d, [](json& j) { j["nvlink_domain"]["trays"] = 0; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/trays");
  EXPECT_EQ(e.detail(), "expected a positive integer, got 0");
  e = error_after(d, [](json& j) { j["nvlink_domain"]["tray"]["gpus"] = -4; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/tray/gpus");
  EXPECT_EQ(e.detail(), "expected a positive integer, got -4");
}

// Systems the topology could not join: GPUs of one domain without switch chips, and a fabric whose
// trays have no NICs. Both loaded once and then failed in pricing ("GPUs are not connected", exit 1).
TEST(BadInput, ASystemItsTopologyCannotJoin) {
  TempDir d;
  SpecError e = error_after(d, [](json& j) {
    j["nvlink_domain"]["switch_chips"] = 0;
    j["nvlink_domain"].erase("gpu_links_per_chip");
  });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/switch_chips");
  EXPECT_NE(e.detail().find("expected NVSwitch chips for a domain of 8 GPUs"), std::string::npos) << e.what();
  e = error_after(d, [](json& j) {
    j["fabric"] = source("topologies/fabrics/quantum-2-fat-tree.json");
    j["gpus"] = 16;
  });
  EXPECT_EQ(e.json_path(), "/fabric");
  EXPECT_NE(e.detail().find("expected compute trays with NICs for a scale-out fabric"), std::string::npos) << e.what();
  // A switch with fewer ports than the GPUs' links to one chip.
  e = error_after(d, [](json& j) { j["nvlink_domain"]["switch"]["ports"] = 32; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/gpu_links_per_chip");
  EXPECT_NE(e.detail().find("40 ports, but the switch (sw) has 32"), std::string::npos) << e.what();
}

TEST(BadInput, UnitThatDoesNotFit) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) { j["nvlink_domain"]["tray"]["gpu"]["hbm_bandwidth"] = "900 GB"; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/tray/gpu/hbm_bandwidth");
  EXPECT_EQ(e.detail(), "expected a bandwidth like \"900 GB/s\" or \"400 Gb/s\", got \"900 GB\" (a byte size)");
  const SpecError n = error_after(d, [](json& j) { j["nvlink_domain"]["tray"]["gpu"]["hbm_bandwidth"] = 8; });
  EXPECT_EQ(n.detail(), "expected a bandwidth like \"900 GB/s\" or \"400 Gb/s\", got 8");
}

TEST(BadInput, LinksPerChipMustMatchTheGpu) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) { j["nvlink_domain"]["gpu_links_per_chip"] = {5, 5, 5, 5}; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/gpu_links_per_chip");
  EXPECT_EQ(e.detail(), "the links per chip add up to 20, but the GPU (g) has 18 NVLink links");
}

TEST(BadInput, MissingReferencedFile) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) { j["nvlink_domain"] = "domains/nope.json"; });
  EXPECT_EQ(e.json_path(), "/nvlink_domain");
  EXPECT_EQ(e.detail().rfind("referenced file \"domains/nope.json\" not found", 0), 0u) << e.what();
}

TEST(BadInput, ReferenceCycleBetweenFiles) {
  TempDir d;
  // a.json (system) -> b.json (nvlink_domain) -> tray: a.json
  json a = json::parse(kSystem);
  json b = a["nvlink_domain"];
  b["kind"] = "nvlink_domain";
  b["tray"] = "a.json";
  a["nvlink_domain"] = "b.json";
  const auto fa = d.write("a.json", a.dump());
  const auto fb = d.write("b.json", b.dump());
  try {
    validate_file(fa);
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.file(), fb);
    EXPECT_EQ(e.json_path(), "/tray");
    EXPECT_EQ(e.detail(), "reference cycle: a.json -> b.json -> a.json");
  }
}

TEST(BadInput, ReferenceToTheWrongKind) {
  TempDir d;
  const SpecError e = error_after(d, [](json& j) {
    j["nvlink_domain"]["tray"]["gpu"] = source("topologies/nics/connectx-7.json");
  });
  EXPECT_EQ(e.json_path(), "/nvlink_domain/tray/gpu");
  EXPECT_EQ(e.detail(), "expected a path to a \"gpu\" file, but \"" + source("topologies/nics/connectx-7.json") +
                            "\" is a \"nic\"");
}

// ---- scenario consistency ----
std::string scenario_with(const TempDir& d, const std::function<void(json&)>& edit) {
  json s = {{"kind", "scenario"},
            {"model", source("examples/models/deepseek-v3/config.json")},
            {"system", source("topologies/gb300-nvl72.json")},
            {"gpus", 128},
            {"parallelism", {{"ep", 8}, {"fsdp", 16}}},
            {"batch", {{"seq_len", 4096}, {"micro_batch", 6}, {"global_batch", 768}}}};
  edit(s);
  return d.write("scenario.json", s.dump(2));
}

SpecError scenario_error(const TempDir& d, const std::function<void(json&)>& edit) {
  const std::string f = scenario_with(d, edit);
  try {
    load_scenario(f);
  } catch (const SpecError& e) {
    EXPECT_EQ(e.file(), f);
    return e;
  }
  ADD_FAILURE() << "no error";
  return SpecError("", "", "");
}

TEST(BadInput, ScenarioBaseIsValid) {
  TempDir d;
  EXPECT_EQ(load_scenario(scenario_with(d, [](json&) {})).gpus, 128);
}

TEST(BadInput, EpMustDivideTheExperts) {
  TempDir d;
  const SpecError e = scenario_error(d, [](json& s) {
    s["parallelism"]["ep"] = 12;
    s["gpus"] = 12 * 16;
    s["batch"]["global_batch"] = 6 * 12 * 16;
  });
  EXPECT_EQ(e.json_path(), "/parallelism/ep");
  EXPECT_EQ(e.detail(), "ep = 12 must divide the model's 256 routed experts");
}

// A saved tensor is cached in one format, and the router's FP32 scores in none.
TEST(BadInput, CachedTensorsHaveOneFormatAndTheRouterNone) {
  TempDir d;
  SpecError e = scenario_error(d, [](json& s) { s["memory"] = {{"fp8_cache", {"moe_mlpwi"}}, {"e5m6_cache", {"attn_out", "moe_mlpwi"}}}; });
  EXPECT_EQ(e.json_path(), "/memory/e5m6_cache/1");
  EXPECT_EQ(e.detail(), "\"moe_mlpwi\" is in memory.fp8_cache too: a saved tensor is cached in one format");
  e = scenario_error(d, [](json& s) { s["memory"] = {{"e5m6_cache", {"router"}}}; });
  EXPECT_EQ(e.json_path(), "/memory/e5m6_cache/0");
  EXPECT_EQ(e.detail(), "\"router\" holds FP32 routing scores, not a BF16 activation to cache in E5M6");
  e = scenario_error(d, [](json& s) { s["memory"] = {{"fp8_cache", {"router"}}}; });
  EXPECT_EQ(e.json_path(), "/memory/fp8_cache/0");
  EXPECT_EQ(e.detail(), "\"router\" holds FP32 routing scores, not a BF16 activation to cache in FP8");
  EXPECT_EQ(load_scenario(scenario_with(d, [](json& s) { s["memory"] = {{"e5m6_cache", {"attn_out"}}}; })).memory.e5m6_cache,
            std::vector<TensorClass>{TensorClass::attn_out});
}

TEST(BadInput, LayoutMustMatchTheGpuCount) {
  TempDir d;
  const SpecError e = scenario_error(d, [](json& s) { s["gpus"] = 256; });
  EXPECT_EQ(e.json_path(), "/parallelism");
  EXPECT_EQ(e.detail(),
            "tp x cp x pp x ep x fsdp x dp = 1 x 1 x 1 x 8 x 16 x 1 = 128, but gpus is 256; the layout rule is gpus = "
            "tp x cp x pp x ep x fsdp x dp (or, with etp given, Megatron's MoE parallel folding: gpus = tp x cp x pp x "
            "dp, ep x etp dividing a stage)");
}

TEST(BadInput, MicroBatchesMustDivideTheGlobalBatch) {
  TempDir d;
  const SpecError e = scenario_error(d, [](json& s) { s["batch"]["global_batch"] = 1000; });
  EXPECT_EQ(e.json_path(), "/batch/global_batch");
  EXPECT_EQ(e.detail(),
            "global_batch = 1000 sequences must be a multiple of micro_batch x data-parallel ranks (ep x fsdp x dp) = "
            "6 x 128 = 768");
}

TEST(BadInput, TpMustDivideHeadsAndMoreGpusThanTheFabricHolds) {
  TempDir d;
  SpecError e = scenario_error(d, [](json& s) {
    s["parallelism"] = {{"tp", 3}, {"ep", 8}, {"fsdp", 16}};
    s["gpus"] = 384;
  });
  EXPECT_EQ(e.json_path(), "/parallelism/tp");
  EXPECT_EQ(e.detail(), "tp = 3 must divide the model's 128 attention heads");
  e = scenario_error(d, [](json& s) {
    s["system"] = source("topologies/h200-single.json");
  });
  EXPECT_EQ(e.json_path(), "/gpus");
  EXPECT_NE(e.detail().find("no scale-out fabric"), std::string::npos) << e.what();
}

// A distribution's parameter is checked wherever it is given, also beside a distribution that does
// not read it (a sweep over distributions sets it for every point; predict then notes it unused).
TEST(BadInput, RoutingParametersAreCheckedWhenGiven) {
  TempDir d;
  SpecError e = scenario_error(d, [](json& s) { s["routing"] = {{"distribution", "uniform"}, {"zipf_exponent", -0.5}}; });
  EXPECT_EQ(e.json_path(), "/routing/zipf_exponent");
  EXPECT_EQ(e.detail(), "expected a positive number, got -0.5");
  e = scenario_error(d, [](json& s) { s["routing"] = {{"distribution", "zipf"}, {"dirichlet_alpha", "lots"}, {"zipf_exponent", 1}}; });
  EXPECT_EQ(e.json_path(), "/routing/dirichlet_alpha");
  e = scenario_error(d, [](json& s) { s["routing"] = {{"histogram", {1, 2, 3}}}; });
  EXPECT_EQ(e.json_path(), "/routing/histogram");
  EXPECT_EQ(e.detail(), "expected one count per routed expert (256), got 3");
  // Rows per expert a top-8 router cannot give: one expert with a quarter of them (a token picks it
  // once: at most 1/8), or rows on fewer than 8 experts (which gives one of them more than 1/8).
  e = scenario_error(d, [](json& s) {
    std::vector<double> h(256, 1.0);
    h[3] = 85;  // 85 / 340
    s["routing"] = {{"distribution", "histogram"}, {"histogram", h}};
  });
  EXPECT_EQ(e.json_path(), "/routing/histogram");
  EXPECT_EQ(e.detail(), "expected rows per expert that a top-8 router can give: one expert has 25.0 % of the rows, but a token "
                        "picks an expert once, so at most 12.5 %");
  e = scenario_error(d, [](json& s) {
    std::vector<double> h(256, 0.0);
    for (int i = 0; i < 5; ++i) h[static_cast<size_t>(i)] = 1;
    s["routing"] = {{"distribution", "histogram"}, {"histogram", h}};
  });
  EXPECT_EQ(e.detail(), "expected rows per expert that a top-8 router can give: one expert has 20.0 % of the rows, but a token "
                        "picks an expert once, so at most 12.5 %");
  e = scenario_error(d, [](json& s) { s["routing"] = {{"distribution", "zipf"}}; });
  EXPECT_EQ(e.json_path(), "/routing");
  EXPECT_NE(e.detail().find("zipf_exponent"), std::string::npos) << e.what();
  // Given and unused: loaded as given.
  const Scenario ok = load_scenario(scenario_with(d, [](json& s) { s["routing"] = {{"distribution", "uniform"}, {"zipf_exponent", 0.5}}; }));
  EXPECT_EQ(ok.routing.distribution, RoutingDistribution::uniform);
  EXPECT_EQ(ok.routing.zipf_exponent, 0.5);
}

TEST(BadInput, StragglerRacksMustExistAndNotOverlap) {
  TempDir d;
  SpecError e = scenario_error(d, [](json& s) { s["stragglers"] = json::array({{{"rack", 2}}}); });
  EXPECT_EQ(e.json_path(), "/stragglers/0/rack");
  EXPECT_EQ(e.detail(), "expected a rack index below 2 (the job's NVLink domains), got 2");
  e = scenario_error(d, [](json& s) { s["stragglers"] = json::array({{{"rack", 1}, {"gpu", 3}}}); });
  EXPECT_EQ(e.json_path(), "/stragglers/0/rack");
  EXPECT_EQ(e.detail(), "expected either \"gpu\" or \"rack\", not both");
  e = scenario_error(d, [](json& s) { s["stragglers"] = json::array({{{"rack", 1}}, {{"gpu", 70}}}); });
  EXPECT_EQ(e.json_path(), "/stragglers/1/gpu");
  EXPECT_EQ(e.detail(), "GPUs 70-70 overlap an earlier entry's 64-127; stragglers must not overlap");
  // A rack that is a whole pipeline stage leaves nobody for it to be slower than; so do two racks
  // that together are all GPUs.
  e = scenario_error(d, [](json& s) {
    s["parallelism"] = {{"ep", 8}, {"fsdp", 8}, {"pp", 2}};
    s["stragglers"] = json::array({{{"rack", 0}}});
  });
  EXPECT_EQ(e.json_path(), "/stragglers/0/rack");
  EXPECT_EQ(e.detail(), "every GPU of pipeline stage 0 (64 GPUs) would be a straggler: nobody is left to be slower than");
  e = scenario_error(d, [](json& s) { s["stragglers"] = json::array({{{"rack", 0}}, {{"rack", 1}}}); });
  EXPECT_EQ(e.json_path(), "/stragglers/1/rack");
  EXPECT_EQ(e.detail(), "every GPU of pipeline stage 0 (128 GPUs) would be a straggler: nobody is left to be slower than");
  // A rack across two pipeline stages.
  e = scenario_error(d, [](json& s) {
    s["parallelism"] = {{"ep", 8}, {"fsdp", 4}, {"pp", 4}};
    s["stragglers"] = json::array({{{"rack", 0}}});
  });
  EXPECT_EQ(e.json_path(), "/stragglers/0/rack");
  EXPECT_EQ(e.detail(), "rack 0 (GPUs 0-63) spans two pipeline stages of 32 GPUs; a straggler must lie inside one");
  // A mesh that does not multiply out is reported as such, not as a straggler problem (nor a crash).
  e = scenario_error(d, [](json& s) {
    s["parallelism"] = {{"ep", 8}, {"fsdp", 16}, {"pp", 256}};
    s["stragglers"] = json::array({{{"rack", 1}}});
  });
  EXPECT_EQ(e.json_path(), "/parallelism");
}

TEST(BadInput, TrainMtpNeedsAnMtpModule) {
  TempDir d;
  const SpecError e = scenario_error(d, [](json& s) {
    s["model"] = source("examples/models/qwen3-30b-a3b/config.json");
    s["parallelism"] = {{"ep", 8}, {"fsdp", 16}};
    s["train_mtp"] = true;
  });
  EXPECT_EQ(e.json_path(), "/train_mtp");
  EXPECT_NE(e.detail().find("has no MTP module"), std::string::npos) << e.detail();
}

TEST(BadInput, UnknownEnumValueWithHint) {
  TempDir d;
  const SpecError e = scenario_error(d, [](json& s) { s["stack"] = {{"dispatcher", "fused_dedupe"}}; });
  EXPECT_EQ(e.json_path(), "/stack/dispatcher");
  EXPECT_EQ(e.detail(),
            "expected one of \"allgather\", \"alltoall\" or \"fused_dedup\", got \"fused_dedupe\" (did you mean "
            "\"fused_dedup\"?)");
}

// An executor run's measurements (moeperf run --out): attention cores and, with --machine, the
// exchanges as collective records of the embedded system; waits are skipped; each mistake names
// its op's JSON path.
TEST(BadInput, ExecutorRunRecords) {
  TempDir d;
  auto run_file = [&](const std::function<void(json&)>& edit) {
    json j = {{"kind", "measurements"},
              {"machine", {{"cpu", "c"}, {"gemm_peak_flops_measured", 4e10}, {"copy_bandwidth_measured", 3e10}}},
              {"system", json::parse(kSystem)},
              {"ops",
               {{"attn.core", {{"kind", "attention"}, {"calls", 1}, {"bytes_per_call", 1e6}, {"flops_per_call", 1e8}, {"median_s", 0.01},
                               {"attention", {{"keys", 128}, {"head_dim", 32}, {"backward", false}, {"masked_edges", 1}}}}},
                {"moe.dispatch", {{"kind", "communication"}, {"calls", 1}, {"bytes_per_call", 1e6}, {"flops_per_call", 0}, {"median_s", 0.001},
                                  {"collective", "all_to_all"}, {"group", 2}}},
                {"moe.permute", {{"kind", "memory"}, {"calls", 1}, {"bytes_per_call", 2e6}, {"flops_per_call", 0}, {"median_s", 0.001},
                                 {"rows_per_call", 4096}}},
                {"wait.moe.dispatch", {{"kind", "wait"}, {"calls", 1}, {"bytes_per_call", 0}, {"flops_per_call", 0}, {"median_s", 0.0}}}}}};
    edit(j);
    return d.write("m.json", j.dump(2));
  };
  // An MLA backward's work ratio (2.6) is read back as the executor wrote it.
  for (const PartRecord& r : load_parts(run_file([](json& j) {
         j["ops"]["attn.core"]["attention"]["backward"] = true;
         j["ops"]["attn.core"]["attention"]["bwd_work"] = 2.6;
       }))) {
    if (r.cls == PartClass::attention) {
      EXPECT_DOUBLE_EQ(r.attention.bwd_work, 2.6);
    }
  }
  const auto recs = load_parts(run_file([](json&) {}));
  ASSERT_EQ(recs.size(), 3u);  // the wait is no record
  for (const PartRecord& r : recs) {
    if (r.id == "m/moe.permute") {  // a row gather: its rows beside its bytes
      EXPECT_EQ(r.cls, PartClass::memory);
      EXPECT_DOUBLE_EQ(r.rows, 4096);
      EXPECT_DOUBLE_EQ(r.bytes, 2e6);
    } else if (r.id == "m/attn.core") {
      EXPECT_EQ(r.cls, PartClass::attention);
      EXPECT_DOUBLE_EQ(r.attention.keys, 128);
      EXPECT_EQ(r.op, "attention.fwd");
      EXPECT_EQ(r.attention.masked_edges, 1);
      EXPECT_DOUBLE_EQ(r.attention.bwd_work, 2.5);  // older files: equal head dims
    } else {
      EXPECT_EQ(r.id, "m/moe.dispatch");
      EXPECT_EQ(r.cls, PartClass::collective);
      EXPECT_EQ(r.collective, Collective::all_to_all);
      EXPECT_EQ(r.gpus, 2);
      EXPECT_DOUBLE_EQ(r.bytes, 1e6);
      ASSERT_TRUE(r.topology);
    }
  }
  const std::vector<std::pair<std::function<void(json&)>, std::pair<std::string, std::string>>> bad = {
      {[](json& j) { j["ops"]["moe.dispatch"]["collective"] = "broadcast"; }, {"/ops/moe.dispatch/collective", "expected \"all_to_all\""}},
      {[](json& j) { j["ops"]["moe.dispatch"]["group"] = 1; }, {"/ops/moe.dispatch/group", "at least 2 ranks"}},
      {[](json& j) { j["ops"]["moe.dispatch"]["group"] = 64; }, {"/ops/moe.dispatch/group", "at most the embedded system's 8 GPUs"}},
      {[](json& j) { j["ops"]["attn.core"].erase("attention"); }, {"/ops/attn.core", "attention"}},
      {[](json& j) { j["ops"]["attn.core"]["attention"]["keys"] = 0; }, {"/ops/attn.core/attention/keys", "positive"}},
      {[](json& j) { j["ops"]["attn.core"]["kind"] = "softmax"; }, {"/ops/attn.core/kind", "\"wait\""}},
      {[](json& j) { j["ops"]["attn.core"]["attention"]["masked_edges"] = 3; }, {"/ops/attn.core/attention/masked_edges", "expected 0 (full)"}},
      {[](json& j) { j["ops"]["attn.core"]["attention"]["bwd_work"] = 5; }, {"/ops/attn.core/attention/bwd_work", "between 2 and 3"}},
      {[](json& j) { j["system"]["gpus"] = "eight"; }, {"/system/gpus", ""}},
      {[](json& j) { j["ops"]["moe.permute"]["rows_per_call"] = -1; }, {"/ops/moe.permute/rows_per_call", "positive"}},
      {[](json& j) { j["ops"]["attn.core"]["rows_per_call"] = 8; }, {"/ops/attn.core/rows_per_call", "only on a memory op"}},
  };
  for (const auto& [edit, want] : bad) {
    const std::string f = run_file(edit);
    try {
      (void)load_parts(f);
      ADD_FAILURE() << "no error for " << want.first;
    } catch (const SpecError& e) {
      EXPECT_EQ(e.file(), f);
      EXPECT_EQ(e.json_path().rfind(want.first, 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(want.second), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace moeperf::io
