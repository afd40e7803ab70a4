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

// The MoE families whose configs share another family's keys: DeepSeek-V2 (MLA, V3's MoE keys,
// Lite's null q_lora_rank), GLM-4.5 (GQA with DeepSeek's MoE keys, a sigmoid router with a bias
// when the config names no score function), Qwen2-MoE's shared expert of its own width, OLMoE
// (experts as wide as intermediate_size, QK norm) and PhiMoE (Mixtral's keys).
TEST(LoadModel, MoeFamiliesThatShareKeys) {
  TempDir d;
  const ModelSpec v2 = load_model(d.write("v2.json", R"({"model_type": "deepseek_v2", "hidden_size": 2048,
    "num_hidden_layers": 27, "num_attention_heads": 16, "vocab_size": 102400, "q_lora_rank": null, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 64, "n_shared_experts": 2,
    "num_experts_per_tok": 6, "moe_intermediate_size": 1408, "intermediate_size": 10944, "first_k_dense_replace": 1,
    "moe_layer_freq": 1, "scoring_func": "softmax", "topk_method": "greedy", "n_group": 1, "topk_group": 1})"));
  EXPECT_EQ(v2.attention.kind, AttentionKind::mla);
  EXPECT_EQ(v2.attention.q_lora_rank, 0);
  EXPECT_EQ(v2.experts, 64);
  EXPECT_EQ(v2.shared_experts, 2);
  EXPECT_EQ(v2.top_k, 6);
  EXPECT_EQ(v2.dense_layers, 1);
  EXPECT_EQ(v2.moe_layers(), 26);
  EXPECT_EQ(v2.router.score, RouterScore::softmax);
  EXPECT_FALSE(v2.router.bias);
  EXPECT_EQ(v2.mtp_layers, 0);

  const ModelSpec glm = load_model(d.write("glm.json", R"({"model_type": "glm4_moe", "hidden_size": 5120,
    "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151552,
    "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
    "intermediate_size": 12288, "first_k_dense_replace": 3, "n_group": 1, "topk_group": 1, "use_qk_norm": true,
    "num_nextn_predict_layers": 1})"));
  EXPECT_EQ(glm.attention.kind, AttentionKind::gqa);
  EXPECT_EQ(glm.attention.head_dim, 128);  // given, not hidden / heads (53)
  EXPECT_EQ(glm.attention.kv_heads, 8);
  EXPECT_TRUE(glm.attention.qk_norm);
  EXPECT_EQ(glm.experts, 160);
  EXPECT_EQ(glm.dense_layers, 3);
  EXPECT_EQ(glm.dense_ffn, 12288);
  EXPECT_EQ(glm.router.score, RouterScore::sigmoid);
  EXPECT_TRUE(glm.router.bias);
  EXPECT_EQ(glm.mtp_layers, 1);

  const std::string qwen2 = R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936, "num_experts": 60,
    "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": WIDTH})";
  auto with = [&](const std::string& w) { return std::string(qwen2).replace(qwen2.find("WIDTH"), 5, w); };
  const ModelSpec q2 = load_model(d.write("q2.json", with("5632")));
  EXPECT_EQ(q2.shared_experts, 4);  // 5632 = 4 x 1408
  EXPECT_EQ(q2.expert_ffn, 1408);
  EXPECT_FALSE(q2.attention.qk_norm);
  EXPECT_EQ(load_model(d.write("q2none.json", with("0"))).shared_experts, 0);
  try {
    load_model(d.write("q2bad.json", with("5000")));
    FAIL() << "a shared expert that is not a whole number of routed-expert widths loaded";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/shared_expert_intermediate_size"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("multiple of moe_intermediate_size (1408)"), std::string::npos) << e.what();
  }

  const ModelSpec ol = load_model(d.write("olmoe.json", R"({"model_type": "olmoe", "hidden_size": 2048,
    "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 50304,
    "num_experts": 64, "num_experts_per_tok": 8, "intermediate_size": 1024})"));
  EXPECT_EQ(ol.expert_ffn, 1024);
  EXPECT_EQ(ol.experts, 64);
  EXPECT_EQ(ol.dense_layers, 0);
  EXPECT_TRUE(ol.attention.qk_norm);

  const ModelSpec phi = load_model(d.write("phi.json", R"({"model_type": "phimoe", "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32064,
    "num_local_experts": 16, "num_experts_per_tok": 2, "intermediate_size": 6400})"));
  EXPECT_EQ(phi.experts, 16);
  EXPECT_EQ(phi.top_k, 2);
  EXPECT_EQ(phi.expert_ffn, 6400);
  EXPECT_EQ(phi.attention.head_dim, 128);
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
