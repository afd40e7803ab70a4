// Loading models (moeperf JSON and Hugging Face config.json), scenarios and --set overrides.
#include "model/io/load.h"

#include <gtest/gtest.h>

#include "model/io/errors.h"
#include "model/io/scenario_schema.h"
#include "model/study/study.h"
#include <fstream>
#include <sstream>
#include "temp_dir.h"

namespace moeperf::io {
namespace {

using moeperf::testing::source;
using moeperf::testing::TempDir;

TEST(LoadModel, HuggingFaceDeepSeekV3MatchesTheMoeperfFile) {
  const ModelSpec hf = load_model(source("examples/models/deepseek-v3/config.json"));
  const ModelSpec own = load_model(source("examples/models/deepseek-v3.moeperf.json"));
  for (const ModelSpec* m : {&hf, &own}) {
    EXPECT_EQ(m->hidden, 7168);
    EXPECT_EQ(m->layers, 61);
    EXPECT_EQ(m->dense_layers, 3);
    EXPECT_EQ(m->dense_ffn, 18432);
    EXPECT_EQ(m->vocab, 129280);
    EXPECT_EQ(m->experts, 256);
    EXPECT_EQ(m->top_k, 8);
    EXPECT_EQ(m->shared_experts, 1);
    EXPECT_EQ(m->expert_ffn, 2048);
    EXPECT_EQ(m->attention.kind, AttentionKind::mla);
    EXPECT_EQ(m->attention.heads, 128);
    EXPECT_EQ(m->attention.q_lora_rank, 1536);
    EXPECT_EQ(m->attention.kv_lora_rank, 512);
    EXPECT_EQ(m->attention.qk_nope_head_dim, 128);
    EXPECT_EQ(m->attention.qk_rope_head_dim, 64);
    EXPECT_EQ(m->attention.v_head_dim, 128);
    EXPECT_EQ(m->router.score, RouterScore::sigmoid);
    EXPECT_TRUE(m->router.bias);
    EXPECT_EQ(m->router.groups, 8);
    EXPECT_EQ(m->router.topk_groups, 4);
    EXPECT_EQ(m->mtp_layers, 1);
    EXPECT_EQ(m->moe_layers(), 58);
  }
}

TEST(LoadModel, GqaModelsFromHuggingFace) {
  const ModelSpec q = load_model(source("examples/models/qwen3-235b-a22b/config.json"));
  EXPECT_EQ(q.attention.kind, AttentionKind::gqa);
  EXPECT_EQ(q.layers, 94);
  EXPECT_EQ(q.dense_layers, 0);
  EXPECT_EQ(q.attention.heads, 64);
  EXPECT_EQ(q.attention.kv_heads, 4);
  EXPECT_EQ(q.attention.head_dim, 128);
  EXPECT_TRUE(q.attention.qk_norm);
  EXPECT_EQ(q.experts, 128);
  EXPECT_EQ(q.expert_ffn, 1536);

  const ModelSpec mx = load_model(source("examples/models/mixtral-8x7b/config.json"));
  EXPECT_EQ(mx.experts, 8);
  EXPECT_EQ(mx.top_k, 2);
  EXPECT_EQ(mx.expert_ffn, 14336);
  EXPECT_EQ(mx.attention.head_dim, 4096 / 32);

  const ModelSpec g = load_model(source("examples/models/gpt-oss-120b/config.json"));
  EXPECT_EQ(g.top_k, 4);
  EXPECT_EQ(g.attention.head_dim, 64);
  EXPECT_EQ(g.attention.sliding_window, 128);
  ASSERT_EQ(g.attention.sliding_layers.size(), 36u);
  int sliding = 0;
  for (bool b : g.attention.sliding_layers) sliding += b;
  EXPECT_EQ(sliding, 18);  // alternate layers
  EXPECT_TRUE(g.attention.sinks);

  const ModelSpec k = load_model(source("examples/models/kimi-k2/config.json"));
  EXPECT_EQ(k.attention.kind, AttentionKind::mla);
  EXPECT_EQ(k.attention.heads, 64);
  EXPECT_EQ(k.experts, 384);
  EXPECT_EQ(k.dense_layers, 1);
}

TEST(LoadModel, DenseHuggingFaceModelHasNoExperts) {
  TempDir d;
  const auto f = d.write("config.json", R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000})");
  const ModelSpec m = load_model(f);
  EXPECT_FALSE(m.is_moe());
  EXPECT_EQ(m.dense_layers, 32);
  EXPECT_EQ(m.dense_ffn, 11008);
}

TEST(LoadScenario, PublishedReproductionConfig) {
  const Scenario s = load_scenario(source("examples/deepseek-v3/gb300-optimized.json"));
  EXPECT_EQ(s.gpus, 128);
  EXPECT_EQ(s.parallelism.ep, 8);
  EXPECT_EQ(s.parallelism.fsdp, 16);
  EXPECT_EQ(s.micro_batches(), 768 / (6 * 128));
  EXPECT_EQ(s.precision.expert_gemm, Dtype::mxfp8);
  EXPECT_EQ(s.stack.dispatcher, Dispatcher::fused_dedup);
  EXPECT_DOUBLE_EQ(s.memory.usable_hbm_fraction, 0.88);
  ASSERT_TRUE(s.memory.host_offload_limit.has_value());
  EXPECT_DOUBLE_EQ(s.memory.host_offload_limit->value(), 180e9);
  EXPECT_EQ(s.system.gpu().name.find("B300") != std::string::npos, true);
}

TEST(LoadScenario, SetOverridesAreApplied) {
  const Scenario s = load_scenario(source("examples/deepseek-v3/gb300-optimized.json"),
                                   {parse_override("parallelism.ep=16"), parse_override("parallelism.fsdp=8"),
                                    parse_override("stack.dispatcher=alltoall"), parse_override("stack.grouped_gemm=false")});
  EXPECT_EQ(s.parallelism.ep, 16);
  EXPECT_EQ(s.parallelism.fsdp, 8);
  EXPECT_EQ(s.stack.dispatcher, Dispatcher::alltoall);
  EXPECT_FALSE(s.stack.grouped_gemm());
}

TEST(LoadScenario, SetOverrideErrorsSayTheyCameFromTheCommandLine) {
  const std::string f = source("examples/deepseek-v3/gb300-optimized.json");
  try {
    load_scenario(f, {parse_override("parallelism.ep=abc")});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.json_path(), "/parallelism/ep");
    EXPECT_EQ(e.detail(), "expected a positive integer, got \"abc\" (set by --set parallelism.ep=abc)");
  }
  try {
    load_scenario(f, {parse_override("parallelism.epp=2")});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.json_path(), "/parallelism/epp");
    EXPECT_EQ(e.detail(), "unknown key \"epp\" (did you mean \"pp\", \"vpp\", \"ep\" or \"etp\"?) (set by --set parallelism.epp=2)");
  }
  EXPECT_THROW(parse_override("parallelism.ep"), SpecError);
}

// The scenario reference (docs/scenario.md) is what `moeperf schema` prints from the loader's own
// field list; regenerate it with: build/bin/moeperf schema > docs/scenario.md
TEST(ScenarioSchema, DocsScenarioMdIsCurrent) {
  std::ifstream in(source("docs/scenario.md"));
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), scenario_reference_markdown()) << "regenerate: build/bin/moeperf schema > docs/scenario.md";
}

// Every default the reference states as a value is the loader's: a scenario that spells out every
// such default loads to the same values as one that leaves them all out.
TEST(ScenarioSchema, StatedDefaultsAreTheLoadersDefaults) {
  TempDir d;
  const std::string minimal = d.write("minimal.json", R"({"model": ")" + source("examples/models/deepseek-v3/config.json") +
                                                          R"(", "system": ")" + source("topologies/gb300-nvl72.json") +
                                                          R"(", "gpus": 1, "parallelism": {},
      "batch": {"seq_len": 4096, "micro_batch": 1, "global_batch": 1}})");
  std::vector<Override> all;
  for (const FieldDoc& f : scenario_fields())
    if (!f.default_json.empty()) all.push_back({std::string(f.path), std::string(f.default_json)});
  EXPECT_GE(all.size(), 35u);
  const Scenario a = load_scenario(minimal), b = load_scenario(minimal, all);
  EXPECT_TRUE(differing_fields(a, b).empty()) << differing_fields(a, b).front();
  // And a value other than the default is seen as one (the check can fail).
  const Scenario c = load_scenario(minimal, {{"stack.dispatcher", "\"fused_dedup\""}});
  EXPECT_EQ(differing_fields(a, c), std::vector<std::string>{"stack.dispatcher"});
}

// The loader accepts exactly the documented keys: an undocumented one is refused with the list.
TEST(ScenarioSchema, LoaderAcceptsTheDocumentedKeys) {
  EXPECT_EQ(scenario_keys("stack.overlap"),
            (std::vector<std::string>{"fsdp_prefetch", "fsdp_prefetch_depth", "a2a_with_shared_expert", "fwd_bwd",
                                      "grad_reduce"}));
  EXPECT_EQ(scenario_keys("stragglers[]"),
            (std::vector<std::string>{"gpu", "rack", "compute_slowdown", "nvlink_slowdown", "network_slowdown", "note"}));
  try {
    load_scenario(source("examples/deepseek-v3/gb300-optimized.json"), {{"stack.overlap.prefetch", "true"}});
    FAIL() << "an undocumented key loaded";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.json_path(), "/stack/overlap/prefetch");
    EXPECT_NE(std::string(e.what()).find("expected one of \"fsdp_prefetch\", \"fsdp_prefetch_depth\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeperf::io
