// Software stacks as data (stacks/*.json) and the mechanisms they switch, against closed forms:
// XLA's one-shot ragged all-to-all (Little's law, on the compute stream, where it applies), the
// NCCL ragged path's host waits, ragged buffers, jax.lax.ragged_dot's masked dense lowering, the
// host that issues ops (and CUDA graphs), and the ablations that walk a stack's optimizations.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../model/io/temp_dir.h"
#include "model/error.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/scenario_schema.h"
#include "model/io/stacks.h"
#include "model/pricing/cost.h"
#include "model/pricing/efficiency.h"
#include "model/sim/sim.h"
#include "model/study/predict.h"
#include "model/study/study.h"
#include "model/workload/flops.h"
#include "model/workload/memory.h"
#include "model/workload/step.h"

namespace moeperf {
namespace {

using moeperf::testing::source;
namespace fs = std::filesystem;

Scenario load(const std::string& rel, std::vector<std::string> sets = {}) {
  std::vector<io::Override> o;
  for (auto& s : sets) o.push_back(io::parse_override(s));
  return io::load_scenario(source(rel), o);
}

const char* kBaseline = "examples/deepseek-v3/gb300-baseline.json";
const char* kOptimized = "examples/deepseek-v3/gb300-optimized.json";

std::vector<const Op*> named(const StepGraph& g, const std::string& name) {
  std::vector<const Op*> out;
  for (const Op& op : g.classes.front().ops)
    if (op.name == name) out.push_back(&op);
  return out;
}

// Every field of every shipped stack says where it comes from: a source, or an assumption and why.
TEST(Stacks, EveryFieldHasASourceOrAnAssumption) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(source("stacks"))) {
    if (e.path().extension() != ".json") continue;
    ++files;
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(e.path()));
    EXPECT_EQ(j.value("kind", ""), "stack") << e.path();
    int fields = 0;
    std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& o, const std::string& at) {
      for (auto it = o.begin(); it != o.end(); ++it) {
        const std::string key = it.key();
        if (at.empty() && (key == "kind" || key == "name" || key == "description" || key == "ablation")) continue;
        const nlohmann::json& v = it.value();
        if (v.is_object() && !v.contains("value")) {  // a group of fields ("overlap")
          walk(v, at + key + ".");
          continue;
        }
        ++fields;
        ASSERT_TRUE(v.is_object()) << e.path() << ": " << at << key << " is a bare value";
        const bool sourced = v.contains("source") && v["source"].is_string() && v["source"].get<std::string>().size() > 10;
        const bool assumed = v.contains("assumption") && v["assumption"].is_string() &&
                             v["assumption"].get<std::string>().size() > 10;
        EXPECT_TRUE(sourced != assumed) << e.path() << ": " << at << key
                                        << " needs either a source or an assumption (with its reason)";
      }
    };
    walk(j, "");
    // Every field the loader knows is written out in every stack file (the scenario's stack keys
    // less base, the older grouped_gemm and the overlap group, plus the overlap group's keys).
    const size_t known = io::scenario_keys("stack").size() - 3 + io::scenario_keys("stack.overlap").size();
    EXPECT_EQ(static_cast<size_t>(fields), known) << e.path();
    EXPECT_NO_THROW(io::validate_file(e.path().string())) << e.path();
  }
  EXPECT_GE(files, 3);
  EXPECT_EQ(static_cast<size_t>(files), io::builtin_stacks().size());  // the build embeds them all
}

// Switching every step of maxtext-te-2026-09's ablation off gives the unoptimized stack: the two
// files agree field by field, so `compare --ablate` on the optimized file starts at the baseline.
TEST(Stacks, TeAblationStartsAtTheXlaStack) {
  const Scenario opt = load(kOptimized), base = load(kBaseline);
  const std::vector<NamedState> states = io::ablation_states(opt);
  ASSERT_EQ(states.size(), 6u);
  EXPECT_EQ(differing_fields(states.front().scenario, base), std::vector<std::string>{});
  EXPECT_EQ(differing_fields(states.back().scenario, opt), std::vector<std::string>{});
  // The post's order, each step switching its own fields.
  const std::vector<WaterfallStep> w = walk(states, opt.calibration);
  EXPECT_EQ(w[1].name, "grouped GEMM");
  EXPECT_EQ(w[1].changes, "stack.expert_gemm");
  EXPECT_EQ(w[5].name, "NCCL EP dispatch/combine");
  EXPECT_EQ(w[5].changes, "stack.dispatcher, stack.ragged_a2a");
  EXPECT_NEAR(w.front().report.model_tflops_per_gpu, predict(base, base.calibration).model_tflops_per_gpu, 1e-9);
}

// compare tells two models apart by every field of their attention and router, and names a Hugging
// Face config without _name_or_path after its folder: two Mixtrals are not "mixtral vs mixtral".
TEST(Stacks, CompareSeesEveryAttentionAndRouterField) {
  const Scenario a = load(kOptimized);
  auto differs = [&](const std::function<void(ModelSpec&)>& change) {
    Scenario b = a;
    change(b.model);
    return differing_fields(a, b) == std::vector<std::string>{"model"};
  };
  EXPECT_TRUE(differs([](ModelSpec& m) { m.attention.qk_rope_head_dim += 16; }));
  EXPECT_TRUE(differs([](ModelSpec& m) { m.attention.v_head_dim += 16; }));
  EXPECT_TRUE(differs([](ModelSpec& m) { m.attention.sliding_layers.assign(static_cast<size_t>(m.layers), true); }));
  EXPECT_TRUE(differs([](ModelSpec& m) { m.attention.nope_layers.assign(static_cast<size_t>(m.layers), true); }));
  EXPECT_TRUE(differs([](ModelSpec& m) { m.attention.qk_norm = !m.attention.qk_norm; }));
  EXPECT_TRUE(differs([](ModelSpec& m) { m.router.bias = !m.router.bias; }));
  EXPECT_TRUE(differs([](ModelSpec& m) { m.router.score = m.router.score == RouterScore::softmax ? RouterScore::sigmoid : RouterScore::softmax; }));
  EXPECT_EQ(differing_fields(a, a), std::vector<std::string>{});
  // The NVLink switches the topology is built from are the system's too.
  auto system_differs = [&](const std::function<void(NvlinkDomainSpec&)>& change) {
    Scenario b = a;
    change(b.system.domain);
    return differing_fields(a, b) == std::vector<std::string>{"system"};
  };
  EXPECT_TRUE(system_differs([](NvlinkDomainSpec& d) { d.switch_chips += 1; }));
  EXPECT_TRUE(system_differs([](NvlinkDomainSpec& d) { d.gpu_links_per_chip.push_back(1); }));
  EXPECT_TRUE(system_differs([](NvlinkDomainSpec& d) { d.nvswitch->latency = d.nvswitch->latency * 2.0; }));
  EXPECT_TRUE(system_differs([](NvlinkDomainSpec& d) { d.nvswitch->port_bandwidth = d.nvswitch->port_bandwidth * 2.0; }));
  EXPECT_TRUE(system_differs([](NvlinkDomainSpec& d) { d.nvswitch.reset(); }));
  const std::string dir = std::string(MOEPERF_SOURCE_DIR) + "/examples/models/";
  EXPECT_EQ(io::load_model(dir + "mixtral-8x7b/config.json").name, "mixtral-8x7b (mixtral)");
  EXPECT_EQ(io::load_model(dir + "mixtral-8x22b/config.json").name, "mixtral-8x22b (mixtral)");
}

// The ladder's 13 scenario files are the states of megatron-core's ablation of the last one.
TEST(Stacks, LadderFilesAreTheAblationStates) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(source("examples/deepseek-v3")))
    if (e.path().filename().string().rfind("gb200-mcore-ladder-", 0) == 0) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 13u);
  const Scenario last = io::load_scenario(files.back());
  const std::vector<NamedState> states = io::ablation_states(last);
  ASSERT_EQ(states.size(), 13u);
  for (size_t k = 0; k < 13; ++k) {
    const Scenario file = io::load_scenario(files[k]);
    EXPECT_EQ(differing_fields(file, states[k].scenario), std::vector<std::string>{}) << files[k];
  }
  // Unmapped steps switch nothing and say so.
  const std::vector<WaterfallStep> w = walk(states, last.calibration);
  EXPECT_NE(w[7].changes.find("not mapped"), std::string::npos) << w[7].changes;
  EXPECT_EQ(w[7].report.step_time, w[6].report.step_time);
}

// A stack file of the user's own, with an ablation: a scenario names it by path and compare
// --ablate walks its steps (fields it leaves out keep the built-in defaults).
TEST(Stacks, UserStackFileWithItsAblation) {
  testing::TempDir d;
  const std::string file = d.write("mine.json", R"({"kind": "stack", "name": "our-fork",
    "expert_gemm": {"value": "grouped", "source": "our fork"},
    "ablation": [{"name": "grouped GEMM", "off": {"stack.expert_gemm": "per_expert_loop"}},
                 {"name": "a step we cannot model", "off": {}, "note": "not mapped"}]})");
  const Scenario s = load(kOptimized, {"stack=" + file});
  EXPECT_EQ(s.stack.name, "our-fork");
  ASSERT_EQ(s.stack.ablation.size(), 2u);
  const std::vector<NamedState> states = io::ablation_states(s);
  ASSERT_EQ(states.size(), 3u);
  EXPECT_EQ(states[0].scenario.stack.expert_gemm, ExpertGemm::per_expert_loop);
  EXPECT_EQ(states[1].scenario.stack.expert_gemm, ExpertGemm::grouped);
  EXPECT_EQ(differing_fields(states[1].scenario, states[2].scenario), std::vector<std::string>{});
  EXPECT_EQ(states[2].note, "not mapped");
}

// A stack by name, an object over a base, --set through a named stack; unknown names and bad
// fields fail with the file and the JSON path.
TEST(Stacks, ScenarioNamesAndOverridesAStack) {
  const Scenario b = load(kBaseline);
  EXPECT_EQ(b.stack.name, "maxtext-xla-2026-09");
  EXPECT_EQ(b.stack.ragged_a2a, RaggedA2a::one_shot);
  EXPECT_EQ(b.stack.one_shot_threads, 128);
  EXPECT_DOUBLE_EQ(b.stack.host_op_s, 2e-6);
  const Scenario o = load(kBaseline, {"stack.ragged_a2a=nccl", "stack.overlap.fsdp_prefetch=true"});
  EXPECT_EQ(o.stack.name, "maxtext-xla-2026-09");
  EXPECT_EQ(o.stack.ragged_a2a, RaggedA2a::nccl);
  EXPECT_TRUE(o.stack.fsdp_prefetch);
  EXPECT_FALSE(o.stack.multistream_collectives);  // the rest from the base
  const Scenario m = load(kBaseline, {"stack=megatron-core"});
  EXPECT_EQ(m.stack.name, "megatron-core");
  EXPECT_EQ(m.stack.cuda_graphs, static_cast<unsigned>(GraphScope::attn) | static_cast<unsigned>(GraphScope::mlp) |
                                     static_cast<unsigned>(GraphScope::moe_router) |
                                     static_cast<unsigned>(GraphScope::shared_expert));
  try {
    load(kBaseline, {"stack=maxtext-xla-2025"});
    FAIL() << "an unknown stack loaded";
  } catch (const io::SpecError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("gb300-baseline.json"), std::string::npos) << w;
    EXPECT_NE(w.find("/stack"), std::string::npos) << w;
    EXPECT_NE(w.find("\"maxtext-xla-2026-09\""), std::string::npos) << w;  // the names it knows
  }
  // A stack file's ablation may only name fields that exist, with valid values.
  testing::TempDir d;
  const std::string bad = d.write("bad.json", R"({"kind": "stack", "ablation": [{"name": "a", "off": {"stack.nope": 1}}]})");
  try {
    io::validate_file(bad);
    FAIL() << "a stack with an unknown ablation field validated";
  } catch (const io::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/ablation/0/off/stack.nope"), std::string::npos) << e.what();
  }
  const std::string bad_value = d.write("bad2.json", R"({"kind": "stack", "ablation": [{"name": "a", "off": {"precision.expert_gemm": "fp6"}}]})");
  EXPECT_THROW(io::validate_file(bad_value), io::SpecError);
  EXPECT_THROW(load(kBaseline, {"stack=5"}), io::SpecError);
  EXPECT_THROW(load(kBaseline, {"stack.grouped_gemm=true", "stack.expert_gemm=masked_dense"}), io::SpecError);
  EXPECT_EQ(load(kBaseline, {"stack.grouped_gemm=true", "stack.expert_gemm=grouped"}).stack.expert_gemm, ExpertGemm::grouped);
  EXPECT_THROW(load(kBaseline, {"stack.one_shot_scope=rack"}), io::SpecError);
  EXPECT_THROW(load(kBaseline, {"stack.cuda_graphs=[\"attention\"]"}), io::SpecError);
  EXPECT_THROW(load(kBaseline, {"stack.host_op_s=-1"}), io::SpecError);
}

// XLA's one-shot kernel: on the compute stream, per peer bytes x latency / bytes in flight, plus
// two rendezvous steps and three launches.
TEST(Stacks, OneShotAllToAllIsPricedByLittlesLaw) {
  const Scenario s = load(kBaseline);
  const Calibration& cal = s.calibration;
  const ExpertLoad load_ = expert_load(s, cal);
  const StepGraph g = lower_step(s, load_);
  const auto d = named(g, "moe.dispatch");
  ASSERT_FALSE(d.empty());
  const Op& op = *d.front();
  EXPECT_EQ(op.stream, Stream::compute);
  EXPECT_EQ(op.collective, Collective::none);
  EXPECT_EQ(op.category, Category::ep_comm);
  EXPECT_DOUBLE_EQ(op.one_shot_in_flight, 128.0 * 8.0);
  const Topology t = Topology::build(s.system, s.gpus);
  const Pricer pr(s, t, cal);
  const double per_peer = std::max(op.bytes, op.recv_bytes).value() / 7.0;
  const double want = per_peer * cal[Param::oneshot_copy_latency_s] / 1024.0 + 2 * cal[Param::nvlink_step_s] +
                      3 * cal[Param::kernel_launch_s];
  EXPECT_NEAR(pr.time(op).value(), want, 1e-12);
  // DeepSeek-V3's 24,576 tokens x 8 rows x 7168 x 2 B per GPU: ~2.8 GB, 1/8 per peer at 1 KiB per
  // ~0.46 us: about 0.15 s a call (64 x MI355X measured 155 ms for the same shape).
  EXPECT_GT(pr.time(op).value(), 0.12);
  EXPECT_LT(pr.time(op).value(), 0.19);
  // It blocks compute: the baseline's communication share is the published order (84 %).
  const StepReport r = predict(s, cal);
  EXPECT_GT(r.comm_fraction_of_kernel_time, 0.76);
  EXPECT_LT(r.comm_fraction_of_kernel_time, 0.92);
}

// Where the one-shot kernel does not apply (a group over more ranks than it takes, or peers in
// another process), XLA's NCCL path runs: an offsets all-to-all and two host waits per call.
TEST(Stacks, NcclRaggedPathWaitsForTheHost) {
  for (const std::vector<std::string>& sets :
       std::vector<std::vector<std::string>>{{"stack.one_shot_scope=process"}, {"stack.one_shot_max_ranks=4"}}) {
    const Scenario s = load(kBaseline, sets);
    const StepGraph g = lower_step(s, expert_load(s, s.calibration));
    const auto d = named(g, "moe.dispatch");
    ASSERT_FALSE(d.empty());
    EXPECT_EQ(d.front()->collective, Collective::all_to_all) << sets[0];
    EXPECT_EQ(d.front()->stream, Stream::ep_comm) << sets[0];
    const size_t calls = named(g, "moe.dispatch").size() + named(g, "moe.combine").size() +
                         named(g, "moe.dispatch.recompute").size() + named(g, "moe.combine.bwd").size() +
                         named(g, "moe.dispatch.bwd").size();
    const size_t waits = named(g, "moe.dispatch.host_wait").size() + named(g, "moe.combine.host_wait").size() +
                         named(g, "moe.dispatch.recompute.host_wait").size() +
                         named(g, "moe.combine.bwd.host_wait").size() + named(g, "moe.dispatch.bwd.host_wait").size();
    EXPECT_EQ(waits, 2 * calls) << sets[0];
    EXPECT_EQ(named(g, "moe.dispatch.offsets").size(), named(g, "moe.dispatch").size()) << sets[0];
    for (const Op* w : named(g, "moe.dispatch.host_wait")) EXPECT_EQ(w->category, Category::sync);
  }
  // The one-shot kernel with its peers in one NVLink domain: no waits at all.
  const Scenario s = load(kBaseline);
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  EXPECT_TRUE(named(g, "moe.dispatch.host_wait").empty());
}

// Host waits with a straggler: the slow GPU's class resumes issuing later, and the collectives
// both classes share still run once, together (each waits for the other's host to issue it).
TEST(Stacks, HostWaitsWithAStragglerRunEachCollectiveOnce) {
  const Scenario base = load(kBaseline, {"stack.ragged_a2a=nccl"});
  const Scenario slow = load(kBaseline, {"stack.ragged_a2a=nccl", "stragglers=[{\"gpu\": 5, \"compute_slowdown\": 1.5}]"});
  const StepReport r0 = predict(base, base.calibration), r1 = predict(slow, slow.calibration);
  ASSERT_TRUE(r1.sim);
  ASSERT_GE(r1.sim->classes.size(), 2u);
  EXPECT_GT(r1.step_time.value(), r0.step_time.value());
  // The classes finish together (every MoE layer's all-to-alls synchronize them) and the fast one
  // waits: its collectives spin for the slow one, never running alone a second time.
  const double f0 = r1.sim->classes[0].finish.value(), f1 = r1.sim->classes[1].finish.value();
  EXPECT_NEAR(f0, f1, 0.02 * std::max(f0, f1));
  Seconds waited;
  for (const SimClass& c : r1.sim->classes) waited += c.wait;
  EXPECT_GT(waited.value(), 0.0);
  // Same op counts in both classes.
  EXPECT_EQ(r1.sim->classes[0].ops.size(), r1.sim->classes[1].ops.size());
}

// Ragged buffers: factor x the rows, or with a factor <= 0 MaxText's default (rows x min(EP,
// experts / top_k)); the local sort touches every buffer row, and the memory report holds them
// beside the rank's own rows the dispatch sends and the combine receives.
TEST(Stacks, RaggedBuffersSizeTheSortAndTheMemory) {
  const Scenario two = load(kBaseline), dflt = load(kBaseline, {"stack.a2a_buffer_factor=-1"});
  const Calibration& cal = two.calibration;
  const ExpertLoad l = expert_load(two, cal);
  const double h = 7168, rows2 = 2 * l.mean_rows, rows_d = l.mean_rows * std::min(8.0, 256.0 / 8.0);
  EXPECT_DOUBLE_EQ(rows_d, 8 * l.mean_rows);
  const StepGraph g2 = lower_step(two, l), gd = lower_step(dflt, l);
  const auto sort2 = named(g2, "moe.sort"), sortd = named(gd, "moe.sort");
  ASSERT_FALSE(sort2.empty());
  EXPECT_NEAR(sort2.front()->hbm_bytes.value(), rows2 * h * 2.0 * 2.0, 1.0);
  EXPECT_NEAR(sortd.front()->hbm_bytes.value(), rows_d * h * 2.0 * 2.0, 1.0);
  const StepReport r2 = predict(two, cal), rd = predict(dflt, cal);
  // The dispatch's receive buffer and the combine's send buffer are buffer-sized; the dispatch's
  // send and the combine's receive hold the rank's own rows.
  EXPECT_NEAR(r2.memory.comm_buffers.value(), (rows2 + l.mean_rows) * h * (2.0 + 2.0), 1.0);
  EXPECT_NEAR(rd.memory.comm_buffers.value(), (rows_d + l.mean_rows) * h * (2.0 + 2.0), 1.0);
  // 1,572,864 rows of 7168 BF16 values: the 22.5 GB MaxText's default buffer holds at EP 8.
  EXPECT_NEAR(rows_d * h * 2.0 / 1e9, 22.5, 0.1);
}

// MaxText's ragged exchanges write into jnp.zeros outputs: before each, the whole output is written
// with zeros (the dispatch's buffer rows and its recompute's, the combine's own rows; in the
// backward the combine's transpose fills buffer rows, the dispatch's own rows), and the exchange
// follows its fill. Off (PyTorch's new_empty), and on megatron-core, nothing is filled.
TEST(Stacks, RaggedExchangesFillTheirZeroedOutputsFirst) {
  const Scenario jax = load(kBaseline), off = load(kBaseline, {"stack.a2a_zero_fill=false"});
  ASSERT_TRUE(jax.stack.a2a_zero_fill);
  const ExpertLoad l = expert_load(jax, jax.calibration);
  const double h = 7168, own = 6 * 4096.0 * 8, buffer = 2 * l.mean_rows;
  ASSERT_DOUBLE_EQ(l.mean_rows, own);
  const StepGraph g = lower_step(jax, l);
  const int moe_layers = 58;
  for (const auto& [name, rows] : std::vector<std::pair<std::string, double>>{{"moe.dispatch", buffer},
                                                                              {"moe.dispatch.recompute", buffer},
                                                                              {"moe.combine", own},
                                                                              {"moe.combine.bwd", buffer},
                                                                              {"moe.dispatch.bwd", own}}) {
    const auto fills = named(g, name + ".zero_fill");
    ASSERT_EQ(fills.size(), static_cast<size_t>(moe_layers)) << name;
    EXPECT_DOUBLE_EQ(fills.front()->hbm_bytes.value(), rows * h * 2.0) << name;
    // The exchange right after its fill waits for it (on the compute stream with the one-shot kernel, by order).
    const auto& ops = g.classes.front().ops;
    const auto at = static_cast<size_t>(fills.front() - ops.data());
    size_t next = at + 1;
    while (next < ops.size() && ops[next].name != name) ++next;
    ASSERT_LT(next, ops.size()) << name;
    const bool waits = ops[next].stream == ops[at].stream ||
                       std::find(ops[next].deps.begin(), ops[next].deps.end(), static_cast<int32_t>(at)) != ops[next].deps.end();
    EXPECT_TRUE(waits) << name;
  }
  const StepGraph go = lower_step(off, l);
  for (const RankClass& rc : go.classes)
    for (const Op& op : rc.ops) EXPECT_FALSE(op.name.ends_with(".zero_fill")) << op.name;
  const Scenario mc = load("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json");
  EXPECT_FALSE(mc.stack.a2a_zero_fill);
}

// jax.lax.ragged_dot's default lowering: every local expert against every buffer row.
TEST(Stacks, MaskedDenseRaggedDotMultipliesTheExpertFlops) {
  const Scenario loop = load(kBaseline), dense = load(kBaseline, {"stack.expert_gemm=masked_dense"});
  const ExpertLoad l = expert_load(loop, loop.calibration);
  const StepGraph gd = lower_step(dense, l), gl = lower_step(loop, l);
  const auto fc1 = named(gd, "moe.expert_fc1");
  ASSERT_FALSE(fc1.empty());
  const double e_local = 256.0 / 8.0, rows = 2 * l.mean_rows;
  EXPECT_NEAR(fc1.front()->flops.value(), e_local * rows * 2.0 * 7168 * 2.0 * 2048, 1e3);
  EXPECT_EQ(fc1.front()->groups, 32);
  EXPECT_EQ(fc1.front()->m, static_cast<int64_t>(std::llround(rows)));
  // The useful FLOPs are the same.
  const auto fc1_loop = named(gl, "moe.expert_fc1");
  EXPECT_DOUBLE_EQ(fc1.front()->model_flops.value(), fc1_loop.front()->model_flops.value());
}

// The host issues ops in program order at host_op_s x host_ops each; the GPU cannot start an op
// before it is issued, and after a host wait nothing is issued until the wait is over.
TEST(Stacks, HostIssuesOpsAndWaits) {
  const Scenario s = load(kOptimized);
  const Topology t = Topology::build(s.system, s.gpus);
  Calibration cal;
  const Pricer pr(s, t, cal);
  auto tiny = [](const char* name) {
    Op op;
    op.name = name;
    op.category = Category::memory;
    op.hbm_bytes = Bytes(1e3);
    return op;
  };
  StepGraph g;
  RankClass rc;
  for (int i = 0; i < 10; ++i) rc.ops.push_back(tiny("x"));
  g.classes.push_back(rc);
  StackOptions st;
  st.host_op_s = 50e-6;  // far above a 1 kB kernel: the host sets the pace
  const double op_s = pr.compute_time(rc.ops[0]).value();
  SimResult r = simulate(g, pr, st);
  EXPECT_NEAR(r.step_time.value(), 10 * 50e-6 + op_s, 1e-12);
  // A host wait after the fifth op: the host issues op 6 only when the wait is done.
  Op w;
  w.name = "wait";
  w.category = Category::sync;
  {  // rebuilt, not vector::insert: GCC 12's -Warray-bounds misreads the inlined insert of an Op
    std::vector<Op>& ops = g.classes[0].ops;
    std::vector<Op> with;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i == 5) with.push_back(w);
      with.push_back(ops[i]);
    }
    ops = std::move(with);
  }
  r = simulate(g, pr, st);
  const double wait_end = 6 * 50e-6 + cal[Param::host_sync_s];
  EXPECT_NEAR(r.classes[0].ops[5].end.value(), wait_end, 1e-12);
  EXPECT_NEAR(r.step_time.value(), wait_end + 5 * 50e-6 + op_s, 1e-12);
  // Captured in one CUDA graph part, a run of ops costs the host one graph launch.
  for (Op& op : g.classes[0].ops) op.graph = static_cast<unsigned>(GraphScope::attn);
  g.classes[0].ops.erase(g.classes[0].ops.begin() + 5);
  st.graph_launch_s = 20e-6;
  r = simulate(g, pr, st);
  EXPECT_NEAR(r.step_time.value(), 20e-6 + 10 * op_s, 1e-12);
  // Without a host cost nothing changes from before the host model: back to back.
  r = simulate(g, pr, StackOptions{});
  EXPECT_NEAR(r.step_time.value(), 10 * op_s, 1e-12);
  // An overlapped pair: a host wait in the forward lane holds that lane only; the one host thread
  // issues the backward lane's ops (later in program order) meanwhile, then the forward's rest.
  // Program: x0..x4, wait, y0..y4 on lane 0, z0..z4 on lane 1.
  {
    StepGraph p;
    RankClass pc;
    for (int i = 0; i < 5; ++i) pc.ops.push_back(tiny("x"));
    pc.ops.push_back(w);
    for (int i = 0; i < 5; ++i) pc.ops.push_back(tiny("y"));
    for (int i = 0; i < 5; ++i) {
      pc.ops.push_back(tiny("z"));
      pc.ops.back().lane = 1;
    }
    p.classes.push_back(pc);
    StackOptions hs;
    hs.host_op_s = 50e-6;
    const SimResult q = simulate(p, pr, hs);
    const double wait = 6 * 50e-6 + cal[Param::host_sync_s];
    EXPECT_NEAR(q.classes[0].ops[5].end.value(), wait, 1e-12);
    EXPECT_NEAR(q.classes[0].ops[11].start.value(), 7 * 50e-6, 1e-12);   // z0 issued while lane 0 waits
    EXPECT_NEAR(q.classes[0].ops[15].start.value(), 11 * 50e-6, 1e-12);  // z4
    EXPECT_NEAR(q.classes[0].ops[6].start.value(), 12 * 50e-6, 1e-12);   // y0: after the host's z's
    EXPECT_NEAR(q.step_time.value(), 16 * 50e-6 + op_s, 1e-12);
  }
}

// Transformer Engine's multi-stream grouped GEMM: the host issues one cuBLASLt GEMM per group
// (gemm_multi_stream_group_s each). The GPU starts once the first group is issued and cannot end
// before the last one is, plus that group's share of the work; a host far ahead hides the loop, and
// a CUDA graph captures it.
TEST(Stacks, AMultiStreamGroupedGemmWaitsForTheHostsLoopOverItsGroups) {
  const Scenario s = load(kOptimized);
  const Topology t = Topology::build(s.system, s.gpus);
  Calibration cal;
  const double h = 1e-3;  // per group: far above the GEMM's GPU time
  cal.set(Param::gemm_multi_stream_group_s, h);
  const Pricer pr(s, t, cal);
  Op gemm;
  gemm.name = "moe.expert_fc1";
  gemm.category = Category::gemm;
  gemm.ragged = true;
  gemm.groups = 8;
  gemm.m = 512;
  gemm.n = 4096;
  gemm.k = 7168;
  gemm.flops = Flops(2.0 * 8 * 512 * 4096 * 7168);
  gemm.grouped_kernel = GroupedKernel::multi_stream;
  const double g_s = pr.compute_time(gemm).value();
  ASSERT_LT(g_s, 8 * h);
  EXPECT_NEAR(pr.host_loop_time(gemm).value(), 8 * h, 1e-15);
  StackOptions st;  // host_op_s 0: only the library's loop costs host time
  StepGraph g;
  RankClass rc;
  rc.ops = {gemm};
  g.classes.push_back(rc);
  SimResult r = simulate(g, pr, st);
  EXPECT_NEAR(r.classes[0].ops[0].start.value(), h, 1e-12);
  EXPECT_NEAR(r.classes[0].ops[0].end.value(), 8 * h + g_s / 8, 1e-12);
  EXPECT_NEAR(r.classes[0].host_busy.value(), 8 * h, 1e-15);  // what compare-trace sets beside a trace's launches
  EXPECT_DOUBLE_EQ(r.classes[0].host_ops, 1.0);
  // A pointer-array kernel of the same shape is one launch: no loop, the GPU's time alone.
  g.classes[0].ops[0].grouped_kernel = GroupedKernel::ptr_array;
  EXPECT_DOUBLE_EQ(pr.host_loop_time(g.classes[0].ops[0]).value(), 0.0);
  r = simulate(g, pr, st);
  EXPECT_NEAR(r.step_time.value(), pr.compute_time(g.classes[0].ops[0]).value(), 1e-12);
  // Behind a GPU op longer than the loop, the loop is hidden: the GEMM runs at its GPU time.
  Op slow;
  slow.name = "x";
  slow.category = Category::memory;
  slow.hbm_bytes = Bytes(s.system.gpu().hbm_bandwidth.value() * 0.02);  // 20 ms or more
  const double slow_s = pr.compute_time(slow).value();
  ASSERT_GT(slow_s, 8 * h);
  g.classes[0].ops = {slow, gemm};
  r = simulate(g, pr, st);
  EXPECT_NEAR(r.classes[0].ops[1].end.value(), slow_s + g_s, 1e-12);
  // Captured in a CUDA graph, the loop is replayed by the graph: one graph launch.
  g.classes[0].ops = {gemm};
  g.classes[0].ops[0].graph = static_cast<unsigned>(GraphScope::moe);
  st.graph_launch_s = 20e-6;
  r = simulate(g, pr, st);
  EXPECT_NEAR(r.step_time.value(), 20e-6 + g_s, 1e-12);
  EXPECT_EQ(r.classes[0].graph_launches, 1);
  EXPECT_DOUBLE_EQ(r.classes[0].host_ops, 0.0);
  EXPECT_NEAR(r.classes[0].host_busy.value(), 20e-6, 1e-15);
}

// A fused EP kernel holds the SMs the stack gives it: a GEMM beside it runs on the rest.
TEST(Stacks, FusedEpKernelHoldsItsSms) {
  const Scenario s = load(kOptimized, {"stack.ep_sms=32"});
  const Topology t = Topology::build(s.system, s.gpus);
  const Calibration cal;
  const Pricer pr(s, t, cal);
  Op gemm;
  gemm.name = "g";
  gemm.category = Category::gemm;
  gemm.m = gemm.n = gemm.k = 8192;
  gemm.flops = Flops(2.0 * 8192 * 8192 * 8192);
  Op a2a;
  a2a.name = "moe.dispatch";
  a2a.category = Category::ep_comm;
  a2a.stream = Stream::ep_comm;
  a2a.collective = Collective::all_to_all;
  a2a.group = Group::ep;
  a2a.fanout = 5;
  a2a.bytes = a2a.recv_bytes = Bytes(100e9);  // outlasts the GEMM
  StepGraph g;
  RankClass rc;
  rc.ops = {gemm, a2a};
  g.classes.push_back(rc);
  StackOptions st = s.stack;
  st.host_op_s = 0;  // both issued at once
  st.ep_sms = 16;    // the stack simulated, not the scenario's (32)
  const SimResult r = simulate(g, pr, st);
  const double solo = pr.compute_time(gemm).value();
  EXPECT_NEAR(r.classes[0].ops[0].end.value(), solo / (1.0 - 16.0 / s.system.gpu().sms), 1e-9);
}

// JAX's remat rebuilds the expert input rows in the backward (a second permute and all-to-all);
// PyTorch's autograd keeps them: no second dispatch, their bytes in the activations.
TEST(Stacks, AutogradKeepsTheExpertRowsRematRebuildsThem) {
  const Scenario jax = load(kOptimized), torch = load(kOptimized, {"stack.remat_dispatch=false"});
  const ExpertLoad l = expert_load(jax, jax.calibration);
  const StepGraph gj = lower_step(jax, l), gt = lower_step(torch, l);
  EXPECT_EQ(named(gj, "moe.dispatch.recompute").size(), 58u);
  EXPECT_TRUE(named(gt, "moe.dispatch.recompute").empty());
  EXPECT_TRUE(named(gt, "moe.permute.recompute").empty());
  const StepReport rj = predict(jax, jax.calibration), rt = predict(torch, torch.calibration);
  // One micro-batch in flight, 58 MoE layers: autograd keeps the expert input rows and the experts'
  // activation output (moe_act, not in this scenario's recompute list), both in the GEMMs' MXFP8,
  // with the shared expert's activation output (BF16, every token: 6 x 4,096), and in all 61
  // layers the two normalizations' outputs (BF16, as the layer input), and MLA's latents (q 1,536,
  // kv 512 + 64 wide, BF16), from which autograd's recompute of the up projections starts; and the
  // three dense layers' FC2 input in FP8, which JAX's remat rebuilds from FC1's output.
  const double rows = l.max_rows * 7168 * bytes_per_element(Dtype::mxfp8) * 58;
  const double dense = 3 * 6 * 4096.0 * 18432 * bytes_per_element(Dtype::fp8);
  const double act = (l.max_rows * 2048 * bytes_per_element(Dtype::mxfp8) + 6 * 4096.0 * 2048 * 2.0) * 58;
  const double norms = 2 * layer_input_bytes(jax) * 61;
  const double latents = 6 * 4096.0 * (1536 + 512 + 64) * 2.0 * 61;
  EXPECT_NEAR(rt.memory.activations.value() - rj.memory.activations.value(), rows + act + norms + latents + dense, 1.0);
  EXPECT_LT(rt.step_time.value(), rj.step_time.value());
}

// The routed experts' activation output (moe_act): JAX's remat rebuilds it in every backward;
// PyTorch's autograd keeps it (activation memory) unless the run recomputes it (Megatron's
// --recompute-modules moe_act, the ladder from step 5 on). Either way the FC2 weight and input
// gradients wait for the combine's backward, which brings their output gradient.
TEST(Stacks, TheExpertActivationIsKeptByAutogradUnlessRecomputed) {
  const char* ladder = "examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  const Scenario recomputed = load(ladder);
  ASSERT_NE(std::find(recomputed.memory.recompute.begin(), recomputed.memory.recompute.end(), TensorClass::moe_act),
            recomputed.memory.recompute.end());
  const Scenario kept = load(ladder, {"memory.recompute=[\"mlp\"]"});
  const Scenario jax = load(kOptimized);
  const ExpertLoad l = expert_load(recomputed, recomputed.calibration);
  const StepGraph gr = lower_step(recomputed, l), gk = lower_step(kept, l);
  EXPECT_EQ(named(gr, "moe.act.recompute").size(), named(gr, "moe.act.bwd").size());
  EXPECT_TRUE(named(gk, "moe.act.recompute").empty());
  const ExpertLoad lj = expert_load(jax, jax.calibration);
  const StepGraph gj = lower_step(jax, lj);
  EXPECT_EQ(named(gj, "moe.act.recompute").size(), 58u);  // JAX: always, with no moe_act listed
  // Memory: the kept activation is the busiest rank's rows x the expert FFN in the FC2 input's
  // format (MXFP8 here) and the shared expert's 4,096 tokens x its FFN in BF16, per MoE layer of the
  // fullest stage and micro-batch in flight; JAX keeps none.
  const StepReport rr = predict(recomputed, recomputed.calibration), rk = predict(kept, kept.calibration);
  const auto act = static_cast<size_t>(TensorClass::moe_act);
  EXPECT_DOUBLE_EQ(rr.memory.activations_by_class[act].value(), 0.0);
  ASSERT_EQ(rk.memory.pp_stage, 2);  // layers 3-4, 19-20, 35-36 and 51-52: eight MoE layers
  const double per_layer = l.max_rows * 2048 * bytes_per_element(Dtype::mxfp8) + 4096.0 * 2048 * 2.0;
  EXPECT_NEAR(rk.memory.activations_by_class[act].value(), 8 * per_layer * rk.memory.micro_batches_in_flight, 1.0);
  EXPECT_DOUBLE_EQ(predict(jax, jax.calibration).memory.activations_by_class[act].value(), 0.0);
  // Without the recompute the FC2 data gradient itself waits for the combine's backward.
  for (const StepGraph* g : {&gr, &gk}) {
    const auto& ops = g->classes[0].ops;
    for (const Op* dg : named(*g, "moe.expert_fc2.dgrad")) {
      // The first compute op after the combine's backward carries the dependency on it.
      const size_t i = static_cast<size_t>(dg - ops.data());
      size_t first = i;
      if (ops[first - 1].name == "moe.expert_fc2.dgrad.quant") --first;  // MXFP8: its operands' quantization
      if (g == &gr) {
        ASSERT_EQ(ops[first - 1].name, "moe.act.recompute");
        --first;
      }
      // Megatron's flex dispatcher spreads the arriving rows over the experts first (the
      // un-permute's backward, after the exchange): that op carries it.
      if (ops[first - 1].name == "moe.unpermute.bwd") --first;
      bool waits = false;
      for (int32_t dep : ops[first].deps)
        waits = waits || ops[static_cast<size_t>(dep)].name == "moe.combine.bwd";
      EXPECT_TRUE(waits) << ops[first].name << " at " << first << " does not wait for moe.combine.bwd";
    }
  }
}

// Fusions the PyTorch stack names: an unfused router is more kernels over the scores, an unfused
// permute more launches, a separate scale allocation one more kernel per quantization; PDL takes
// the quantizations' launch gaps away.
TEST(Stacks, FusionsChangeKernelsAndHostOps) {
  const char* ladder = "examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  const Scenario fused = load(ladder);
  const Scenario unfused = load(ladder, {"stack.router_fusion=false", "stack.permute_fusion=false",
                                         "stack.quantize_host_ops=2", "stack.pdl_quantize=false"});
  const ExpertLoad l = expert_load(fused, fused.calibration);
  const StepGraph gf = lower_step(fused, l), gu = lower_step(unfused, l);
  const Op& tf = *named(gf, "moe.topk").front();
  const Op& tu = *named(gu, "moe.topk").front();
  EXPECT_EQ(tu.launches, 12);
  EXPECT_DOUBLE_EQ(tu.hbm_bytes.value(), tf.hbm_bytes.value() * 6.0);
  EXPECT_DOUBLE_EQ(tu.host_ops, 12.0);
  EXPECT_DOUBLE_EQ(tf.host_ops, 3.0);
  // The score function's backward: one per MoE layer and micro-batch, as many as the forward's,
  // reading the saved FP32 scores and writing the logits' gradient ([tokens, 256 experts] x 4 B,
  // twice, plus the top-8 gates' gradient); unfused, autograd replays the router's 12 ops.
  const auto bf = named(gf, "moe.topk.bwd");
  EXPECT_EQ(bf.size(), named(gf, "moe.topk").size());
  const double tokens = 4096;  // micro-batch 1 x 4096, no TP or CP
  EXPECT_DOUBLE_EQ(bf.front()->hbm_bytes.value(), tokens * (256 * 4.0 * 2.0 + 8 * 4.0));
  EXPECT_EQ(bf.front()->phase, Phase::backward);
  const Op& bu = *named(gu, "moe.topk.bwd").front();
  EXPECT_EQ(bu.launches, 12);
  EXPECT_DOUBLE_EQ(bu.host_ops, 12.0);
  EXPECT_EQ(named(gu, "moe.permute").front()->launches, 6);
  EXPECT_EQ(named(gf, "attn.out_proj.quant").front()->launches, 0);  // PDL
  EXPECT_EQ(named(gu, "attn.out_proj.quant").front()->launches, 2);
  // The shared expert is captured in a graph, the routed experts are not.
  EXPECT_NE(named(gf, "moe.shared_fc1").front()->graph, 0u);
  EXPECT_EQ(named(gf, "moe.expert_fc1").front()->graph, 0u);
  // Norm + quantize fusion (ANormThatQuantizesLeavesNoQuantizationKernelBehindIt): unfused, the q
  // projection's quantization reads its BF16 input and writes both copies (the weights are stored).
  const Scenario nofuse = load(ladder, {"stack.norm_quantize_fusion=false"});
  const StepGraph gn = lower_step(nofuse, l);
  const Op& qn = *named(gn, "attn.q_proj.quant").front();
  const Op& q = *named(gf, "attn.q_proj").front();
  // MLA: the down projection's own quantization of the hidden-wide input beside it (fused or not).
  const double down = quantize_bytes_per_element(Dtype::mxfp8) * static_cast<double>(q.m) * 7168;
  EXPECT_NEAR(qn.hbm_bytes.value(), quantize_bytes_per_element(Dtype::mxfp8) * static_cast<double>(q.m * q.k) + down, 1.0);
  ASSERT_FALSE(named(gf, "attn.q_proj.quant").empty());
  EXPECT_NEAR(named(gf, "attn.q_proj.quant").front()->hbm_bytes.value(), down, 1.0);
}

// Megatron's residual adds are kernels of their own (bias-dropout-add), and backward autograd sums
// the skip gradient into the norm's input gradient in one more (and, in the MoE block, the shared
// expert's output into the routed one, and the gradients of the norm's output); XLA fuses them. In
// passes over the [tokens, hidden] BF16 state X: fused norm 3 / 4, unfused norm 2 / 3 + add 3 / 3.
// The MLP's norm runs backward after the MLP's backward, whose input gradient it needs.
TEST(Stacks, ResidualAddsAreKernelsOfTheirOwnUnlessFused) {
  const char* ladder = "examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  // The norms' own passes (a norm that quantizes also writes the projections' copies: its own test).
  const Scenario mcore = load(ladder, {"stack.norm_quantize_fusion=false"});
  ASSERT_FALSE(mcore.stack.residual_fusion);
  const Scenario fused = load(ladder, {"stack.residual_fusion=true", "stack.norm_quantize_fusion=false"});
  const ExpertLoad l = expert_load(mcore, mcore.calibration);
  const StepGraph gu = lower_step(mcore, l), gf = lower_step(fused, l);
  const double x = 4096.0 * 7168 * 2.0;  // micro-batch 1 x 4096 tokens, no TP or CP, BF16
  // Stage 0 runs layers 0 (dense), 15, 16, 31, 32, 47, 48 over 64 micro-batches.
  const size_t per_stage = 7 * 64;
  for (const char* name : {"attn.residual", "mlp.residual", "attn.residual.bwd", "mlp.residual.bwd"}) {
    const auto u = named(gu, name);
    ASSERT_EQ(u.size(), per_stage) << name;
    for (const Op* op : u) EXPECT_DOUBLE_EQ(op->hbm_bytes.value(), 3.0 * x) << name;
    EXPECT_TRUE(named(gf, name).empty()) << name;
  }
  for (auto [name, unfused, fusedx] : {std::tuple{"attn.norm", 2.0, 3.0}, std::tuple{"mlp.norm", 2.0, 3.0},
                                       std::tuple{"attn.norm.bwd", 3.0, 4.0}, std::tuple{"mlp.norm.bwd", 3.0, 4.0}}) {
    ASSERT_EQ(named(gu, name).size(), per_stage) << name;
    EXPECT_DOUBLE_EQ(named(gu, name).front()->hbm_bytes.value(), unfused * x) << name;
    EXPECT_DOUBLE_EQ(named(gf, name).front()->hbm_bytes.value(), fusedx * x) << name;
  }
  // The MoE block (DeepSeek-V3: one shared expert, 6 MoE layers of stage 0): the shared expert's
  // output added to the routed output (3 X), and backward the router's and the shared expert's
  // input gradients summed into the permute's (2 kernels of 3 X); eager, outside every graph.
  const auto add = named(gu, "moe.output_add"), sum = named(gu, "moe.grad_sum.bwd");
  ASSERT_EQ(add.size(), 6u * 64);
  ASSERT_EQ(sum.size(), 2u * 6 * 64);
  EXPECT_DOUBLE_EQ(add.front()->hbm_bytes.value(), 3.0 * x);
  EXPECT_DOUBLE_EQ(sum.front()->hbm_bytes.value(), 3.0 * x);
  EXPECT_DOUBLE_EQ(sum.front()->host_ops, 3.0);
  EXPECT_EQ(add.front()->graph, 0u);
  EXPECT_TRUE(named(gf, "moe.output_add").empty());
  EXPECT_TRUE(named(gf, "moe.grad_sum.bwd").empty());
  // CUDA graphs (attn, mlp, moe_router, shared_expert): the attention's add is in the attention's
  // graph, the MLP's in the dense MLP's graph but eager after the routed experts.
  for (const Op* op : named(gu, "attn.residual")) EXPECT_NE(op->graph, 0u);
  for (const Op* op : named(gu, "mlp.residual")) EXPECT_EQ(op->graph != 0u, op->layer == 0) << op->layer;
  // Order within one layer's backward (micro-batch 0 of layer 16): the MoE block's last ops, then
  // the norm and the sum, then the attention's backward, its norm and sum.
  const auto& ops = gu.classes.front().ops;
  auto at = [&](const std::string& name) {
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == name && ops[i].layer == 16 && ops[i].micro_batch == 0) return static_cast<long>(i);
    ADD_FAILURE() << name << " not found";
    return -1L;
  };
  for (auto [before, after] : std::vector<std::pair<const char*, const char*>>{
           {"moe.router.dgrad", "mlp.norm.bwd"},       {"moe.permute.bwd", "mlp.norm.bwd"},
           {"mlp.norm.bwd", "mlp.residual.bwd"},       {"mlp.residual.bwd", "attn.out_proj.dgrad"},
           {"attn.q_proj.dgrad", "attn.norm.bwd"},     {"attn.norm.bwd", "attn.residual.bwd"},
           {"attn.out_proj", "attn.residual"},         {"attn.residual", "mlp.norm"},
           {"moe.unpermute", "moe.output_add"},        {"moe.output_add", "mlp.residual"},
           {"moe.router.dgrad", "moe.grad_sum.bwd"},   {"moe.grad_sum.bwd", "mlp.norm.bwd"}})
    EXPECT_LT(at(before), at(after)) << before << " before " << after;
  // The unfused stack moves more bytes (per MoE layer and micro-batch 5 X forward, 6 X backward here).
  const StepReport ru = predict(mcore, mcore.calibration), rf = predict(fused, fused.calibration);
  EXPECT_GT(ru.step_time.value(), rf.step_time.value());
}

// The head's norm backward: 3 passes (input, output gradient, input gradient), and one pass more
// only where its input has a second reader, an MTP module, whose gradient is summed in: inside the
// norm's kernel when fused, by a kernel of its own when not. An MTP module's two input norms are
// plain norms (2 passes forward, 3 backward each).
TEST(Stacks, TheHeadsNormSumsAGradientOnlyWhereAnMtpModuleReadsItsInput) {
  const char* seed = "examples/deepseek-v3/gb300-optimized.json";
  for (bool fused : {true, false}) {
    for (bool mtp : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "unfused") + (mtp ? ", MTP" : ", no MTP"));
      const Scenario s = load(seed, {fused ? "stack.residual_fusion=true" : "stack.residual_fusion=false",
                                     mtp ? "train_mtp=true" : "train_mtp=false"});
      const StepGraph g = lower_step(s, expert_load(s, s.calibration));
      const auto norm = named(g, "head.norm"), bwd = named(g, "head.norm.bwd"), sum = named(g, "head.grad_sum.bwd");
      ASSERT_FALSE(norm.empty());
      ASSERT_EQ(bwd.size(), norm.size());
      const double x = norm.front()->hbm_bytes.value() / (fused ? 3.0 : 2.0);  // one pass over [tokens, hidden]
      EXPECT_DOUBLE_EQ(bwd.front()->hbm_bytes.value(), (mtp && fused ? 4.0 : 3.0) * x);
      ASSERT_EQ(sum.size(), mtp && !fused ? bwd.size() : 0u);
      if (!sum.empty()) {
        EXPECT_DOUBLE_EQ(sum.front()->hbm_bytes.value(), 3.0 * x);
      }
      if (!mtp) {
        EXPECT_TRUE(named(g, "mtp.norm").empty());
        continue;
      }
      // DeepSeek-V3 has one MTP module: its head's input feeds nothing after it.
      ASSERT_EQ(named(g, "mtp.head.norm.bwd").size(), bwd.size());
      EXPECT_DOUBLE_EQ(named(g, "mtp.head.norm.bwd").front()->hbm_bytes.value(), 3.0 * x);
      EXPECT_TRUE(named(g, "mtp.head.grad_sum.bwd").empty());
      EXPECT_DOUBLE_EQ(named(g, "mtp.norm").front()->hbm_bytes.value(), 2.0 * 2.0 * x);
      EXPECT_DOUBLE_EQ(named(g, "mtp.norm.bwd").front()->hbm_bytes.value(), 2.0 * 3.0 * x);
    }
  }
}


// Transformer Engine's per-step weight cache (Megatron-Core sets is_first_microbatch): a step's first
// micro-batch quantizes each weight (row- and column-wise copies, k x n x 2 x (1 + 1/32) bytes written
// for MXFP8 after a BF16 read), the later ones use the copies, which stay in HBM; weights stored in
// the GEMM's format are never quantized; without the cache every micro-batch quantizes them again.
TEST(Stacks, QuantizedWeightsAreMadeOncePerStepUnderTheCache) {
  const char* ladder = "examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  // The ladder's own weights are stored in MXFP8 ("FP8 primary weights"); held in BF16 here.
  const Scenario cached = load(ladder, {"precision.weights=\"bf16\""}),
                 per_mb = load(ladder, {"precision.weights=\"bf16\"", "stack.weight_quant_cache=false"}),
                 stored = load(ladder);
  ASSERT_TRUE(cached.stack.weight_quant_cache);
  ASSERT_EQ(cached.precision.expert_gemm, Dtype::mxfp8);
  ASSERT_EQ(stored.precision.weights, Dtype::mxfp8);
  const ExpertLoad l = expert_load(cached, cached.calibration);
  // The expert FC1 quantization of one MoE layer, by micro-batch: its bytes less the rows' part.
  auto weight_part = [&](const Scenario& s) {
    std::map<int, double> by_mb;
    const StepGraph g = lower_step(s, l);
    const int layer = named(g, "moe.expert_fc1").front()->layer;
    for (const Op* op : named(g, "moe.expert_fc1.quant"))
      if (op->layer == layer) by_mb[op->micro_batch] = op->hbm_bytes.value();
    return by_mb;
  };
  const double w = 8.0 * 7168 * 4096 * quantize_bytes_per_element(Dtype::mxfp8);  // 8 local experts
  const auto c = weight_part(cached), p = weight_part(per_mb), st = weight_part(stored);
  ASSERT_GT(c.size(), 2u);
  EXPECT_NEAR(c.at(0) - c.at(1), w, 1e-6 * w);
  EXPECT_NEAR(p.at(1) - c.at(1), w, 1e-6 * w);
  EXPECT_NEAR(p.at(0), p.at(1), 1e-6 * w);
  for (const auto& [mb, bytes] : st) EXPECT_NEAR(bytes, c.at(1), 1e-6 * w) << "micro-batch " << mb;
  // Memory: the cached copies of the stage's quantized weights, two MXFP8 layouts per parameter.
  const StepReport rc = predict(cached, cached.calibration), rp = predict(per_mb, per_mb.calibration);
  EXPECT_DOUBLE_EQ(rp.memory.weight_cache.value(), 0.0);
  EXPECT_DOUBLE_EQ(rc.memory.weights.value(), rp.memory.weights.value());
  EXPECT_NEAR(rc.memory.weight_cache.value() / (rp.memory.weights.value() / 2), 2 * bytes_per_element(Dtype::mxfp8), 0.05);
  EXPECT_NEAR((rc.memory.hbm_total - rp.memory.hbm_total).value(), rc.memory.weight_cache.value(), 1.0);
  EXPECT_LT(rc.step_time.value(), rp.step_time.value());
}

// JAX's remat recomputes every residual its policy does not name: the column-wise copy of a
// quantized GEMM's input, which the weight gradient contracts, is one, so the backward quantizes
// the kept or rebuilt input again (the whole quantization, as the forward ran it; rows that arrive
// in MXFP8 from the dispatch only their column-wise copy); a GEMM recomputed in the backward
// quantizes its input once, in its recompute; autograd keeps Transformer Engine's copies, and a
// BF16 GEMM has none.
TEST(Stacks, JaxsRematQuantizesAQuantizedGemmsInputAgainForItsWeightGradient) {
  const Scenario s = load(kOptimized);
  ASSERT_TRUE(s.stack.remat_dispatch);
  ASSERT_EQ(s.precision.dense_gemm, Dtype::fp8);
  ASSERT_EQ(s.precision.expert_gemm, Dtype::mxfp8);
  ASSERT_EQ(s.precision.dispatch, Dtype::mxfp8);
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  // The output projection reads the attention's context, tokens x heads x v_head_dim, kept.
  const double t = 6.0 * 4096, h = 7168, ffn = 2048;
  const auto out = named(g, "attn.out_proj.recompute.quant");
  ASSERT_EQ(out.size(), named(g, "attn.out_proj.wgrad").size());
  EXPECT_DOUBLE_EQ(out.front()->hbm_bytes.value(), t * 128 * 128 * quantize_bytes_per_element(Dtype::fp8));
  EXPECT_EQ(out.front()->phase, Phase::recompute);
  // The experts: FC1's rows arrive in MXFP8 (column-wise copy only), FC2's input is the rebuilt
  // activation (both copies): the same rows.
  const auto fc1 = named(g, "moe.expert_fc1.recompute.quant"), fc2 = named(g, "moe.expert_fc2.recompute.quant");
  ASSERT_EQ(fc1.size(), named(g, "moe.expert_fc1.wgrad").size());
  ASSERT_EQ(fc2.size(), fc1.size());
  const double rows1 = fc1.front()->hbm_bytes.value() / (h * 2.0 * bytes_per_element(Dtype::mxfp8));
  const double rows2 = fc2.front()->hbm_bytes.value() / (ffn * quantize_bytes_per_element(Dtype::mxfp8));
  EXPECT_NEAR(rows1, rows2, 1e-9 * rows1);
  EXPECT_GE(rows1, expert_load(s, s.calibration).max_rows);
  // Recomputed projections (q and kv in this policy) quantize once, in their recompute.
  for (const char* p : {"attn.q_proj", "attn.kv_proj"})
    EXPECT_EQ(named(g, std::string(p) + ".recompute.quant").size(), named(g, std::string(p) + ".recompute").size()) << p;
  // A recomputed FC1 likewise.
  const Scenario rc = load(kOptimized, {"memory.offload=[]", "memory.recompute=[\"q_proj\", \"kv_proj\", \"moe_mlpwi\"]"});
  const StepGraph grc = lower_step(rc, expert_load(rc, rc.calibration));
  ASSERT_FALSE(named(grc, "moe.expert_fc1.recompute").empty());
  EXPECT_EQ(named(grc, "moe.expert_fc1.recompute.quant").size(), named(grc, "moe.expert_fc1.recompute").size());
  // BF16 GEMMs have nothing to quantize; an autograd stack keeps its copies.
  const Scenario bf16 = load(kOptimized, {"precision.dense_gemm=\"bf16\"", "precision.expert_gemm=\"bf16\"",
                                          "precision.dispatch=\"bf16\""});
  const Scenario torch = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json");
  ASSERT_FALSE(torch.stack.remat_dispatch);
  for (const Scenario* x : {&bf16, &torch}) {
    const StepGraph gx = lower_step(*x, expert_load(*x, x->calibration));
    for (const char* n : {"attn.out_proj.recompute.quant", "moe.expert_fc1.recompute.quant", "moe.expert_fc2.recompute.quant",
                          "moe.shared_fc1.recompute.quant"})
      EXPECT_TRUE(named(gx, n).empty()) << n;
  }
}

// MLA's projection ops carry the down projection (hidden -> latent) beside the up projection: in a
// low-precision format the down projection quantizes its hidden-wide input and its weights in the
// forward and the recompute, the latent's gradient and its weights in the data gradient, each
// projection its own; a norm-fused up projection still leaves the down projection's quantization a
// kernel.
TEST(Stacks, MlasDownProjectionsQuantizeTheirHiddenWideInput) {
  const Scenario s = load(kOptimized);  // FP8 current scaling, FSDP: the weights are quantized each time
  ASSERT_EQ(s.precision.dense_gemm, Dtype::fp8);
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  const double q = quantize_bytes_per_element(Dtype::fp8), t = 6.0 * 4096, h = 7168, heads = 128;
  const double ql = 1536, kvl = 512, rope = 64, qk = 192, vd = 128;
  auto first = [&](const char* n) {
    const auto v = named(g, n);
    EXPECT_FALSE(v.empty()) << n;
    return v.empty() ? 0.0 : v.front()->hbm_bytes.value();
  };
  EXPECT_DOUBLE_EQ(first("attn.q_proj.quant"), q * (t * ql + ql * heads * qk) + q * (t * h + h * ql));
  // The K/V up projection's weights: each head's no-rope part of K and its V (the rope part of K
  // comes from the down projection).
  EXPECT_DOUBLE_EQ(first("attn.kv_proj.quant"), q * (t * kvl + kvl * heads * (qk - rope + vd)) + q * (t * h + h * (kvl + rope)));
  EXPECT_DOUBLE_EQ(first("attn.q_proj.recompute.quant"), first("attn.q_proj.quant"));
  // The data gradient after the recompute of the same projection uses the weight copies that
  // recompute made from the backward's gather: the output gradient and the latent's gradient only.
  EXPECT_DOUBLE_EQ(first("attn.q_proj.dgrad.quant"), q * t * heads * qk + q * t * ql);
  // JAX reruns the whole projection: the recompute's FLOPs are the forward's.
  EXPECT_DOUBLE_EQ(named(g, "attn.q_proj.recompute").front()->flops.value(), named(g, "attn.q_proj").front()->flops.value());
  // Megatron's ladder end: MXFP8 weights stored as they are, the latent's quantization in the
  // norm's kernel; the hidden-wide input is the down projection's own.
  const Scenario m = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json");
  ASSERT_TRUE(m.stack.norm_quantize_fusion);
  ASSERT_EQ(m.precision.weights, Dtype::mxfp8);
  const StepGraph gm = lower_step(m, expert_load(m, m.calibration));
  const double qm = quantize_bytes_per_element(Dtype::mxfp8), tm = 4096;
  const auto mq = named(gm, "attn.q_proj.quant");
  ASSERT_FALSE(mq.empty());
  EXPECT_DOUBLE_EQ(mq.front()->hbm_bytes.value(), qm * tm * h);  // the latent's copies are the norm's
  ASSERT_FALSE(named(gm, "attn.kv_proj.quant").empty());
  // Autograd's recompute of these ops is the up projections' alone (Megatron's mla_up_proj): the
  // latent's quantization only (the weights are stored), nothing of the down projection.
  const Scenario up = load("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json");
  ASSERT_FALSE(up.stack.remat_dispatch);
  const StepGraph gu = lower_step(up, expert_load(up, up.calibration));
  const auto uq = named(gu, "attn.q_proj.recompute.quant");
  ASSERT_FALSE(uq.empty());
  EXPECT_DOUBLE_EQ(uq.front()->hbm_bytes.value(), qm * tm * ql);
  // ... and runs the up projections' FLOPs alone: latent x heads x head dims of the op's
  // latent x heads x head dims + hidden x latent.
  const double up_q = ql * heads * qk, up_kv = kvl * heads * (128 + vd);
  EXPECT_NEAR(named(gu, "attn.q_proj.recompute").front()->flops.value(),
              named(gu, "attn.q_proj").front()->flops.value() * up_q / (up_q + h * ql), 1.0);
  EXPECT_NEAR(named(gu, "attn.kv_proj.recompute").front()->flops.value(),
              named(gu, "attn.kv_proj").front()->flops.value() * up_kv / (up_kv + h * (kvl + rope)), 1.0);
  // With the weights gathered by FSDP in BF16, the data gradient after the up projections'
  // recompute still quantizes the down projection's weights (the recompute did not run it), and
  // the latents stay in memory for that recompute.
  const Scenario fs = load("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json",
                           {"gpus=512", "parallelism.fsdp=2", "precision.weights=\"bf16\""});
  const StepGraph gfs = lower_step(fs, expert_load(fs, fs.calibration));
  EXPECT_DOUBLE_EQ(named(gfs, "attn.q_proj.dgrad.quant").front()->hbm_bytes.value(), qm * (tm * heads * qk + tm * ql + h * ql));
  EXPECT_DOUBLE_EQ(recomputed_class_kept_bytes(up, TensorClass::q_proj, 1e12), tm * ql * 2.0);
  EXPECT_DOUBLE_EQ(recomputed_class_kept_bytes(up, TensorClass::kv_proj, 1e12), tm * (kvl + rope) * 2.0);
  EXPECT_DOUBLE_EQ(recomputed_class_kept_bytes(s, TensorClass::q_proj, 1e12), 0.0);  // JAX reruns the whole projection
  // Under tensor parallelism the down projection quantizes the tokens the lowering gathered
  // before the projections (the op's rows), as the up projection does.
  const Scenario tp2 = load("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json", {"parallelism.tp=2", "parallelism.ep=16"});
  const StepGraph g2 = lower_step(tp2, expert_load(tp2, tp2.calibration));
  const Op& q2 = *named(g2, "attn.q_proj").front();
  EXPECT_DOUBLE_EQ(static_cast<double>(q2.m), tm);
  EXPECT_DOUBLE_EQ(named(g2, "attn.q_proj.quant").front()->hbm_bytes.value(), qm * tm * ql + qm * tm * h);
  // ... and its weights and latent gradient are split over TP as its FLOPs are (BF16 weights here).
  const Scenario tp2w = load("examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json",
                             {"parallelism.tp=2", "parallelism.ep=16", "precision.weights=\"bf16\""});
  const StepGraph g2w = lower_step(tp2w, expert_load(tp2w, tp2w.calibration));
  const double n2 = static_cast<double>(named(g2w, "attn.q_proj").front()->n);
  EXPECT_DOUBLE_EQ(named(g2w, "attn.q_proj.quant").front()->hbm_bytes.value(),
                   qm * (tm * ql + ql * n2) + qm * (tm * h + h * ql / 2));
  // JAX keeping the projections: the backward's replay quantizes the latent and the hidden-wide
  // input again for the weight gradients (no weights: the replay is the input's alone).
  const Scenario kept = load(kOptimized, {"memory.recompute=[]"});
  const StepGraph gk = lower_step(kept, expert_load(kept, kept.calibration));
  EXPECT_TRUE(named(gk, "attn.q_proj.recompute").empty());
  const auto rq = named(gk, "attn.q_proj.recompute.quant"), rkv = named(gk, "attn.kv_proj.recompute.quant");
  ASSERT_FALSE(rq.empty());
  ASSERT_FALSE(rkv.empty());
  EXPECT_DOUBLE_EQ(rq.front()->hbm_bytes.value(), q * t * (ql + h));
  EXPECT_DOUBLE_EQ(rkv.front()->hbm_bytes.value(), q * t * (kvl + h));
}

// A recomputed dense MLP: FC1 and the activation rebuild FC2's input in every stack; PyTorch's
// checkpoint of the module (Megatron's "mlp" recompute) also runs FC2 again, JAX's remat does not.
// Not recomputed, JAX's remat still rebuilds the activation's output from FC1's (no checkpoint name),
// which autograd keeps.
TEST(Stacks, ARecomputedDenseMlpRunsWhatItsFrameworkRuns) {
  const Scenario torch = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"),
                 jax = load(kOptimized, {"memory.recompute=[\"mlp\"]"});
  ASSERT_FALSE(torch.stack.remat_dispatch);
  ASSERT_TRUE(jax.stack.remat_dispatch);
  for (const Scenario* s : {&torch, &jax}) {
    const StepGraph g = lower_step(*s, expert_load(*s, s->calibration));
    const size_t fc1 = named(g, "mlp.fc1.recompute").size();
    EXPECT_GT(fc1, 0u);
    EXPECT_EQ(named(g, "mlp.act.recompute").size(), fc1);
    EXPECT_EQ(named(g, "mlp.fc2.recompute").size(), s == &torch ? fc1 : 0u);
    for (const Op* op : named(g, "mlp.fc2.recompute")) EXPECT_DOUBLE_EQ(op->model_flops.value(), 0.0);
  }
  const Scenario jax_kept = load(kOptimized, {"memory.recompute=[]"}),
                 torch_kept = load(kOptimized, {"memory.recompute=[]", "stack.remat_dispatch=false"});
  const StepGraph gj = lower_step(jax_kept, expert_load(jax_kept, jax_kept.calibration)),
                  gt = lower_step(torch_kept, expert_load(torch_kept, torch_kept.calibration));
  EXPECT_EQ(named(gj, "mlp.fc1.recompute").size(), 0u);
  EXPECT_EQ(named(gj, "mlp.act.recompute").size(), 3u);  // DeepSeek-V3's three dense layers
  EXPECT_EQ(named(gt, "mlp.act.recompute").size(), 0u);
}

// The dense MLP's saved tensors: FC1's output, and under autograd FC2's input as its GEMM reads it
// (an FP8 GEMM's quantized copy); never FC2's output, which no backward reads.
TEST(Stacks, ADenseMlpSavesWhatItsBackwardReads) {
  for (const bool autograd : {false, true}) {
    const Scenario s = load(kOptimized, {autograd ? "stack.remat_dispatch=false" : "stack.remat_dispatch=true"});
    ASSERT_EQ(s.precision.dense_gemm, Dtype::fp8);
    const double t = static_cast<double>(s.batch.micro_batch * s.batch.seq_len), ffn = static_cast<double>(s.model.dense_ffn);
    const auto b = saved_tensor_bytes(s, expert_load(s, s.calibration), 0);
    EXPECT_NEAR(b[static_cast<size_t>(TensorClass::mlp)], t * 2 * ffn * 2.0 + (autograd ? t * ffn * 1.0 : 0.0), 1.0) << autograd;
    // Cached in FP8, FC1's output shrinks; FC2's FP8 input is FP8 already.
    const Scenario c = load(kOptimized, {autograd ? "stack.remat_dispatch=false" : "stack.remat_dispatch=true", "memory.fp8_cache=[\"mlp\"]"});
    const auto bc = saved_tensor_bytes(c, expert_load(c, c.calibration), 0);
    EXPECT_NEAR(bc[static_cast<size_t>(TensorClass::mlp)], t * 2 * ffn * 2.0 * (1 + 4.0 / 128) / 2 + (autograd ? t * ffn * 1.0 : 0.0), 1.0)
        << autograd;
  }
}


// DeepSeek-V3's FP8 recipe (one FP32 scale per 1 x 128 tile, arXiv 2412.19437 section 3.3.2) takes
// each tile's amax in the quantization's one pass, where per-tensor current scaling reads the input
// once more; its tensors carry the scales (4 bytes per 128 elements); its GEMMs run at the FP8 rate.
TEST(Stacks, BlockScaledFp8QuantizesInOnePassAndCarriesItsScales) {
  const char* h800 = "examples/deepseek-v3/h800-dualpipe.json";
  const Scenario block = load(h800),
                 tensor = load(h800, {"precision.dense_gemm=\"fp8\"", "precision.expert_gemm=\"fp8\"",
                                      "precision.dispatch=\"fp8\"", "precision.combine_bwd=\"fp8\""});
  ASSERT_EQ(block.precision.expert_gemm, Dtype::fp8_block);
  ASSERT_EQ(block.precision.dispatch, Dtype::fp8_block);
  EXPECT_DOUBLE_EQ(bytes_per_element(Dtype::fp8_block), 1.03125);
  EXPECT_DOUBLE_EQ(quantize_bytes_per_element(Dtype::fp8_block), 2.0 + 2.0 * 1.03125);
  EXPECT_DOUBLE_EQ(quantize_bytes_per_element(Dtype::fp8), 2.0 + 2.0 + 2.0);
  const ExpertLoad l = expert_load(block, block.calibration);
  const StepGraph gb = lower_step(block, l), gt = lower_step(tensor, l);
  auto total = [](const StepGraph& g, const std::string& name, bool message) {
    double x = 0;
    for (const Op* op : named(g, name)) x += (message ? op->bytes : op->hbm_bytes).value();
    return x;
  };
  // A dense projection's input and weights, both quantized here: the ratio of the two recipes.
  ASSERT_GT(total(gt, "attn.out_proj.quant", false), 0.0);
  EXPECT_NEAR(total(gb, "attn.out_proj.quant", false) / total(gt, "attn.out_proj.quant", false), 4.0625 / 6.0, 1e-12);
  // The dispatched rows and the combine's gradients carry their scales.
  ASSERT_GT(total(gt, "moe.dispatch", true), 0.0);
  EXPECT_NEAR(total(gb, "moe.dispatch", true) / total(gt, "moe.dispatch", true), 1.03125, 1e-12);
  EXPECT_NEAR(total(gb, "moe.combine.bwd", true) / total(gt, "moe.combine.bwd", true), 1.03125, 1e-12);
  // The FP8 tensor-core peak at the block-scaled fraction (Hopper's, fitted on DeepGEMM's records),
  // and nothing reported as priced at another format.
  const Topology t = Topology::build(block.system, block.gpus);
  const Pricer pb(block, t, block.calibration), pt(tensor, t, tensor.calibration);
  const Op& fc1b = *named(gb, "moe.expert_fc1").front();
  const Op& fc1t = *named(gt, "moe.expert_fc1").front();
  EXPECT_EQ(fc1b.dtype, Dtype::fp8_block);
  EXPECT_EQ(rate_param(fc1b, block.system.gpu()), Param::gemm_fraction_mxfp8);
  EXPECT_EQ(rate_param(fc1t, tensor.system.gpu()), Param::gemm_fraction_fp8);
  EXPECT_DOUBLE_EQ(gemm_peak(Dtype::fp8_block, block.system.gpu()).value(), gemm_peak(Dtype::fp8, block.system.gpu()).value());
  const double fb = block.calibration[Param::gemm_fraction_mxfp8], ft = tensor.calibration[Param::gemm_fraction_fp8];
  EXPECT_NEAR(pt.time(fc1t).value() / pb.time(fc1b).value(), fb / ft, 0.002);
  EXPECT_GT(std::abs(fb / ft - 1), 0.004);  // the two fractions differ enough to tell them apart
  EXPECT_TRUE(pb.notes().empty()) << pb.notes().front();
}

// FlashAttention's backward runs five matmuls per score (QK^T again, dQ, dK over the query/key head
// dim; dV, dP over the value head dim) against the forward's two: 2.5 x the forward's FLOPs at equal
// head dims, (3 x 192 + 2 x 128) / 320 = 2.6 for MLA. Counted (model FLOPs) it stays 2 x.
TEST(Stacks, AttentionsBackwardRunsItsMatmulsHeadDimByHeadDim) {
  EXPECT_DOUBLE_EQ(attention_bwd_work(128, 128), 2.5);
  EXPECT_DOUBLE_EQ(attention_bwd_work(192, 128), 2.6);
  const Scenario mla = load(kOptimized), gqa = load("examples/compare/qwen3-235b-gb200-nvl72.json");
  for (const Scenario* s : {&mla, &gqa}) {
    const StepGraph g = lower_step(*s, expert_load(*s, s->calibration));
    const Op& fwd = *named(g, "attn.core").front();
    const Op& bwd = *named(g, "attn.core.bwd").front();
    EXPECT_NEAR(bwd.flops.value() / fwd.flops.value(), s == &mla ? 2.6 : 2.5, 1e-12) << s->name;
    EXPECT_NEAR(bwd.model_flops.value() / fwd.model_flops.value(), 2.0, 1e-12) << s->name;
    // Its softmax share shrinks by the same ratio: the head-dim term's half is attention_hd_half
    // over the op's own work per score (2.6 for MLA), not over 2.5 whatever the head dims.
    const Topology t = Topology::build(s->system, s->gpus);
    const Pricer pr(*s, t, s->calibration);
    const double work = s == &mla ? 2.6 : 2.5;
    const AttentionShape shape{static_cast<double>(bwd.k), static_cast<double>(bwd.n), true, bwd.mask_edges, work};
    EXPECT_NEAR(pr.time(bwd).value(),
                attention_seconds(shape, bwd.flops.value(), bwd.hbm_bytes.value(), s->system.gpu(), s->calibration, bwd.launches).value(),
                1e-12) << s->name;
  }
  // The closed form at MLA's 2.6: fraction x [hd / (hd + hd_half / 2.6)] / [128 / (128 + hd_half / 2.6)].
  Calibration c;
  c.set(Param::attention_bwd_fraction, 0.5);
  c.set(Param::attention_kv_half, 0);
  c.set(Param::attention_hd_half, 52);
  EXPECT_NEAR(attention_efficiency(AttentionShape{1000, 100, true, 0, 2.6}, c), 0.5 * 100 / 120 * 148 / 128, 1e-12);
}

// Megatron's AlltoAll dispatcher gathers every EP rank's tokens per expert before it copies the
// split sizes to the host (MoEAlltoAllTokenDispatcher.preprocess): an all-gather of one int64 per
// expert from each rank, which the host wait waits for. DeepEP counts inside its own kernels.
TEST(Stacks, MegatronsAllToAllDispatcherGathersTheCountsBeforeItsHostWait) {
  const Scenario a2a = load("examples/deepseek-v3/gb200-mcore-ladder-03-router-fusion.json"),
                 deepep = load("examples/deepseek-v3/gb200-mcore-ladder-04-deepep.json");
  const StepGraph g = lower_step(a2a, expert_load(a2a, a2a.calibration));
  const auto counts = named(g, "moe.dispatch.counts");
  const auto waits = named(g, "moe.dispatch.host_sync");
  ASSERT_FALSE(counts.empty());
  ASSERT_EQ(counts.size(), waits.size());
  const Op& c = *counts.front();
  EXPECT_EQ(c.collective, Collective::all_gather);
  EXPECT_EQ(c.group, Group::ep);
  EXPECT_DOUBLE_EQ(c.bytes.value(), 32.0 * 256 * 8);
  const int32_t ci = static_cast<int32_t>(&c - g.classes.front().ops.data());
  EXPECT_NE(std::find(waits.front()->deps.begin(), waits.front()->deps.end(), ci), waits.front()->deps.end());
  EXPECT_TRUE(named(lower_step(deepep, expert_load(deepep, deepep.calibration)), "moe.dispatch.counts").empty());
}

// Transformer Engine's multi-stream grouped GEMM takes its row counts as a host list (Megatron's
// TEGroupedMLP.forward: tokens_per_expert.tolist()): with no dispatcher wait before it (HybridEP)
// the forward waits on the host after the exchange and its permute, before FC1; the backward keeps
// the list. With the dispatcher's own wait (DeepEP's normal kernels, the AlltoAll dispatcher), or a
// pointer-array kernel that reads the counts on the device, no second wait.
TEST(Stacks, AMultiStreamGroupedGemmReadsItsCountsOnTheHostAfterTheExchange) {
  const std::string f = "examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  const Scenario ms = load(f), ptr = load(f, {"stack.grouped_kernel=\"ptr_array\""}),
                 synced = load(f, {"stack.dispatch_host_syncs=1"});
  ASSERT_EQ(ms.stack.grouped_kernel, GroupedKernel::multi_stream);
  ASSERT_EQ(ms.stack.dispatch_host_syncs, 0);
  const ExpertLoad l = expert_load(ms, ms.calibration);
  const StepGraph g = lower_step(ms, l);
  const std::vector<Op>& ops = g.classes.front().ops;
  const auto syncs = named(g, "moe.count_sync");
  const auto fc1 = named(g, "moe.expert_fc1");
  ASSERT_FALSE(fc1.empty());
  EXPECT_EQ(syncs.size(), fc1.size());  // one per MoE layer's forward (and micro-batch)
  for (const Op* s : syncs) EXPECT_EQ(s->phase, Phase::forward);
  const Op& first = *syncs.front();
  const auto at = [&](const Op* o) { return static_cast<int32_t>(o - ops.data()); };
  const Op& permute = *named(g, "moe.permute").front();  // the flex dispatcher's, after the exchange
  EXPECT_NE(std::find(first.deps.begin(), first.deps.end(), at(&permute)), first.deps.end());
  // What the FC1 waits for (its quantization first) waits for the host's wait; the FC1 comes after it.
  bool waits = false;
  for (size_t i = static_cast<size_t>(at(&first)) + 1; i <= static_cast<size_t>(at(fc1.front())) && !waits; ++i)
    waits = std::find(ops[i].deps.begin(), ops[i].deps.end(), at(&first)) != ops[i].deps.end();
  EXPECT_TRUE(waits);
  EXPECT_LT(at(&first), at(fc1.front()));
  EXPECT_TRUE(named(lower_step(ptr, l), "moe.count_sync").empty());
  EXPECT_TRUE(named(lower_step(synced, l), "moe.count_sync").empty());
  EXPECT_EQ(named(lower_step(synced, l), "moe.dispatch.host_sync").size(), fc1.size());
  // The all-gather dispatcher never waits for split sizes, whatever dispatch_host_syncs says: the
  // GEMM's own wait stays.
  EXPECT_EQ(named(lower_step(load(f, {"stack.dispatch_host_syncs=1", "stack.dispatcher=\"allgather\""}), l), "moe.count_sync").size(),
            fc1.size());
  // Its groups' row counts are read each step: a CUDA graph over the MoE block leaves it eager.
  const StepGraph gg = lower_step(load(f, {"stack.cuda_graphs=[\"moe\"]"}), l);
  EXPECT_EQ(named(gg, "moe.expert_fc1").front()->graph, 0u);
  EXPECT_EQ(named(gg, "moe.count_sync").front()->graph, 0u);  // a host wait is never in a graph
  EXPECT_NE(named(gg, "moe.act").front()->graph, 0u);
  EXPECT_NE(named(lower_step(load(f, {"stack.cuda_graphs=[\"moe\"]", "stack.grouped_kernel=\"ptr_array\""}), l),
                  "moe.expert_fc1").front()->graph, 0u);
}

// Megatron's flex dispatcher (DeepEP, HybridEP): the kernel reads each token once; the received
// rows, one per token and rank hit, are permuted into one row per local expert after the exchange
// and summed back before the combine (get_permuted_hidden_states_by_experts /
// get_restored_hidden_states_by_experts), and the block's output is the combine's. Off, the
// permute before the exchange writes one row per destination and the un-permute after the combine
// sums them.
TEST(Stacks, TheFlexDispatcherPermutesTheReceivedRowsAfterTheExchange) {
  const Scenario flex = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"),
                 before = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json", {"stack.permute_after_dispatch=false"});
  ASSERT_TRUE(flex.stack.permute_after_dispatch);
  const ExpertLoad l = expert_load(flex, flex.calibration);
  const StepGraph gf = lower_step(flex, l), gb = lower_step(before, l);
  const std::vector<Op>& ops = gf.classes.front().ops;
  auto index = [&](const Op* o) { return static_cast<int32_t>(o - ops.data()); };
  auto has_dep = [](const Op& o, int32_t d) { return std::find(o.deps.begin(), o.deps.end(), d) != o.deps.end(); };
  const Op& dispatch = *named(gf, "moe.dispatch").front();
  const Op& permute = *named(gf, "moe.permute").front();
  const Op& unpermute = *named(gf, "moe.unpermute").front();
  const Op& combine = *named(gf, "moe.combine").front();
  EXPECT_LT(index(&dispatch), index(&permute));
  EXPECT_TRUE(has_dep(permute, index(&dispatch)));
  EXPECT_LT(index(&unpermute), index(&combine));
  EXPECT_TRUE(has_dep(combine, index(&unpermute)));
  // Bytes: the received rows (one per token and rank hit, the busiest rank's) and the expert rows.
  const double h = 7168, received = 4096.0 * l.distinct_ranks * l.max_tokens / l.mean_tokens, rows = l.max_rows;
  const double bd = bytes_per_element(flex.precision.dispatch);
  EXPECT_NEAR(permute.hbm_bytes.value(), (received + rows) * h * bd + rows * 4.0, 1e-6 * permute.hbm_bytes.value());
  EXPECT_DOUBLE_EQ(permute.rows, rows);
  // The next compute op after the combine waits for it: the combined rows are the block's output.
  bool waited = false;
  for (size_t i = static_cast<size_t>(index(&combine)) + 1; i < ops.size() && !waited; ++i)
    if (ops[i].stream == Stream::compute) waited = has_dep(ops[i], index(&combine));
  EXPECT_TRUE(waited);
  // Before the field: a permute ahead of the exchange, an un-permute after the combine.
  const std::vector<Op>& ob = gb.classes.front().ops;
  const Op* bp = named(gb, "moe.permute").front();
  const Op* bdisp = named(gb, "moe.dispatch").front();
  const Op* bun = named(gb, "moe.unpermute").front();
  const Op* bcomb = named(gb, "moe.combine").front();
  EXPECT_LT(bp - ob.data(), bdisp - ob.data());
  EXPECT_LT(bcomb - ob.data(), bun - ob.data());
  // Backward: with the shared expert overlapped (a2a_with_shared_expert) the exchange of the
  // output gradients is the MoE block's first op; it waits for what the layer waits for, the
  // gradient received from the next stage included (it once started before it arrived).
  const Scenario overlapped =
      load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json", {"stack.overlap.a2a_with_shared_expert=true"});
  const StepGraph go = lower_step(overlapped, l);
  int checked = 0;
  for (const RankClass& rc : go.classes) {
    const std::vector<Op>& os = rc.ops;
    for (size_t i = 0; i < os.size(); ++i) {
      if (os[i].name != "pp.recv.bwd") continue;
      // The first op after the receive that is compute or the exchange carries the wait.
      for (size_t k = i + 1; k < os.size(); ++k) {
        if (os[k].stream != Stream::compute && os[k].name != "moe.combine.bwd") continue;
        if (os[k].name == "moe.combine.bwd") {
          EXPECT_TRUE(has_dep(os[k], static_cast<int32_t>(i))) << "moe.combine.bwd at " << k << " does not wait for pp.recv.bwd at " << i;
          ++checked;
        }
        break;
      }
    }
  }
  EXPECT_GT(checked, 0);
  // The flex layout moves more bytes (received and expert rows, where the permute ahead read each
  // token once), so the step is slower, not faster.
  EXPECT_GT(predict(flex, flex.calibration).step_time.value(), predict(before, before.calibration).step_time.value());
}

// Ladder step 13 (cuDNN 9.14's fused norm + quantize): with the weights stored in the GEMM's format
// nothing of a GEMM's input is left for a quantization kernel after a normalization; the norm's
// kernel writes the row- and column-wise copies. A dense model's fused QKV projection keeps no
// quantization kernel at all; MLA's projection ops keep one for their down projections, which
// quantize the layer's hidden-wide normalized input themselves (TELinear modules of their own).
TEST(Stacks, ANormThatQuantizesLeavesNoQuantizationKernelBehindIt) {
  const Scenario fused = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json"),
                 apart = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json", {"stack.norm_quantize_fusion=false"});
  ASSERT_TRUE(fused.stack.norm_quantize_fusion);
  ASSERT_EQ(fused.precision.weights, fused.precision.dense_gemm);  // stored: no weight quantization
  const ExpertLoad l = expert_load(fused, fused.calibration);
  const StepGraph gf = lower_step(fused, l), ga = lower_step(apart, l);
  for (const char* q : {"attn.q_proj.quant", "attn.kv_proj.quant"}) {
    ASSERT_FALSE(named(gf, q).empty()) << q;
    ASSERT_FALSE(named(ga, q).empty()) << q;
    // Fused, only the down projection's hidden-wide input: 4096 x 7168 at the quantization's bytes.
    EXPECT_NEAR(named(gf, q).front()->hbm_bytes.value(), 4096.0 * 7168 * quantize_bytes_per_element(Dtype::mxfp8), 1.0) << q;
    EXPECT_LT(named(gf, q).front()->hbm_bytes.value(), named(ga, q).front()->hbm_bytes.value()) << q;
  }
  // A model without MLA (a fused QKV projection after the norm): no quantization kernel left.
  const Scenario gqa = load("examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json",
                            {"model=\"../models/qwen3-30b-a3b/config.json\"", "parallelism.layout=null"});
  const StepGraph gg = lower_step(gqa, expert_load(gqa, gqa.calibration));
  ASSERT_FALSE(named(gg, "attn.qkv_proj").empty());  // megatron-core's fused_qkv
  EXPECT_TRUE(named(gg, "attn.qkv_proj.quant").empty());
  // A MoE layer's norm is a module of its own (pre_mlp_layernorm = TENorm): the shared expert's FC1
  // still quantizes its input, reading it.
  ASSERT_FALSE(named(gf, "moe.shared_fc1.quant").empty());
  EXPECT_DOUBLE_EQ(named(gf, "moe.shared_fc1.quant").front()->hbm_bytes.value(),
                   named(ga, "moe.shared_fc1.quant").front()->hbm_bytes.value());
  // The copies' writes moved into the norm: q - 2 bytes per element of the projections' inputs
  // (MXFP8: 2.0625); MLA's projections here read the latents (q_lora 1,536 and kv_lora 512 wide),
  // the up-projections' inputs whose norms Transformer Engine fuses.
  const Op& nf = *named(gf, "attn.norm").front();
  const Op& na = *named(ga, "attn.norm").front();
  const double t = 4096, q = quantize_bytes_per_element(Dtype::mxfp8) - 2.0;
  EXPECT_GT(nf.hbm_bytes.value(), na.hbm_bytes.value());
  const double k = static_cast<double>(named(ga, "attn.q_proj").front()->k + named(ga, "attn.kv_proj").front()->k);
  EXPECT_NEAR(nf.hbm_bytes.value() - na.hbm_bytes.value(), t * q * k, 1.0);
  EXPECT_EQ(nf.launches, na.launches);
}

// Megatron projects grouped-query attention's Q, K and V with one GEMM (linear_qkv): one op of the
// two ops' FLOPs at the fused width, one quantization of its input, the same in the recompute and
// the backward. MLA keeps its projections apart.
TEST(Stacks, AFusedQkvProjectionIsOneGemmWithOneQuantizedInput) {
  const char* ladder = "examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  const std::vector<std::string> gqa = {"model=\"../models/qwen3-30b-a3b/config.json\"", "parallelism.layout=null",
                                        "precision.weights=\"bf16\"", "stack.norm_quantize_fusion=false", "memory.recompute=[\"q_proj\"]"};
  std::vector<std::string> apart_sets = gqa;
  apart_sets.push_back("stack.fused_qkv=false");
  const Scenario fused = load(ladder, gqa), apart = load(ladder, apart_sets);
  ASSERT_TRUE(fused.stack.fused_qkv);
  const ExpertLoad l = expert_load(fused, fused.calibration);
  const StepGraph gf = lower_step(fused, l), ga = lower_step(apart, l);
  for (const char* n : {"attn.q_proj", "attn.kv_proj", "attn.q_proj.dgrad", "attn.kv_proj.wgrad", "attn.q_proj.recompute"}) {
    EXPECT_TRUE(named(gf, n).empty()) << n;
    EXPECT_FALSE(named(ga, n).empty()) << n;
  }
  EXPECT_TRUE(named(ga, "attn.kv_proj.recompute").empty());  // apart, only the Q projection is recomputed
  for (const std::string suffix : {"", ".recompute", ".dgrad", ".wgrad"}) {
    const auto qkv = named(gf, "attn.qkv_proj" + suffix), q = named(ga, "attn.q_proj" + suffix);
    // Fused, recomputing Q reruns the whole projection: K and V too.
    const auto kv = named(ga, "attn.kv_proj" + (suffix == ".recompute" ? std::string() : suffix));
    ASSERT_FALSE(qkv.empty()) << suffix;
    ASSERT_EQ(qkv.size(), q.size()) << suffix;
    ASSERT_FALSE(kv.empty()) << suffix;
    EXPECT_DOUBLE_EQ(qkv.front()->flops.value(), q.front()->flops.value() + kv.front()->flops.value()) << suffix;
    const int64_t width = named(ga, "attn.q_proj").front()->n + named(ga, "attn.kv_proj").front()->n;  // 32 x 128 + 2 x 4 x 128
    if (suffix == ".dgrad") {
      EXPECT_EQ(qkv.front()->k, width);
      EXPECT_EQ(qkv.front()->n, q.front()->n) << "dX = dQKV W^T is hidden wide";
    } else if (suffix == ".wgrad") {
      EXPECT_EQ(qkv.front()->n, width);
    } else {
      EXPECT_EQ(qkv.front()->n, width) << suffix;
      EXPECT_EQ(qkv.front()->k, q.front()->k) << suffix;
      EXPECT_EQ(qkv.front()->m, q.front()->m) << suffix;
    }
  }
  EXPECT_EQ(named(gf, "attn.qkv_proj").front()->n, 32 * 128 + 2 * 4 * 128);
  // One quantization: the input (tokens x hidden) once, the fused weight whole.
  const Op& fq = *named(gf, "attn.qkv_proj.quant").front();
  const Op& qq = *named(ga, "attn.q_proj.quant").front();
  const Op& kq = *named(ga, "attn.kv_proj.quant").front();
  const Op& q0 = *named(ga, "attn.q_proj").front();
  EXPECT_NEAR(fq.hbm_bytes.value(),
              qq.hbm_bytes.value() + kq.hbm_bytes.value() - static_cast<double>(q0.m * q0.k) * quantize_bytes_per_element(Dtype::mxfp8), 1.0);
  // The rotation recomputed with the projection: Q's and K's, as the forward's.
  EXPECT_DOUBLE_EQ(named(gf, "attn.rope.recompute").front()->hbm_bytes.value(), named(gf, "attn.rope").front()->hbm_bytes.value());
  EXPECT_LT(named(ga, "attn.rope.recompute").front()->hbm_bytes.value(), named(ga, "attn.rope").front()->hbm_bytes.value());
  // Priced as one GEMM the step is no slower; the model's FLOPs are the same.
  const StepReport pf = predict(fused, fused.calibration), pa = predict(apart, apart.calibration);
  EXPECT_LT(pf.step_time.value(), pa.step_time.value());
  EXPECT_DOUBLE_EQ(pf.model_flops_per_token, pa.model_flops_per_token);
  // The memory report agrees: naming q_proj recomputes, and keeps, neither Q nor K/V, as naming both.
  std::vector<std::string> both_sets = gqa;
  both_sets.push_back("memory.recompute=[\"q_proj\", \"kv_proj\"]");
  const Scenario both = load(ladder, both_sets);
  const MemoryReport mf = memory_report(fused, l, fused.calibration), mb = memory_report(both, l, both.calibration),
                     ma = memory_report(apart, l, apart.calibration);
  EXPECT_DOUBLE_EQ(mf.activations.value(), mb.activations.value());
  EXPECT_GT(ma.activations.value(), mf.activations.value()) << "apart, K/V stays saved";
  // Offloading the K/V class moves nothing when the fused projection rebuilds it (a GQA class keeps
  // nothing when recomputed); apart, K/V leaves for the host after each layer.
  std::vector<std::string> fused_off = gqa, apart_off = apart_sets;
  fused_off.push_back("memory.offload=[\"kv_proj\"]");
  apart_off.push_back("memory.offload=[\"kv_proj\"]");
  const Scenario fo = load(ladder, fused_off), ao = load(ladder, apart_off);
  const StepGraph gfo = lower_step(fo, l), gao = lower_step(ao, l);
  EXPECT_TRUE(named(gfo, "offload.d2h").empty());
  EXPECT_FALSE(named(gao, "offload.d2h").empty());
  // Under tensor parallelism (Megatron's TP 2 on Qwen3-235B-A22B: 64 Q heads, 4 K/V groups): each
  // rank's share, 32 Q heads and 2 K/V groups of 128.
  const Scenario tp2 = io::load_scenario(source("examples/layouts/qwen3-235b-h100-megatron-folded.json"));
  ASSERT_EQ(tp2.parallelism.tp, 2);
  ASSERT_TRUE(tp2.stack.fused_qkv);
  const StepGraph g2 = lower_step(tp2, expert_load(tp2, tp2.calibration));
  const Op* p2 = nullptr;
  for (const Op& op : g2.classes.front().ops)
    if (op.name == "attn.qkv_proj") p2 = &op;
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(p2->n, 32 * 128 + 2 * 2 * 128);
  EXPECT_EQ(p2->k, 4096);
  EXPECT_NEAR(p2->flops.value(), 2.0 * static_cast<double>(p2->m) * static_cast<double>(p2->n) * static_cast<double>(p2->k),
              1e-9 * p2->flops.value());
  // MLA (DeepSeek-V3 under the same stack): its projections stay apart.
  const StepGraph mla = lower_step(load(ladder), l);
  EXPECT_FALSE(named(mla, "attn.q_proj").empty());
  EXPECT_FALSE(named(mla, "attn.kv_proj").empty());
  EXPECT_TRUE(named(mla, "attn.qkv_proj").empty());
}

// ragged_dot's default lowering materializes its operand expanded over the local experts and its
// output per expert (fidelity: "group-count times the FLOPs, and the expanded operand in memory"):
// DeepSeek-V3 at EP 8 on the baseline's ragged buffers does not fit a B300.
TEST(Stacks, AMaskedDenseDotHoldsItsExpandedOperandInMemory) {
  const Scenario grouped = load(kBaseline), masked = load(kBaseline, {"stack.expert_gemm=\"masked_dense\""});
  const ExpertLoad l = expert_load(masked, masked.calibration);
  const MemoryReport mg = memory_report(grouped, l, grouped.calibration), mm = memory_report(masked, l, masked.calibration);
  const double want = 256.0 / 8 * ragged_buffer_rows(masked, l) * (7168 + 2 * 2048) * 2.0;
  EXPECT_NEAR(mm.transient.value(), want, 1e-9 * want);
  EXPECT_LT(mg.transient.value(), want / 10);
  EXPECT_TRUE(mg.fits_hbm);
  EXPECT_FALSE(mm.fits_hbm);
}

// A CUDA graph cannot capture a host wait: the "moe" scope with a dispatcher that copies its split
// sizes to the host, or with the per-expert loop's count copy, is refused with the file, the path
// and what to change; without the wait it loads.
TEST(Stacks, AGraphOverTheMoeBlockCannotHoldAHostWait) {
  const char* ladder = "examples/deepseek-v3/gb200-mcore-ladder-05-no-upproj-recompute.json";
  ASSERT_GT(load(ladder).stack.dispatch_host_syncs, 0);
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"stack.cuda_graphs=[\"moe\"]"},
        std::vector<std::string>{"stack.cuda_graphs=[\"moe\"]", "stack.dispatch_host_syncs=0", "stack.expert_gemm=\"per_expert_loop\""}}) {
    try {
      load(ladder, sets);
      FAIL() << "a graph over a host wait loaded: " << sets.back();
    } catch (const io::SpecError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("gb200-mcore-ladder-05"), std::string::npos) << w;
      EXPECT_NE(w.find("/stack/cuda_graphs"), std::string::npos) << w;
      EXPECT_NE(w.find(sets.size() == 1 ? "dispatch_host_syncs is 1" : "per_expert_loop"), std::string::npos) << w;
    }
  }
  const Scenario ok = load(ladder, {"stack.cuda_graphs=[\"moe\"]", "stack.dispatch_host_syncs=0"});
  EXPECT_TRUE(ok.stack.captured(GraphScope::moe));
}

}  // namespace
}  // namespace moeperf
