// Loading models (moeperf JSON and Hugging Face config.json), scenarios and --set overrides.
#include "model/io/load.h"

#include <gtest/gtest.h>

#include "model/io/errors.h"
#include "model/io/scenario_schema.h"
#include "model/study/predict.h"
#include "model/study/study.h"
#include "model/workload/flops.h"
#include "model/workload/memory.h"
#include "model/workload/step.h"
#include <fstream>
#include <map>
#include <set>
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

  // A dense Mistral config's window covers every layer; a Qwen2 config's stays off (its
  // use_sliding_window is false in the released models).
  {
    TempDir d;
    const std::string body = R"("hidden_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096)";
    const std::string mistral = d.write("mistral.json", "{\"model_type\": \"mistral\", " + body + "}");
    const std::string qwen2 = d.write("qwen2.json", "{\"model_type\": \"qwen2\", \"use_sliding_window\": false, " + body + "}");
    const ModelSpec ms = load_model(mistral), qw = load_model(qwen2);
    EXPECT_EQ(ms.attention.sliding_window, 4096);
    EXPECT_EQ(ms.attention.sliding_layers, std::vector<bool>(4, true));
    EXPECT_EQ(qw.attention.sliding_window, 0);
  }

  const ModelSpec g = load_model(source("examples/models/gpt-oss-120b/config.json"));
  EXPECT_EQ(g.top_k, 4);
  EXPECT_EQ(g.attention.head_dim, 64);
  EXPECT_EQ(g.attention.sliding_window, 128);
  ASSERT_EQ(g.attention.sliding_layers.size(), 36u);
  int sliding = 0;
  for (bool b : g.attention.sliding_layers) sliding += b;
  EXPECT_EQ(sliding, 18);  // alternate layers
  EXPECT_TRUE(g.attention.sinks);
  // gpt-oss may write its top-k as experts_per_token alone; too large a top-k is named by that key.
  {
    TempDir d;
    std::ifstream in(source("examples/models/gpt-oss-120b/config.json"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto drop = [&](const std::string& key) {  // the line "key": N, of the published file
      const size_t at = text.find("\"" + key + "\"");
      ASSERT_NE(at, std::string::npos) << key;
      text.erase(text.rfind('\n', at), text.find('\n', at) - text.rfind('\n', at));
    };
    drop("num_experts_per_tok");
    EXPECT_EQ(load_model(d.write("oss.json", text)).top_k, 4);
    const size_t k = text.find("\"experts_per_token\": 4");
    ASSERT_NE(k, std::string::npos);
    text.replace(k, std::string("\"experts_per_token\": 4").size(), "\"experts_per_token\": 200");
    try {
      load_model(d.write("oss-bad.json", text));
      ADD_FAILURE() << "top-k 200 of 128 experts loaded";
    } catch (const SpecError& e) {
      EXPECT_EQ(e.json_path(), "/experts_per_token");
      EXPECT_EQ(e.detail(), "expected at most the expert count (128)");
    }
  }

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
  // Without the field, transformers' Qwen2MoeConfig default of 5632 (as transformers reads the file).
  std::string absent = qwen2;
  absent.replace(absent.find(", \"shared_expert_intermediate_size\": WIDTH"), std::string(", \"shared_expert_intermediate_size\": WIDTH").size(), "");
  EXPECT_EQ(load_model(d.write("q2default.json", absent)).shared_experts, 4);
  // Written as null is not absent: no width, an error at the field.
  try {
    load_model(d.write("q2null.json", with("null")));
    FAIL() << "a null shared expert width loaded";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/shared_expert_intermediate_size"), std::string::npos) << e.what();
  }
  try {
    std::string odd = absent;
    odd.replace(odd.find("1408"), 4, "1000");
    load_model(d.write("q2odd.json", odd));
    FAIL() << "a default shared expert width that the expert width does not divide loaded";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/moe_intermediate_size"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected a divisor of 5632, the shared expert's width when shared_expert_intermediate_size is absent"), std::string::npos) << e.what();
  }
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

// MoE layers that are not simply "all after the first k": Llama 4's every other layer (its config
// nested in text_config), Qwen's decoder_sparse_step with mlp_only_layers, DeepSeek's
// moe_layer_freq, and a moeperf file's moe.layers. The dense layers get the dense FFN, the counts
// and the lowering follow the map, and the default shape keeps no map at all.
TEST(LoadModel, InterleavedMoeLayers) {
  TempDir d;
  const auto l4 = d.write("llama4.json", R"({"model_type": "llama4", "_name_or_path": "tiny-llama4",
    "text_config": {"model_type": "llama4_text", "hidden_size": 512, "num_hidden_layers": 8,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
      "num_local_experts": 16, "num_experts_per_tok": 1, "intermediate_size": 256, "intermediate_size_mlp": 1024,
      "interleave_moe_layer_step": 2, "use_qk_norm": true}})");
  const ModelSpec m = load_model(l4);
  EXPECT_EQ(m.name, "tiny-llama4");
  for (int l = 0; l < 8; ++l) EXPECT_EQ(m.is_moe_layer(l), l % 2 == 1) << l;  // (l + 1) % 2 == 0
  EXPECT_TRUE(m.is_moe_layer(8));  // an MTP module's layer: the last layer's kind
  EXPECT_EQ(m.moe_layers(), 4);
  EXPECT_EQ(m.dense_layers, 1);
  EXPECT_EQ(m.dense_ffn, 1024);
  EXPECT_EQ(m.expert_ffn, 256);
  EXPECT_EQ(m.shared_experts, 1);
  EXPECT_EQ(m.top_k, 1);
  EXPECT_EQ(m.router.score, RouterScore::sigmoid);
  EXPECT_TRUE(m.attention.qk_norm);
  const ParamCounts p = count_params(m);
  const double h = 512, expert = 3 * h * 256;
  EXPECT_DOUBLE_EQ(p.routed_experts, 4 * 16 * expert);
  const double attn = p.attention_per_layer;
  const double dense_ffn = 3 * h * 1024, moe_rest = h * 16 + expert;  // router + shared expert
  EXPECT_DOUBLE_EQ(p.total, p.embedding + p.lm_head + h + 8 * attn + 4 * dense_ffn + 4 * (moe_rest + 16 * expert));

  // The lowering puts expert GEMMs on the MoE layers only and the dense FFN on the others.
  const auto sc = d.write("s.json", R"({"kind": "scenario", "name": "interleaved", "model": "llama4.json",
    "system": ")" + source("topologies/dgx-h100-cluster.json") + R"(", "gpus": 4, "parallelism": {"ep": 4},
    "batch": {"seq_len": 256, "micro_batch": 1, "global_batch": 4}})");
  const Scenario s = load_scenario(sc);
  const StepGraph g = lower_step(s, expert_load(s, Calibration{}));
  std::set<int> expert_layers, dense_layers;
  for (const Op& op : g.classes.at(0).ops) {
    if (op.name == "moe.expert_fc1") expert_layers.insert(op.layer);
    if (op.name == "mlp.fc1") dense_layers.insert(op.layer);
  }
  EXPECT_EQ(expert_layers, (std::set<int>{1, 3, 5, 7}));
  EXPECT_EQ(dense_layers, (std::set<int>{0, 2, 4, 6}));
  // NoPE layers (no_rope_layer_interval, 4 by default: layers 3 and 7) rotate nothing and, with
  // use_qk_norm, normalize nothing; an explicit no_rope_layers list (1 rotates) overrides it.
  auto rotating = [](const StepGraph& sg, const char* name) {
    std::set<int> out;
    for (const Op& op : sg.classes.at(0).ops)
      if (op.name == name) out.insert(op.layer);
    return out;
  };
  EXPECT_EQ(rotating(g, "attn.rope"), (std::set<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(rotating(g, "attn.qk_norm"), (std::set<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(rotating(g, "attn.rope.bwd"), (std::set<int>{0, 1, 2, 4, 5, 6}));
  const Scenario listed = load_scenario(sc, {parse_override("model.text_config.no_rope_layers=[0,1,1,1,1,1,1,0]")});
  const StepGraph lg = lower_step(listed, expert_load(listed, Calibration{}));
  EXPECT_EQ(rotating(lg, "attn.rope"), (std::set<int>{1, 2, 3, 4, 5, 6}));
  try {
    load_scenario(sc, {parse_override("model.text_config.no_rope_layers=[1,1]")});
    ADD_FAILURE() << "a no_rope_layers list of the wrong length loaded";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.json_path(), "/model/text_config/no_rope_layers");  // the --set value, in the scenario
  }
  // --set reaches into text_config; a key set beside it would be ignored, so it is an error.
  EXPECT_EQ(load_scenario(sc, {parse_override("model.text_config.interleave_moe_layer_step=1")}).model.moe_layers(), 8);
  // Chunked attention (attention_chunk_size): on the layers that rotate, unless layer_types says.
  EXPECT_EQ(m.attention.chunk_size, 0);
  const ModelSpec chunked = load_scenario(sc, {parse_override("model.text_config.attention_chunk_size=128")}).model;
  EXPECT_EQ(chunked.attention.chunk_size, 128);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(is_chunked(chunked, l), l != 3 && l != 7) << l;
  const ModelSpec typed = load_scenario(sc, {parse_override("model.text_config.attention_chunk_size=128"),
                                             parse_override(R"(model.text_config.layer_types=["full_attention","chunked_attention",)"
                                                            R"("chunked_attention","full_attention","chunked_attention","chunked_attention",)"
                                                            R"("chunked_attention","chunked_attention"])")})
                              .model;
  for (int l = 0; l < 8; ++l) EXPECT_EQ(is_chunked(typed, l), l != 0 && l != 3) << l;
  {  // the attention op's keys follow the chunk: 256-token sequences, 128-token chunks
    const Scenario cs = load_scenario(sc, {parse_override("model.text_config.attention_chunk_size=128")});
    const StepGraph cg = lower_step(cs, expert_load(cs, Calibration{}));
    std::map<int, int64_t> keys;
    for (const Op& op : cg.classes.at(0).ops)
      if (op.name == "attn.core") keys[op.layer] = op.k;
    EXPECT_EQ(keys.at(0), 64);   // chunked: C / 2
    EXPECT_EQ(keys.at(3), 128);  // NoPE, global: S / 2
  }
  try {
    load_scenario(sc, {parse_override("model.text_config.attention_chunk_size=128"),
                       parse_override(R"(model.text_config.layer_types=["full_attention"])")});
    ADD_FAILURE() << "a layer_types list of the wrong length loaded";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.json_path(), "/model/text_config/layer_types");
  }
  try {
    load_scenario(sc, {parse_override("model.interleave_moe_layer_step=1")});
    ADD_FAILURE() << "a llama4 key set beside text_config loaded";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("write --set model.text_config.interleave_moe_layer_step=1"), std::string::npos)
        << e.what();
  }

  try {  // a text_config that is not Llama 4's language model (nor, recursively, another llama4)
    load_model(d.write("l4bad.json", R"({"model_type": "llama4", "text_config": {"model_type": "llama4"}})"));
    ADD_FAILURE() << "a nested llama4 loaded";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("/text_config/model_type: expected \"llama4_text\""), std::string::npos) << e.what();
  }

  // A pipeline stage whose layers are all dense holds no all-to-all buffers and no expert
  // transient: Qwen's mlp_only_layers [0, 1] with wide dense FFNs make stage 0 (dense only) the
  // stage with the most HBM under pp 2; with every layer MoE, the reported stage holds them.
  for (const bool dense_first : {true, false}) {
    d.write("q3pp.json", std::string(R"({"model_type": "qwen3_moe", "hidden_size": 1024, "num_hidden_layers": 4,
      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "num_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 256, "intermediate_size": 65536, "mlp_only_layers": )") +
                                (dense_first ? "[0, 1]" : "[]") + "}");
    const Scenario ps = load_scenario(d.write("pp.json", R"({"kind": "scenario", "name": "pp", "model": "q3pp.json",
      "system": ")" + source("topologies/dgx-h100-cluster.json") + R"(", "gpus": 8, "parallelism": {"pp": 2, "ep": 4},
      "batch": {"seq_len": 256, "micro_batch": 1, "global_batch": 8}})"));
    const MemoryReport mr = memory_report(ps, expert_load(ps, Calibration{}), Calibration{});
    if (dense_first) {
      EXPECT_EQ(mr.pp_stage, 0);
      EXPECT_EQ(mr.comm_buffers.value(), 0.0);
    } else {
      EXPECT_GT(mr.comm_buffers.value(), 0.0);
    }
  }

  const ModelSpec q = load_model(d.write("q3.json", R"({"model_type": "qwen3_moe", "hidden_size": 256,
    "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "intermediate_size": 512,
    "decoder_sparse_step": 2, "mlp_only_layers": [3]})"));
  for (int l = 0; l < 6; ++l) EXPECT_EQ(q.is_moe_layer(l), l == 1 || l == 5) << l;
  EXPECT_EQ(q.dense_ffn, 512);

  const ModelSpec ds = load_model(d.write("ds.json", R"({"model_type": "deepseek_v2", "hidden_size": 256,
    "num_hidden_layers": 6, "num_attention_heads": 4, "vocab_size": 1000, "kv_lora_rank": 64,
    "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 128, "intermediate_size": 512, "first_k_dense_replace": 1, "moe_layer_freq": 2,
    "scoring_func": "softmax"})"));
  for (int l = 0; l < 6; ++l) EXPECT_EQ(ds.is_moe_layer(l), l == 2 || l == 4) << l;
  EXPECT_TRUE(load_model(source("examples/models/deepseek-v3/config.json")).moe_map.empty());

  const std::string own = R"({"kind": "model", "name": "own", "hidden": 256, "layers": 4, "vocab": 1000,
    "dense_ffn": 512, "attention": {"type": "gqa", "heads": 4, "kv_heads": 2, "head_dim": 64},
    "moe": {"experts": 8, "top_k": 2, "expert_ffn": 128, "layers": LAYERS}})";
  auto with = [&](const std::string& l) { return std::string(own).replace(own.find("LAYERS"), 6, l); };
  const ModelSpec o = load_model(d.write("own.json", with("[1, 3]")));
  for (int l = 0; l < 4; ++l) EXPECT_EQ(o.is_moe_layer(l), l == 1 || l == 3) << l;
  EXPECT_TRUE(load_model(d.write("own2.json", with("[2, 3]"))).moe_map.empty());  // the default shape
  EXPECT_EQ(load_model(d.write("own3.json", with("[2, 3]"))).dense_layers, 2);
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 4]", "/moe/layers/1: expected a layer index below layers (4)"},
           {"[1, 1]", "/moe/layers/1: layer 1 is listed twice"},
           {"[]", "/moe/layers: expected at least one MoE layer"}}) {
    try {
      load_model(d.write("bad.json", with(bad)));
      ADD_FAILURE() << bad << " loaded";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST(LoadModel, OwnFormatChunkedAttention) {
  TempDir d;
  const std::string own = R"({"kind": "model", "name": "own", "hidden": 256, "layers": 4, "vocab": 1000, "dense_ffn": 512,
    "attention": {"type": "gqa", "heads": 4, "kv_heads": 2, "head_dim": 64, ATTN}})";
  auto with = [&](const std::string& x) { return std::string(own).replace(own.find("ATTN"), 4, x); };
  const ModelSpec all = load_model(d.write("a.json", with(R"("chunk_size": 1024)")));
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(is_chunked(all, l)) << l;
  const ModelSpec some = load_model(d.write("b.json", with(R"("chunk_size": 1024, "chunked_layers": [true, false, true, false])")));
  for (int l = 0; l < 4; ++l) EXPECT_EQ(is_chunked(some, l), l % 2 == 0) << l;
  // A window and a chunk on one layer: refused (a layer attends through one or the other).
  const ModelSpec apart = load_model(d.write("c.json", with(R"("chunk_size": 1024, "chunked_layers": [true, false, true, false],
    "sliding_window": 128, "sliding_layers": [false, true, false, true])")));
  EXPECT_TRUE(is_sliding(apart, 1));
  EXPECT_TRUE(is_chunked(apart, 0));
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {R"("chunk_size": 1024, "sliding_window": 128, "sliding_layers": [false, true, false, false])",
            "/attention/chunk_size: layer 1 has both a sliding window and a chunk"},
           {R"("chunk_size": 1024, "chunked_layers": [true, true, false, false], "sliding_window": 128, "sliding_layers": [false, true, false, false])",
            "/attention/chunked_layers/1: layer 1 has both"},
           {R"("chunk_size": 1024, "chunked_layers": [true])", "/attention/chunked_layers: expected one entry per layer (4), got 1"},
           {R"("chunk_size": -1)", "/attention/chunk_size"}}) {
    try {
      load_model(d.write("bad.json", with(bad)));
      ADD_FAILURE() << bad << " loaded";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
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
