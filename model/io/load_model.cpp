// Loading models: moeperf's own model files ("kind": "model") and Hugging Face config.json files
// as published (deepseek_v3, deepseek_v2, kimi_k2, glm4_moe, qwen3_moe, qwen2_moe, olmoe, mixtral, phimoe, gpt_oss,
// llama4, and dense ones).
#include "model/io/detail/parsers.h"

#include <algorithm>
#include <filesystem>

#include "model/io/load.h"
#include "model/limits.h"
#include "model/workload/flops.h"

namespace moeperf::io {
namespace detail {

// ------------------------------------------------------------------ models
namespace {

// Which layers are MoE, one entry per layer: the default shape (the first k dense, the rest MoE)
// becomes dense_layers = k with no map, so such models price and compare as before; any other
// pattern keeps the map, and dense_layers counts the dense layers before the first MoE one.
void set_moe_map(ModelSpec& m, const std::vector<char>& map) {
  int lead = 0;
  while (lead < static_cast<int>(map.size()) && map[static_cast<size_t>(lead)] == 0) ++lead;
  bool plain = true;
  for (size_t l = static_cast<size_t>(lead); l < map.size(); ++l) plain = plain && map[l] != 0;
  m.dense_layers = lead;
  m.moe_map = plain ? std::vector<char>{} : map;
}

bool any_dense(const std::vector<char>& map) {
  return std::find(map.begin(), map.end(), 0) != map.end();
}

// Sets map[l] = value for every layer index l of a JSON list, each checked to be below the layer
// count (`count_key`, as the file names it); `unique`: an index listed twice is an error.
void mark_layers(const Node& list, const char* count_key, std::vector<char>& map, char value, bool unique) {
  std::vector<char> seen(map.size(), 0);
  for (size_t i = 0; i < list.size(); ++i) {
    const Node e = list[i];
    const int64_t l = e.as_nonneg_int(limits::kLayers);
    if (l >= static_cast<int64_t>(map.size()))
      e.fail("expected a layer index below " + std::string(count_key) + " (" + std::to_string(map.size()) + ")");
    if (unique && seen[static_cast<size_t>(l)]) e.fail("layer " + std::to_string(l) + " is listed twice");
    seen[static_cast<size_t>(l)] = 1;
    map[static_cast<size_t>(l)] = value;
  }
}

}  // namespace

// GQA: the query heads split evenly over the KV heads.
void check_kv_heads(const Node& at, const AttentionSpec& a) {
  if (a.kv_heads > a.heads || a.heads % a.kv_heads != 0)
    at.fail("expected a divisor of the " + std::to_string(a.heads) + " attention heads (each KV head serves the same number of "
            "query heads), got " + std::to_string(a.kv_heads));
}

// A group-limited router: groups split the experts evenly, at most all of them are kept, and the
// kept groups hold at least top_k experts.
void check_router_groups(const Node& groups, const Node& topk_groups, const ModelSpec& m) {
  const RouterSpec& r = m.router;
  if (m.experts % r.groups != 0)
    groups.fail("expected a divisor of the " + std::to_string(m.experts) + " routed experts, got " + std::to_string(r.groups));
  if (r.topk_groups > r.groups)
    topk_groups.fail("expected at most the " + std::to_string(r.groups) + " groups, got " + std::to_string(r.topk_groups));
  if (r.topk_groups * (m.experts / r.groups) < m.top_k)
    topk_groups.fail("the " + std::to_string(r.topk_groups) + " kept groups hold " + std::to_string(r.topk_groups * (m.experts / r.groups)) +
                     " experts, fewer than top_k (" + std::to_string(m.top_k) + ")");
}

ModelSpec parse_own_model(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "description", "hidden", "layers", "dense_layers", "dense_ffn",
                "vocab", "tie_embeddings", "attention", "moe", "mtp_layers"});
  ModelSpec m;
  m.name = n.at("name").as_string();
  m.hidden = n.at("hidden").as_positive_int(limits::kHidden);
  m.layers = static_cast<int>(n.at("layers").as_positive_int(limits::kLayers));
  m.vocab = n.at("vocab").as_positive_int(limits::kVocab);
  m.tie_embeddings = n.bool_or("tie_embeddings", false);
  m.mtp_layers = n.get("mtp_layers") ? static_cast<int>(n.at("mtp_layers").as_nonneg_int(limits::kLayers)) : 0;
  const Node a = n.at("attention");
  a.expect_object();
  m.attention.kind = a.at("type").as_enum<AttentionKind>({{"mla", AttentionKind::mla}, {"gqa", AttentionKind::gqa}});
  m.attention.heads = static_cast<int>(a.at("heads").as_positive_int(limits::kHeads));
  if (m.attention.kind == AttentionKind::mla) {
    a.allow_only({"type", "heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    m.attention.q_lora_rank = a.get("q_lora_rank") ? static_cast<int>(a.at("q_lora_rank").as_nonneg_int(limits::kHidden)) : 0;
    m.attention.kv_lora_rank = static_cast<int>(a.at("kv_lora_rank").as_positive_int(limits::kHidden));
    m.attention.qk_nope_head_dim = static_cast<int>(a.at("qk_nope_head_dim").as_positive_int(limits::kHidden));
    m.attention.qk_rope_head_dim = static_cast<int>(a.at("qk_rope_head_dim").as_positive_int(limits::kHidden));
    m.attention.v_head_dim = static_cast<int>(a.at("v_head_dim").as_positive_int(limits::kHidden));
  } else {
    a.allow_only({"type", "heads", "kv_heads", "head_dim", "qk_norm", "sliding_window", "sliding_layers", "sinks", "chunk_size",
                  "chunked_layers"});
    m.attention.kv_heads = static_cast<int>(a.at("kv_heads").as_positive_int(limits::kHeads));
    check_kv_heads(a.at("kv_heads"), m.attention);
    m.attention.head_dim = static_cast<int>(a.positive_int_or("head_dim", m.hidden / m.attention.heads, limits::kHidden));
    m.attention.qk_norm = a.bool_or("qk_norm", false);
    m.attention.sinks = a.bool_or("sinks", false);
    if (auto w = a.get("sliding_window")) m.attention.sliding_window = static_cast<int>(w->as_nonneg_int(limits::kSeqLen));
    if (auto l = a.get("sliding_layers")) {
      if (l->size() != static_cast<size_t>(m.layers))
        l->fail("expected one entry per layer (" + std::to_string(m.layers) + "), got " + std::to_string(l->size()));
      for (size_t i = 0; i < l->size(); ++i) m.attention.sliding_layers.push_back((*l)[i].as_bool());
    }
    // Chunked local attention: every layer unless chunked_layers names them.
    if (auto c = a.get("chunk_size")) m.attention.chunk_size = static_cast<int>(c->as_nonneg_int(limits::kSeqLen));
    if (auto l = a.get("chunked_layers")) {
      if (l->size() != static_cast<size_t>(m.layers))
        l->fail("expected one entry per layer (" + std::to_string(m.layers) + "), got " + std::to_string(l->size()));
      for (size_t i = 0; i < l->size(); ++i) m.attention.chunked_layers.push_back((*l)[i].as_bool());
    } else if (m.attention.chunk_size > 0) {
      m.attention.chunked_layers.assign(static_cast<size_t>(m.layers), true);
    }
    for (int l = 0; l < m.layers; ++l)
      if (is_sliding(m, l) && is_chunked(m, l))
        (a.has("chunked_layers") ? a.at("chunked_layers")[static_cast<size_t>(l)] : a.at("chunk_size"))
            .fail("layer " + std::to_string(l) + " has both a sliding window and a chunk: a layer attends through one or the other");
  }
  if (auto moe = n.get("moe")) {
    moe->allow_only({"experts", "top_k", "shared_experts", "expert_ffn", "router", "layers"});
    m.experts = static_cast<int>(moe->at("experts").as_positive_int(limits::kExperts));
    m.top_k = static_cast<int>(moe->at("top_k").as_positive_int(limits::kExperts));
    if (m.top_k > m.experts) moe->at("top_k").fail("expected at most the expert count (" + std::to_string(m.experts) + ")");
    m.shared_experts = moe->get("shared_experts") ? static_cast<int>(moe->at("shared_experts").as_nonneg_int(limits::kExperts)) : 0;
    m.expert_ffn = moe->at("expert_ffn").as_positive_int(limits::kFfn);
    if (auto r = moe->get("router")) {
      r->allow_only({"score", "bias", "groups", "topk_groups"});
      if (auto sc = r->get("score"))
        m.router.score = sc->as_enum<RouterScore>({{"softmax", RouterScore::softmax}, {"sigmoid", RouterScore::sigmoid}});
      m.router.bias = r->bool_or("bias", false);
      m.router.groups = static_cast<int>(r->positive_int_or("groups", 1, limits::kExperts));
      m.router.topk_groups = static_cast<int>(r->positive_int_or("topk_groups", 1, limits::kExperts));
      check_router_groups(r->has("groups") ? r->at("groups") : *r, r->has("topk_groups") ? r->at("topk_groups") : *r, m);
    }
    m.dense_layers = n.get("dense_layers") ? static_cast<int>(n.at("dense_layers").as_nonneg_int(limits::kLayers)) : 0;
    if (m.dense_layers >= m.layers)
      n.at("dense_layers").fail("expected fewer than the " + std::to_string(m.layers) +
                                " layers: a model with a \"moe\" object has at least one MoE layer");
    if (auto ls = moe->get("layers")) {
      // The MoE layers by index (Llama 4's every other layer): the rest have the dense FFN.
      if (n.has("dense_layers")) ls->fail("give either dense_layers or moe.layers, not both");
      std::vector<char> map(static_cast<size_t>(m.layers), 0);
      mark_layers(*ls, "layers", map, 1, true);
      if (ls->size() == 0) ls->fail("expected at least one MoE layer (a dense model has no \"moe\" object)");
      set_moe_map(m, map);
    }
    if (m.dense_layers > 0 || any_dense(m.moe_map)) m.dense_ffn = n.at("dense_ffn").as_positive_int(limits::kFfn);
  } else {
    m.dense_layers = m.layers;
    m.dense_ffn = n.at("dense_ffn").as_positive_int(limits::kFfn);
  }
  return m;
}

// A Hugging Face config.json as published. Keys we do not use are allowed (the file is the
// publisher's); the keys we need must be there with the right types.
ModelSpec parse_hf_model(const Node& n) {
  ModelSpec m;
  const std::string type = n.at("model_type").as_string();
  // Llama 4's config.json holds the language model in text_config (model_type llama4_text).
  if (type == "llama4") {
    const Node text = n.at("text_config");
    if (text.at("model_type").as_string() != "llama4_text")
      text.at("model_type").fail("expected \"llama4_text\" (Llama 4's language model)");
    ModelSpec t = parse_hf_model(text);
    if (n.has("_name_or_path")) t.name = n.at("_name_or_path").as_string();
    return t;
  }
  // Without _name_or_path, a config.json is named after its folder (as the Hub's repositories and
  // their local copies are), the model type beside it; else by its type alone.
  m.name = type;
  if (n.has("_name_or_path")) {
    m.name = n.at("_name_or_path").as_string();
  } else if (const std::filesystem::path f(n.file()); f.filename() == "config.json" && f.has_parent_path()) {
    const std::string dir = std::filesystem::absolute(f).parent_path().filename().string();
    if (!dir.empty()) m.name = dir + " (" + type + ")";
  }
  m.hidden = n.at("hidden_size").as_positive_int(limits::kHidden);
  m.layers = static_cast<int>(n.at("num_hidden_layers").as_positive_int(limits::kLayers));
  m.vocab = n.at("vocab_size").as_positive_int(limits::kVocab);
  m.tie_embeddings = n.bool_or("tie_word_embeddings", false);
  AttentionSpec& a = m.attention;
  a.heads = static_cast<int>(n.at("num_attention_heads").as_positive_int(limits::kHeads));
  auto gqa = [&] {
    a.kind = AttentionKind::gqa;
    a.kv_heads = static_cast<int>(n.positive_int_or("num_key_value_heads", a.heads, limits::kHeads));
    if (n.has("num_key_value_heads")) check_kv_heads(n.at("num_key_value_heads"), a);
    a.head_dim = static_cast<int>(n.positive_int_or("head_dim", m.hidden / a.heads, limits::kHidden));
  };
  auto moe_checks = [&] {
    // gpt-oss may write its top-k as experts_per_token alone.
    const char* k = n.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
    if (m.top_k > m.experts) n.at(k).fail("expected at most the expert count (" + std::to_string(m.experts) + ")");
  };
  // DeepSeek's MoE keys, shared by its V2 and V3 configs, Kimi K2's and GLM-4.5's (glm4_moe): routed
  // and shared experts, dense layers first, the router's score function and group limit.
  auto deepseek_moe = [&] {
    m.experts = static_cast<int>(n.at("n_routed_experts").as_positive_int(limits::kExperts));
    m.top_k = static_cast<int>(n.at("num_experts_per_tok").as_positive_int(limits::kExperts));
    m.shared_experts = n.get("n_shared_experts") ? static_cast<int>(n.at("n_shared_experts").as_nonneg_int(limits::kExperts)) : 0;
    m.expert_ffn = n.at("moe_intermediate_size").as_positive_int(limits::kFfn);
    m.dense_layers = static_cast<int>(n.at("first_k_dense_replace").as_nonneg_int(limits::kLayers));
    if (m.dense_layers >= m.layers)
      n.at("first_k_dense_replace").fail("expected fewer than num_hidden_layers (" + std::to_string(m.layers) +
                                         "): the model would have no MoE layer");
    m.dense_ffn = n.at("intermediate_size").as_positive_int(limits::kFfn);
    // transformers' DeepseekV2/V3 decoder layer: MoE where layer >= first_k_dense_replace and
    // layer % moe_layer_freq == 0.
    const int64_t freq = n.positive_int_or("moe_layer_freq", 1, limits::kLayers);
    std::vector<char> map(static_cast<size_t>(m.layers), 0);
    for (int l = m.dense_layers; l < m.layers; ++l) map[static_cast<size_t>(l)] = l % freq == 0;
    set_moe_map(m, map);
    // DeepSeek-V2's configs write the score function out ("softmax"); GLM-4.5's has none and
    // scores with a sigmoid and a bias (transformers' Glm4MoeTopkRouter).
    if (type == "glm4_moe") {  // Glm4MoeTopkRouter always has its e_score_correction_bias
      m.router.score = n.has("scoring_func") ? n.at("scoring_func").as_enum<RouterScore>({{"softmax", RouterScore::softmax},
                                                                                         {"sigmoid", RouterScore::sigmoid}})
                                             : RouterScore::sigmoid;
      m.router.bias = true;
    } else {
      m.router.score = n.at("scoring_func").as_enum<RouterScore>({{"softmax", RouterScore::softmax},
                                                                  {"sigmoid", RouterScore::sigmoid}});
      m.router.bias = n.string_or("topk_method", "") == "noaux_tc";
    }
    m.router.groups = static_cast<int>(n.positive_int_or("n_group", 1, limits::kExperts));
    m.router.topk_groups = static_cast<int>(n.positive_int_or("topk_group", 1, limits::kExperts));
    if (m.top_k <= m.experts)  // else moe_checks says so
      check_router_groups(n.has("n_group") ? n.at("n_group") : n, n.has("topk_group") ? n.at("topk_group") : n, m);
    m.mtp_layers = n.get("num_nextn_predict_layers") ? static_cast<int>(n.at("num_nextn_predict_layers").as_nonneg_int(limits::kLayers)) : 0;
    moe_checks();
  };
  if (type == "deepseek_v3" || type == "kimi_k2" || type == "deepseek_v2") {
    a.kind = AttentionKind::mla;
    // DeepSeek-V2-Lite writes "q_lora_rank": null: queries projected at full rank (get() is nullopt).
    a.q_lora_rank = n.get("q_lora_rank") ? static_cast<int>(n.at("q_lora_rank").as_nonneg_int(limits::kHidden)) : 0;
    a.kv_lora_rank = static_cast<int>(n.at("kv_lora_rank").as_positive_int(limits::kHidden));
    a.qk_nope_head_dim = static_cast<int>(n.at("qk_nope_head_dim").as_positive_int(limits::kHidden));
    a.qk_rope_head_dim = static_cast<int>(n.at("qk_rope_head_dim").as_positive_int(limits::kHidden));
    a.v_head_dim = static_cast<int>(n.at("v_head_dim").as_positive_int(limits::kHidden));
    deepseek_moe();
  } else if (type == "glm4_moe") {
    gqa();
    a.qk_norm = n.bool_or("use_qk_norm", false);
    deepseek_moe();
  } else if (type == "qwen3_moe" || type == "qwen2_moe" || type == "olmoe") {
    gqa();
    a.qk_norm = type == "qwen3_moe" || type == "olmoe";
    m.experts = static_cast<int>(n.at("num_experts").as_positive_int(limits::kExperts));
    m.top_k = static_cast<int>(n.at("num_experts_per_tok").as_positive_int(limits::kExperts));
    // OLMoE's experts are its intermediate_size (every layer is MoE, no dense FFN).
    m.expert_ffn = n.at(type == "olmoe" ? "intermediate_size" : "moe_intermediate_size").as_positive_int(limits::kFfn);
    // Qwen2-MoE adds one shared expert of its own width (shared_expert_intermediate_size) to every
    // MoE layer; moeperf's shared experts are expert-wide, so the width must be a whole number of
    // routed experts (Qwen1.5-MoE-A2.7B: 5632 = 4 x 1408; Qwen2-57B-A14B: 20480 = 8 x 2560).
    // A config without the field gets transformers' Qwen2MoeConfig default, 5632, as transformers
    // reads the same file (a width that must then divide by the config's own expert width).
    if (type == "qwen2_moe") {
      constexpr int64_t kTransformersDefault = 5632;
      // Written as null is no width (transformers would fail on it): an error, not the default.
      const auto sh = n.has("shared_expert_intermediate_size") ? std::optional(n.at("shared_expert_intermediate_size")) : std::nullopt;
      const int64_t w = sh ? sh->as_nonneg_int(limits::kFfn) : kTransformersDefault;
      const std::string fix = ": moeperf counts a shared expert as that many routed-expert widths; write a moeperf model file "
                              "(\"kind\": \"model\") with shared_experts rounded, and say so";
      if (w % m.expert_ffn != 0 && sh)
        sh->fail("expected a multiple of moe_intermediate_size (" + std::to_string(m.expert_ffn) + ")" + fix);
      if (w % m.expert_ffn != 0)
        n.at("moe_intermediate_size")
            .fail("expected a divisor of 5632, the shared expert's width when shared_expert_intermediate_size is absent "
                  "(transformers' Qwen2MoeConfig default)" + fix);
      m.shared_experts = static_cast<int>(w / m.expert_ffn);
    }
    // transformers' Qwen2/Qwen3-MoE decoder layer: MoE unless listed in mlp_only_layers, where
    // (layer + 1) % decoder_sparse_step == 0; the other layers have the dense intermediate_size.
    const int64_t step = n.positive_int_or("decoder_sparse_step", 1, limits::kLayers);
    std::vector<char> map(static_cast<size_t>(m.layers), 0);
    for (int l = 0; l < m.layers; ++l) map[static_cast<size_t>(l)] = (l + 1) % step == 0;
    if (auto mlp = n.get("mlp_only_layers")) mark_layers(*mlp, "num_hidden_layers", map, 0, false);
    if (std::find(map.begin(), map.end(), 1) == map.end())
      (n.has("decoder_sparse_step") ? n.at("decoder_sparse_step") : n.at("mlp_only_layers"))
          .fail("no layer is MoE (decoder_sparse_step and mlp_only_layers leave none)");
    set_moe_map(m, map);
    if (any_dense(map)) m.dense_ffn = n.at("intermediate_size").as_positive_int(limits::kFfn);
    m.router.score = RouterScore::softmax;
    moe_checks();
  } else if (type == "mixtral" || type == "gpt_oss" || type == "phimoe") {
    gqa();
    m.experts = static_cast<int>(n.at("num_local_experts").as_positive_int(limits::kExperts));
    const char* k = n.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
    m.top_k = static_cast<int>(n.at(k).as_positive_int(limits::kExperts));
    m.expert_ffn = n.at("intermediate_size").as_positive_int(limits::kFfn);
    m.router.score = RouterScore::softmax;
    if (type == "gpt_oss") {
      a.sinks = true;
      a.sliding_window = static_cast<int>(n.at("sliding_window").as_positive_int(limits::kSeqLen));
      const Node lt = n.at("layer_types");
      if (lt.size() != static_cast<size_t>(m.layers))
        lt.fail("expected one entry per layer (" + std::to_string(m.layers) + "), got " + std::to_string(lt.size()));
      for (size_t i = 0; i < lt.size(); ++i)
        a.sliding_layers.push_back(lt[i].as_enum<bool>({{"sliding_attention", true}, {"full_attention", false}}));
    } else if (auto w = n.get("sliding_window")) {
      a.sliding_window = static_cast<int>(w->as_nonneg_int(limits::kSeqLen));
      a.sliding_layers.assign(static_cast<size_t>(m.layers), a.sliding_window > 0);
    }
    moe_checks();
  } else if (type == "llama4_text") {
    // transformers' Llama4TextConfig: routed experts of intermediate_size plus one shared expert of
    // the same width in every MoE layer, top-k over sigmoid scores; the MoE layers are moe_layers
    // if given, else every interleave_moe_layer_step-th ((layer + 1) % step == 0: Maverick's odd
    // layers); the others have intermediate_size_mlp. Chunked local attention: a query of a
    // chunked layer attends within its attention_chunk_size tokens; the chunked layers are
    // layer_types' "chunked_attention" when given, else the layers that rotate (the NoPE layers
    // attend globally), as Llama4TextConfig sets them.
    gqa();
    a.qk_norm = n.bool_or("use_qk_norm", false);
    // NoPE layers: no_rope_layers (1 rotates, 0 does not, one per layer) when given and not empty,
    // else every no_rope_layer_interval-th layer ((layer + 1) % interval == 0), as Llama4TextConfig.
    a.nope_layers.assign(static_cast<size_t>(m.layers), false);
    if (auto nr = n.get("no_rope_layers"); nr && !nr->is_array()) nr->fail("expected an array of 0 or 1 per layer (1: the layer uses RoPE)");
    if (auto nr = n.get("no_rope_layers"); nr && nr->size() > 0) {
      if (nr->size() != static_cast<size_t>(m.layers))
        nr->fail("expected one entry per layer (num_hidden_layers " + std::to_string(m.layers) + "), got " + std::to_string(nr->size()));
      for (size_t i = 0; i < nr->size(); ++i) {
        const int64_t v = (*nr)[i].as_nonneg_int(1);
        a.nope_layers[i] = v == 0;
      }
    } else {
      const int64_t every = n.positive_int_or("no_rope_layer_interval", 4, limits::kLayers);
      for (int l = 0; l < m.layers; ++l) a.nope_layers[static_cast<size_t>(l)] = (l + 1) % every == 0;
    }
    if (auto c = n.get("attention_chunk_size"); c && !c->is_null()) {
      a.chunk_size = static_cast<int>(c->as_nonneg_int(limits::kSeqLen));
      if (auto lt = n.get("layer_types")) {
        if (lt->size() != static_cast<size_t>(m.layers))
          lt->fail("expected one entry per layer (num_hidden_layers " + std::to_string(m.layers) + "), got " + std::to_string(lt->size()));
        for (size_t i = 0; i < lt->size(); ++i)
          a.chunked_layers.push_back((*lt)[i].as_enum<bool>({{"chunked_attention", true}, {"full_attention", false}}));
      } else {
        for (int l = 0; l < m.layers; ++l) a.chunked_layers.push_back(!a.nope_layers[static_cast<size_t>(l)]);
      }
    }
    m.experts = static_cast<int>(n.at("num_local_experts").as_positive_int(limits::kExperts));
    m.top_k = static_cast<int>(n.at("num_experts_per_tok").as_positive_int(limits::kExperts));
    m.expert_ffn = n.at("intermediate_size").as_positive_int(limits::kFfn);
    m.shared_experts = 1;
    m.router.score = RouterScore::sigmoid;
    std::vector<char> map(static_cast<size_t>(m.layers), 0);
    if (auto ls = n.get("moe_layers")) {
      mark_layers(*ls, "num_hidden_layers", map, 1, false);
    } else {
      const int64_t step = n.positive_int_or("interleave_moe_layer_step", 1, limits::kLayers);
      for (int l = 0; l < m.layers; ++l) map[static_cast<size_t>(l)] = (l + 1) % step == 0;
    }
    if (std::find(map.begin(), map.end(), 1) == map.end())
      (n.has("moe_layers") ? n.at("moe_layers") : n.at("interleave_moe_layer_step")).fail("no layer is MoE");
    set_moe_map(m, map);
    if (any_dense(map)) m.dense_ffn = n.at("intermediate_size_mlp").as_positive_int(limits::kFfn);
    moe_checks();
  } else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3") {
    gqa();
    a.qk_norm = type == "qwen3";
    m.dense_layers = m.layers;
    m.dense_ffn = n.at("intermediate_size").as_positive_int(limits::kFfn);
    // Mistral's window applies to every layer (transformers' MistralAttention); Qwen2/Qwen3 configs
    // carry a sliding_window that use_sliding_window (false in the released models) leaves off.
    if (auto w = type == "mistral" ? n.get("sliding_window") : std::nullopt) {
      a.sliding_window = static_cast<int>(w->as_nonneg_int(limits::kSeqLen));
      a.sliding_layers.assign(static_cast<size_t>(m.layers), a.sliding_window > 0);
    }
  } else {
    n.at("model_type").fail("unsupported model_type \"" + type +
                            "\"; expected one of deepseek_v3, deepseek_v2, kimi_k2, glm4_moe, qwen3_moe, qwen2_moe, "
                            "olmoe, mixtral, phimoe, gpt_oss, llama4, llama, mistral, qwen2, qwen3 (or write a moeperf "
                            "model file with \"kind\": \"model\")");
  }
  return m;
}

const std::vector<std::string>& hf_keys() {
  static const std::vector<std::string> k = {
      "_name_or_path", "attention_chunk_size", "decoder_sparse_step", "experts_per_token", "first_k_dense_replace", "head_dim", "hidden_size",
      "interleave_moe_layer_step", "intermediate_size", "intermediate_size_mlp", "kv_lora_rank", "layer_types", "mlp_only_layers", "model_type", "moe_intermediate_size",
      "moe_layer_freq", "moe_layers", "n_group", "n_routed_experts", "n_shared_experts", "no_rope_layer_interval", "no_rope_layers", "num_attention_heads", "num_experts",
      "num_experts_per_tok", "num_hidden_layers", "num_key_value_heads", "num_local_experts", "num_nextn_predict_layers",
      "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "scoring_func", "shared_expert_intermediate_size",
      "sliding_window", "tie_word_embeddings", "topk_group", "topk_method", "use_qk_norm", "v_head_dim", "vocab_size"};
  return k;
}

bool is_hf(const Node& n) { return n.is_object() && n.has("model_type") && !n.has("kind"); }

ModelSpec parse_model_any(const Node& n) { return is_hf(n) ? parse_hf_model(n) : parse_own_model(n); }


}  // namespace detail

using namespace detail;

ModelSpec load_model(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  root.expect_object();
  if (!is_hf(root) && (!root.has("kind") || root.at("kind").as_string() != "model"))
    root.fail("expected a model file: a Hugging Face config.json (with \"model_type\") or \"kind\": \"model\"");
  return parse_model_any(root);
}


}  // namespace moeperf::io
