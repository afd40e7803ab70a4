// Megatron's MoE parallel folding: the expert mesh (etp x ep x edp) over the GPUs of a stage next to
// the dense one (tp x cp x dp), against closed forms: group placement, collective bytes, memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model/io/load.h"
#include "model/pricing/collective.h"
#include "model/study/predict.h"
#include "model/workload/flops.h"
#include "model/workload/memory.h"
#include "model/workload/step.h"

namespace moeperf {
namespace {

const std::string kFolded = std::string(MOEPERF_SOURCE_DIR) + "/examples/layouts/qwen3-235b-h100-megatron-folded.json";

Scenario folded(std::vector<std::string> sets = {}) {
  std::vector<io::Override> o;
  for (auto& x : sets) o.push_back(io::parse_override(x));
  return io::load_scenario(kFolded, o);
}

std::vector<int64_t> range(int64_t from, int64_t n, int64_t step) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(from + i * step);
  return v;
}

// TP 2 x DP 16 per stage of 32 GPUs, PP 8, EP 32: the EP group is the whole stage (both TP ranks,
// 4 DGX nodes); TP pairs neighbours; the dense gradient group strides over TP; the pipeline
// strides over stages. Unfolded, EP 16 with the same TP would be every other rank.
TEST(Folding, GroupsArePlacedAsMegatronPlacesThem) {
  const Scenario s = folded();
  const Parallelism& p = s.parallelism;
  ASSERT_TRUE(p.folded);
  EXPECT_EQ(p.world(), 256);
  EXPECT_EQ(p.expert_data_parallel(), 1);
  EXPECT_EQ(p.dense_data_parallel(), 16);
  EXPECT_EQ(group_members(Group::ep, p, 0), range(0, 32, 1));
  EXPECT_EQ(group_members(Group::ep, p, 37), range(32, 32, 1));
  EXPECT_EQ(group_members(Group::tp, p, 5), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(group_members(Group::dense_dp, p, 1), range(1, 16, 2));
  EXPECT_EQ(group_members(Group::expert_dp, p, 3), (std::vector<int64_t>{3}));
  EXPECT_EQ(group_members(Group::pp, p, 3), range(3, 8, 32));
  EXPECT_EQ(s.micro_batches(), 64);  // 1,024 / (micro-batch 1 x dense DP 16)
  // ETP 2 x EP 8 x EDP 2 over the same stage: expert slices on neighbours, EP every other rank.
  const Scenario e = folded({"parallelism.etp=2", "parallelism.ep=8"});
  EXPECT_EQ(e.parallelism.expert_data_parallel(), 2);
  EXPECT_EQ(group_members(Group::etp, e.parallelism, 7), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(group_members(Group::ep, e.parallelism, 1), range(1, 8, 2));
  EXPECT_EQ(group_members(Group::expert_dp, e.parallelism, 1), (std::vector<int64_t>{1, 17}));
  // Unfolded, the same GPUs: tp 2 x ep 16 x dp 1 (EP inside the dense data parallelism).
  const Scenario u = folded({"parallelism={\"tp\": 2, \"pp\": 8, \"ep\": 16, \"dp\": 1, \"distributed_optimizer\": true}"});
  ASSERT_FALSE(u.parallelism.folded);
  EXPECT_EQ(group_members(Group::ep, u.parallelism, 0), range(0, 16, 2));
  EXPECT_EQ(u.parallelism.dense_data_parallel(), 16);
  // The EP group spans 4 NVLink domains of 8 either way; the folded one puts 8 of its ranks in each.
  const ExpertLoad lf = expert_load(s, s.calibration), lu = expert_load(u, u.calibration);
  EXPECT_EQ(lf.ep_domains, 4);
  EXPECT_EQ(lu.ep_domains, 4);
}

// With the megatron-core stack, tp > 1 without etp is a mesh Megatron does not build (its
// --expert-tensor-parallel-size defaults to the TP size, folded): predict says so and what to give.
// Not with etp given, at tp 1, or for another stack.
TEST(Folding, AnUnfoldedMegatronMeshWithTensorParallelismIsNamed) {
  auto notes_of = [](const Scenario& s) {
    std::string all;
    for (const std::string& n : predict(s, s.calibration).notes) all += n + "\n";
    return all;
  };
  const std::string want = "tp 2 without parallelism.etp prices the unfolded mesh";
  const Scenario unfolded = folded({"parallelism.etp=null", "parallelism.ep=8", "parallelism.dp=2"});
  ASSERT_FALSE(unfolded.parallelism.folded);
  ASSERT_EQ(unfolded.stack.name, "megatron-core");
  const std::string n = notes_of(unfolded);
  EXPECT_NE(n.find(want), std::string::npos) << n;
  EXPECT_NE(n.find("give parallelism.etp (2, or 1 for --expert-tensor-parallel-size 1)"), std::string::npos) << n;
  EXPECT_EQ(notes_of(folded()).find(want), std::string::npos);
  EXPECT_EQ(notes_of(folded({"parallelism.etp=null", "parallelism.ep=8", "parallelism.dp=2", "stack.base=maxtext-te-2026-09"})).find(want),
            std::string::npos);
}

// ZeRO-1 (Megatron's distributed optimizer): the gradients are reduce-scattered, never all-reduced,
// and the updated weights all-gathered. With --overlap-param-gather (the stack's fsdp_prefetch) the
// gathers are issued before the step's first unit and each layer's first forward waits for its
// own, the embedding's lookup for the table's; without it they follow the optimizer step. Without
// the distributed optimizer the gradients are all-reduced and nothing is gathered.
TEST(Folding, TheDistributedOptimizerReduceScattersAndGathersTheWeights) {
  const Scenario s = folded();
  ASSERT_TRUE(s.parallelism.distributed_optimizer && s.stack.fsdp_prefetch);
  const ExpertLoad load = expert_load(s, s.calibration);
  const StepGraph g = lower_step(s, load);
  const RankClass& rc = g.classes[0];
  std::map<int, int32_t> gather_of;  // layer (-1: the table) -> its gather
  int32_t first_compute = -1;
  for (size_t i = 0; i < rc.ops.size(); ++i) {
    const Op& op = rc.ops[i];
    if (op.name == "dp.all_gather" || op.name == "dp.all_gather.embed") {
      EXPECT_TRUE(op.deps.empty()) << op.name;
      EXPECT_EQ(first_compute, -1) << "a gather after the first compute op";
      gather_of[op.layer] = static_cast<int32_t>(i);
    }
    if (op.stream == Stream::compute && first_compute < 0) first_compute = static_cast<int32_t>(i);
    EXPECT_NE(op.name, "dp.all_reduce");
  }
  ASSERT_EQ(gather_of.size(), stage_layers(s, 0).size() + 1);
  // Each layer's first forward op (and the lookup) waits for its gather; a later one does not.
  std::map<int, int> firsts;
  for (const Op& op : rc.ops) {
    if (op.stream != Stream::compute || op.phase != Phase::forward || !gather_of.count(op.layer)) continue;
    if (op.layer >= 0 && op.name != "attn.norm") continue;
    if (op.layer < 0 && op.name != "embed.lookup") continue;
    const bool waits = std::find(op.deps.begin(), op.deps.end(), gather_of[op.layer]) != op.deps.end();
    EXPECT_EQ(waits, firsts[op.layer]++ == 0) << op.name << " layer " << op.layer << " micro-batch " << op.micro_batch;
  }
  EXPECT_EQ(firsts.size(), gather_of.size());
  // Without the overlap the optimizer step gathers them, after its own op.
  const Scenario late = folded({"stack.overlap.fsdp_prefetch=false"});
  const StepGraph gl = lower_step(late, load);
  int32_t step = -1;
  int gathers = 0;
  for (size_t i = 0; i < gl.classes[0].ops.size(); ++i) {
    const Op& op = gl.classes[0].ops[i];
    if (op.name == "optimizer.step") step = static_cast<int32_t>(i);
    if (op.name == "dp.all_gather" || op.name == "dp.all_gather.embed") {
      ++gathers;
      EXPECT_EQ(op.deps, std::vector<int32_t>{step}) << op.name << " " << op.layer;
    }
  }
  EXPECT_EQ(gathers, static_cast<int>(gather_of.size()));
  // The gathers on the critical path cost time the overlapped ones hide.
  EXPECT_GT(predict(late, late.calibration).step_time.value(), predict(s, s.calibration).step_time.value());
  // Plain data parallelism: all-reduces, no gathers.
  const Scenario plain = folded({"parallelism.distributed_optimizer=false"});
  std::map<std::string, int> n;
  const StepGraph gp = lower_step(plain, load);  // kept: a range-for over a temporary's member dangles
  for (const Op& op : gp.classes[0].ops) ++n[op.name];
  EXPECT_EQ(n["dp.all_reduce"], static_cast<int>(stage_layers(s, 0).size()) + 1);
  EXPECT_EQ(n["dp.reduce_scatter"] + n["dp.all_gather"] + n["dp.all_gather.embed"], 0);
}

// ZeRO-1's prefetched weight gathers on every schedule: each rank class's gathers come before its
// first compute op, and the first forward op that reads a layer's weights (its norm; an MTP module's
// lookup), the table's (the lookup, the module's own) or the head's waits for them, whichever
// chunk the schedule runs first (DualPipe's second chunk starts at micro-batch pp / 2, DualPipeV's
// last stage holds both ends); the step simulates to its end. Without --overlap-grad-reduce
// Megatron refuses --overlap-param-gather: the gathers then follow the optimizer step.
TEST(Folding, EveryScheduleWaitsForItsPrefetchedWeightGathers) {
  const std::string h800 = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/h800-dualpipe.json";
  const std::string ladder = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  // Half and an eighth of the files' batches: the same programs with fewer micro-batches.
  const std::vector<std::string> on = {"stack.overlap.fsdp_prefetch=true", "stack.overlap.grad_reduce=true", "batch.global_batch=4096"};
  const std::vector<std::string> small = {"batch.global_batch=256"};
  struct Case {
    std::string file;
    std::vector<std::string> sets;
  };
  std::vector<Case> cases = {{h800, on}, {h800, on}, {h800, on}, {h800, on}, {ladder, small}, {ladder, small}};
  cases[1].sets.push_back("parallelism.schedule=dualpipev");
  cases[2].sets.push_back("parallelism.schedule=zbh1");
  cases[3].sets.push_back("parallelism.schedule=1f1b");
  cases[3].sets.push_back("stack.overlap.fwd_bwd=true");
  cases[5].sets = {"parallelism.schedule=zbh1", "parallelism.vpp=1", "parallelism.layout=null", "batch.global_batch=256"};
  for (const Case& c : cases) {
    std::vector<io::Override> o;
    for (const auto& x : c.sets) o.push_back(io::parse_override(x));
    const Scenario s = io::load_scenario(c.file, o);
    std::string what = c.file.substr(c.file.rfind('/') + 1);
    for (const auto& x : c.sets) what += " " + x;
    ASSERT_TRUE(s.parallelism.distributed_optimizer && s.stack.fsdp_prefetch && s.stack.grad_reduce_overlap) << what;
    const StepReport r = predict(s, s.calibration);
    ASSERT_GT(r.step_time.value(), 0) << what;
    int gathers = 0;
    for (const RankClass& rc : r.graph->classes) {
      std::map<std::pair<std::string, int>, std::vector<int32_t>> by_use;  // (what reads it, layer) -> gathers
      int32_t first_compute = -1;
      for (size_t i = 0; i < rc.ops.size(); ++i) {
        const Op& op = rc.ops[i];
        for (int32_t d : op.deps) ASSERT_LT(d, static_cast<int32_t>(i)) << what << " " << op.name;
        if (op.stream == Stream::compute && first_compute < 0) first_compute = static_cast<int32_t>(i);
        if (op.name.str().rfind("dp.all_gather", 0) != 0) continue;
        ASSERT_EQ(first_compute, -1) << what << " " << rc.name << ": " << op.name << " after the first compute op";
        ++gathers;
        const std::string user = op.name == "dp.all_gather.embed" ? "table" : op.name == "dp.all_gather.head" ? "head" : "layer";
        by_use[{user, op.layer}].push_back(static_cast<int32_t>(i));
      }
      for (const auto& [use, ids] : by_use) {
        const auto& [user, layer] = use;
        const Op* first = nullptr;
        for (const Op& op : rc.ops) {
          if (op.stream != Stream::compute || op.phase != Phase::forward) continue;
          const bool reads = user == "table" ? op.name == "embed.lookup" || op.name == "mtp.embed.lookup"
                             : user == "head" ? op.name == "head.norm"
                                              : op.layer == layer;
          if (reads) {
            first = &op;
            break;
          }
        }
        ASSERT_NE(first, nullptr) << what << " " << rc.name << ": nothing reads " << user << " " << layer;
        for (int32_t id : ids)
          EXPECT_NE(std::find(first->deps.begin(), first->deps.end(), id), first->deps.end())
              << what << " " << rc.name << ": " << first->name << " (layer " << first->layer << ") does not wait for "
              << rc.ops[static_cast<size_t>(id)].name;
      }
    }
    EXPECT_GT(gathers, 0) << what;
  }
  // --overlap-param-gather without --overlap-grad-reduce: after the optimizer step.
  const Scenario late = io::load_scenario(h800, {io::parse_override("stack.overlap.fsdp_prefetch=true")});
  ASSERT_FALSE(late.stack.grad_reduce_overlap);
  const StepGraph g = lower_step(late, expert_load(late, late.calibration));
  int after = 0;
  for (const Op& op : g.classes[0].ops)
    if (op.name.str().rfind("dp.all_gather", 0) == 0) {
      ++after;
      ASSERT_EQ(op.deps.size(), 1u);
      EXPECT_EQ(g.classes[0].ops[static_cast<size_t>(op.deps[0])].name, "optimizer.step");
    }
  EXPECT_GT(after, 0);
}

// Hopper's ep_api_copy_passes is carried from Blackwell's fit: a prediction whose HybridEP exchanges
// go through the PyTorch API says so, with the exchanges' share; on Blackwell, where records fit it,
// or without the API's copies, it does not.
TEST(Folding, CarriedApiCopiesAreNamedWhereTheyPriceTheExchanges) {
  const std::string ladder = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb200-mcore-ladder-11-hybridep.json";
  auto notes = [&](std::vector<std::string> sets) {
    std::vector<io::Override> o;
    for (const auto& x : sets) o.push_back(io::parse_override(x));
    const Scenario s = io::load_scenario(ladder, o);
    std::string all;
    for (const std::string& n : predict(s, s.calibration).notes) all += n + "\n";
    return all;
  };
  const std::vector<std::string> h100 = {"system=../../topologies/dgx-h100-cluster.json", "precision.weights=bf16",
                                         "precision.dense_gemm=fp8", "precision.expert_gemm=fp8"};
  const std::string want = "ep_api_copy_passes = 3.90982 is carried from the blackwell profile";
  const std::string n = notes(h100);
  EXPECT_NE(n.find(want), std::string::npos) << n;
  EXPECT_NE(n.find("of the step's kernel time include"), std::string::npos) << n;
  std::vector<std::string> plain = h100;
  plain.push_back("stack.ep_buffer_copies=false");
  EXPECT_EQ(notes(plain).find("ep_api_copy_passes"), std::string::npos);
  EXPECT_EQ(notes({}).find("ep_api_copy_passes"), std::string::npos);
}

// The embedding and head stay BF16 under FP8 primary weights: their gathers move BF16 (the ladder
// stores MXFP8 weights), the layers' their stored format. ZeRO-1's gathers on the ladder (the table
// on stage 0, the head on stage 7), FSDP's on the GB300 example with MXFP8 weights (the table, the
// head and, at pp 2 with the MTP module trained, its own copy of the table on the last stage).
TEST(Folding, TheModelEndsGatherInBf16UnderFp8Weights) {
  const std::string ladder = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json";
  const Scenario s = io::load_scenario(ladder, {});
  ASSERT_EQ(s.precision.weights, Dtype::mxfp8);
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  const ParamCounts pc = count_params(s.model);
  const double head = pc.lm_head + static_cast<double>(s.model.hidden);
  std::map<std::string, int> seen;
  for (const RankClass& rc : g.classes)
    for (const Op& op : rc.ops) {
      if (op.name == "dp.all_gather.embed") {
        EXPECT_DOUBLE_EQ(op.bytes.value(), pc.embedding * 2.0) << rc.name;
      }
      if (op.name == "dp.all_gather.head") {
        EXPECT_DOUBLE_EQ(op.bytes.value(), head * 2.0) << rc.name;
      }
      if (op.name == "dp.all_gather") {
        EXPECT_DOUBLE_EQ(op.bytes.value(), layer_params(s.model, op.layer).dense * bytes_per_element(Dtype::mxfp8)) << op.layer;
      }
      ++seen[op.name];
    }
  EXPECT_GT(seen["dp.all_gather.embed"], 0);
  EXPECT_GT(seen["dp.all_gather.head"], 0);
  EXPECT_GT(seen["dp.all_gather"], 0);
  const std::string gb300 = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb300-optimized.json";
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {"precision.weights=mxfp8"}, {"precision.weights=mxfp8", "parallelism.pp=2", "parallelism.fsdp=8", "memory.offload=[]", "train_mtp=true"}}) {
    std::vector<io::Override> o;
    for (const auto& x : sets) o.push_back(io::parse_override(x));
    const Scenario f = io::load_scenario(gb300, o);
    ASSERT_GT(f.parallelism.fsdp, 1);
    const double tp = static_cast<double>(f.parallelism.tp);
    const StepGraph gf = lower_step(f, expert_load(f, f.calibration));
    std::map<std::string, int> n;
    for (const RankClass& rc : gf.classes)
      for (const Op& op : rc.ops) {
        if (op.name == "fsdp.all_gather.embed") {
          EXPECT_DOUBLE_EQ(op.bytes.value(), pc.embedding / tp * 2.0) << rc.name << " " << op.layer;
        }
        if (op.name == "fsdp.all_gather.head") {
          EXPECT_DOUBLE_EQ(op.bytes.value(), head / tp * 2.0) << rc.name;
        }
        if (op.name == "fsdp.all_gather.embed" && op.layer >= 0) ++n["mtp table"];
        ++n[op.name];
      }
    EXPECT_GT(n["fsdp.all_gather.embed"], 0);
    EXPECT_GT(n["fsdp.all_gather.head"], 0);
    if (f.parallelism.pp > 1) {
      EXPECT_GT(n["mtp table"], 0) << "the MTP module's own table gather on the last stage";
    }
  }
}

// Bytes of the lowered collectives, closed form (Qwen3-235B: hidden 4096, 94 layers, 128 experts
// of FFN 1536, top 8; micro-batch 1 x 4096 tokens, sequence parallel over TP 2): each rank
// dispatches its 2,048 tokens to its EP group of 32 (a fraction 31/32 leaves the rank); under the
// distributed optimizer the dense gradients are reduce-scattered over the 16 dense replicas in FP32
// and the weights all-gathered back in their dtype; the experts (EDP 1) need neither.
TEST(Folding, CollectiveBytesAreTheClosedForms) {
  const Scenario s = folded();
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  const RankClass& rc = g.classes[0];
  ASSERT_EQ(rc.pp_stage, 0);
  std::map<std::string, int> count;
  ASSERT_TRUE(s.parallelism.distributed_optimizer);
  double dense = 0, reduced = 0, gathered = 0;
  for (int l : stage_layers(s, 0)) dense += layer_params(s.model, l).dense / 2;
  dense += count_params(s.model).embedding / 2;
  for (const Op& op : rc.ops) {
    ++count[op.name];
    if (op.name == "moe.dispatch" && op.micro_batch == 0) {
      EXPECT_EQ(op.group, Group::ep);
      EXPECT_NEAR(op.bytes.value(), 2048.0 * op.fanout * 4096 * 2 * 31 / 32, 1e-6 * op.bytes.value());
    }
    if (op.name == "dp.reduce_scatter") {
      EXPECT_EQ(op.group, Group::dense_dp);
      EXPECT_EQ(op.collective, Collective::reduce_scatter);
      reduced += op.bytes.value();
    }
    if (op.name == "dp.all_gather" || op.name == "dp.all_gather.embed") {
      EXPECT_EQ(op.group, Group::dense_dp);
      EXPECT_EQ(op.collective, Collective::all_gather);
      gathered += op.bytes.value();
    }
  }
  // megatron-core overlaps the reduction with the last backward: one reduce-scatter per layer of
  // the stage, then the embedding's; together the stage's dense gradients. The weights' gathers
  // (--overlap-param-gather) are the same parameters in the weights' dtype.
  EXPECT_NEAR(reduced, dense * 4, 1e-6 * reduced);
  EXPECT_NEAR(gathered, dense * bytes_per_element(s.precision.weights), 1e-6 * gathered);
  EXPECT_EQ(count["dp.reduce_scatter"], static_cast<int>(stage_layers(s, 0).size()) + 1);
  EXPECT_EQ(count["dp.all_gather"], static_cast<int>(stage_layers(s, 0).size()));
  EXPECT_EQ(count["dp.all_gather.embed"], 1);
  EXPECT_EQ(count["dp.all_reduce"] + count["dp.all_reduce_experts"] + count["dp.reduce_scatter_experts"], 0);
  EXPECT_EQ(count["dp.all_gather_experts"], 0);
  EXPECT_EQ(count["moe.dispatch.etp_all_gather"], 0);
  // ETP 2 x EP 8 x EDP 2: the expert slices gather their EP rank's rows and reduce-scatter them
  // back (2 x the busiest rank's rows each, forward and backward), the expert GEMMs are half as
  // wide with twice the rows, and the experts' gradients all-reduce over EDP 2.
  const Scenario e = folded({"parallelism.etp=2", "parallelism.ep=8"});
  const ExpertLoad le = expert_load(e, e.calibration);
  const StepGraph ge = lower_step(e, le);
  double expert = 0;
  for (int l : stage_layers(e, 0)) expert += layer_params(e.model, l).routed_experts / 16;
  std::map<std::string, int> n;
  double expert_reduced = 0;
  for (const Op& op : ge.classes[0].ops) {
    ++n[op.name];
    if (op.name == "moe.dispatch.etp_all_gather" || op.name == "moe.combine.etp_reduce_scatter") {
      EXPECT_EQ(op.group, Group::etp);
      EXPECT_NEAR(op.bytes.value(), le.max_rows * 2 * 4096 * 2, 1e-6 * op.bytes.value());
    }
    if (op.name == "moe.expert_fc1" && op.micro_batch == 0) {
      EXPECT_EQ(op.n, 1536);  // 2 x 1536 / etp 2
      EXPECT_EQ(op.groups, 16);  // 128 experts / EP 8
    }
    if (op.name == "dp.reduce_scatter_experts") {
      EXPECT_EQ(op.group, Group::expert_dp);
      expert_reduced += op.bytes.value();
    }
    if (op.name == "dp.all_gather_experts") {
      EXPECT_EQ(op.group, Group::expert_dp);
    }
  }
  EXPECT_NEAR(expert_reduced, expert * 4, 1e-6 * expert_reduced);  // per layer (megatron-core overlaps them)
  const int64_t moe_layers = static_cast<int64_t>(stage_layers(e, 0).size()) * e.micro_batches();
  EXPECT_EQ(n["moe.dispatch.etp_all_gather"], moe_layers);
  EXPECT_EQ(n["moe.combine.etp_reduce_scatter"], moe_layers);
  EXPECT_EQ(n["moe.combine.bwd.etp_all_gather"], moe_layers);
  EXPECT_EQ(n["moe.dispatch.bwd.etp_reduce_scatter"], moe_layers);
  EXPECT_EQ(n["dp.reduce_scatter_experts"], static_cast<int64_t>(stage_layers(e, 0).size()));
  EXPECT_EQ(n["dp.all_gather_experts"], static_cast<int64_t>(stage_layers(e, 0).size()));
}

// Under TP 2 (sequence parallel) the vocabulary-parallel ends of the model exchange the whole
// sequence: the embedding's partial sums are reduce-scattered into sequence shards (and its
// gradient gathered back), the head's input gathered before the column-parallel projection (its
// input gradient reduce-scattered after it), and the loss all-reduces three FP32 values per token
// (maximum logit, sum of exponentials, target logit). Once per micro-batch, on the first and last
// stages; none at TP 1.
TEST(Folding, TheVocabularyParallelEndsExchangeTheSequence) {
  const Scenario s = folded();
  ASSERT_EQ(s.parallelism.tp, 2);
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  const double t = static_cast<double>(s.batch.micro_batch * s.batch.seq_len), h = 4096, mb = static_cast<double>(s.micro_batches());
  std::map<std::string, std::pair<int, double>> first, last;
  for (const Op& op : g.classes.front().ops) ++first[op.name].first, first[op.name].second = op.bytes.value();
  for (const Op& op : g.classes.back().ops) ++last[op.name].first, last[op.name].second = op.bytes.value();
  ASSERT_EQ(g.classes.back().pp_stage, 7);
  for (const char* n : {"tp.reduce_scatter.embed", "tp.all_gather.embed.bwd"}) {
    EXPECT_EQ(first[n].first, mb) << n;
    EXPECT_DOUBLE_EQ(first[n].second, t * h * 2) << n;
  }
  for (const char* n : {"tp.all_gather.head", "tp.reduce_scatter.head.bwd"}) {
    EXPECT_EQ(last[n].first, mb) << n;
    EXPECT_DOUBLE_EQ(last[n].second, t * h * 2) << n;
  }
  EXPECT_EQ(last["tp.all_reduce.head.loss"].first, 3 * mb);
  // The head's backward gathers its input shard again for the weight gradient (once per micro-batch
  // beside the layers' own re-gathers).
  int layer_gathers = 0, head_gathers = 0;
  for (const Op& op : g.classes.back().ops)
    if (op.name == "tp.all_gather.input") (op.layer < 0 ? head_gathers : layer_gathers) += 1;
  EXPECT_EQ(head_gathers, mb);
  EXPECT_GT(layer_gathers, 0);
  EXPECT_DOUBLE_EQ(last["tp.all_reduce.head.loss"].second, t * 4);
  EXPECT_EQ(first.count("tp.all_gather.head"), 0u);
  const Scenario one = folded({"parallelism.tp=1", "parallelism.dp=32"});
  const StepGraph g1 = lower_step(one, expert_load(one, one.calibration));
  for (const RankClass& rc : g1.classes)
    for (const Op& op : rc.ops) EXPECT_FALSE(op.name.starts_with("tp.")) << op.name;
}

// Folded, each rank holds 128 / 32 = 4 whole experts per layer; unfolded with the same TP (EP 16
// inside the dense replicas) it holds 8: the expert weights per GPU halve, the dense ones do not.
TEST(Folding, ExpertWeightsSplitOverTheWholeStage) {
  const Scenario f = folded({"parallelism.pp=1", "parallelism.dp=128", "batch.global_batch=1024"});
  const Scenario u = folded({"parallelism={\"tp\": 2, \"pp\": 1, \"ep\": 16, \"dp\": 8, \"distributed_optimizer\": true}"});
  const MemoryReport mf = memory_report(f, expert_load(f, f.calibration), f.calibration);
  const MemoryReport mu = memory_report(u, expert_load(u, u.calibration), u.calibration);
  const ParamCounts pc = count_params(f.model);
  double expert = 0;
  for (int l = 0; l < f.model.layers; ++l) expert += layer_params(f.model, l).routed_experts;
  const double dense = pc.total - expert;
  EXPECT_NEAR(mf.weights.value(), (dense / 2 + expert / 32) * 2, 1e-6 * mf.weights.value());
  EXPECT_NEAR(mu.weights.value(), (dense / 2 + expert / 16) * 2, 1e-6 * mu.weights.value());
}

// Context parallelism: the CP ranks of a sequence hold the same weights and sum their gradients
// with the data-parallel replicas (Megatron's get_data_parallel_group(with_context_parallel=True)),
// and a distributed optimizer shards over them. Unfolded cp 2 x ep 16 x dp 1 on 32 GPUs per stage:
// the dense gradients reduce over all 32 ranks of a stage, the experts' over the two CP ranks,
// and the optimizer states are the stage's dense parameters / 32 and its experts / (16 x 2).
// Folded (tp 2 x cp 2 x dp 8, EP 32): the dense group is the 16 ranks at TP stride.
TEST(Folding, ContextParallelRanksReduceTheirGradientsWithTheDataParallelOnes) {
  const Scenario u =
      folded({"parallelism={\"tp\": 1, \"cp\": 2, \"pp\": 8, \"ep\": 16, \"dp\": 1, \"distributed_optimizer\": true}"});
  const Parallelism& p = u.parallelism;
  ASSERT_FALSE(p.folded);
  EXPECT_EQ(p.dense_data_parallel(), 16);  // the batch is still split 16 ways
  EXPECT_EQ(u.micro_batches(), 64);
  EXPECT_EQ(p.dense_grad_replicas(), 32);
  EXPECT_EQ(p.expert_data_parallel(), 2);
  EXPECT_EQ(group_members(Group::dense_dp, p, 0), range(0, 32, 1));
  EXPECT_EQ(group_members(Group::expert_dp, p, 5), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(group_members(Group::expert_dp, p, 37), (std::vector<int64_t>{36, 37}));
  EXPECT_EQ(group_size(Group::expert_dp, p), 2);
  const ExpertLoad load = expert_load(u, u.calibration);
  const StepGraph g = lower_step(u, load);
  const RankClass& rc = g.classes[1];
  ASSERT_EQ(rc.pp_stage, 1);
  double dense = 0, expert = 0;
  for (int l : stage_layers(u, 1)) {
    dense += layer_params(u.model, l).dense;
    expert += layer_params(u.model, l).routed_experts / 16;
  }
  double dense_reduced = 0, expert_reduced = 0;
  for (const Op& op : rc.ops) {
    if (op.name == "dp.reduce_scatter") {  // the distributed optimizer's (the folded example sets it)
      EXPECT_EQ(op.group, Group::dense_dp);
      dense_reduced += op.bytes.value();
    }
    if (op.name == "dp.reduce_scatter_experts") {
      EXPECT_EQ(op.group, Group::expert_dp);
      expert_reduced += op.bytes.value();
    }
  }
  EXPECT_NEAR(dense_reduced, dense * 4, 1e-6 * dense * 4);  // FP32 gradients
  EXPECT_NEAR(expert_reduced, expert * 4, 1e-6 * expert * 4);
  const MemoryReport m = memory_report(u, load, u.calibration);
  double md = 0, me = 0;
  for (int l : stage_layers(u, m.pp_stage)) {
    md += layer_params(u.model, l).dense;
    me += layer_params(u.model, l).routed_experts / 16;
  }
  const ParamCounts pc = count_params(u.model);
  if (holds_embedding(u, m.pp_stage)) md += pc.embedding;
  if (holds_head(u, m.pp_stage)) md += pc.lm_head + static_cast<double>(u.model.hidden);
  // Adam's two FP32 moments and the FP32 master weights: 12 bytes per parameter owned.
  EXPECT_NEAR(m.optimizer_states.value(), (md / 32 + me / 2) * 12, 1e-6 * m.optimizer_states.value());
  // Folded: the dense data-parallel group counts cp x dp = 16 at TP stride; the expert mesh
  // (EP 32 = the stage) has no replicas.
  const Scenario f = folded({"parallelism.cp=2", "parallelism.dp=8"});
  EXPECT_EQ(f.parallelism.dense_grad_replicas(), 16);
  EXPECT_EQ(f.micro_batches(), 128);
  EXPECT_EQ(group_members(Group::dense_dp, f.parallelism, 1), range(1, 16, 2));
  EXPECT_EQ(group_size(Group::dense_dp, f.parallelism), 16);
  EXPECT_EQ(f.parallelism.expert_data_parallel(), 1);
}

// Sequence parallelism (TP 2): the projections kept their input as this rank's shard, so each
// attention block's backward gathers it again (tp.all_gather.input, the forward gather's bytes)
// before the projections' backward; when the policy drops them, before their recomputation too
// (the recomputed linears keep their shard again, so the weight gradients gather once more).
TEST(Folding, SequenceParallelBackwardGathersTheProjectionsInputAgain) {
  for (const char* recompute : {"[]", "[\"q_proj\", \"kv_proj\"]"})
  for (const char* fuse : {"true", "false"}) {
    const Scenario s = folded({std::string("memory.recompute=") + recompute, std::string("stack.fused_qkv=") + fuse});
    const StepGraph g = lower_step(s, expert_load(s, s.calibration));
    const RankClass& rc = g.classes[1];
    const bool again = std::string(recompute) != "[]";
    int gathers = 0;
    for (size_t i = 0; i < rc.ops.size(); ++i) {
      const Op& op = rc.ops[i];
      if (op.name != "tp.all_gather.input") continue;
      ++gathers;
      EXPECT_EQ(op.group, Group::tp);
      EXPECT_DOUBLE_EQ(op.bytes.value(), 4096.0 * 4096 * 2);  // the block's input: 4,096 tokens x hidden 4,096, BF16
      // The first GEMM after it that needs it waits for it: the K/V projection's backward, or the
      // recomputed Q projection (megatron-core's fused QKV projection: its recompute, its backward).
      const bool fused = s.stack.fused_qkv;
      const std::string want = again && gathers % 2 == 1 ? (fused ? "attn.qkv_proj.recompute" : "attn.q_proj.recompute")
                               : fused                   ? "attn.qkv_proj"
                                                         : "attn.kv_proj";
      for (size_t j = i + 1; j < rc.ops.size(); ++j) {
        const Op& next = rc.ops[j];
        if (next.stream != Stream::compute || std::find(next.deps.begin(), next.deps.end(), static_cast<int32_t>(i)) == next.deps.end())
          continue;
        EXPECT_EQ(std::string(next.name).rfind(want, 0), 0u) << next.name << " under " << recompute << ", fused_qkv " << fuse;
        break;
      }
    }
    EXPECT_EQ(gathers, (again ? 2 : 1) * static_cast<int>(stage_layers(s, 1).size() * s.micro_batches())) << recompute;
  }
}

// Wrong folded meshes: the rule in the message, at the JSON path.
TEST(Folding, WrongFoldedMeshesSayWhy) {
  auto message = [](std::vector<std::string> sets) -> std::string {
    try {
      (void)folded(std::move(sets));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "accepted";
  };
  std::string m = message({"parallelism.ep=64"});
  EXPECT_NE(m.find("/parallelism/ep"), std::string::npos) << m;
  EXPECT_NE(m.find("must divide the 32 GPUs of a pipeline stage"), std::string::npos) << m;
  m = message({"parallelism.dp=8"});
  EXPECT_NE(m.find("gpus = tp x cp x pp x dp"), std::string::npos) << m;
  m = message({"parallelism.fsdp=2"});
  EXPECT_NE(m.find("/parallelism/fsdp"), std::string::npos) << m;
  m = message({"parallelism.etp=5", "parallelism.ep=1"});
  EXPECT_NE(m.find("must divide"), std::string::npos) << m;
}

}  // namespace
}  // namespace moeperf
