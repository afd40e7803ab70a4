// CPU references of the MoE kernels (kernels/reference): closed forms on tiny cases, the oracles of
// executor.md (permute then un-permute is the identity, counts sum to T*k, small-integer GEMMs are
// exact) and its traps table (zero-token experts, 2^31 offsets, determinism, MXFP8 rounding).
#include "kernels/reference/moe_ref.h"
#include "kernels/reference/mxfp8_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace moeperf::ref {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
std::vector<T> sized(int64_t n, T fill = T{}) {
  return std::vector<T>(static_cast<size_t>(n), fill);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Small integers in [-r, r] as floats: products and sums stay exact.
std::vector<float> small_ints(int64_t n, int r, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-r, r);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(d(gen));
  return v;
}

std::vector<float> uniform(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

struct Routing {
  std::vector<int64_t> counts, offsets, row_of_slot, slot_of_row;
};

Routing route(const std::vector<int32_t>& idx, int64_t tokens, int k, int64_t experts) {
  Routing r{sized<int64_t>(experts), sized<int64_t>(experts + 1), sized<int64_t>(tokens * k),
            sized<int64_t>(tokens * k)};
  expert_counts(idx.data(), tokens, k, experts, r.counts.data(), r.offsets.data());
  permute_map(idx.data(), tokens, k, experts, r.offsets.data(), r.row_of_slot.data(),
              r.slot_of_row.data());
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ---------------------------------------------------------------- router

TEST(RefRouter, SoftmaxWeightsInClosedForm) {
  // exp(logits) = {1, 2, 3, 4}: probabilities {1, 2, 3, 4} / 10; top-2 = experts 3, 2.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  RouterParams p;
  p.tokens = 1;
  p.experts = 4;
  p.top_k = 2;
  p.score = Score::softmax;
  std::vector<int32_t> idx(2);
  std::vector<float> w(2);

  p.normalize = false;
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(w[0], 4.0 / 10.0, 1e-6);
  EXPECT_NEAR(w[1], 3.0 / 10.0, 1e-6);

  p.normalize = true;
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(w[0], 4.0 / 7.0, 1e-6);  // 0.4 / (0.4 + 0.3)
  EXPECT_NEAR(w[1], 3.0 / 7.0, 1e-6);
}

TEST(RefRouter, SigmoidWeightsInClosedForm) {
  // sigmoid(ln a) = a / (1 + a): {1/2, 3/4, 1/4, 7/8}; top-2 = experts 3 (7/8), 1 (3/4).
  const std::vector<float> logits = {0.0f, std::log(3.0f), -std::log(3.0f), std::log(7.0f)};
  RouterParams p;
  p.tokens = 1;
  p.experts = 4;
  p.top_k = 2;
  p.score = Score::sigmoid;
  std::vector<int32_t> idx(2);
  std::vector<float> w(2);

  p.normalize = false;
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{3, 1}));
  EXPECT_NEAR(w[0], 7.0 / 8.0, 1e-6);
  EXPECT_NEAR(w[1], 3.0 / 4.0, 1e-6);

  p.normalize = true;
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_NEAR(w[0], (7.0 / 8.0) / (7.0 / 8.0 + 3.0 / 4.0), 1e-6);  // 7/13
  EXPECT_NEAR(w[1], (3.0 / 4.0) / (7.0 / 8.0 + 3.0 / 4.0), 1e-6);  // 6/13
  EXPECT_NEAR(w[0] + w[1], 1.0, 1e-6);
}

TEST(RefRouter, BiasChangesSelectionNotWeights) {
  // Softmax probabilities {1, 2, 3, 4} / 10. Bias +1 on expert 0 lifts its selection score to
  // 1.1 > 0.4, so the top-2 becomes {0, 3}; the weights stay the unbiased 0.1 and 0.4.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  const std::vector<float> bias = {1.0f, 0.0f, 0.0f, 0.0f};
  RouterParams p;
  p.tokens = 1;
  p.experts = 4;
  p.top_k = 2;
  p.normalize = false;
  std::vector<int32_t> idx(2);
  std::vector<float> w(2);
  router_topk(logits.data(), bias.data(), p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 3}));
  EXPECT_NEAR(w[0], 1.0 / 10.0, 1e-6);
  EXPECT_NEAR(w[1], 4.0 / 10.0, 1e-6);

  p.normalize = true;
  router_topk(logits.data(), bias.data(), p, idx.data(), w.data());
  EXPECT_NEAR(w[0], 1.0 / 5.0, 1e-6);  // 0.1 / (0.1 + 0.4)
  EXPECT_NEAR(w[1], 4.0 / 5.0, 1e-6);
}

TEST(RefRouter, GroupLimitedPicksOnlyFromTheBestGroups) {
  // 8 experts in 4 groups of 2, sigmoid scores. Group score = sum of its top-2:
  //   g0 {s(4), s(-4)} = 1 (s(x) + s(-x) = 1)   g1 {s(1), s(1)} = 1.462
  //   g2 {s(.5), s(.5)} = 1.245                 g3 {s(0), s(-1)} = 0.769
  // Best two groups: g1 and g2, so expert 0 (the single best score, s(4) = 0.982) is excluded.
  // Inside: s(1) ties for experts 2, 3 and s(.5) ties for 4, 5 -> lower ids: {2, 3, 4}.
  const std::vector<float> logits = {4.0f, -4.0f, 1.0f, 1.0f, 0.5f, 0.5f, 0.0f, -1.0f};
  RouterParams p;
  p.tokens = 1;
  p.experts = 8;
  p.top_k = 3;
  p.score = Score::sigmoid;
  p.groups = 4;
  p.topk_groups = 2;
  std::vector<int32_t> idx(3);
  std::vector<float> w(3);
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{2, 3, 4}));
  const double sum = 2 * sigmoid(1.0) + sigmoid(0.5);
  EXPECT_NEAR(w[0], sigmoid(1.0) / sum, 1e-6);
  EXPECT_NEAR(w[1], sigmoid(1.0) / sum, 1e-6);
  EXPECT_NEAR(w[2], sigmoid(0.5) / sum, 1e-6);

  // The same logits without the group limit pick expert 0 first: s(4) > s(1).
  p.groups = 1;
  p.topk_groups = 1;
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 2, 3}));
}

TEST(RefRouter, GroupScoresUseTheBiasedScores) {
  // Unbiased the groups rank g1 > g2 > g0 > g3 (previous test); bias +1 on both experts of g3
  // makes its score 0.769 + 2 the best, so g3 and g1 are kept.
  const std::vector<float> logits = {4.0f, -4.0f, 1.0f, 1.0f, 0.5f, 0.5f, 0.0f, -1.0f};
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0, 1.0f, 1.0f};
  RouterParams p;
  p.tokens = 1;
  p.experts = 8;
  p.top_k = 4;
  p.score = Score::sigmoid;
  p.groups = 4;
  p.topk_groups = 2;
  p.normalize = false;
  std::vector<int32_t> idx(4);
  std::vector<float> w(4);
  router_topk(logits.data(), bias.data(), p, idx.data(), w.data());
  // Biased: e6 = 1.5, e7 = 1.269, e2 = e3 = 0.731.
  EXPECT_EQ(idx, (std::vector<int32_t>{6, 7, 2, 3}));
  EXPECT_NEAR(w[0], sigmoid(0.0), 1e-6);   // unbiased
  EXPECT_NEAR(w[1], sigmoid(-1.0), 1e-6);
}

TEST(RefRouter, TiesGoToTheLowerExpertId) {
  const std::vector<float> logits(6, 0.25f);
  RouterParams p;
  p.tokens = 1;
  p.experts = 6;
  p.top_k = 3;
  std::vector<int32_t> idx(3);
  std::vector<float> w(3);
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 1, 2}));
  for (float x : w) EXPECT_NEAR(x, 1.0 / 3.0, 1e-6);  // equal scores, renormalized
}

TEST(RefRouter, OutputSortedByDescendingBiasedScoreOnManyTokens) {
  const int64_t T = 64, E = 32;
  const int k = 4;
  const std::vector<float> logits = uniform(T * E, -3.0f, 3.0f, 1);
  const std::vector<float> bias = uniform(E, -0.1f, 0.1f, 2);
  RouterParams p;
  p.tokens = T;
  p.experts = E;
  p.top_k = k;
  p.score = Score::sigmoid;
  p.groups = 8;
  p.topk_groups = 4;
  std::vector<int32_t> idx = sized<int32_t>(T * k);
  std::vector<float> w = sized<float>(T * k);
  router_topk(logits.data(), bias.data(), p, idx.data(), w.data());
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      const int32_t e = idx[t * k + j];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, E);
      sum += w[t * k + j];
      if (j > 0) {
        const int32_t prev = idx[t * k + j - 1];
        const float sp = static_cast<float>(sigmoid(logits[t * E + prev])) + bias[prev];
        const float se = static_cast<float>(sigmoid(logits[t * E + e])) + bias[e];
        EXPECT_TRUE(sp > se || (sp == se && prev < e)) << "token " << t << " slot " << j;
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);  // normalize = true
  }
}

TEST(RefRouter, RejectsImpossibleParameters) {
  const std::vector<float> logits(8, 0.0f);
  std::vector<int32_t> idx(8);
  std::vector<float> w(8);
  RouterParams p;
  p.tokens = 1;
  p.experts = 8;
  p.groups = 3;  // does not divide 8
  EXPECT_THROW(router_topk(logits.data(), nullptr, p, idx.data(), w.data()), std::invalid_argument);
  p.groups = 4;
  p.topk_groups = 1;
  p.top_k = 3;  // only 2 experts in one kept group
  EXPECT_THROW(router_topk(logits.data(), nullptr, p, idx.data(), w.data()), std::invalid_argument);
}

// ---------------------------------------------------------------- counts / offsets / permute map

TEST(RefCounts, CountsOffsetsAndStableOrderOnAHandExample) {
  // 4 tokens, k = 2, 4 experts; expert 3 gets nothing.
  // slots: 0:(t0,e1) 1:(t0,e0) 2:(t1,e1) 3:(t1,e2) 4:(t2,e0) 5:(t2,e1) 6:(t3,e2) 7:(t3,e1)
  const std::vector<int32_t> idx = {1, 0, 1, 2, 0, 1, 2, 1};
  const Routing r = route(idx, 4, 2, 4);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{2, 4, 2, 0}));
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 2, 6, 8, 8}));
  // Rows of each expert in (token, slot) order: e0 <- slots 1, 4; e1 <- 0, 2, 5, 7; e2 <- 3, 6.
  EXPECT_EQ(r.slot_of_row, (std::vector<int64_t>{1, 4, 0, 2, 5, 7, 3, 6}));
  EXPECT_EQ(r.row_of_slot, (std::vector<int64_t>{2, 0, 3, 6, 1, 4, 7, 5}));
}

TEST(RefCounts, DroplessOnRandomRoutingAndInverseMaps) {
  const int64_t T = 257, E = 16;
  const int k = 8;
  std::mt19937 gen(3);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(E) - 1);
  std::vector<int32_t> idx = sized<int32_t>(T * k);
  for (int32_t& e : idx) e = d(gen);
  const Routing r = route(idx, T, k, E);
  int64_t sum = 0;
  for (int64_t c : r.counts) sum += c;
  EXPECT_EQ(sum, T * k);  // dropless: no slot lost
  EXPECT_EQ(r.offsets[0], 0);
  EXPECT_EQ(r.offsets[E], T * k);
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(r.offsets[e + 1] - r.offsets[e], r.counts[e]);  // exclusive prefix sum
    for (int64_t row = r.offsets[e]; row < r.offsets[e + 1]; ++row) {
      EXPECT_EQ(idx[r.slot_of_row[row]], e);
      if (row > r.offsets[e]) {
        EXPECT_LT(r.slot_of_row[row - 1], r.slot_of_row[row]);  // stable
      }
    }
  }
  for (int64_t s = 0; s < T * k; ++s) EXPECT_EQ(r.slot_of_row[r.row_of_slot[s]], s);
}

TEST(RefCounts, EveryTokenOnOneExpertLeavesTheOthersEmpty) {
  const int64_t T = 5, E = 3;
  const std::vector<int32_t> idx(T, 1);  // k = 1
  const Routing r = route(idx, T, 1, E);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{0, T, 0}));
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 0, T, T}));
  EXPECT_EQ(r.slot_of_row, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(RefCounts, ExpertsWithZeroOneAndManyTokens) {
  // k = 1: e0 none, e1 one (token 2), e2 the other three.
  const std::vector<int32_t> idx = {2, 2, 1, 2};
  const Routing r = route(idx, 4, 1, 3);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 0, 1, 4}));
}

TEST(RefCounts, RejectsAnExpertIdOutOfRange) {
  const std::vector<int32_t> idx = {0, 3};
  std::vector<int64_t> counts(3), offsets(4);
  EXPECT_THROW(expert_counts(idx.data(), 2, 1, 3, counts.data(), offsets.data()),
               std::invalid_argument);
}

// ---------------------------------------------------------------- permute / un-permute

TEST(RefPermute, UnpermuteOfPermuteIsTheIdentityWithKOneAndUnitWeights) {
  const int64_t T = 33, E = 5, H = 17;
  std::vector<int32_t> idx = sized<int32_t>(T);
  for (int64_t t = 0; t < T; ++t) idx[t] = static_cast<int32_t>((t * 7) % E);
  std::vector<float> x = uniform(T * H, -2.0f, 2.0f, 4);
  x[3] = -0.0f;  // the sign of zero survives too
  const Routing r = route(idx, T, 1, E);
  std::vector<float> rows = sized<float>(T * H), out = sized<float>(T * H);
  const std::vector<float> w(T, 1.0f);
  permute(x.data(), T, H, 1, r.slot_of_row.data(), rows.data());
  unpermute(rows.data(), T, H, 1, r.row_of_slot.data(), w.data(), out.data());
  EXPECT_TRUE(same_bits(out, x));
}

TEST(RefPermute, RowsOfAnExpertAreItsTokensInOrder) {
  const std::vector<int32_t> idx = {1, 0, 1, 2, 0, 1, 2, 1};  // the hand example above
  const int64_t T = 4, H = 3;
  const int k = 2;
  const Routing r = route(idx, T, k, 4);
  std::vector<float> x = sized<float>(T * H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) x[t * H + h] = static_cast<float>(10 * t + h);
  std::vector<float> rows = sized<float>(T * k * H);
  permute(x.data(), T, H, k, r.slot_of_row.data(), rows.data());
  // Row r holds token slot_of_row[r] / 2: tokens {0, 2 | 0, 1, 2, 3 | 1, 3}.
  const std::vector<int64_t> token_of_row = {0, 2, 0, 1, 2, 3, 1, 3};
  for (int64_t row = 0; row < T * k; ++row)
    for (int64_t h = 0; h < H; ++h)
      EXPECT_EQ(rows[row * H + h], static_cast<float>(10 * token_of_row[row] + h)) << row;
}

TEST(RefPermute, CombineWithWeightsSummingToOneReturnsTheInput) {
  // Identical expert outputs (each expert returns its input row) and router weights that sum to
  // one: sum_j w_j x = x up to FP32 rounding of k products and sums.
  const int64_t T = 40, E = 16, H = 64;
  const int k = 4;
  RouterParams p;
  p.tokens = T;
  p.experts = E;
  p.top_k = k;
  const std::vector<float> logits = uniform(T * E, -2.0f, 2.0f, 5);
  std::vector<int32_t> idx = sized<int32_t>(T * k);
  std::vector<float> w = sized<float>(T * k);
  router_topk(logits.data(), nullptr, p, idx.data(), w.data());
  const Routing r = route(idx, T, k, E);
  const std::vector<float> x = uniform(T * H, -1.0f, 1.0f, 6);
  std::vector<float> rows = sized<float>(T * k * H), out = sized<float>(T * H);
  permute(x.data(), T, H, k, r.slot_of_row.data(), rows.data());
  unpermute(rows.data(), T, H, k, r.row_of_slot.data(), w.data(), out.data());
  for (int64_t i = 0; i < T * H; ++i) EXPECT_NEAR(out[i], x[i], 1e-6) << i;
}

TEST(RefPermute, DispatchThenCombineMultipliesByTheWeightSum) {
  // Integer rows and dyadic weights: sum_j w_j x is exact, = (sum_j w_j) x.
  const int64_t T = 6, E = 4, H = 5;
  const int k = 3;
  std::vector<int32_t> idx = sized<int32_t>(T * k);
  for (int64_t s = 0; s < T * k; ++s) idx[s] = static_cast<int32_t>((s * 3 + s / k) % E);
  const std::vector<float> w = {0.5f, 0.25f, 2.0f, 1.0f, 1.0f, 1.0f, 0.125f, 0.0f, 4.0f,
                                1.5f, 0.5f, 0.5f, 3.0f, 0.0f, 0.0f, 0.75f, 0.25f, 1.0f};
  const Routing r = route(idx, T, k, E);
  const std::vector<float> x = small_ints(T * H, 9, 7);
  std::vector<float> rows = sized<float>(T * k * H), out = sized<float>(T * H);
  permute(x.data(), T, H, k, r.slot_of_row.data(), rows.data());
  unpermute(rows.data(), T, H, k, r.row_of_slot.data(), w.data(), out.data());
  for (int64_t t = 0; t < T; ++t) {
    const float wsum = w[t * k] + w[t * k + 1] + w[t * k + 2];
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(out[t * H + h], wsum * x[t * H + h]);
  }
}

TEST(RefPermute, BackwardsAreTheAdjointsOnIntegers) {
  // <unpermute(rows, w), g> = <rows, drows> and dL/dw_s = <g_t, rows_r>; <permute(x), d> =
  // <x, permute_bwd(d)>. Integers and integer weights make every sum exact.
  const int64_t T = 7, E = 3, H = 4;
  const int k = 2;
  std::vector<int32_t> idx = sized<int32_t>(T * k);
  for (int64_t t = 0; t < T; ++t) {
    idx[t * k] = static_cast<int32_t>(t % E);
    idx[t * k + 1] = static_cast<int32_t>((t + 1) % E);
  }
  const Routing r = route(idx, T, k, E);
  const std::vector<float> rows = small_ints(T * k * H, 5, 8), g = small_ints(T * H, 5, 9);
  const std::vector<float> w = small_ints(T * k, 3, 10);
  std::vector<float> out = sized<float>(T * H), drows = sized<float>(T * k * H),
                     dw = sized<float>(T * k);
  unpermute(rows.data(), T, H, k, r.row_of_slot.data(), w.data(), out.data());
  unpermute_bwd(rows.data(), g.data(), T, H, k, r.row_of_slot.data(), w.data(), drows.data(),
                dw.data());
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < T * H; ++i) lhs += double(out[i]) * g[i];
  for (int64_t i = 0; i < T * k * H; ++i) rhs += double(drows[i]) * rows[i];
  EXPECT_EQ(lhs, 1.0 * rhs);  // out is linear in rows: L(rows) = <rows, drows>
  for (int64_t t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      double dot = 0;
      for (int64_t h = 0; h < H; ++h) dot += double(g[t * H + h]) * rows[r.row_of_slot[t * k + j] * H + h];
      EXPECT_EQ(dw[t * k + j], dot);
      for (int64_t h = 0; h < H; ++h)
        EXPECT_EQ(drows[r.row_of_slot[t * k + j] * H + h], w[t * k + j] * g[t * H + h]);
    }

  const std::vector<float> x = small_ints(T * H, 5, 11), d = small_ints(T * k * H, 5, 12);
  std::vector<float> px = sized<float>(T * k * H), dx = sized<float>(T * H);
  permute(x.data(), T, H, k, r.slot_of_row.data(), px.data());
  permute_bwd(d.data(), T, H, k, r.row_of_slot.data(), dx.data());
  double a = 0, b = 0;
  for (int64_t i = 0; i < T * k * H; ++i) a += double(px[i]) * d[i];
  for (int64_t i = 0; i < T * H; ++i) b += double(x[i]) * dx[i];
  EXPECT_EQ(a, b);
}

// ---------------------------------------------------------------- SwiGLU

TEST(RefSwiglu, ClosedFormAtZeroGate) {
  // g = 0: silu(0) = 0 and silu'(0) = s(0) = 1/2; so out = 0, dg = dout * u / 2, du = 0.
  const std::vector<float> gu = {0.0f, 3.0f};  // rows = 1, I = 1
  std::vector<float> out(1), dgu(2);
  swiglu_fwd(gu.data(), 1, 1, out.data());
  EXPECT_EQ(out[0], 0.0f);
  const std::vector<float> dout = {2.0f};
  swiglu_bwd(gu.data(), dout.data(), 1, 1, dgu.data());
  EXPECT_EQ(dgu[0], 2.0f * 3.0f * 0.5f);
  EXPECT_EQ(dgu[1], 0.0f);
}

TEST(RefSwiglu, ForwardInClosedForm) {
  // silu(g) * u with silu(g) = g / (1 + e^-g).
  const std::vector<float> gu = {1.0f, -2.0f, 0.5f, 4.0f};  // rows = 1, I = 2: g {1, -2}, u {.5, 4}
  std::vector<float> out(2);
  swiglu_fwd(gu.data(), 1, 2, out.data());
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(-1.0)) * 0.5, 1e-7);
  EXPECT_NEAR(out[1], -2.0 / (1.0 + std::exp(2.0)) * 4.0, 1e-6);
}

TEST(RefSwiglu, BackwardMatchesFiniteDifferences) {
  const int64_t R = 3, I = 8;
  const std::vector<float> gu = uniform(R * 2 * I, -4.0f, 4.0f, 13), dout = uniform(R * I, -1.0f, 1.0f, 14);
  std::vector<float> dgu = sized<float>(R * 2 * I);
  swiglu_bwd(gu.data(), dout.data(), R, I, dgu.data());
  // Elementwise: out[r, i] depends on gu[r, i] and gu[r, I + i] only; central difference of
  // dout * out(g, u) through the reference forward, h = 1e-2 (error O(h^2) ~ 1e-4).
  const float h = 1e-2f;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t col : {i, I + i}) {
        std::vector<float> p = {gu[r * 2 * I + i], gu[r * 2 * I + I + i]}, m = p;
        const size_t which = col == i ? 0 : 1;
        p[which] += h;
        m[which] -= h;
        float fp = 0, fm = 0;
        swiglu_fwd(p.data(), 1, 1, &fp);
        swiglu_fwd(m.data(), 1, 1, &fm);
        const double fd = double(dout[r * I + i]) * (double(fp) - fm) / (double(p[which]) - m[which]);
        const double an = dgu[r * 2 * I + col];
        EXPECT_NEAR(an, fd, 1e-3 * std::max(1.0, std::fabs(fd))) << "row " << r << " col " << col;
      }
}

// ---------------------------------------------------------------- grouped GEMM

// Dense [m x k] x [k x n] written independently of the reference (i, j, kk order).
std::vector<float> dense_gemm(const float* a, const float* b, int64_t m, int64_t k, int64_t n) {
  std::vector<float> c = sized<float>(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += a[i * k + kk] * b[kk * n + j];
      c[i * n + j] = s;
    }
  return c;
}

TEST(RefGroupedGemm, MatchesPerExpertDenseGemmOnIntegers) {
  // Ragged groups, one empty in the middle and one at the end.
  const std::vector<int64_t> offsets = {0, 3, 3, 10, 11, 11};
  const int64_t E = 5, K = 6, N = 7, rows = offsets[E];
  const std::vector<float> a = small_ints(rows * K, 4, 15), w = small_ints(E * K * N, 4, 16);
  std::vector<float> c = sized<float>(rows * N, kNaN);
  grouped_gemm(a.data(), w.data(), offsets.data(), E, K, N, c.data());
  for (int64_t e = 0; e < E; ++e) {
    const int64_t m = offsets[e + 1] - offsets[e];
    const std::vector<float> ref = dense_gemm(a.data() + offsets[e] * K, w.data() + e * K * N, m, K, N);
    for (int64_t i = 0; i < m * N; ++i) EXPECT_EQ(c[offsets[e] * N + i], ref[i]) << "expert " << e;
  }
}

TEST(RefGroupedGemm, ZeroRowExpertsWriteNothingAndWgradIsExactZero) {
  // Expert 1 has no rows (its weights are NaN: reading them would show); rows past the end are a
  // guard that must stay NaN. Its weight gradient, pre-filled with NaN, must become +0.
  const std::vector<int64_t> offsets = {0, 2, 2, 4};
  const int64_t E = 3, K = 2, N = 3, rows = offsets[E];
  const std::vector<float> a = small_ints(rows * K, 3, 17);
  std::vector<float> w = small_ints(E * K * N, 3, 18);
  for (int64_t i = K * N; i < 2 * K * N; ++i) w[i] = kNaN;
  std::vector<float> c = sized<float>((rows + 1) * N, kNaN);
  grouped_gemm(a.data(), w.data(), offsets.data(), E, K, N, c.data());
  for (int64_t i = 0; i < rows * N; ++i) EXPECT_FALSE(std::isnan(c[i])) << i;
  for (int64_t i = rows * N; i < (rows + 1) * N; ++i) EXPECT_TRUE(std::isnan(c[i])) << "guard " << i;

  const std::vector<float> dc = small_ints(rows * N, 3, 19);
  std::vector<float> dw = sized<float>(E * K * N, kNaN);
  grouped_gemm_wgrad(a.data(), dc.data(), offsets.data(), E, K, N, dw.data());
  for (int64_t i = K * N; i < 2 * K * N; ++i) {
    EXPECT_EQ(dw[i], 0.0f);
    EXPECT_FALSE(std::signbit(dw[i]));
  }
  for (float v : dw) EXPECT_FALSE(std::isnan(v));
}

TEST(RefGroupedGemm, EveryRowOnOneExpert) {
  const std::vector<int64_t> offsets = {0, 0, 5, 5};
  const int64_t E = 3, K = 3, N = 2;
  const std::vector<float> a = small_ints(5 * K, 4, 20), w = small_ints(E * K * N, 4, 21);
  std::vector<float> c = sized<float>(5 * N, kNaN);
  grouped_gemm(a.data(), w.data(), offsets.data(), E, K, N, c.data());
  EXPECT_EQ(c, dense_gemm(a.data(), w.data() + K * N, 5, K, N));
  std::vector<float> dw = sized<float>(E * K * N, kNaN);
  grouped_gemm_wgrad(a.data(), c.data(), offsets.data(), E, K, N, dw.data());
  for (int64_t i = 0; i < K * N; ++i) EXPECT_EQ(dw[i], 0.0f);
  for (int64_t i = 2 * K * N; i < 3 * K * N; ++i) EXPECT_EQ(dw[i], 0.0f);
}

TEST(RefGroupedGemm, WgradInClosedFormOnAHandExample) {
  // One expert, a = [[1, 2], [3, 4]] (rows x K), dc = [[5], [6]] (rows x N):
  // dw = a^T dc = [[1*5 + 3*6], [2*5 + 4*6]] = [[23], [34]].
  const std::vector<int64_t> offsets = {0, 2};
  const std::vector<float> a = {1, 2, 3, 4}, dc = {5, 6};
  std::vector<float> dw(2);
  grouped_gemm_wgrad(a.data(), dc.data(), offsets.data(), 1, 2, 1, dw.data());
  EXPECT_EQ(dw[0], 1.0f * 5 + 3.0f * 6);
  EXPECT_EQ(dw[1], 2.0f * 5 + 4.0f * 6);
}

TEST(RefGroupedGemm, WgradIsTheFiniteDifferenceOfTheForward) {
  // L(w) = <grouped_gemm(a, w), dc> is linear in w, so L(w + e_i) - L(w) = dw_i exactly on integers.
  const std::vector<int64_t> offsets = {0, 4, 4, 9};
  const int64_t E = 3, K = 3, N = 4, rows = offsets[E];
  const std::vector<float> a = small_ints(rows * K, 3, 22), dc = small_ints(rows * N, 3, 23);
  std::vector<float> w = small_ints(E * K * N, 3, 24);
  std::vector<float> dw = sized<float>(E * K * N);
  grouped_gemm_wgrad(a.data(), dc.data(), offsets.data(), E, K, N, dw.data());
  auto loss = [&](const std::vector<float>& ww) {
    std::vector<float> c = sized<float>(rows * N);
    grouped_gemm(a.data(), ww.data(), offsets.data(), E, K, N, c.data());
    double l = 0;
    for (int64_t i = 0; i < rows * N; ++i) l += double(c[i]) * dc[i];
    return l;
  };
  const double l0 = loss(w);
  for (int64_t i = 0; i < E * K * N; ++i) {
    std::vector<float> wp = w;
    wp[i] += 1.0f;
    EXPECT_EQ(loss(wp) - l0, double(dw[i])) << i;
  }
}

TEST(RefGroupedGemm, RejectsDecreasingOffsets) {
  const std::vector<int64_t> offsets = {0, 3, 2};
  const std::vector<float> a(9), w(8);
  std::vector<float> c(9);
  EXPECT_THROW(grouped_gemm(a.data(), w.data(), offsets.data(), 2, 2, 2, c.data()),
               std::invalid_argument);
}

// ---------------------------------------------------------------- determinism, 2^31

TEST(RefDeterminism, TwoRunsGiveIdenticalBits) {
  const int64_t T = 96, E = 16, H = 48, I = 24;
  const int k = 4;
  RouterParams p;
  p.tokens = T;
  p.experts = E;
  p.top_k = k;
  p.score = Score::sigmoid;
  p.groups = 4;
  p.topk_groups = 2;
  const std::vector<float> logits = uniform(T * E, -3, 3, 25), bias = uniform(E, -0.1f, 0.1f, 26);
  const std::vector<float> x = uniform(T * H, -1, 1, 27), w1 = uniform(E * H * 2 * I, -0.1f, 0.1f, 28);
  const std::vector<float> w2 = uniform(E * I * H, -0.1f, 0.1f, 29), g = uniform(T * H, -1, 1, 30);

  auto run = [&] {
    std::vector<int32_t> idx = sized<int32_t>(T * k);
    std::vector<float> w = sized<float>(T * k);
    router_topk(logits.data(), bias.data(), p, idx.data(), w.data());
    const Routing r = route(idx, T, k, E);
    std::vector<float> rows = sized<float>(T * k * H), gu = sized<float>(T * k * 2 * I),
                       act = sized<float>(T * k * I), y = sized<float>(T * k * H),
                       out = sized<float>(T * H), dy = sized<float>(T * k * H),
                       dw = sized<float>(T * k), dw2 = sized<float>(E * I * H);
    permute(x.data(), T, H, k, r.slot_of_row.data(), rows.data());
    grouped_gemm(rows.data(), w1.data(), r.offsets.data(), E, H, 2 * I, gu.data());
    swiglu_fwd(gu.data(), T * k, I, act.data());
    grouped_gemm(act.data(), w2.data(), r.offsets.data(), E, I, H, y.data());
    unpermute(y.data(), T, H, k, r.row_of_slot.data(), w.data(), out.data());
    unpermute_bwd(y.data(), g.data(), T, H, k, r.row_of_slot.data(), w.data(), dy.data(), dw.data());
    grouped_gemm_wgrad(act.data(), dy.data(), r.offsets.data(), E, I, H, dw2.data());
    std::vector<uint8_t> q = sized<uint8_t>(T * H), s = sized<uint8_t>(T * H / kMxfp8Block);
    mxfp8_quantize(out.data(), T * H, q.data(), s.data());
    return std::make_tuple(idx, w, out, dw, dw2, q, s);
  };
  const auto a = run(), b = run();
  EXPECT_TRUE(same_bits(std::get<0>(a), std::get<0>(b)));
  EXPECT_TRUE(same_bits(std::get<1>(a), std::get<1>(b)));
  EXPECT_TRUE(same_bits(std::get<2>(a), std::get<2>(b)));
  EXPECT_TRUE(same_bits(std::get<3>(a), std::get<3>(b)));
  EXPECT_TRUE(same_bits(std::get<4>(a), std::get<4>(b)));
  EXPECT_TRUE(same_bits(std::get<5>(a), std::get<5>(b)));
  EXPECT_TRUE(same_bits(std::get<6>(a), std::get<6>(b)));
}

TEST(RefIndex, RowOffsetsPast2To31AreExactInInt64) {
  // DeepSeek-V3: 37,450 routed rows of 7,168 FP64 elements already pass 2^31 bytes;
  // 300,000 tokens * k = 8 rows of 7,168 FP32 elements pass it 32 times over.
  static_assert(row_offset_bytes(37450, 7168, 8) == 2'147'532'800);  // 37450 * 7168 * 8
  constexpr int64_t last = 300000 * int64_t{8} - 1;
  static_assert(row_offset_bytes(last, 7168, 4) == 68'812'771'328);  // 2,399,999 * 7168 * 4
  EXPECT_EQ(row_offset_bytes(37450, 7168, 8), int64_t{37450} * 7168 * 8);
  EXPECT_GT(row_offset_bytes(37450, 7168, 8), int64_t{1} << 31);
  EXPECT_EQ(row_offset_bytes(last, 7168, 4), last * 7168 * 4);
  // What a 32-bit computation would have produced instead: the product modulo 2^32, reinterpreted.
  EXPECT_NE(row_offset_bytes(last, 7168, 4),
            static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(last * 7168 * 4))));
}

// ---------------------------------------------------------------- MXFP8

// A block of 32 floats: `head` first, the rest zero.
std::vector<float> block(std::initializer_list<float> head) {
  std::vector<float> b(kMxfp8Block, 0.0f);
  std::copy(head.begin(), head.end(), b.begin());
  return b;
}

Mxfp8Row quantize(const std::vector<float>& x) {
  return mxfp8_quantize_row(x.data(), static_cast<int64_t>(x.size()));
}

TEST(RefMxfp8, MaxValueHasScaleOneAndCode0x7E) {
  // 448 = 1.75 * 2^8 = S.1111.110 with e = ceil(log2(448 / 448)) = 0 -> E8M0 byte 0 + 127.
  const Mxfp8Row q = quantize(block({448.0f, -448.0f, 1.0f}));
  EXPECT_EQ(q.scale_e8m0[0], 127);
  EXPECT_EQ(q.e4m3[0], 0x7E);
  EXPECT_EQ(q.e4m3[1], 0xFE);
  EXPECT_EQ(q.e4m3[2], 0x38);  // 1.0 = 2^(7 - 7): exponent field 7, mantissa 0
  EXPECT_EQ(q.e4m3[3], 0x00);
}

TEST(RefMxfp8, ScaleExponentIsRoundedUp) {
  // amax 1000: e = ceil(log2(1000 / 448)) = ceil(1.158) = 2; 1000 / 4 = 250 rounds to 256
  // (grid step 16 in [128, 256)), code 1.0 * 2^8 = exponent field 15, mantissa 0 = 0x78.
  Mxfp8Row q = quantize(block({1000.0f}));
  EXPECT_EQ(q.scale_e8m0[0], 2 + 127);
  EXPECT_EQ(q.e4m3[0], 0x78);
  // Exactly 448 * 2^k needs no extra step: 896 -> e = 1; one float above it -> e = 2.
  EXPECT_EQ(mxfp8_block_exponent(896.0f), 1);
  EXPECT_EQ(mxfp8_block_exponent(std::nextafter(896.0f, kInf)), 2);
  EXPECT_EQ(mxfp8_block_exponent(448.0f), 0);
  EXPECT_EQ(mxfp8_block_exponent(std::nextafter(448.0f, 0.0f)), 0);  // (224, 448] -> 0
  EXPECT_EQ(mxfp8_block_exponent(224.0f), -1);
  // Clamps: amax 0 -> -127; the smallest subnormal float 2^-149 wants -157 -> -127;
  // FLT_MAX ~ 2^128 -> ceil(128 - log2 448) = 120, inside the range.
  EXPECT_EQ(mxfp8_block_exponent(0.0f), -127);
  EXPECT_EQ(mxfp8_block_exponent(std::numeric_limits<float>::denorm_min()), -127);
  EXPECT_EQ(mxfp8_block_exponent(std::numeric_limits<float>::max()), 120);
  q = quantize(block({}));
  EXPECT_EQ(q.scale_e8m0[0], 0);  // -127 + 127
}

TEST(RefMxfp8, NothingSaturates) {
  // Every |x| / 2^e <= 448 for amax across many binades: dequantized amax within half an ulp.
  for (float amax : {1e-30f, 3.0e-5f, 0.7f, 447.9f, 448.1f, 1e6f, 3e20f}) {
    const Mxfp8Row q = quantize(block({amax, -amax / 3}));
    const int e = q.scale_e8m0[0] - 127;
    EXPECT_LE(std::ldexp(double(amax), -e), 448.0) << amax;
    EXPECT_NE(q.e4m3[0] & 0x7F, 0x7F) << amax;  // not NaN
  }
}

TEST(RefMxfp8, HalfwayValuesRoundToEven) {
  // Scale 2^0 (448 in the block). Grid in [1, 2): step 1/8; in [16, 32): step 2; subnormal: 2^-9.
  const Mxfp8Row q = quantize(block({448.0f,
                                     1.0625f,                 // 1 + 1/16: between 1.0 (m 0) and 1.125 (m 1) -> 1.0
                                     1.1875f,                 // between 1.125 (m 1) and 1.25 (m 2) -> 1.25
                                     17.0f,                   // between 16 (m 0) and 18 (m 1) -> 16
                                     19.0f,                   // between 18 (m 1) and 20 (m 2) -> 20
                                     std::ldexp(0.5f, -9),    // between 0 and 2^-9 -> 0
                                     std::ldexp(1.5f, -9),    // between m 1 and m 2 -> m 2
                                     std::ldexp(2.5f, -9),    // between m 2 and m 3 -> m 2
                                     -1.0625f,
                                     240.0f + 8.0f,           // between 240 (1.875*2^7) and 256 -> 256
                                     std::ldexp(7.5f, -9)})); // between 7*2^-9 and 2^-6 -> 2^-6
  EXPECT_EQ(q.scale_e8m0[0], 127);
  EXPECT_EQ(q.e4m3[1], 0x38);   // exp 7, m 0
  EXPECT_EQ(q.e4m3[2], 0x3A);   // exp 7, m 2
  EXPECT_EQ(q.e4m3[3], 0x58);   // 16 = 2^4: exp 11, m 0
  EXPECT_EQ(q.e4m3[4], 0x5A);   // 20 = 1.25 * 2^4: exp 11, m 2
  EXPECT_EQ(q.e4m3[5], 0x00);
  EXPECT_EQ(q.e4m3[6], 0x02);
  EXPECT_EQ(q.e4m3[7], 0x02);
  EXPECT_EQ(q.e4m3[8], 0xB8);   // sign | 0x38
  EXPECT_EQ(q.e4m3[9], 0x78);   // 256 = 2^8: exp 15, m 0
  EXPECT_EQ(q.e4m3[10], 0x08);  // 2^-6: exp 1, m 0 (carry from subnormal to normal)
  // Just off halfway goes to the nearer code.
  EXPECT_EQ(e4m3_from_double(std::nextafter(1.0625, 2.0)), 0x39);
  EXPECT_EQ(e4m3_from_double(std::nextafter(1.1875, 0.0)), 0x39);
}

TEST(RefMxfp8, SubnormalsEncode) {
  // With scale 2^0, 2^-9 = 1 * 2^-9 is the smallest subnormal: code 0x01; 7 * 2^-9 is 0x07.
  Mxfp8Row q = quantize(block({448.0f, std::ldexp(1.0f, -9), std::ldexp(7.0f, -9), -std::ldexp(3.0f, -9)}));
  EXPECT_EQ(q.e4m3[1], 0x01);
  EXPECT_EQ(q.e4m3[2], 0x07);
  EXPECT_EQ(q.e4m3[3], 0x83);
  EXPECT_EQ(e4m3_to_double(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(e4m3_to_double(0x07), 7 * std::ldexp(1.0, -9));
  // Alone in its block, 2^-9 gets e = ceil(-9 - log2 448) = -17 and becomes 2^8: code 0x78.
  q = quantize(block({std::ldexp(1.0f, -9)}));
  EXPECT_EQ(q.scale_e8m0[0], -17 + 127);
  EXPECT_EQ(q.e4m3[0], 0x78);
}

TEST(RefMxfp8, NaNAndInfDoNotPoisonTheScale) {
  // NaN -> 0x7F, -NaN -> 0xFF, +Inf -> 0x7F, -Inf -> 0xFF; amax over the rest = 448 -> e = 0.
  const Mxfp8Row q = quantize(block({kNaN, 448.0f, -kNaN, kInf, -kInf, 2.0f}));
  EXPECT_EQ(q.scale_e8m0[0], 127);
  EXPECT_EQ(q.e4m3[0], 0x7F);
  EXPECT_EQ(q.e4m3[1], 0x7E);
  EXPECT_EQ(q.e4m3[2], 0xFF);
  EXPECT_EQ(q.e4m3[3], 0x7F);
  EXPECT_EQ(q.e4m3[4], 0xFF);
  EXPECT_EQ(q.e4m3[5], 0x40);  // 2 = 2^1: exp 8, m 0
  std::vector<float> y(kMxfp8Block);
  mxfp8_dequantize(q.e4m3.data(), q.scale_e8m0.data(), kMxfp8Block, y.data());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(y[1], 448.0f);
  EXPECT_EQ(y[5], 2.0f);
}

TEST(RefMxfp8, AllNaNBlockGetsTheNaNScale) {
  // The one case that writes E8M0 0xFF: no finite element. Elements keep their signed NaN codes;
  // the next block is independent.
  std::vector<float> x(2 * kMxfp8Block, kNaN);
  x[1] = -kInf;
  for (int64_t i = kMxfp8Block; i < 2 * kMxfp8Block; ++i) x[i] = 1.0f;
  const Mxfp8Row q = quantize(x);
  EXPECT_EQ(q.scale_e8m0[0], 0xFF);
  EXPECT_EQ(q.e4m3[0], 0x7F);
  EXPECT_EQ(q.e4m3[1], 0xFF);
  EXPECT_EQ(q.scale_e8m0[1], -8 + 127);  // ceil(log2(1 / 448)) = ceil(-8.807) = -8
  std::vector<float> y(x.size());
  mxfp8_dequantize(q.e4m3.data(), q.scale_e8m0.data(), 2 * kMxfp8Block, y.data());
  for (int64_t i = 0; i < kMxfp8Block; ++i) EXPECT_TRUE(std::isnan(y[i]));
  for (int64_t i = kMxfp8Block; i < 2 * kMxfp8Block; ++i) EXPECT_EQ(y[i], 1.0f);
}

TEST(RefMxfp8, RoundTripWithinHalfAnUlp) {
  // Normal E4M3 range: |x| / 2^e >= 2^-6. Values in [amax / 64, amax] keep that (amax / 2^e >
  // 224), and RNE with 3 mantissa bits is within 2^-4 relative (half of the 2^-3 spacing).
  const int64_t n = 64 * kMxfp8Block;
  std::vector<float> x = uniform(n, 1.0f / 64, 1.0f, 31);
  std::mt19937 gen(32);
  std::uniform_int_distribution<int> exps(-40, 40), sign(0, 1);
  for (int64_t b = 0; b < n / kMxfp8Block; ++b) {
    const int e = exps(gen);
    for (int64_t i = 0; i < kMxfp8Block; ++i) {
      float& v = x[b * kMxfp8Block + i];
      v = std::ldexp(v, e) * (sign(gen) ? -1.0f : 1.0f);
    }
  }
  const Mxfp8Row q = quantize(x);
  std::vector<float> y(x.size());
  mxfp8_dequantize(q.e4m3.data(), q.scale_e8m0.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_LE(std::fabs(double(y[i]) - x[i]), std::ldexp(std::fabs(double(x[i])), -4)) << i;
  // Dequantized values are fixed points of the round trip. (Codes need not be: a block whose amax
  // rounds down to exactly 224 * 2^e gets e - 1 the second time, each code one binade higher.)
  const Mxfp8Row q2 = quantize(y);
  std::vector<float> y2(x.size());
  mxfp8_dequantize(q2.e4m3.data(), q2.scale_e8m0.data(), n, y2.data());
  EXPECT_TRUE(same_bits(y2, y));
}

TEST(RefMxfp8, EveryCodeDecodesAndReencodesToItself) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const double v = e4m3_to_double(code);
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    EXPECT_LE(std::fabs(v), 448.0);
    EXPECT_EQ(e4m3_from_double(v), code) << c;
  }
}

TEST(RefMxfp8, EncoderMatchesABruteForceNearestCodeSearch) {
  // Independent oracle: the finite code nearest to v, ties to the even code (mantissa LSB 0).
  // Probed at every midpoint between neighbouring codes, a hair either side, and random values.
  std::vector<double> grid;  // the 127 non-negative finite values, ascending with the code
  for (int c = 0; c < 0x7F; ++c) grid.push_back(e4m3_to_double(static_cast<uint8_t>(c)));
  auto brute = [&](double v) {
    const double a = std::fabs(v);
    int best = 0;
    for (int c = 1; c < 0x7F; ++c) {
      const double d = std::fabs(a - grid[c]), db = std::fabs(a - grid[best]);
      if (d < db || (d == db && (c & 1) == 0)) best = c;
    }
    return static_cast<uint8_t>((std::signbit(v) ? 0x80 : 0) | best);
  };
  std::vector<double> probes;
  for (size_t c = 0; c + 1 < grid.size(); ++c) {
    const double mid = (grid[c] + grid[c + 1]) / 2;
    probes.insert(probes.end(), {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e3), -mid});
  }
  std::mt19937 gen(33);
  std::uniform_real_distribution<double> d(-448.0, 448.0);
  std::uniform_int_distribution<int> ex(-12, 0);
  for (int i = 0; i < 20000; ++i) probes.push_back(std::ldexp(d(gen), ex(gen)));
  for (double v : probes) EXPECT_EQ(e4m3_from_double(v), brute(v)) << v;
}

TEST(RefMxfp8, RejectsLengthsThatAreNotWholeBlocks) {
  std::vector<float> x(33);
  std::vector<uint8_t> q(33), s(2);
  EXPECT_THROW(mxfp8_quantize(x.data(), 33, q.data(), s.data()), std::invalid_argument);
}

// ---------------------------------------------------------------- FP8, 128-element blocks

TEST(RefFp8Block128, SameRuleAsMxfp8WhenTheSubBlocksShareTheirExponent) {
  // Every 32-element sub-block holds the same amax: the 128-block exponent is the MXFP8 one, so
  // the codes are the MXFP8 codes and the scale is 2^e as a float.
  std::vector<float> x(2 * kFp8Block128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int>(i * 37 % 101) - 50)) * 0.37f;
  for (size_t b = 0; b < x.size() / 32; ++b) x[b * 32 + 5] = b < 4 ? 100.0f : -3000.0f;
  std::vector<uint8_t> q(x.size()), mq(x.size()), ms(x.size() / 32);
  std::vector<float> s(x.size() / kFp8Block128);
  fp8_block128_quantize(x.data(), static_cast<int64_t>(x.size()), q.data(), s.data());
  mxfp8_quantize(x.data(), static_cast<int64_t>(x.size()), mq.data(), ms.data());
  EXPECT_EQ(q, mq);
  for (size_t b = 0; b < s.size(); ++b) EXPECT_EQ(s[b], std::ldexp(1.0f, ms[b * 4] - 127)) << b;
}

TEST(RefFp8Block128, OneLargeValueSetsTheWholeBlocksScale) {
  std::vector<float> x(kFp8Block128, 1.0f);
  x[127] = 896.0f;  // e = 1: every 1.0 becomes 0.5 = code 0x30; 896 / 2 = 448 = 0x7E
  std::vector<uint8_t> q(x.size());
  float s = 0;
  fp8_block128_quantize(x.data(), kFp8Block128, q.data(), &s);
  EXPECT_EQ(s, 2.0f);
  EXPECT_EQ(q[0], 0x30);
  EXPECT_EQ(q[127], 0x7E);
  std::vector<float> back(x.size());
  fp8_block128_dequantize(q.data(), &s, kFp8Block128, back.data());
  EXPECT_EQ(back, x);
}

TEST(RefFp8Block128, ZeroNaNAndBadLengths) {
  std::vector<float> x(2 * kFp8Block128, 0.0f);
  for (int64_t i = kFp8Block128; i < 2 * kFp8Block128; ++i) x[static_cast<size_t>(i)] = i % 2 ? -kInf : std::nanf("");
  x[3] = std::nanf("");
  std::vector<uint8_t> q(x.size());
  float s[2] = {0, 0};
  fp8_block128_quantize(x.data(), 2 * kFp8Block128, q.data(), s);
  EXPECT_EQ(s[0], std::ldexp(1.0f, -127));  // amax 0: e = -127, a float subnormal, exact
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[3], 0x7F);  // NaN element, finite block: its NaN code, the scale unaffected
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_EQ(q[kFp8Block128], 0x7F);
  EXPECT_EQ(q[kFp8Block128 + 1], 0xFF);
  EXPECT_THROW(fp8_block128_quantize(x.data(), 32, q.data(), s), std::invalid_argument);
  EXPECT_THROW(fp8_block128_dequantize(q.data(), s, 160, x.data()), std::invalid_argument);
}

}  // namespace
}  // namespace moeperf::ref
