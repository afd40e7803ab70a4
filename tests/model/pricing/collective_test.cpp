// Collectives on small graphs and the fluid sharing of the simulator, against closed forms.
#include "model/pricing/collective.h"
#include "model/pricing/efficiency.h"
#include "model/pricing/cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "model/io/load.h"
#include "model/study/predict.h"
#include "model/workload/routing.h"
#include "model/sim/sim.h"
#include "model/study/study.h"
#include "model/error.h"
#include "../io/temp_dir.h"

namespace moeperf {
namespace {

using moeperf::testing::source;

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// Synthetic ops for the simulator tests: an FSDP all-gather of `bytes` on `stream`, and a BF16
// 8192^3 GEMM (compute-bound).
Op fsdp_gather(const char* name, Bytes bytes, Stream stream = Stream::fsdp_comm) {
  Op op;
  op.name = name;
  op.category = Category::fsdp_comm;
  op.stream = stream;
  op.collective = Collective::all_gather;
  op.group = Group::fsdp;
  op.bytes = op.recv_bytes = bytes;
  return op;
}

Op big_gemm(const char* name) {
  Op op;
  op.name = name;
  op.category = Category::gemm;
  op.dtype = Dtype::bf16;
  op.m = op.n = op.k = 8192;
  op.flops = Flops(2.0 * 8192 * 8192 * 8192);
  return op;
}

TEST(Collective, RingOfEightOverNvlink) {
  const SystemSpec sys = io::load_system(source("topologies/dgx-h100-cluster.json"));
  const Topology t = Topology::build(sys, 8);
  const Calibration cal;
  const CollectiveCost c = collective_cost(Collective::all_gather, iota(8), t, cal);
  EXPECT_STREQ(c.algorithm, "ring");
  EXPECT_EQ(c.steps, 7);
  // Every GPU sends (n-1)/n of the buffer over its NVLink (18 x 25 GB/s) at nvlink_fraction.
  const double bw = 18 * 25e9 * cal[Param::nvlink_fraction];
  EXPECT_NEAR(c.s_per_byte[static_cast<int>(Resource::nvlink)], (7.0 / 8) / bw, 1e-24);
  EXPECT_DOUBLE_EQ(c.s_per_byte[static_cast<int>(Resource::nic)], 0.0);
  // Seven NVLink steps, each the library's step latency or the route's, whichever is longer.
  const double step = std::max(cal[Param::nvlink_step_s], sys.domain.nvlink_latency.value());
  const double lat = cal[Param::collective_launch_s] + 7 * step;
  EXPECT_NEAR(c.time(gibibytes(1)).value(), lat + 1073741824.0 * (7.0 / 8) / bw, 1e-12);
  // nccl-tests: busbw = algbw x (n-1)/n equals the per-GPU achieved NVLink bandwidth for large sizes.
  const double algbw = 1073741824.0 / (c.time(gibibytes(1)).value() - lat);
  EXPECT_NEAR(algbw * bus_factor(Collective::all_gather, 8), bw, 1e-6 * bw);
  // All-reduce inside one NVSwitch domain uses in-switch reduction (NVLS): S(1 + 1/n) each way.
  const CollectiveCost ar = collective_cost(Collective::all_reduce, iota(8), t, cal);
  EXPECT_STREQ(ar.algorithm, "nvls");
  EXPECT_NEAR(ar.s_per_byte[static_cast<int>(Resource::nvlink)], (1.0 + 1.0 / 8) / bw, 1e-24);
}

TEST(Collective, AllToAllAcrossTwoRacksThroughOneSpine) {
  // Two GB300 racks of 64 GPUs, a fat tree that is not rail-optimized: NICs 0-71 on leaf 0, 72-127
  // on leaf 1, one spine.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(source("topologies/gb300-nvl72.json")));
  j["nvlink_domain"] = source("topologies/domains/gb300-nvl72.json");
  nlohmann::json f = nlohmann::json::parse(std::ifstream(source("topologies/fabrics/quantum-x800-fat-tree.json")));
  f["switch"] = source("topologies/switches/quantum-x800.json");
  f["rail_optimized"] = false;
  j["fabric"] = f;
  moeperf::testing::TempDir d;
  const SystemSpec sys = io::load_system(d.write("two-racks.json", j.dump()));
  const Topology t = Topology::build(sys, 128);
  ASSERT_EQ(t.count(VertexKind::leaf), 2);
  ASSERT_EQ(t.count(VertexKind::spine), 1);
  const Calibration cal;
  const CollectiveCost c = collective_cost(Collective::all_to_all, iota(128), t, cal);
  const double nic = 100e9 * cal[Param::ib_fraction], nvl = 900e9 * cal[Param::nvlink_fraction];
  // Each GPU sends 1/127 of its buffer to every other GPU: 64 of them in the other rack over its NIC,
  // 63 in its own rack over NVLink.
  EXPECT_NEAR(c.s_per_byte[static_cast<int>(Resource::nic)], (64.0 / 127) / nic, 1e-24);
  EXPECT_NEAR(c.s_per_byte[static_cast<int>(Resource::nvlink)], (63.0 / 127) / nvl, 1e-24);
  // Leaf 0 holds rack 0 (64 GPUs) and 8 GPUs of rack 1; rack 0's traffic to the 56 GPUs on leaf 1 goes
  // up to the spine: 64 x 56/127 of a buffer over 72 uplinks of 100 GB/s.
  EXPECT_NEAR(c.s_per_byte[static_cast<int>(Resource::fabric)], (64.0 * 56 / 127) / (72 * 100e9 * cal[Param::ib_fraction]), 1e-24);
  EXPECT_DOUBLE_EQ(c.bottleneck_s_per_byte(), c.s_per_byte[static_cast<int>(Resource::nic)]);
}

// Balls into bins, closed forms: 2 flows over 2 links fill one with both half of the time (1.5);
// 3 over 2: 3 a quarter of the time, else 2 (2.25); 3 over 3: 3 in 3/27, 1 in 6/27, else 2 (51/27);
// 2 over 32: both on one link 1/32 of the time; one flow is always 1. Above 200 flows (Poissonized),
// against the exact law n! [x^n] (sum_{j<=m} x^j / (j! U^j))^U summed over m (the exact branch's
// sum, run outside moeperf for these counts): 201 over 2 -> 106.163, 201 over 16 ->
// 19.191, 288 over 72 -> 9.488; and one more flow never lowers the maximum across the switch at 200
// (the normal approximation gave 104.50, 18.62 and 8.74, and fell from 19.11 to 18.62 at 201).
TEST(Ecmp, ExpectedMaxOfFlowsOverLinksIsTheClosedForm) {
  EXPECT_NEAR(expected_max_balls(2, 2), 1.5, 1e-12);
  EXPECT_NEAR(expected_max_balls(3, 2), 2.25, 1e-12);
  EXPECT_NEAR(expected_max_balls(3, 3), 51.0 / 27, 1e-12);
  EXPECT_NEAR(expected_max_balls(2, 32), 1 + 1.0 / 32, 1e-12);
  EXPECT_NEAR(expected_max_balls(1, 72), 1.0, 1e-12);
  EXPECT_NEAR(expected_max_balls(7, 1), 7.0, 1e-12);
  EXPECT_NEAR(expected_max_balls(200, 16), 19.1127, 1e-3);  // exact branch
  EXPECT_NEAR(expected_max_balls(201, 2), 106.163, 0.02);
  EXPECT_NEAR(expected_max_balls(201, 16), 19.1909, 0.005 * 19.1909);
  EXPECT_NEAR(expected_max_balls(288, 72), 9.4882, 0.005 * 9.4882);
  EXPECT_GT(expected_max_balls(201, 16), expected_max_balls(200, 16));
  EXPECT_GT(expected_max_balls(100000, 72), 100000.0 / 72);  // large counts stay finite and above the mean
  EXPECT_LT(expected_max_balls(100000, 72), 100000.0 / 72 + 5 * std::sqrt(100000.0 / 72));
  EXPECT_NEAR(ecmp_collision_factor(1, 72), 72.0, 1e-9);  // one flow: one link of 72 carries it all
  EXPECT_GT(ecmp_collision_factor(3584, 72), 1.2);
  EXPECT_LT(ecmp_collision_factor(3584, 72), 1.6);
}

// Static ECMP on the two-rack fabric: leaf 0's 64 rack-0 GPUs each send to the 56 GPUs on leaf 1,
// 3,584 flows hashed over 72 uplinks (and as many into leaf 1's downlinks): the busiest link
// carries E[max] of them, the fabric's time per byte that many times the adaptive one's.
TEST(Ecmp, StaticHashingCollidesOnTheUplinks) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(source("topologies/gb300-nvl72.json")));
  j["nvlink_domain"] = source("topologies/domains/gb300-nvl72.json");
  nlohmann::json f = nlohmann::json::parse(std::ifstream(source("topologies/fabrics/quantum-x800-fat-tree.json")));
  nlohmann::json sw = nlohmann::json::parse(std::ifstream(source("topologies/switches/quantum-x800.json")));
  f["rail_optimized"] = false;
  moeperf::testing::TempDir d;
  f["switch"] = sw;
  j["fabric"] = f;
  const Topology adaptive = Topology::build(io::load_system(d.write("adaptive.json", j.dump())), 128);
  sw["routing"] = "static_ecmp";
  j["fabric"]["switch"] = sw;
  const Topology hashed = Topology::build(io::load_system(d.write("static.json", j.dump())), 128);
  EXPECT_TRUE(adaptive.adaptive_routing());
  EXPECT_FALSE(hashed.adaptive_routing());
  EXPECT_EQ(hashed.leaf_uplinks(), 72);
  const Calibration cal;
  const int fab = static_cast<int>(Resource::fabric);
  const double a = collective_cost(Collective::all_to_all, iota(128), adaptive, cal).s_per_byte[fab];
  const double s = collective_cost(Collective::all_to_all, iota(128), hashed, cal).s_per_byte[fab];
  EXPECT_NEAR(s / a, ecmp_collision_factor(64 * 56, 72), 1e-9);
  // Inside one rack nothing crosses a leaf: no collisions either way.
  EXPECT_DOUBLE_EQ(collective_cost(Collective::all_to_all, iota(64), hashed, cal).s_per_byte[fab], 0.0);
  // A pair across the leaves (GPU 1 on leaf 0, GPU 100 on leaf 1): one flow up from leaf 0, but the
  // other 71 GPUs of that leaf belong to pairs doing the same at the same time, so 72 flows hash
  // onto its 72 uplinks and the busiest carries E[max] of 72 balls in 72 bins (about 4.3), not 1:
  // this pair's flow gets a quarter of a link where rank 0's group alone would have one to itself.
  ASSERT_EQ(hashed.leaf_of(1), 0);
  ASSERT_EQ(hashed.leaf_of(100), 1);
  ASSERT_EQ(hashed.gpus_on_leaf(0), 72);
  const std::vector<int64_t> pair{1, 100};
  const double pa = collective_cost(Collective::all_to_all, pair, adaptive, cal).s_per_byte[fab];
  const double ps = collective_cost(Collective::all_to_all, pair, hashed, cal).s_per_byte[fab];
  EXPECT_NEAR(ecmp_collision_factor(1, 72, 72.0), expected_max_balls(72, 72) * 72.0, 1e-9);
  EXPECT_NEAR(ps / pa, expected_max_balls(72, 72) * 72.0, 1e-9);
  EXPECT_GT(expected_max_balls(72, 72), 3.5);
  EXPECT_LT(expected_max_balls(72, 72), 5.5);
}

TEST(Collective, AllToAllOf1152Gb200GpusIsBoundByTheBytesLeavingEachRack) {
  const SystemSpec sys = io::load_system(source("topologies/gb200-nvl72.json"));
  const Topology t = Topology::build(sys, 1152);
  const Calibration cal;
  const CollectiveCost c = collective_cost(Collective::all_to_all, iota(1152), t, cal);
  const double size = 64.0 * 1048576, n = 1152, per_rack = static_cast<double>(t.gpus_per_domain());
  const double moved = size * (n - 1) / n;  // nccl-tests: 1/n of the buffer stays on the GPU
  const double time = c.time(Bytes(moved)).value();
  // Bound: the bytes that leave the GPU's rack over its 400 Gb/s NIC at the achieved IB efficiency.
  const double bound = size * (n - per_rack) / n / (50e9 * cal[Param::ib_fraction]);
  EXPECT_NEAR(time / bound, 1.0, 0.05);
}

// All-reduce over two GB300 racks (64 GPUs each): the tree exchanges half of each rack's buffer with
// the other rack (1/64 of the buffer per NIC), the rail-aligned ring twice that; inside the racks a
// chain passes the buffer on twice, NVLink SHARP sends and receives it once.
TEST(Collective, TreeAllReduceAcrossTwoRacks) {
  const SystemSpec sys = io::load_system(source("topologies/gb300-nvl72.json"));
  const Topology t = Topology::build(sys, 128);
  const Calibration cal;
  const double nic = 100e9 * cal[Param::ib_fraction], nvl = 900e9 * cal[Param::nvlink_fraction];
  const auto algos = collective_algorithms(Collective::all_reduce, iota(128), t, cal);
  ASSERT_EQ(algos.size(), 3u);
  const CollectiveCost &ring = algos[0], &tree = algos[1], &nvls_tree = algos[2];
  EXPECT_STREQ(ring.algorithm, "ring");
  EXPECT_STREQ(tree.algorithm, "tree");
  EXPECT_STREQ(nvls_tree.algorithm, "nvls_tree");
  const int nic_r = static_cast<int>(Resource::nic), nvl_r = static_cast<int>(Resource::nvlink);
  EXPECT_NEAR(ring.s_per_byte[nic_r], 2.0 * 127 / 128 / 64 / nic, 1e-24);
  EXPECT_NEAR(tree.s_per_byte[nic_r], 1.0 / 64 / nic, 1e-24);
  // An interior GPU of the NVLink chain passes the whole buffer on in the reduce and in the
  // broadcast (2 each way); NVLS moves S(1 + 1/g) each way (ld_reduce of its shard, multicast).
  EXPECT_NEAR(tree.s_per_byte[nvl_r], 2.0 / nvl, 1e-24);
  EXPECT_NEAR(nvls_tree.s_per_byte[nvl_r], (1.0 + 1.0 / 64) / nvl, 1e-24);
  EXPECT_NEAR(nvls_tree.s_per_byte[nic_r], 1.0 / 64 / nic, 1e-24);
  // Steps: the ring 2 x 127, of which 2 x 1 cross the network; the tree 2 (1 network level + 63
  // chain steps); NVLS tree 2 (1 + 1). Each step costs the library's step latency (route as floor);
  // an NVLS phase inside a rack is the switches' reduction or multicast (nvls_step_s).
  EXPECT_EQ(ring.steps, 254);
  EXPECT_EQ(tree.steps, 128);
  EXPECT_EQ(nvls_tree.steps, 4);
  const double nvl_step = std::max(cal[Param::nvlink_step_s], t.route(0, 1).latency.value());
  const double net_step = std::max(cal[Param::network_step_s], t.route(0, 64).latency.value());
  const double launch = cal[Param::collective_launch_s];
  EXPECT_NEAR(ring.latency.value(), launch + 2 * (126 * nvl_step + 1 * net_step), 1e-12);
  EXPECT_NEAR(tree.latency.value(), launch + 2 * (63 * nvl_step + 1 * net_step), 1e-12);
  EXPECT_NEAR(nvls_tree.latency.value(), launch + 2 * (1 * cal[Param::nvls_step_s] + 1 * net_step), 1e-12);
  // Rails line up between the racks (rail-optimized leaves): nothing goes up to a spine.
  EXPECT_DOUBLE_EQ(tree.s_per_byte[static_cast<int>(Resource::fabric)], 0.0);
}

// Domains of unequal size (64, 64 and 8 GPUs): the longest NVLink chain, not the shortest, sets the
// tree's steps; three domains make one tree level (floor(log2 3)).
TEST(Collective, TreeLatencyFollowsTheLargestDomain) {
  const SystemSpec sys = io::load_system(source("topologies/gb300-nvl72.json"));
  const Topology t = Topology::build(sys, 136);
  ASSERT_EQ(t.domains(), 3);
  const Calibration cal;
  const CollectiveCost tree = all_reduce_tree_cost(iota(136), t, cal);
  EXPECT_EQ(tree.steps, 2 * (1 + 63));
  const Topology t2 = Topology::build(sys, 128);
  const CollectiveCost tree2 = all_reduce_tree_cost(iota(128), t2, cal);
  EXPECT_NEAR(tree.latency.value(), tree2.latency.value(), 1e-12);
}

// The tree's network steps grow as log2 of the domains, the ring's linearly: for small messages on
// 16 racks the tree wins, for large ones both carry the same NIC bytes.
TEST(Collective, TreeBeatsRingOnLatencyAcrossManyRacks) {
  const SystemSpec sys = io::load_system(source("topologies/gb300-nvl72.json"));
  const Topology t = Topology::build(sys, 1024);
  const Calibration cal;
  const auto algos = collective_algorithms(Collective::all_reduce, iota(1024), t, cal);
  const CollectiveCost &ring = algos[0], &tree = algos[1];
  EXPECT_EQ(ring.steps, 2 * 1023);
  EXPECT_EQ(tree.steps, 2 * (4 + 63));
  EXPECT_LT(tree.latency, ring.latency);
  const int nic_r = static_cast<int>(Resource::nic);
  // Double binary tree: a rack is interior in one tree and a leaf in the other, about 2/64 of the
  // buffer per NIC and direction, as the ring's 2 (n-1)/n / 64.
  EXPECT_NEAR(tree.s_per_byte[nic_r] / ring.s_per_byte[nic_r], 1.0, 0.05);
}

// All-to-all over two racks, hierarchically: a row crosses the network once to the GPU on the
// destination's rail, then NVLink. Without de-duplication the NIC bytes are those of the direct
// exchange (but no traffic goes up to a spine); with node-level de-duplication a token crosses to
// the other rack once: node_fanout / 2 rows of the fanout x 127/128 each GPU sends.
TEST(Collective, HierarchicalAllToAllCrossesEachRemoteRackOnce) {
  const SystemSpec sys = io::load_system(source("topologies/gb300-nvl72.json"));
  const Topology t = Topology::build(sys, 128);
  const Calibration cal;
  const double nic = 100e9 * cal[Param::ib_fraction];
  const int nic_r = static_cast<int>(Resource::nic), fab_r = static_cast<int>(Resource::fabric);
  const CollectiveCost direct = collective_cost(Collective::all_to_all, iota(128), t, cal);
  const CollectiveCost hier = all_to_all_hierarchical_cost(iota(128), t, cal, {8.0, 0.0});
  EXPECT_STREQ(hier.algorithm, "hierarchical");
  EXPECT_NEAR(hier.s_per_byte[nic_r], (64.0 / 127) / nic, 1e-24);
  EXPECT_NEAR(direct.s_per_byte[nic_r], (64.0 / 127) / nic, 1e-24);
  EXPECT_GT(direct.s_per_byte[fab_r], 0.0);
  EXPECT_DOUBLE_EQ(hier.s_per_byte[fab_r], 0.0);
  const double node_fanout = 1.99;
  const CollectiveCost dedup = all_to_all_hierarchical_cost(iota(128), t, cal, {8.0, node_fanout});
  EXPECT_STREQ(dedup.algorithm, "hierarchical-dedup");
  EXPECT_NEAR(dedup.s_per_byte[nic_r], (node_fanout / 2) / (8.0 * 127 / 128) / nic, 1e-24);
  // Offered: only the de-duplicating path when node_fanout is given; both plain paths otherwise.
  EXPECT_EQ(collective_algorithms(Collective::all_to_all, iota(128), t, cal, {8.0, node_fanout}).size(), 1u);
  EXPECT_EQ(collective_algorithms(Collective::all_to_all, iota(128), t, cal, {8.0, 0.0}).size(), 2u);
  EXPECT_EQ(collective_algorithms(Collective::all_to_all, iota(64), t, cal, {8.0, 0.0}).size(), 1u);
}

// A scenario whose EP group spans both racks: the fused de-duplicating dispatcher sends the routing
// model's expected distinct racks per token across the network, and is priced hierarchically.
TEST(Collective, FusedDedupDispatchAcrossRacksUsesDistinctNodes) {
  Scenario s = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"));
  s.parallelism.ep = 128;
  s.parallelism.fsdp = 1;
  const ExpertLoad load = expert_load(s, s.calibration);
  EXPECT_EQ(load.ep_domains, 2);
  RouterSpec router;  // the example routes without group limits
  const double nodes = expected_distinct_nodes(s.routing, router, 256, 8, 128, 64);
  EXPECT_NEAR(load.distinct_domains, nodes, 1e-12);
  EXPECT_GT(nodes, 1.9);  // 8 picks over 2 racks: both are hit unless all 8 land in one (~0.4 %)
  const StepGraph g = lower_step(s, load);
  const Topology t = Topology::build(s.system, s.gpus);
  const Pricer pr(s, t, s.calibration);
  const Op* dispatch = nullptr;
  for (const Op& op : g.classes[0].ops)
    if (op.name == "moe.dispatch") dispatch = &op;
  ASSERT_NE(dispatch, nullptr);
  EXPECT_DOUBLE_EQ(dispatch->node_fanout, nodes);
  EXPECT_DOUBLE_EQ(dispatch->fanout, load.distinct_ranks);
  const CollectiveCost c = pr.comm_cost(*dispatch);
  EXPECT_STREQ(c.algorithm, "hierarchical-dedup");
  // Plain all-to-all: no node_fanout, k rows per token.
  s.stack.dispatcher = Dispatcher::alltoall;
  const StepGraph g2 = lower_step(s, load);
  for (const Op& op : g2.classes[0].ops)
    if (op.name == "moe.dispatch") {
      EXPECT_DOUBLE_EQ(op.node_fanout, 0.0);
      EXPECT_DOUBLE_EQ(op.fanout, 8.0);
    }
}

// A pipeline hand-off is priced between the two stages it joins: with 4 GPUs a stage on 8-GPU
// DGX H100 nodes, stages 0 and 1 share a node (NVLink) and stages 1 and 2 do not (the NICs). Each
// boundary was priced as stage 0's, so every hand-off ran at NVLink speed.
TEST(Collective, PipelineSendsCrossWhatTheirStagesCross) {
  Scenario s = io::load_scenario(source("examples/layouts/qwen3-235b-h100-megatron-folded.json"),
                                 {io::parse_override("gpus=32"), io::parse_override("parallelism.dp=2"),
                                  io::parse_override("parallelism.ep=4"), io::parse_override("batch.global_batch=128")});
  ASSERT_EQ(s.parallelism.pp, 8);
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  const Topology t = Topology::build(s.system, s.gpus);
  const Pricer pr(s, t, s.calibration);
  const RankClass* stage1 = nullptr;
  for (const RankClass& rc : g.classes)
    if (rc.pp_stage == 1 && !stage1) stage1 = &rc;
  ASSERT_NE(stage1, nullptr);
  const Op *to0 = nullptr, *to2 = nullptr;
  for (const Op& op : stage1->ops)
    if (op.name == "pp.send" || op.name == "pp.send.bwd") (op.peer_stage == 2 ? to2 : to0) = &op;
  ASSERT_TRUE(to0 && to2);
  EXPECT_EQ(to0->peer_stage, 0);
  const CollectiveCost in_node = pr.comm_cost(*to0, 1), across = pr.comm_cost(*to2, 1);
  // Across nodes the bytes go through one CX-7 NIC: at most its 50 GB/s, far below NVLink.
  const double bytes = to2->bytes.value();
  EXPECT_GT(across.time(to2->bytes).value(), bytes / 50e9);
  EXPECT_LT(in_node.time(to0->bytes).value(), bytes / 100e9 + in_node.latency.value());
  EXPECT_GT(across.time(to2->bytes).value(), 3 * in_node.time(to0->bytes).value());
  // The same boundary from either side.
  EXPECT_DOUBLE_EQ(pr.comm_cost(*to0, 1).time(to0->bytes).value(), pr.time(*to0, 1).value());
}

// DeepSeek's H800 mesh (EP 64 over 8 nodes) with a fused EP kernel, and its first MoE dispatch's
// cost at `sms` SMs: each part's seconds per byte.
struct H800Dispatch {
  Scenario s;
  Topology t;
  StepGraph g;
  const Op* dispatch = nullptr;
  explicit H800Dispatch(EpKernel kernel, const std::vector<std::pair<Param, double>>& params = {})
      : s(io::load_scenario(source("examples/deepseek-v3/h800-dualpipe.json"))), t(Topology::build(s.system, s.gpus)) {
    s.stack.ep_kernel = kernel;
    for (auto [p, v] : params) s.calibration.set(p, v);
    g = lower_step(s, expert_load(s, s.calibration));
    for (const Op& op : g.classes[0].ops)
      if (op.name == "moe.dispatch" && !dispatch) dispatch = &op;
  }
  CollectiveCost priced(int sms) const {
    Scenario x = s;
    x.stack.ep_sms = sms;
    return Pricer(x, t, x.calibration).comm_cost(*dispatch);
  }
};

// DeepEP's normal kernels over RDMA run at the NIC's rate whatever SMs they are given (V1 on H800:
// 43-58 GB/s internode at 24 SMs, of a 50 GB/s NIC); their SM curve, fitted on NVLink records,
// slows the NVLink part only. (The NIC part was cut by it too: 30 GB/s at 24 SMs.)
TEST(Collective, DeepEpsRdmaRateDoesNotFollowItsSms) {
  const H800Dispatch h(EpKernel::deepep, {{Param::deepep_row_sm_s, 0.0}});  // the SM curve alone (rows' SM time: AFusedEpExchangePaysItsRowsSmTime)
  ASSERT_EQ(h.s.stack.dispatcher, Dispatcher::fused_dedup);
  ASSERT_EQ(h.s.parallelism.ep, 64);  // across 8 nodes
  ASSERT_NE(h.dispatch, nullptr);
  const int nic = static_cast<int>(Resource::nic), nvl = static_cast<int>(Resource::nvlink);
  const CollectiveCost few = h.priced(8), many = h.priced(24);
  EXPECT_GT(few.own_s_per_byte[nvl], many.own_s_per_byte[nvl] * 1.2);  // the NVLink part follows the SMs
  EXPECT_DOUBLE_EQ(few.own_s_per_byte[nic], many.own_s_per_byte[nic]);  // the NIC part does not
  EXPECT_DOUBLE_EQ(few.s_per_byte[nvl], many.s_per_byte[nvl]);          // what they take of the links does not
}

// HybridEP over RDMA: each SM keeps requests in flight to every remote node it writes to, so its
// NIC rate is ep_network_fraction x x / (x + ep_sm_half) with x = SMs x (remote nodes), closed form;
// the same SMs reach more of the NIC over more nodes (HybridEP on H100: 4 SMs, 22 GB/s of the NIC
// at 2 nodes, 40 at 4).
TEST(Collective, HybridEpsRdmaRateFollowsItsSmsTimesRemoteNodes) {
  const H800Dispatch h(EpKernel::hybridep, {{Param::ep_sm_half, 7.0}, {Param::ep_network_fraction, 0.9}});
  ASSERT_EQ(h.s.parallelism.ep, 64);  // across 8 nodes
  ASSERT_NE(h.dispatch, nullptr);
  const int nic = static_cast<int>(Resource::nic);
  // 1 SM x 7 remote nodes: half the rate; 7 SMs x 7: 7/8 of it.
  EXPECT_NEAR(h.priced(1).own_s_per_byte[nic] / h.priced(7).own_s_per_byte[nic], (7.0 / 8.0) / 0.5, 1e-9);
  // Against the fraction alone (ep_sm_half 0): 1 / 0.5.
  const H800Dispatch flat(EpKernel::hybridep, {{Param::ep_sm_half, 0.0}, {Param::ep_network_fraction, 0.9}});
  EXPECT_NEAR(h.priced(1).own_s_per_byte[nic] / flat.priced(1).own_s_per_byte[nic], 2.0, 1e-9);
}

// HybridEP's rows pay their SM time over RDMA too, counted as its RDMA records count them (a token
// once per node hit, its own node included): the NIC's seconds per byte grow by 1 + R x row_sm_s /
// (SMs x row bytes x (D - 1) / D) on D nodes; DeepEP's RDMA kernels run at the NIC's rate alone.
TEST(Collective, HybridEpsRowsPayTheirSmTimeOverRdma) {
  const H800Dispatch with(EpKernel::hybridep, {{Param::ep_sm_half, 0.0}, {Param::ep_network_fraction, 0.9}, {Param::ep_row_sm_s, 1e-7}});
  const H800Dispatch none(EpKernel::hybridep, {{Param::ep_sm_half, 0.0}, {Param::ep_network_fraction, 0.9}, {Param::ep_row_sm_s, 0.0}});
  ASSERT_NE(with.dispatch, nullptr);
  const int nic = static_cast<int>(Resource::nic);
  const double nodes = 8, sms = 16;  // EP 64 over 8 nodes
  const double rate = with.t.scaleout_bandwidth_per_gpu().value() * 0.9;
  EXPECT_NEAR(with.priced(16).own_s_per_byte[nic] / none.priced(16).own_s_per_byte[nic],
              1.0 + rate * 1e-7 / (sms * with.dispatch->row_bytes * (nodes - 1) / nodes), 1e-9);
  const H800Dispatch deepep(EpKernel::deepep, {{Param::deepep_row_sm_s, 1e-7}});
  const H800Dispatch deepep0(EpKernel::deepep, {{Param::deepep_row_sm_s, 0.0}});
  EXPECT_DOUBLE_EQ(deepep.priced(16).own_s_per_byte[nic], deepep0.priced(16).own_s_per_byte[nic]);
}

// A fused EP combine (and a dispatch's backward, the same kernel) sums each token's rows on the
// receiver: over NVLink its seconds per byte are the dispatch's over ep_combine_factor, closed form
// sms / (sms + combine_sm_half) / (1 + combine_peer_cost x (ranks - 1)); the combine's backward is
// a dispatch again, and the AlltoAll dispatcher's NCCL exchanges have no such factor.
TEST(Collective, AFusedCombineRunsAtItsOwnFittedRate) {
  // 8 micro-batches per pipeline, not 64: the same exchanges, lowered faster.
  Scenario s = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-11-hybridep.json"),
                                 {io::parse_override("batch.global_batch=256")});
  ASSERT_EQ(s.stack.dispatcher, Dispatcher::fused_dedup);
  ASSERT_EQ(s.stack.ep_kernel, EpKernel::hybridep);
  ASSERT_EQ(s.parallelism.ep, 32);
  s.calibration.set(Param::ep_combine_sm_half, s.stack.ep_sms);  // half the rate from the SMs
  s.calibration.set(Param::ep_combine_peer_cost, 1.0 / 31.0);     // and half again from 32 ranks
  s.stack.ep_buffer_copies = false;  // the kernels alone (the API's copies add alike to both: HybridEpsTorchApi...)
  s.calibration.set(Param::ep_row_sm_s, 0.0);  // and no rows' SM time (the combine's BF16 rows are the dispatch's here)
  EXPECT_DOUBLE_EQ(ep_combine_factor(s.stack.ep_sms, 32, s.calibration), 0.25);
  const ExpertLoad load = expert_load(s, s.calibration);
  ASSERT_EQ(load.ep_domains, 1);  // all on NVLink
  const StepGraph g = lower_step(s, load);
  const Topology t = Topology::build(s.system, s.gpus);
  const Pricer pr(s, t, s.calibration);
  std::map<std::string, const Op*> by_name;
  for (const Op& op : g.classes[0].ops) by_name.emplace(op.name, &op);
  for (const char* n : {"moe.dispatch", "moe.combine", "moe.dispatch.bwd", "moe.combine.bwd"}) ASSERT_TRUE(by_name.count(n)) << n;
  EXPECT_TRUE(by_name["moe.combine"]->combine);
  EXPECT_TRUE(by_name["moe.dispatch.bwd"]->combine);
  EXPECT_FALSE(by_name["moe.dispatch"]->combine);
  EXPECT_FALSE(by_name["moe.combine.bwd"]->combine);
  const double d = pr.comm_cost(*by_name["moe.dispatch"]).bottleneck_s_per_byte();
  EXPECT_NEAR(pr.comm_cost(*by_name["moe.combine"]).bottleneck_s_per_byte() / d, 4.0, 1e-9);
  EXPECT_NEAR(pr.comm_cost(*by_name["moe.dispatch.bwd"]).bottleneck_s_per_byte() / d, 4.0, 1e-9);
  EXPECT_NEAR(pr.comm_cost(*by_name["moe.combine.bwd"]).bottleneck_s_per_byte() / d, 1.0, 1e-9);
  // NCCL's all-to-all (the AlltoAll dispatcher): dispatch and combine alike.
  s.stack.dispatcher = Dispatcher::alltoall;
  s.stack.dispatch_host_syncs = 1;
  const StepGraph g2 = lower_step(s, load);
  const Pricer pr2(s, t, s.calibration);
  std::map<std::string, const Op*> by2;
  for (const Op& op : g2.classes[0].ops) by2.emplace(op.name, &op);
  EXPECT_NEAR(pr2.comm_cost(*by2["moe.combine"]).bottleneck_s_per_byte() /
                  pr2.comm_cost(*by2["moe.dispatch"]).bottleneck_s_per_byte(), 1.0, 1e-9);
}

// A fused EP kernel's NVLink rate falls with the EP size, dispatch and combine alike: closed form
// 1 / (1 + peer_cost x (ranks - 1)), ep_peer_cost for HybridEP, deepep_peer_cost for DeepEP's
// normal kernels; NCCL's all-to-all (the AlltoAll dispatcher) has no such factor.
TEST(Collective, AFusedEpKernelsRateFallsWithItsPeers) {
  Scenario s = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-11-hybridep.json"));
  ASSERT_EQ(s.stack.ep_kernel, EpKernel::hybridep);
  ASSERT_EQ(s.parallelism.ep, 32);
  s.stack.ep_buffer_copies = false;
  s.calibration.set(Param::ep_row_sm_s, 0.0);
  s.calibration.set(Param::deepep_row_sm_s, 0.0);
  const ExpertLoad load = expert_load(s, s.calibration);
  ASSERT_EQ(load.ep_domains, 1);  // all on NVLink
  const Topology t = Topology::build(s.system, s.gpus);
  auto per_byte = [&](const Scenario& x, const char* name) {
    const StepGraph g = lower_step(x, load);
    const Pricer pr(x, t, x.calibration);
    for (const Op& op : g.classes[0].ops)
      if (op.name == name) return pr.comm_cost(op).bottleneck_s_per_byte();
    ADD_FAILURE() << name;
    return 0.0;
  };
  for (const bool deepep : {false, true}) {
    Scenario a = s;
    if (deepep) a.stack.ep_kernel = EpKernel::deepep;
    const Param own = deepep ? Param::deepep_peer_cost : Param::ep_peer_cost;
    const Param other = deepep ? Param::ep_peer_cost : Param::deepep_peer_cost;
    a.calibration.set(own, 0.0);
    a.calibration.set(other, 0.0);
    Scenario b = a;
    b.calibration.set(own, 1.0 / 31.0);  // half the rate at 32 ranks
    EXPECT_DOUBLE_EQ(ep_peer_factor(32, b.calibration, deepep), 0.5);
    EXPECT_DOUBLE_EQ(ep_peer_factor(1, b.calibration, deepep), 1.0);
    for (const char* n : {"moe.dispatch", "moe.combine", "moe.dispatch.bwd", "moe.combine.bwd"})
      EXPECT_NEAR(per_byte(b, n) / per_byte(a, n), 2.0, 1e-9) << n << (deepep ? " deepep" : " hybridep");
    Scenario c = a;
    c.calibration.set(other, 1.0 / 31.0);  // the other family's term leaves this kernel alone
    EXPECT_NEAR(per_byte(c, "moe.dispatch") / per_byte(a, "moe.dispatch"), 1.0, 1e-12);
  }
  // An EP group over two racks (EP 128 as 2 x 64): the NVLink term counts the 64 peers of a rank's
  // own domain, not the group's 128 (the records that fit it ran inside one domain).
  {
    Scenario x = io::load_scenario(source("examples/deepseek-v3/gb200-optimized.json"),
                                   {io::parse_override("parallelism.ep=128"), io::parse_override("parallelism.fsdp=1")});
    ASSERT_EQ(x.stack.dispatcher, Dispatcher::fused_dedup);
    x.stack.ep_kernel = EpKernel::hybridep;
    x.stack.ep_buffer_copies = false;
    x.calibration.set(Param::ep_row_sm_s, 0.0);
    x.calibration.set(Param::ep_peer_cost, 0.0);
    Scenario y = x;
    y.calibration.set(Param::ep_peer_cost, 1.0 / 63.0);  // half the rate at 64 peers
    const ExpertLoad lx = expert_load(x, x.calibration);
    ASSERT_EQ(lx.ep_domains, 2);
    const Topology tx = Topology::build(x.system, x.gpus);
    const int nvl = static_cast<int>(Resource::nvlink);
    auto nvlink_per_byte = [&](const Scenario& z) {
      const StepGraph g = lower_step(z, lx);
      const Pricer pr(z, tx, z.calibration);
      for (const Op& op : g.classes[0].ops)
        if (op.name == "moe.dispatch") return pr.comm_cost(op).own_s_per_byte[nvl];
      ADD_FAILURE() << "no moe.dispatch";
      return 0.0;
    };
    EXPECT_NEAR(nvlink_per_byte(y) / nvlink_per_byte(x), 2.0, 1e-9);
  }
  Scenario nccl = s;
  nccl.stack.dispatcher = Dispatcher::alltoall;
  nccl.stack.dispatch_host_syncs = 1;
  Scenario nccl_peer = nccl;
  nccl_peer.calibration.set(Param::ep_peer_cost, 1.0 / 31.0);
  EXPECT_NEAR(per_byte(nccl_peer, "moe.dispatch") / per_byte(nccl, "moe.dispatch"), 1.0, 1e-12);
}

// HybridEP through its PyTorch API (stack.ep_buffer_copies): the rows also pass ep_api_copy_passes
// times over HBM, in series with the kernel: closed form, seconds per byte + passes / (HBM x
// hbm_fraction) on the NVLink part, and the passes on the HBM traffic beside it. DeepEP's published
// rates are its API's already (no copies added), and the AlltoAll dispatcher's NCCL exchanges have none.
TEST(Collective, HybridEpsTorchApiAddsItsBufferCopiesInSeries) {
  Scenario s = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-11-hybridep.json"));
  ASSERT_EQ(s.stack.dispatcher, Dispatcher::fused_dedup);
  ASSERT_EQ(s.stack.ep_kernel, EpKernel::hybridep);
  ASSERT_TRUE(s.stack.ep_buffer_copies);  // megatron-core's
  s.calibration.set(Param::ep_api_copy_passes, 4.0);
  s.calibration.set(Param::hbm_fraction, 0.5);
  const double per_row = 4.0 / (s.system.gpu().hbm_bandwidth.value() * 0.5);
  EXPECT_DOUBLE_EQ(ep_api_copy_s_per_byte(s.system.gpu(), s.calibration), per_row);
  // The copies move all 32 ranks' rows, the exchange's size counts the 31 other ranks' (as the
  // records' algorithm bandwidth counts all rows): per byte of the size, 32/31 of the rows' cost.
  const double copy = per_row * 32.0 / 31.0;
  const StepGraph g = lower_step(s, expert_load(s, s.calibration));
  const Topology t = Topology::build(s.system, s.gpus);
  const Op* dispatch = nullptr;
  const Op* combine = nullptr;
  for (const Op& op : g.classes[0].ops) {
    if (op.name == "moe.dispatch" && !dispatch) dispatch = &op;
    if (op.name == "moe.combine" && !combine) combine = &op;
  }
  ASSERT_TRUE(dispatch && combine);
  const int nvl = static_cast<int>(Resource::nvlink);
  auto priced = [&](const Scenario& x, const Op& op) { return Pricer(x, t, x.calibration).comm_cost(op); };
  Scenario plain = s;
  plain.stack.ep_buffer_copies = false;
  for (const Op* op : {dispatch, combine}) {
    const CollectiveCost with = priced(s, *op), without = priced(plain, *op);
    // In series with the kernel: its own seconds per byte grow by the copies'; the links it loads
    // do not (they are idle while the rows cross HBM).
    EXPECT_NEAR(with.own_s_per_byte[nvl], without.own_s_per_byte[nvl] + copy, 1e-9 * copy) << op->name;
    EXPECT_DOUBLE_EQ(with.s_per_byte[nvl], without.s_per_byte[nvl]) << op->name;
    EXPECT_DOUBLE_EQ(with.hbm_bytes_per_byte, without.hbm_bytes_per_byte + 4.0 * 32.0 / 31.0) << op->name;
    EXPECT_EQ(with.own_s_per_byte[static_cast<int>(Resource::nic)], 0.0);  // one rack: no NIC to lengthen
    // 470 MB-class exchange: the copies lengthen it by their bytes over half of HBM, four times.
    EXPECT_NEAR((with.time(op->bytes) - without.time(op->bytes)).value(), op->bytes.value() * copy,
                1e-9 * op->bytes.value() * copy) << op->name;
  }
  // DeepEP: unchanged by the field.
  Scenario deepep = s, deepep_plain = plain;
  deepep.stack.ep_kernel = deepep_plain.stack.ep_kernel = EpKernel::deepep;
  EXPECT_DOUBLE_EQ(priced(deepep, *dispatch).own_s_per_byte[nvl], priced(deepep_plain, *dispatch).own_s_per_byte[nvl]);
  // And the step is slower by about the exposed copies, never faster.
  EXPECT_GT(predict(s, s.calibration).step_time.value(), predict(plain, plain.calibration).step_time.value());
}

// A fused EP kernel held to its SMs (DeepEP at 20 SMs on EP 32: about 0.43 of its NVLink rate in
// the dispatch) is a cap on its own rate, not a load that fills its links: beside an NCCL
// all-gather on the same NVLink it keeps its solo time, and the all-gather takes what it leaves of
// the link (1 - a_d / own_d of it). Both were charged as full link users before, so each halved
// the other: the dispatch ran 21 % slower and the all-gather at half the link.
TEST(Simulation, AnEpKernelHeldToItsSmsLeavesItsLinkToOthers) {
  const Scenario s = io::load_scenario(source("examples/deepseek-v3/gb200-mcore-ladder-04-deepep.json"));
  ASSERT_EQ(s.stack.ep_kernel, EpKernel::deepep);
  const Topology t = Topology::build(s.system, s.gpus);
  const Pricer pr(s, t, s.calibration);
  const StepGraph lowered = lower_step(s, expert_load(s, s.calibration));
  const Op* dispatch = nullptr;
  for (const Op& op : lowered.classes[0].ops)
    if (op.name == "moe.dispatch" && !dispatch) dispatch = &op;
  ASSERT_TRUE(dispatch);
  Op d = *dispatch;
  d.deps.clear();
  Op gather = fsdp_gather("gather", gigabytes(4));
  gather.group = Group::ep;  // the same 32 GPUs of one rack: NVLink only
  const int nvl = static_cast<int>(Resource::nvlink);
  const CollectiveCost cd = pr.comm_cost(d), cg = pr.comm_cost(gather);
  ASSERT_GT(cd.own_bottleneck_s_per_byte(), cd.s_per_byte[nvl] * 1.5);  // the kernel, not the link, bounds it
  EXPECT_EQ(cg.own_bottleneck_s_per_byte(), 0.0);                        // NCCL: the link's own fraction
  StepGraph g;
  RankClass rc;
  rc.ranks = 1;
  rc.ops = {d, gather};
  g.classes.push_back(rc);
  StackOptions multi = s.stack;
  multi.multistream_collectives = true;
  multi.host_op_s = 0;  // no host lane: both are issued at 0
  const SimResult r = simulate(g, pr, multi);
  const double bytes = std::max(d.bytes, d.recv_bytes).value();
  EXPECT_NEAR(r.classes[0].ops[0].end.value(), cd.latency.value() + bytes * cd.own_bottleneck_s_per_byte(), 1e-9);
  // The all-gather never gets less than what the dispatch leaves of the link.
  const double left = 1.0 - cd.s_per_byte[nvl] / cd.own_bottleneck_s_per_byte();
  EXPECT_LE(r.classes[0].ops[1].end.value(), cg.latency.value() + 4e9 * cg.s_per_byte[nvl] / left + 1e-9);
  EXPECT_GT(r.classes[0].ops[1].end.value(), cg.time(gigabytes(4)).value());  // but it did share
}

TEST(Collective, GroupsFollowTheRankOrder) {
  Parallelism p;
  p.tp = 2, p.ep = 4, p.fsdp = 2;
  EXPECT_EQ(group_members(Group::tp, p, 5), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(group_members(Group::ep, p, 5), (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_EQ(group_members(Group::fsdp, p, 5), (std::vector<int64_t>{5, 13}));
  EXPECT_EQ(group_members(Group::dense_shard, p, 0), (std::vector<int64_t>{0, 2, 4, 6, 8, 10, 12, 14}));
}

// Two identical collectives on two streams share their bottleneck: each runs at half rate, so both
// end at latency + 2 x bytes x seconds-per-byte (fluid max-min sharing).
TEST(Simulation, TwoFlowsOnOneLinkShareIt) {
  const Scenario s = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"));
  const Topology t = Topology::build(s.system, s.gpus);
  const Calibration cal;
  const Pricer pr(s, t, cal);
  StepGraph g;
  RankClass rc;
  rc.ranks = 1;
  const Op a = fsdp_gather("a", gigabytes(1));
  const Op b = fsdp_gather("b", gigabytes(1), Stream::ep_comm);
  rc.ops = {a, b};
  g.classes.push_back(rc);
  StackOptions multi;
  multi.multistream_collectives = true;
  const SimResult r = simulate(g, pr, multi);
  const CollectiveCost c = pr.comm_cost(a);
  EXPECT_NEAR(r.classes[0].ops[0].end.value(), c.latency.value() + 2 * 1e9 * c.bottleneck_s_per_byte(), 1e-9);
  EXPECT_NEAR(r.classes[0].ops[1].end.value(), c.latency.value() + 2 * 1e9 * c.bottleneck_s_per_byte(), 1e-9);
  // On one stream they serialize instead: the second ends at twice the solo time.
  StackOptions single;
  single.multistream_collectives = false;
  const SimResult q = simulate(g, pr, single);
  EXPECT_NEAR(q.classes[0].ops[1].end.value(), 2 * c.time(gigabytes(1)).value(), 1e-9);
}

// A compute op running beside a communication kernel runs on (1 - comm_sm_fraction) of the SMs.
// A GEMM running beside communication kernels runs on the SMs they leave: 1 - comm_sm_fraction
// beside one, 1 - 2 x comm_sm_fraction beside two (each holds its own thread blocks).
TEST(Simulation, CommunicationKernelsTakeSmsFromCompute) {
  const Scenario s = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"));
  const Topology t = Topology::build(s.system, s.gpus);
  const Calibration cal;
  const Pricer pr(s, t, cal);
  const Op comp = big_gemm("c");
  const Op comm = fsdp_gather("x", gigabytes(100));  // outlasts the compute op
  const Op comm2 = fsdp_gather("y", gigabytes(100), Stream::ep_comm);
  const double solo = pr.compute_time(comp).value();
  for (int kernels : {1, 2}) {
    StepGraph g;
    RankClass rc;
    rc.ops = {comp, comm};
    if (kernels == 2) rc.ops.push_back(comm2);
    g.classes.push_back(rc);
    const SimResult r = simulate(g, pr, StackOptions{});
    EXPECT_NEAR(r.classes[0].ops[0].end.value(), solo / (1 - kernels * cal[Param::comm_sm_fraction]), 1e-9) << kernels;
  }
}

// Compute kernels on two lanes (forward/backward overlap) run at once and split the SMs: two
// equal GEMMs both end at twice the time of one.
TEST(Simulation, ComputeOnTwoLanesSharesTheSms) {
  const Scenario s = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"));
  const Topology t = Topology::build(s.system, s.gpus);
  const Pricer pr(s, t, Calibration{});
  const Op a = big_gemm("a");
  Op b = big_gemm("b");
  b.lane = 1;
  StepGraph g;
  RankClass rc;
  rc.ops = {a, b};
  g.classes.push_back(rc);
  const SimResult r = simulate(g, pr, StackOptions{});
  const double solo = pr.compute_time(a).value();
  EXPECT_NEAR(r.classes[0].ops[0].end.value(), 2 * solo, 1e-9);
  EXPECT_NEAR(r.classes[0].ops[1].end.value(), 2 * solo, 1e-9);
  EXPECT_EQ(r.classes[0].queues.size(), 12u);  // six queues per lane (multistream)
  EXPECT_EQ(queue_name(r.classes[0], static_cast<size_t>(r.classes[0].ops[1].queue)), "compute (backward lane)");
}

// A memory-bound kernel beside a collective also shares HBM with it: the collective reads what it
// sends and writes what it receives (twice its byte rate), so once its latency phase is over the
// kernel runs at min(1 - comm_sm_fraction, 1 - 2 x rate / achieved HBM bandwidth).
// A memory-bound kernel beside a 100 GB collective `c` of the FSDP group on the GB300 example:
// it runs at 1 - comm_sm_fraction during the collective's latency, then at what the collective's
// HBM traffic (hbm_per_byte x its byte rate) leaves; its end time against that closed form.
void expect_hbm_shared(Collective c, double hbm_per_byte) {
  const Scenario s = io::load_scenario(source("examples/deepseek-v3/gb300-optimized.json"));
  const Topology t = Topology::build(s.system, s.gpus);
  const Calibration cal;
  const Pricer pr(s, t, cal);
  Op comp;
  comp.name = "c";
  comp.category = Category::memory;
  comp.hbm_bytes = gigabytes(10);
  Op comm = fsdp_gather("x", gigabytes(100));
  comm.collective = c;
  StepGraph g;
  RankClass rc;
  rc.ops = {comp, comm};
  g.classes.push_back(rc);
  const SimResult r = simulate(g, pr, StackOptions{});
  const double solo = pr.compute_time(comp).value();
  const CollectiveCost cc = pr.comm_cost(comm);
  ASSERT_DOUBLE_EQ(cc.hbm_bytes_per_byte, hbm_per_byte);
  const double hbm = s.system.gpu().hbm_bandwidth.value() * cal[Param::hbm_fraction];
  const double r1 = 1 - cal[Param::comm_sm_fraction];
  const double r2 = std::min(r1, 1 - hbm_per_byte / cc.bottleneck_s_per_byte() / hbm);
  const double L = cc.latency.value();
  ASSERT_GT(solo, L * r1);
  ASSERT_LT(r2, r1);
  EXPECT_NEAR(r.classes[0].ops[0].end.value(), L + (solo - L * r1) / r2, 1e-9);
}

TEST(Simulation, CommunicationSharesHbmWithMemoryBoundKernels) { expect_hbm_shared(Collective::all_gather, 2.0); }

// A ring reduce-scatter also reads its own chunk to add it in: 3 bytes of HBM per byte.
TEST(Simulation, ReduceScatterTakesThreeBytesOfHbmPerByte) { expect_hbm_shared(Collective::reduce_scatter, 3.0); }

// NVLS all-reduce in one NVLink domain: multimem.ld_reduce plus multimem.st move S(1 + 1/n) over
// each GPU's NVLink each way, so the algorithm bandwidth stays below B n / (n + 1) (physics review).
TEST(Collective, NvlsAllReduceStaysBelowBnOverNPlusOne) {
  const SystemSpec sys = io::load_system(source("topologies/dgx-h100-cluster.json"));
  const Topology t = Topology::build(sys, 8);
  const Calibration cal;
  const CollectiveCost c = collective_cost(Collective::all_reduce, iota(8), t, cal);
  ASSERT_STREQ(c.algorithm, "nvls");
  const double B = 18 * 25e9;  // the GPU's NVLink bandwidth per direction
  const double size = 8e9, algbw = size / c.time(Bytes(size)).value();
  EXPECT_LT(algbw, B * 8 / 9);
  EXPECT_NEAR(c.s_per_byte[static_cast<int>(Resource::nvlink)], (1.0 + 1.0 / 8) / (B * cal[Param::nvls_fraction]), 1e-24);
}

// Two GPUs of one NVSwitch domain all-reduce by a ring: it moves S each way (2(n-1)/n), NVLS would
// move S(1 + 1/2) at its lower efficiency, so a pair was priced slower than a group of three.
TEST(Collective, APairAllReducesByARing) {
  const SystemSpec sys = io::load_system(source("topologies/dgx-h100-cluster.json"));
  const Topology t = Topology::build(sys, 8);
  const Calibration cal;
  const std::vector<CollectiveCost> two = collective_algorithms(Collective::all_reduce, {0, 1}, t, cal, {});
  ASSERT_EQ(two.size(), size_t{1});
  EXPECT_STREQ(two[0].algorithm, "ring");
  const double bw = 18 * 25e9 * cal[Param::nvlink_fraction];
  EXPECT_NEAR(two[0].s_per_byte[static_cast<int>(Resource::nvlink)], 1.0 / bw, 1e-24);
  // Three or more: NVLS and the ring are both offered (NCCL's tuner picks by size).
  const std::vector<CollectiveCost> three = collective_algorithms(Collective::all_reduce, {0, 1, 2}, t, cal, {});
  ASSERT_EQ(three.size(), size_t{2});
  auto best = [](const std::vector<CollectiveCost>& v, Bytes b) {
    double m = 1e300;
    for (const CollectiveCost& c : v) m = std::min(m, c.time(b).value());
    return m;
  };
  EXPECT_LT(best(two, gibibytes(1)), best(three, gibibytes(1)));
}

// The NIC's host link (PCIe) bounds the scale-out rate where it is narrower than the port.
TEST(Collective, ANicsHostLinkBoundsItsRate) {
  SystemSpec sys = io::load_system(source("topologies/dgx-h100-cluster.json"));
  const double port = sys.domain.tray.nic.port_bandwidth.value();
  EXPECT_DOUBLE_EQ(Topology::build(sys, 16).scaleout_bandwidth_per_gpu().value(), port);
  EXPECT_FALSE(Topology::build(sys, 16).scaleout_host_link_bound());
  sys.domain.tray.nic.host_link_bandwidth = BytesPerSecond(8e9);
  const Topology t = Topology::build(sys, 16);
  EXPECT_DOUBLE_EQ(t.scaleout_bandwidth_per_gpu().value(), 8e9);
  EXPECT_TRUE(t.scaleout_host_link_bound());
  // A ring over two nodes: every NIC carries 2(n-1)/n of S over its 8 GPUs' rails, now at 8 GB/s.
  const Calibration cal;
  const CollectiveCost c = collective_cost(Collective::all_gather, iota(16), t, cal);
  EXPECT_NEAR(c.s_per_byte[static_cast<int>(Resource::nic)], (15.0 / 16) / 8 / (8e9 * cal[Param::ib_fraction]), 1e-22);
}

// TP 6 on 8-GPU nodes: rank 0's TP group stays in node 0, the next one straddles nodes 0 and 1 and
// crosses InfiniBand; the step waits for it, so that is the group priced (it was rank 0's).
TEST(Collective, AStraddlingGroupIsPricedNotRankZerosGroup) {
  const SystemSpec sys = io::load_system(source("topologies/dgx-h100-cluster.json"));
  const Topology t = Topology::build(sys, 24);
  Parallelism p;
  p.tp = 6;
  p.dp = 4;
  EXPECT_EQ(group_members(Group::tp, p, 0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  const std::vector<int64_t> w = widest_group(Group::tp, p, t, 24);
  EXPECT_EQ(w, (std::vector<int64_t>{6, 7, 8, 9, 10, 11}));
  const Calibration cal;
  EXPECT_EQ(collective_cost(Collective::all_gather, group_members(Group::tp, p, 0), t, cal).s_per_byte[static_cast<int>(Resource::nic)], 0.0);
  EXPECT_GT(collective_cost(Collective::all_gather, w, t, cal).s_per_byte[static_cast<int>(Resource::nic)], 0.0);
  // Groups that all span alike: rank 0's.
  p.tp = 4;
  p.dp = 6;
  EXPECT_EQ(widest_group(Group::tp, p, t, 24), group_members(Group::tp, p, 0));
}

// HBM traffic per byte of a collective's size, by algorithm: what it reads and writes.
TEST(Collective, HbmTrafficFollowsTheAlgorithm) {
  const SystemSpec sys = io::load_system(source("topologies/gb300-nvl72.json"));
  const Topology t = Topology::build(sys, 128);
  const Calibration cal;
  EXPECT_DOUBLE_EQ(collective_cost(Collective::all_gather, iota(128), t, cal).hbm_bytes_per_byte, 2.0);
  EXPECT_DOUBLE_EQ(collective_cost(Collective::reduce_scatter, iota(128), t, cal).hbm_bytes_per_byte, 3.0);
  EXPECT_DOUBLE_EQ(collective_cost(Collective::all_to_all, iota(128), t, cal).hbm_bytes_per_byte, 2.0);
  const auto ar = collective_algorithms(Collective::all_reduce, iota(128), t, cal);
  EXPECT_DOUBLE_EQ(ar[0].hbm_bytes_per_byte, 5.0);  // ring: reduce-scatter then all-gather
  EXPECT_DOUBLE_EQ(ar[1].hbm_bytes_per_byte, 5.0);  // tree: reduce then broadcast
}


// Rail-aligned rings: each channel leaves a domain and enters the next at the same local index
// (one rail), so with an even number of domains no ring byte climbs to a spine; with an odd number
// only the closing edge of each channel changes rails (physics review).
TEST(Collective, RingsStayOnTheirRailBetweenDomains) {
  const SystemSpec sys = io::load_system(source("topologies/gb300-nvl72.json"));
  const Calibration cal;
  const int fab = static_cast<int>(Resource::fabric), nic = static_cast<int>(Resource::nic);
  for (int64_t gpus : {128, 256}) {  // 2 and 4 racks of 64, under one rail's leaf (72 trays of 4 racks)
    const Topology t = Topology::build(sys, gpus);
    const CollectiveCost c = collective_cost(Collective::all_gather, iota(gpus), t, cal);
    EXPECT_DOUBLE_EQ(c.s_per_byte[fab], 0.0) << gpus;
    EXPECT_GT(c.s_per_byte[nic], 0.0) << gpus;
  }
  const Topology t3 = Topology::build(sys, 192);  // 3 racks: the closing edges change rails
  EXPECT_GT(collective_cost(Collective::all_gather, iota(192), t3, cal).s_per_byte[fab], 0.0);
}

TEST(Params, EveryParameterHasADefaultAReasonAndARange) {
  ASSERT_EQ(param_defs().size(), static_cast<size_t>(kParamCount));
  for (int i = 0; i < kParamCount; ++i) {
    const ParamDef& d = param_defs()[static_cast<size_t>(i)];
    EXPECT_EQ(static_cast<int>(d.id), i) << d.name;  // the table follows the enum
    EXPECT_FALSE(d.name.empty());
    EXPECT_FALSE(d.unit.empty()) << d.name;
    EXPECT_GT(d.reasoning.size(), 40u) << d.name;
    EXPECT_LE(d.min, d.value) << d.name;
    EXPECT_LE(d.value, d.max) << d.name;
    EXPECT_EQ(find_param(d.name), d.id);
  }
}

}  // namespace
}  // namespace moeperf

namespace moeperf {
namespace {

// NCCL's double binary tree (graph/trees.cc): each tree has one root and every node reaches it; the
// root has one child; at 4 nodes tree 0 is 0 - 2 - {1, 3} and its mirror 3 - 1 - {0, 2}, so nodes
// 1 and 2 are interior in one tree each and carry 4 edges in all (a heap order gave 3).
TEST(Collectives, TheTreeBetweenDomainsIsNcclsDoubleBinaryTree) {
  EXPECT_EQ(nccl_dtree_parent(4, 0, 0), -1);
  EXPECT_EQ(nccl_dtree_parent(4, 1, 0), 2);
  EXPECT_EQ(nccl_dtree_parent(4, 2, 0), 0);
  EXPECT_EQ(nccl_dtree_parent(4, 3, 0), 2);
  EXPECT_EQ(nccl_dtree_parent(4, 3, 1), -1);
  EXPECT_EQ(nccl_dtree_parent(4, 1, 1), 3);
  EXPECT_EQ(nccl_dtree_parent(4, 0, 1), 1);
  EXPECT_EQ(nccl_dtree_parent(4, 2, 1), 1);
  for (int64_t n = 1; n <= 70; ++n)
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      std::vector<int> children(static_cast<size_t>(n), 0);
      for (int64_t r = 0; r < n; ++r) {
        const int64_t p = nccl_dtree_parent(n, r, tree);
        if (p < 0) {
          ++roots;
          continue;
        }
        ASSERT_LT(p, n);
        ++children[static_cast<size_t>(p)];
        int64_t x = r, hops = 0;  // reaches the root
        while (nccl_dtree_parent(n, x, tree) >= 0 && hops <= n) x = nccl_dtree_parent(n, x, tree), ++hops;
        ASSERT_LE(hops, n) << n << " " << r;
      }
      EXPECT_EQ(roots, 1) << n;
      for (int64_t r = 0; r < n; ++r) {
        EXPECT_LE(children[static_cast<size_t>(r)], 2) << n << " " << r;
        if (nccl_dtree_parent(n, r, tree) < 0) {
          EXPECT_LE(children[static_cast<size_t>(r)], 1) << n;  // the root: one child
        }
      }
    }
}

// The shipped defaults profile names every parameter at its default: adding a parameter without
// writing it (and its default) there fails here.
TEST(Params, DefaultsProfileListsEveryParameter) {
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(testing::source("examples/calibration/defaults.json")));
  EXPECT_EQ(j["params"].size(), static_cast<size_t>(kParamCount));
  for (const ParamDef& d : param_defs()) {
    ASSERT_TRUE(j["params"].contains(std::string(d.name))) << d.name;
    EXPECT_DOUBLE_EQ(j["params"][std::string(d.name)].get<double>(), d.value) << d.name;
  }
}

}  // namespace
}  // namespace moeperf

namespace moeperf {
namespace {

// A straggler becomes a class of one GPU; the others' collectives wait for it. With a slowdown of 1
// nothing changes; with 1.2x compute the step slows and the rest of the ranks show the wait.
TEST(Simulation, StragglerIsItsOwnClassAndTheOthersWaitForIt) {
  const std::string f = testing::source("examples/deepseek-v3/gb300-optimized.json");
  const StepReport base = predict(io::load_scenario(f), Calibration{});
  const StepReport same =
      predict(io::load_scenario(f, {io::parse_override("stragglers=[{\"gpu\": 5, \"compute_slowdown\": 1.0}]")}), Calibration{});
  ASSERT_EQ(same.graph->classes.size(), 2u);
  EXPECT_EQ(same.graph->classes[0].ranks, 127);
  EXPECT_EQ(same.graph->classes[1].ranks, 1);
  EXPECT_NEAR(same.step_time.value(), base.step_time.value(), 1e-9);
  const StepReport slow =
      predict(io::load_scenario(f, {io::parse_override("stragglers=[{\"gpu\": 5, \"compute_slowdown\": 1.2}]")}), Calibration{});
  EXPECT_GT(slow.step_time.value(), base.step_time.value() * 1.1);
  EXPECT_GT(slow.sim->classes[0].wait.value(), 0.1);                           // the 127 wait ...
  EXPECT_LT(slow.sim->classes[1].wait.value(), slow.sim->classes[0].wait.value());  // ... for the one
  EXPECT_EQ(slow.busiest_class, 1);
  // The wait is kernel time of the fast class's collectives (a profiler sees their kernels spin),
  // and only of collectives.
  double waited = 0;
  const auto& ops = slow.graph->classes[0].ops;
  const auto& timing = slow.sim->classes[0].ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (timing[i].waited.value() > 0) {
      EXPECT_NE(ops[i].collective, Collective::none) << ops[i].name;
    }
    waited += timing[i].waited.value();
  }
  EXPECT_NEAR(waited, slow.sim->classes[0].wait.value(), 1e-9);
}

// Three copies of one program (the busiest EP rank under a skewed router, the typical ranks, a
// straggler): every collective starts at one time on all three (the typical ranks synchronized
// with the stage class alone and started up to 52 ms early while it still waited for the straggler).
TEST(Simulation, ACollectiveStartsTogetherOnEveryCopyOfTheProgram) {
  const std::string f = testing::source("examples/deepseek-v3/gb300-optimized.json");
  const Scenario s = io::load_scenario(f, {io::parse_override("routing.distribution=\"zipf\""), io::parse_override("routing.zipf_exponent=0.5"),
                                           io::parse_override("stragglers=[{\"gpu\": 5, \"compute_slowdown\": 1.5}]")});
  const StepReport r = predict(s, s.calibration);
  ASSERT_EQ(r.graph->classes.size(), 3u);
  int compared = 0;
  const auto& ops = r.graph->classes[0].ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].collective == Collective::none || ops[i].collective == Collective::send_recv ||
        ops[i].collective == Collective::d2h || ops[i].collective == Collective::h2d)
      continue;
    for (size_t c = 1; c < 3; ++c) {
      ASSERT_EQ(r.graph->classes[c].ops[i].name.str(), ops[i].name.str());
      EXPECT_NEAR(r.sim->classes[c].ops[i].start.value(), r.sim->classes[0].ops[i].start.value(), 1e-9) << ops[i].name.str() << " #" << i;
    }
    ++compared;
  }
  EXPECT_GT(compared, 300);
}

// Under a skewed router a de-duplicating dispatch's busiest rank exchanges its distinct tokens'
// ratio over the mean (not its rows'), and the typical ranks' class exchanges the mean (it carried
// the busiest rank's ratio too).
TEST(Simulation, TheTypicalRanksExchangeTheMeanTokens) {
  const Scenario s = io::load_scenario(testing::source("examples/deepseek-v3/gb300-optimized.json"),
                                       {io::parse_override("routing.distribution=\"zipf\""), io::parse_override("routing.zipf_exponent=1")});
  ASSERT_EQ(s.stack.dispatcher, Dispatcher::fused_dedup);
  const StepReport r = predict(s, s.calibration);
  ASSERT_EQ(r.graph->classes.size(), 2u);
  const ExpertLoad& load = r.graph->load;
  ASSERT_GT(load.max_tokens / load.mean_tokens, 1.3);
  ASSERT_GT(load.max_rows / load.mean_rows, load.max_tokens / load.mean_tokens + 0.3);
  for (size_t c = 0; c < 2; ++c) {
    const double want = c == 0 ? load.max_tokens / load.mean_tokens : 1.0;
    int seen = 0;
    for (const Op& op : r.graph->classes[c].ops)
      if (op.name.str() == "moe.combine") {
        EXPECT_NEAR(op.bytes.value() / op.recv_bytes.value(), want, 1e-9) << c;
        ++seen;
      } else if (op.name.str() == "moe.dispatch") {
        EXPECT_NEAR(op.recv_bytes.value() / op.bytes.value(), want, 1e-9) << c;
        ++seen;
      }
    EXPECT_EQ(seen, 2 * 58) << c;
  }
}

// A straggler inside a pipeline stage: the next stage's receives wait for the straggler's sends
// too (they waited for the stage class's alone and started before their input existed), every
// collective of the straggler's stage starts with all copies of its program, and the sum of op
// times carries the straggler's slowdown (it was the unslowed sum).
TEST(Simulation, PipelineNeighboursWaitForAStragglersSends) {
  const std::string f = testing::source("examples/layouts/qwen3-235b-h100-megatron-folded.json");
  const std::vector<std::string> layout{"parallelism.ep=1", "parallelism.tp=1", "parallelism.dp=32"};
  auto load = [&](std::vector<std::string> extra) {
    std::vector<io::Override> o;
    for (const auto& x : layout) o.push_back(io::parse_override(x));
    for (const auto& x : extra) o.push_back(io::parse_override(x));
    return io::load_scenario(f, o);
  };
  const Scenario slow_s = load({"stragglers=[{\"gpu\": 100, \"compute_slowdown\": 2}]"});
  const StepReport slow = predict(slow_s, slow_s.calibration);
  const auto& g = *slow.graph;
  int straggler = -1;
  for (size_t c = 0; c < g.classes.size(); ++c)
    if (g.classes[c].ranks == 1) straggler = static_cast<int>(c);
  ASSERT_GE(straggler, 0);
  const int stage = g.classes[static_cast<size_t>(straggler)].sync_with;
  ASSERT_GE(stage, 0);
  ASSERT_EQ(g.classes[static_cast<size_t>(stage)].pp_stage, 3);
  // Every receive from the straggler's stage starts after the straggler's matching send ended.
  const auto& st_ops = g.classes[static_cast<size_t>(straggler)].ops;
  const auto& st_t = slow.sim->classes[static_cast<size_t>(straggler)].ops;
  int checked = 0;
  for (size_t c = 0; c < g.classes.size(); ++c) {
    if (g.classes[c].sync_with >= 0) continue;
    const auto& ops = g.classes[c].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].name.str().rfind("pp.recv", 0) != 0 || ops[i].peer_stage != stage) continue;
      const std::string suffix = ops[i].name.str().substr(7);
      for (size_t j = 0; j < st_ops.size(); ++j)
        if (st_ops[j].name.str() == "pp.send" + suffix && st_ops[j].micro_batch == ops[i].micro_batch &&
            st_ops[j].chunk == ops[i].peer_chunk && st_ops[j].peer_stage == static_cast<int>(c)) {
          EXPECT_GE(slow.sim->classes[c].ops[i].end.value(), st_t[j].end.value() - 1e-12) << ops[i].name.str();
          ++checked;
          break;
        }
    }
  }
  EXPECT_EQ(checked, 2 * 32);  // forward to stage 4 and backward to stage 2, 32 micro-batches each
  // So the first stage (which the last gradients reach through the straggler's stage) finishes
  // after the straggler's last send plus what it runs after its last receive: later than the
  // straggler itself.
  EXPECT_GT(slow.sim->classes[0].finish.value(), slow.sim->classes[static_cast<size_t>(straggler)].finish.value());
  // The sum of op times carries the slowdown: the straggler's compute ops twice their priced time.
  const Topology topo = Topology::build(slow_s.system, slow_s.gpus);
  const Pricer pr(slow_s, topo, slow_s.calibration);
  double compute = 0, other = 0;
  for (const Op& op : st_ops) (op.collective == Collective::none ? compute : other) += pr.time(op, 3).value();
  EXPECT_NEAR(serial_time(g.classes[static_cast<size_t>(straggler)], pr).value(), 2 * compute + other, 1e-6 * (compute + other));
  EXPECT_GE(slow.serial_step_time.value(), 2 * compute + other - 1e-6);
}

// The GPUs that wait for a straggler spin in their collectives: summed over every GPU, the
// communication share of kernel time rises with the straggler's slowdown.
TEST(Simulation, WaitingForAStragglerIsCommunicationKernelTime) {
  const std::string f = testing::source("examples/deepseek-v3/gb300-optimized.json");
  const StepReport base = predict(io::load_scenario(f), Calibration{});
  const StepReport slow =
      predict(io::load_scenario(f, {io::parse_override("stragglers=[{\"gpu\": 5, \"compute_slowdown\": 3.0}]")}),
              Calibration{});
  EXPECT_GT(slow.comm_fraction_of_kernel_time, base.comm_fraction_of_kernel_time + 0.2);
  // Recomputed from the classes: weighted by their GPUs, waits included.
  double comm = 0, all = 0;
  for (size_t c = 0; c < slow.graph->classes.size(); ++c)
    for (size_t i = 0; i < slow.graph->classes[c].ops.size(); ++i) {
      const OpTiming& t = slow.sim->classes[c].ops[i];
      const double d = (t.end - t.start + t.waited).value() * static_cast<double>(slow.graph->classes[c].ranks);
      all += d;
      if (is_communication(slow.graph->classes[c].ops[i].category)) comm += d;
    }
  EXPECT_NEAR(slow.comm_fraction_of_kernel_time, comm / all, 1e-12);
}

// EP groups that straddle more NVLink domains than rank 0's: the load and the exchanges are the
// widest group's (the step waits for it), with a note.
TEST(Collective, StraddlingEpGroupsArePricedAsTheWidest) {
  Scenario s = io::load_scenario(testing::source("examples/deepseek-v3/gb300-optimized.json"));
  s.system.gpus_per_domain_when_spanning = 72;  // every rack full: 72 is not a multiple of ep = 16
  s.gpus = 144;
  s.parallelism.ep = 16;
  s.parallelism.fsdp = 9;
  std::vector<std::string> notes;
  const ExpertLoad wide = expert_load(s, Calibration{}, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("some EP groups span 2 NVLink domains, rank 0's spans 1"), std::string::npos) << notes[0];
  EXPECT_EQ(wide.ep_domains, 2);  // rank 0's group alone would give 1, and no token crossing
  EXPECT_GT(wide.distinct_domains, 1.0);
  s.gpus = 128, s.parallelism.ep = 8, s.parallelism.fsdp = 16, s.system.gpus_per_domain_when_spanning = 64;
  notes.clear();
  (void)expert_load(s, Calibration{}, &notes);
  EXPECT_TRUE(notes.empty());
}

// A scaling study places rack stragglers on each point's racks and refuses a point without them.
TEST(Simulation, ScaleRePlacesStragglers) {
  const Scenario s = io::load_scenario(testing::source("examples/deepseek-v3/gb300-optimized.json"),
                                       {io::parse_override("stragglers=[{\"rack\": 1, \"compute_slowdown\": 1.2}]")});
  const auto points = scale(s, {256}, GrowAxis::fsdp, Calibration{});
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].report.graph->classes.back().ranks, 64);
  try {
    (void)scale(s, {64}, GrowAxis::fsdp, Calibration{});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "at 64 GPUs, straggler 0: rack 1 is not in this 64-GPU job");
  }
}

// A whole rack with slow NVLink: its 64 GPUs are one class, the other rack's 64 wait for it, and
// the step slows by less than the NVLink factor (compute and the network are not slowed).
TEST(Simulation, SlowRackIsOneClassOfItsGpus) {
  const std::string f = testing::source("examples/deepseek-v3/gb300-optimized.json");
  const StepReport base = predict(io::load_scenario(f), Calibration{});
  const StepReport slow =
      predict(io::load_scenario(f, {io::parse_override("stragglers=[{\"rack\": 1, \"nvlink_slowdown\": 2.0}]")}),
              Calibration{});
  ASSERT_EQ(slow.graph->classes.size(), 2u);
  EXPECT_EQ(slow.graph->classes[0].ranks, 64);
  EXPECT_EQ(slow.graph->classes[1].ranks, 64);
  EXPECT_EQ(slow.graph->classes[1].name, "straggler rack 1");
  EXPECT_GT(slow.step_time.value(), base.step_time.value() * 1.02);
  EXPECT_LT(slow.step_time.value(), base.step_time.value() * 2.0);
  EXPECT_GT(slow.sim->classes[0].wait.value(), 0.0);
}

}  // namespace
}  // namespace moeperf

namespace moeperf {
namespace {

// Four ranks of a CPU joined by host memory, as `moeperf run --suite calibrate --write-system`
// writes them: 4 GB/s per rank between ranks, 40 GB/s of memory per rank.
SystemSpec host_memory_system(testing::TempDir& d, const char* transport) {
  const nlohmann::json gpu = {{"kind", "gpu"}, {"name", "core"}, {"source", "test"}, {"compute_capability", "1.0"}, {"sms", 1},
                              {"dense_flops", {{"bf16", "40 GFLOP/s"}, {"fp8", "40 GFLOP/s"}}}, {"hbm_capacity", "4 GiB"}, {"hbm_usable", "4 GiB"}, {"hbm_bandwidth", "40 GB/s"},
                              {"nvlink", {{"generation", 1}, {"links", 1}, {"bandwidth_per_link", "4 GB/s"}}}};
  const nlohmann::json sys = {
      {"kind", "system"}, {"name", "host"}, {"source", "test"}, {"gpus", 4}, {"placement", {{"gpus_per_domain", 4}}},
      {"nvlink_domain",
       {{"kind", "nvlink_domain"}, {"name", "4 ranks"}, {"source", "test"}, {"trays", 1}, {"switch_chips", 1}, {"gpu_links_per_chip", 1},
        {"nvlink_latency", "0 s"}, {"transport", transport},
        {"switch", {{"kind", "switch"}, {"name", "host memory"}, {"source", "test"}, {"ports", 4}, {"port_bandwidth", "4 GB/s"}, {"latency", "0 s"}}},
        {"tray", {{"kind", "compute_tray"}, {"name", "host"}, {"source", "test"}, {"gpu", gpu}, {"gpus", 4}}}}}};
  const std::string path = d.path(std::string(transport) + ".json");
  std::ofstream(path) << sys.dump();
  return io::load_system(path);
}

// Over host memory a ring's reduction follows its transfer on the same core: a reduce-scatter
// costs the all-gather's copy plus 3 bytes of memory traffic per byte reduced; there is no in-switch
// reduction to offer; and small collectives move at the cache's speed.
TEST(Collective, OverHostMemoryTheReductionAddsToTheCopyAndTheCacheSpeedsSmallOnes) {
  testing::TempDir d;
  const SystemSpec host = host_memory_system(d, "host_memory"), nvl = host_memory_system(d, "nvlink");
  const Topology th = Topology::build(host, 4), tn = Topology::build(nvl, 4);
  EXPECT_DOUBLE_EQ(th.host_memory_bandwidth().value(), 40e9);
  EXPECT_DOUBLE_EQ(tn.host_memory_bandwidth().value(), 0.0);
  Calibration cal;
  cal.set(Param::host_reduce_fraction, 0.5);
  cal.set(Param::host_cache_speedup, 3.0);
  cal.set(Param::host_cache_bytes, 8e6);
  const auto nvlink = static_cast<int>(Resource::nvlink);
  const double copy = 0.75 / (4e9 * cal[Param::nvlink_fraction]);  // (n - 1)/n of the buffer over the link
  const CollectiveCost ag = collective_cost(Collective::all_gather, iota(4), th, cal);
  const CollectiveCost rs = collective_cost(Collective::reduce_scatter, iota(4), th, cal);
  EXPECT_NEAR(ag.s_per_byte[nvlink], copy, 1e-6 * copy);
  EXPECT_NEAR(rs.s_per_byte[nvlink], copy + 3 * 0.75 / (40e9 * 0.5), 1e-6 * copy);
  // All-reduce: a ring (twice the copy) with one reduce-scatter's reduction; no NVLS over host memory.
  const auto ars = collective_algorithms(Collective::all_reduce, iota(4), th, cal);
  ASSERT_EQ(ars.size(), 1u);
  EXPECT_STREQ(ars[0].algorithm, "ring");
  EXPECT_NEAR(ars[0].s_per_byte[nvlink], 2 * copy + 3 * 0.75 / (40e9 * 0.5), 1e-6 * copy);
  // The cache: at S = host_cache_bytes half of the speedup's gain, far above it none, far below all.
  auto rate_at = [&](double s) { return ag.at(Bytes(s)).s_per_byte[nvlink]; };
  EXPECT_NEAR(rate_at(8e6), copy / 2.0, 1e-6 * copy);
  EXPECT_NEAR(rate_at(8e12), copy, 1e-3 * copy);
  EXPECT_NEAR(rate_at(8.0), copy / 3.0, 1e-3 * copy);
  EXPECT_NEAR(ag.time(Bytes(8e6)).value(), ag.latency.value() + 8e6 * copy / 2.0, 1e-9);
  // The same switch as NVLink: no reduction term, no cache, NVLS offered for the all-reduce.
  const CollectiveCost rs_n = collective_cost(Collective::reduce_scatter, iota(4), tn, cal);
  EXPECT_NEAR(rs_n.s_per_byte[nvlink], copy, 1e-6 * copy);
  EXPECT_NEAR(rs_n.at(Bytes(8.0)).s_per_byte[nvlink], copy, 1e-6 * copy);
  EXPECT_EQ(collective_algorithms(Collective::all_reduce, iota(4), tn, cal).size(), 2u);
}

// Over host memory each rank's core copies its peers' blocks in turn: a direct all-to-all takes
// n - 1 steps' latency (as a ring), where over NVLink its peers' transfers run at once (one step).
TEST(Collective, OverHostMemoryAnAllToAllsPeersTakeTurns) {
  testing::TempDir d;
  const SystemSpec host = host_memory_system(d, "host_memory"), nvl = host_memory_system(d, "nvlink");
  const Topology th = Topology::build(host, 4), tn = Topology::build(nvl, 4);
  Calibration cal;
  cal.set(Param::nvlink_step_s, 10e-6);
  const CollectiveCost h = collective_cost(Collective::all_to_all, iota(4), th, cal);
  const CollectiveCost n = collective_cost(Collective::all_to_all, iota(4), tn, cal);
  EXPECT_STREQ(h.algorithm, "direct");
  EXPECT_EQ(h.steps, 3);
  EXPECT_EQ(n.steps, 1);
  const double launch = cal[Param::collective_launch_s];
  EXPECT_GT(n.latency.value() - launch, 0.0);
  EXPECT_NEAR(h.latency.value() - launch, 3.0 * (n.latency.value() - launch), 1e-12);
  // The bytes' rate is the same: only the steps differ.
  const auto nvlink = static_cast<int>(Resource::nvlink);
  EXPECT_NEAR(h.at(Bytes(1e12)).s_per_byte[nvlink], n.at(Bytes(1e12)).s_per_byte[nvlink], 1e-3 * n.at(Bytes(1e12)).s_per_byte[nvlink]);
}

TEST(Collective, ATransportIsNvlinkOrHostMemory) {
  testing::TempDir d;
  try {
    (void)host_memory_system(d, "pcie");
    FAIL() << "an unknown transport loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nvlink_domain/transport"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected \"nvlink\" or \"host_memory\", got \"pcie\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeperf

namespace moeperf {
namespace {

// The direct all-to-all's closed form (add_all_pairs: each member's peers counted per class) and
// the hierarchical all-to-all's summed NVLink forwarding give what adding their pairs one by one
// gives: every resource's seconds per byte, the latency and the steps, on racks and 8-GPU nodes,
// two- and three-tier fabrics, adaptive and hashed routing, whole and ragged member sets.
TEST(Collective, AllToAllClosedFormsMatchThePairwiseSums) {
  testing::TempDir d;
  std::vector<std::pair<std::string, Topology>> topos;
  topos.emplace_back("gb200 x 576", Topology::build(io::load_system(source("topologies/gb200-nvl72.json")), 576));
  topos.emplace_back("h100 x 4096", Topology::build(io::load_system(source("topologies/dgx-h100-cluster.json")), 4096));
  {  // the same nodes on a fabric that hashes flows (ECMP): the leaves' flow counts enter the rate
    nlohmann::json j;
    std::ifstream(source("topologies/dgx-h100-cluster.json")) >> j;
    j["nvlink_domain"] = source("topologies/domains/dgx-h100.json");
    nlohmann::json f;
    std::ifstream(source("topologies/fabrics/quantum-2-fat-tree.json")) >> f;
    nlohmann::json sw;
    std::ifstream(source("topologies/switches/quantum-2.json")) >> sw;
    sw["routing"] = "static_ecmp";
    f["switch"] = sw;
    j["fabric"] = f;
    topos.emplace_back("h100 x 1024, static ECMP", Topology::build(io::load_system(d.write("ecmp.json", j.dump())), 1024));
  }
  Calibration cal;  // no software step floor: each route class's own wire and switch latency shows
  cal.set(Param::network_step_s, 0.0);
  cal.set(Param::nvlink_step_s, 0.0);
  int cases = 0, spanning_pods = 0;
  for (const auto& entry : topos) {
    const std::string& name = entry.first;  // (no structured binding: lambdas below capture them)
    const Topology& t = entry.second;
    const int64_t total = t.gpus();
    std::vector<std::vector<int64_t>> sets;
    for (int64_t n : {int64_t{2}, int64_t{8}, int64_t{72}, int64_t{144}, std::min<int64_t>(total, 320)}) sets.push_back(iota(n));
    for (int64_t stride : {int64_t{3}, int64_t{7}, int64_t{13}}) {  // ragged: partial domains and leaves
      std::vector<int64_t> m;
      for (int64_t g = stride / 2; g < total && m.size() < 600; g += stride) m.push_back(g);
      sets.push_back(m);
    }
    for (const auto& m : sets) {
      bool pods = false;
      for (int64_t g : m) pods = pods || t.pod_of(g) != t.pod_of(m.front());
      spanning_pods += pods;
      auto same = [&](const CollectiveCost& a, const CollectiveCost& b, const char* what) {
        for (size_t r = 0; r < a.s_per_byte.size(); ++r)
          EXPECT_NEAR(a.s_per_byte[r], b.s_per_byte[r], 1e-12 * std::max(std::abs(b.s_per_byte[r]), 1e-30))
              << name << ", " << m.size() << " members, " << what << ", resource " << r;
        EXPECT_NEAR(a.latency.value(), b.latency.value(), 1e-15) << name << ", " << m.size() << " members, " << what;
        EXPECT_EQ(a.steps, b.steps) << name << ", " << what;
        EXPECT_STREQ(a.algorithm, b.algorithm);
      };
      same(collective_cost(Collective::all_to_all, m, t, cal), detail::all_to_all_direct_pairwise(m, t, cal), "direct");
      for (AllToAllShape shape : {AllToAllShape{8.0, 0.0}, AllToAllShape{8.0, 3.2}})
        same(all_to_all_hierarchical_cost(m, t, cal, shape), detail::all_to_all_hierarchical_pairwise(m, t, cal, shape),
             "hierarchical");
      ++cases;
    }
  }
  EXPECT_EQ(cases, 24);
  EXPECT_GT(spanning_pods, 0);  // a three-tier case: pairs through the core
}

}  // namespace
}  // namespace moeperf
