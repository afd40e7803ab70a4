// What grows with scale: the slowest of N GPUs (closed forms of the expected maximum of normals),
// and the waterfall of scale (the terms of a step add up to it, the losses to step - ideal).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/error.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/study/study.h"
#include "model/workload/flops.h"
#include "model/workload/step.h"

namespace moeperf {
namespace {

std::string source(const char* rel) { return std::string(MOEPERF_SOURCE_DIR) + "/" + rel; }

// E[max of n standard normals]: 1/sqrt(pi) for 2, 3/(2 sqrt(pi)) for 3, and tabulated values for
// 5, 10, 100, 1000 (Tippett 1925; Harter 1961), growing like sqrt(2 ln n).
TEST(Fleet, ExpectedMaxOfNormalsIsTheClosedForm) {
  const double pi = std::acos(-1.0);
  EXPECT_DOUBLE_EQ(expected_max_of_normals(1), 0.0);
  EXPECT_NEAR(expected_max_of_normals(2), 1 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_of_normals(3), 1.5 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_of_normals(5), 1.162964, 1e-6);
  EXPECT_NEAR(expected_max_of_normals(10), 1.538753, 1e-6);
  EXPECT_NEAR(expected_max_of_normals(100), 2.507594, 1e-6);
  EXPECT_NEAR(expected_max_of_normals(1000), 3.241436, 1e-6);
  const double e = expected_max_of_normals(100000);
  EXPECT_LT(e, std::sqrt(2 * std::log(100000.0)));
  EXPECT_GT(e, 4.0);
}

// With a fleet spread every class's compute stretches by exp(sigma x E[max of gpus normals]) (the
// slowest GPU's log speed sigma E below the mean's); the step grows by less than that
// (communication does not stretch) and the waterfall names it.
TEST(Fleet, SpreadStretchesComputeByTheSlowestOfTheJob) {
  const std::string f = source("examples/deepseek-v3/gb300-optimized.json");
  const Scenario s0 = io::load_scenario(f), s1 = io::load_scenario(f, {io::parse_override("fleet.speed_sigma=0.02")});
  const StepReport r0 = predict(s0, s0.calibration), r1 = predict(s1, s1.calibration);
  const double k = std::exp(0.02 * expected_max_of_normals(s1.gpus));
  EXPECT_NEAR(k, std::exp(0.02 * 2.5951), 1e-4);  // 128 GPUs: E[max of 128 standard normals] = 2.5946
  EXPECT_DOUBLE_EQ(r1.graph->fleet_slowdown, k);
  for (const RankClass& rc : r1.graph->classes) EXPECT_DOUBLE_EQ(rc.compute_slowdown, k);
  EXPECT_GT(r1.step_time.value(), r0.step_time.value() * 1.02);
  EXPECT_LT(r1.step_time.value(), r0.step_time.value() * k + 1e-9);
  double slow = 0, compute = 0;
  for (const auto& [name, v] : step_terms(r1)) {
    if (name == "slowest of N") slow = v;
    if (name == "compute" || name == "optimizer") compute += v;
  }
  EXPECT_NEAR(slow, compute * (k - 1), 1e-6 * r1.step_time.value());
  EXPECT_THROW(io::load_scenario(f, {io::parse_override("fleet.speed_sigma=0.7")}), io::SpecError);
}

// A listed straggler is one GPU's own draw, not the fleet's slowest: it keeps its slowdown, and the
// rest of the fleet waits for the slowest of the other gpus - count (it was stretched by both, 1.1 x
// 1.053 for a 10 % straggler among 128 GPUs at a 2 % spread); the waterfall charges the fleet term
// to the fleet's classes only.
TEST(Fleet, AStragglerKeepsItsOwnSlowdownUnderAFleetSpread) {
  const std::string f = source("examples/deepseek-v3/gb300-optimized.json");
  const Scenario s = io::load_scenario(f, {io::parse_override("fleet.speed_sigma=0.02"),
                                           io::parse_override("stragglers=[{\"gpu\": 5, \"compute_slowdown\": 1.1}]")});
  const StepReport r = predict(s, s.calibration);
  const double k = std::exp(0.02 * expected_max_of_normals(s.gpus - 1));
  EXPECT_DOUBLE_EQ(r.graph->fleet_slowdown, k);
  int stragglers = 0;
  for (const RankClass& rc : r.graph->classes) {
    if (rc.name.rfind("straggler", 0) == 0) {
      ++stragglers;
      EXPECT_DOUBLE_EQ(rc.compute_slowdown, 1.1);
      EXPECT_DOUBLE_EQ(rc.fleet_slowdown, 1.0);
    } else {
      EXPECT_DOUBLE_EQ(rc.compute_slowdown, k);
    }
  }
  EXPECT_EQ(stragglers, 1);
}

// Strong scaling at a fixed global batch: the batch stays, each pipeline's micro-batches shrink;
// every point's terms add up to its step and its losses to step - ideal; the bubble and the
// gradient all-reduce (a fixed size per GPU against shrinking compute) are what it loses.
TEST(ScaleWaterfall, StrongScalingLossesAddUpAndNameTheirMechanisms) {
  const Scenario s = io::load_scenario(source("examples/deepseek-v3/gb200-strong-scaling.json"));
  int checked = 0;
  const auto pts = scale(s, {512, 2048, 8192}, GrowAxis::dp, s.calibration, ScaleBatch::global,
                         [&](const Scenario& x) { io::check_scenario(x, "test"), ++checked; });
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(checked, 3);
  const int64_t mbs[] = {128, 32, 8};
  double prev_idle = 0, prev_dp = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    const ScalePoint& p = pts[i];
    EXPECT_EQ(p.report.scenario->batch.global_batch, 8192);
    EXPECT_EQ(p.report.scenario->micro_batches(), mbs[i]);
    double terms = 0, lost = 0;
    for (const auto& [k, v] : p.terms) terms += v;
    for (const auto& [k, v] : p.lost) lost += v;
    EXPECT_NEAR(terms, p.report.step_time.value(), 1e-6 * terms) << p.gpus;
    EXPECT_NEAR(lost, p.report.step_time.value() - p.ideal_step_s, 1e-6 * terms) << p.gpus;
    EXPECT_NEAR(p.efficiency, p.ideal_step_s / p.report.step_time.value(), 1e-9) << p.gpus;
    std::map<std::string, double> l(p.lost.begin(), p.lost.end());
    if (i > 0) {
      EXPECT_GT(l["idle"], prev_idle) << p.gpus;
      EXPECT_GT(l["dp/fsdp comm"], prev_dp) << p.gpus;
    }
    prev_idle = l["idle"], prev_dp = l["dp/fsdp comm"];
  }
  EXPECT_LT(pts.back().efficiency, 0.9);
  EXPECT_GT(pts.back().efficiency, 0.6);
  // A fixed global batch that no longer splits into whole micro-batches is an error that says so.
  try {
    Scenario odd = s;
    odd.batch.global_batch = 1536;  // 24 micro-batches per pipeline at 512 GPUs, 1.5 at 8,192
    (void)scale(odd, {512, 8192}, GrowAxis::dp, s.calibration, ScaleBatch::global);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a whole number of micro-batches"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeperf

namespace moeperf {
namespace {

// Megatron's --overlap-grad-reduce (stack.overlap.grad_reduce, on in megatron-core): each layer's
// data-parallel gradient all-reduce follows its weight gradients in the step's last backward of its
// chunk, no pipeline hand-off waits for it, and the bytes add up to the one all-reduce after the
// backward that the flag off gives (BF16 gradients, the stage's dense weights over 1,024 replicas).
TEST(DataParallel, GradientReductionOverlapsTheLastBackward) {
  const std::string f = source("examples/deepseek-v3/gb200-strong-scaling.json");
  const Scenario on = io::load_scenario(f, {io::parse_override("gpus=8192"), io::parse_override("parallelism.dp=32")});
  const Scenario off = io::load_scenario(
      f, {io::parse_override("gpus=8192"), io::parse_override("parallelism.dp=32"),
          io::parse_override("stack.overlap.grad_reduce=false")});
  ASSERT_TRUE(on.stack.grad_reduce_overlap);
  const int64_t mbs = on.micro_batches();
  const StepGraph g = lower_step(on, expert_load(on, on.calibration)), g0 = lower_step(off, expert_load(off, off.calibration));
  for (size_t c = 0; c < g.classes.size(); ++c) {
    const RankClass& rc = g.classes[c];
    double per_layer = 0, rest = 0, expected = 0, before = 0;
    std::vector<int> reduced;
    for (int l : stage_layers(on, rc.pp_stage)) expected += layer_params(on.model, l).dense * 2;
    for (size_t i = 0; i < rc.ops.size(); ++i) {
      const Op& op = rc.ops[i];
      if (op.name == "dp.all_reduce" && op.layer >= 0) {
        per_layer += op.bytes.value();
        reduced.push_back(op.layer);
        EXPECT_EQ(op.micro_batch, mbs - 1) << rc.name;
        ASSERT_EQ(op.deps.size(), 1u);
        const Op& w = rc.ops[static_cast<size_t>(op.deps[0])];
        EXPECT_EQ(w.layer, op.layer) << rc.name << " " << w.name;
        EXPECT_EQ(w.phase, Phase::backward);
      }
      if (op.name == "dp.all_reduce" && op.layer < 0) rest += op.bytes.value();
      if (op.name == "pp.send.bwd") {
        for (int32_t d : op.deps) {
          EXPECT_NE(rc.ops[static_cast<size_t>(d)].name, "dp.all_reduce") << rc.name;
        }
      }
    }
    std::sort(reduced.begin(), reduced.end());
    EXPECT_EQ(reduced, stage_layers(on, rc.pp_stage)) << rc.name;
    EXPECT_NEAR(per_layer, expected, 1e-6 * expected) << rc.name;
    for (const Op& op : g0.classes[c].ops)
      if (op.name == "dp.all_reduce") before += op.bytes.value();
    EXPECT_NEAR(per_layer + rest, before, 1e-6 * before) << rc.name;
  }
}

}  // namespace
}  // namespace moeperf
