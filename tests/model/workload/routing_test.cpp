// Routing / load-imbalance model: every figure against its closed form, an exact enumeration of the
// Plackett-Luce draw, or a brute-force simulation of the same routing process (each token actually
// draws its k distinct experts; the expected maximum is averaged over many micro-batches).
#include "model/workload/expected_max.h"
#include "model/workload/routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>
#include <vector>

namespace moeperf {
namespace {

// ---------------------------------------------------------------- brute force
// SplitMix64 (Steele, Lea & Flood 2014, published constants): fast, and its own code here so the
// reference shares nothing with the model.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform on [0, n) from 32 random bits (Lemire's multiply-shift; bias n / 2^32, immaterial here).
  static int below(uint32_t bits, int n) { return static_cast<int>((static_cast<uint64_t>(bits) * static_cast<uint64_t>(n)) >> 32); }
  int below(int n) { return below(static_cast<uint32_t>(next() >> 32), n); }

 private:
  uint64_t s_;
};

// Vose's alias table: one draw proportional to the shares in O(1).
class Alias {
 public:
  explicit Alias(const std::vector<double>& shares) : prob_(shares.size()), alias_(shares.size(), 0) {
    const int n = static_cast<int>(shares.size());
    std::vector<double> scaled(shares.size());
    std::vector<int> small, large;
    for (int i = 0; i < n; ++i) {
      scaled[i] = shares[i] * n;
      (scaled[i] < 1 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      const int s = small.back(), l = large.back();
      small.pop_back();
      prob_[s] = scaled[s];
      alias_[s] = l;
      scaled[l] -= 1 - scaled[s];
      if (scaled[l] < 1) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (int i : large) prob_[i] = 1;
    for (int i : small) prob_[i] = 1;
  }
  int draw(Rng& rng) const {  // one 64-bit draw: 32 bits pick the column, 32 bits the coin
    const uint64_t bits = rng.next();
    const int i = Rng::below(static_cast<uint32_t>(bits >> 32), static_cast<int>(prob_.size()));
    return static_cast<double>(bits & 0xffffffffULL) * 0x1.0p-32 < prob_[i] ? i : alias_[i];
  }

 private:
  std::vector<double> prob_;
  std::vector<int> alias_;
};

// One token's k distinct experts. Plackett-Luce by rejection: a draw proportional to the shares that
// hits an expert already picked is redrawn, so each accepted pick is proportional to the shares of
// the experts not yet picked, which is the sequential draw without replacement. Group-limited:
// DeepSeek's rule on i.i.d. uniform scores (the M groups with the highest top-2 sums, then the k
// highest scores among their experts).
struct Router {
  int experts = 0, top_k = 0, groups = 1, topk_groups = 1;
  std::vector<double> shares;  // empty: uniform
};

struct Simulated {
  double max_rank_rows = 0, max_expert_rows = 0, distinct_ranks = 0, tile_rows = 0;
  double max_rank_tokens = 0;  // tokens the busiest rank receives once each (de-duplicated)
  double max_rank_rows_se = 0;  // standard error of max_rank_rows
};

Simulated simulate(const Router& router, int ranks, int tokens, int tile, int samples, uint64_t seed) {
  const int E = router.experts, k = router.top_k, per_rank = E / ranks, per_group = E / router.groups;
  const Alias alias(router.shares.empty() ? std::vector<double>(E, 1.0 / E) : router.shares);
  Rng rng(seed);
  std::vector<int> picked_by(E, -1), rank_seen(ranks, -1), rows(E), rank_tokens(ranks);
  std::vector<double> score(E);
  std::vector<std::pair<double, int>> gscore(router.groups), pool;
  int token_id = 0;
  double sum = 0, sum_sq = 0;
  int64_t distinct = 0;
  Simulated out;
  for (int s = 0; s < samples; ++s) {
    std::fill(rows.begin(), rows.end(), 0);
    std::fill(rank_tokens.begin(), rank_tokens.end(), 0);
    for (int t = 0; t < tokens; ++t, ++token_id) {
      if (router.topk_groups < router.groups) {
        // DeepSeek's rule on i.i.d. uniform scores (the model tabulates it on sigmoids of normals):
        // groups ranked by the sum of their two highest scores, the best M kept, then the k highest
        // scores of their experts.
        for (int e = 0; e < E; ++e) score[e] = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
        for (int g = 0; g < router.groups; ++g) {
          double a = -1, b = -1;
          for (int e = g * per_group; e < (g + 1) * per_group; ++e)
            if (score[e] > a) b = a, a = score[e];
            else if (score[e] > b) b = score[e];
          gscore[g] = {a + b, g};
        }
        std::partial_sort(gscore.begin(), gscore.begin() + router.topk_groups, gscore.end(), std::greater<>());
        pool.clear();
        for (int m = 0; m < router.topk_groups; ++m)
          for (int e = gscore[m].second * per_group; e < (gscore[m].second + 1) * per_group; ++e) pool.push_back({score[e], e});
        std::partial_sort(pool.begin(), pool.begin() + k, pool.end(), std::greater<>());
      }
      for (int j = 0; j < k;) {
        int e;
        if (router.topk_groups < router.groups)
          e = pool[j].second;
        else if (router.shares.empty())
          e = rng.below(E);
        else
          e = alias.draw(rng);
        if (picked_by[e] == token_id) continue;
        picked_by[e] = token_id;
        ++rows[e];
        ++j;
        distinct += rank_seen[e / per_rank] != token_id;  // branch-free: the branch would mispredict
        rank_tokens[e / per_rank] += rank_seen[e / per_rank] != token_id;
        rank_seen[e / per_rank] = token_id;
      }
    }
    int max_rank = 0, max_expert = 0, max_tile = 0;
    for (int r = 0; r < ranks; ++r) {
      int load = 0, padded = 0;
      for (int e = r * per_rank; e < (r + 1) * per_rank; ++e) {
        load += rows[e];
        padded += (rows[e] + tile - 1) / tile * tile;
        max_expert = std::max(max_expert, rows[e]);
      }
      max_rank = std::max(max_rank, load);
      max_tile = std::max(max_tile, padded);
    }
    sum += max_rank;
    out.max_rank_tokens += *std::max_element(rank_tokens.begin(), rank_tokens.end());
    sum_sq += static_cast<double>(max_rank) * max_rank;
    out.max_expert_rows += max_expert;
    out.tile_rows += max_tile;
  }
  const double n = samples;
  out.max_rank_rows = sum / n;
  out.max_rank_rows_se = std::sqrt((sum_sq / n - out.max_rank_rows * out.max_rank_rows) / n);
  out.max_expert_rows /= n;
  out.max_rank_tokens /= n;
  out.tile_rows /= n;
  out.distinct_ranks = static_cast<double>(distinct) / (n * tokens);
  return out;
}

Router router_for(const Routing& r, const RouterSpec& spec, int experts, int top_k) {
  Router x{experts, top_k, spec.groups, spec.topk_groups, {}};
  if (r.distribution != RoutingDistribution::uniform) x.shares = expert_shares(r, experts);
  return x;
}

// ---------------------------------------------------------------- exact references
// C(n, r) / C(m, r) as a product of ratios.
double choose_ratio(int n, int m, int r) {
  double x = 1;
  for (int i = 0; i < r; ++i) x *= static_cast<double>(n - i) / (m - i);
  return n < r ? 0.0 : x;
}

// Every ordered Plackett-Luce draw of k of the experts, with its probability
// prod_i w(e_i) / (1 - sum_{j<i} w(e_j)); calls f(picks, probability).
template <class F>
void enumerate_plackett_luce(const std::vector<double>& w, int k, F f) {
  std::vector<int> picks;
  auto rec = [&](auto&& self, double prob, double used) -> void {
    if (static_cast<int>(picks.size()) == k) return f(picks, prob);
    for (int e = 0; e < static_cast<int>(w.size()); ++e) {
      if (std::find(picks.begin(), picks.end(), e) != picks.end()) continue;
      picks.push_back(e);
      self(self, prob * w[e] / (1 - used), used + w[e]);
      picks.pop_back();
    }
  };
  rec(rec, 1.0, 0.0);
}

// E[max of n iid standard normals] = int_0^inf (1 - Phi^n) - int_-inf^0 Phi^n, trapezoid rule.
double iid_normal_max_reference(int n) {
  double s = 0;
  const double h = 1e-3;
  for (double x = -12; x <= 12; x += h) {
    const double phi = 0.5 * std::erfc(-x / std::sqrt(2.0));
    s += (x >= 0 ? 1 - std::pow(phi, n) : -std::pow(phi, n)) * h;
  }
  return s;
}

Routing zipf(double s, uint64_t seed = 1) {
  Routing r;
  r.distribution = RoutingDistribution::zipf;
  r.zipf_exponent = s;
  r.seed = seed;
  return r;
}

Routing dirichlet(double alpha, uint64_t seed = 1) {
  Routing r;
  r.distribution = RoutingDistribution::dirichlet;
  r.dirichlet_alpha = alpha;
  r.seed = seed;
  return r;
}

Routing balanced() {
  Routing r;
  r.distribution = RoutingDistribution::balanced;
  return r;
}

RouterSpec deepseek_groups() {  // DeepSeek-V3: n_group 8, topk_group 4
  RouterSpec g;
  g.groups = 8;
  g.topk_groups = 4;
  return g;
}

// ---------------------------------------------------------------- shares
TEST(Routing, SharesOfEachDistribution) {
  for (double x : expert_shares(Routing{}, 64)) EXPECT_DOUBLE_EQ(x, 1.0 / 64);
  for (double x : expert_shares(balanced(), 64)) EXPECT_DOUBLE_EQ(x, 1.0 / 64);

  // Zipf: sorted, the popularity-rank-i share is i^-s / H(E, s).
  std::vector<double> z = expert_shares(zipf(1.2), 64);
  double harmonic = 0;
  for (int i = 1; i <= 64; ++i) harmonic += std::pow(i, -1.2);
  std::vector<double> sorted = z;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(sorted[i], std::pow(i + 1, -1.2) / harmonic, 1e-15);
  // The permutation spreads the 8 heaviest over the 8 ranks of 8 experts (all on one rank: the
  // chance of that under a uniform permutation is 8 / C(64, 8) ~ 2e-9).
  std::set<int> heavy_ranks;
  for (int i = 0; i < 8; ++i)
    heavy_ranks.insert(static_cast<int>(std::find(z.begin(), z.end(), sorted[i]) - z.begin()) / 8);
  EXPECT_GT(heavy_ranks.size(), 1u);
  EXPECT_EQ(expert_shares(zipf(1.2, 5), 64), expert_shares(zipf(1.2, 5), 64));
  EXPECT_NE(expert_shares(zipf(1.2, 5), 64), expert_shares(zipf(1.2, 6), 64));

  // Dirichlet(alpha): shares sum to 1 and vary as Var = (1/E)(1 - 1/E) / (E alpha + 1); one sample
  // of E = 1024 estimates it within ~12 % (Gamma(1/2) has excess kurtosis 12).
  const int E = 1024;
  const double alpha = 0.5;
  const std::vector<double> d = expert_shares(dirichlet(alpha, 3), E);
  EXPECT_NEAR(std::accumulate(d.begin(), d.end(), 0.0), 1.0, 1e-12);
  double var = 0;
  for (double x : d) var += (x - 1.0 / E) * (x - 1.0 / E) / E;
  EXPECT_NEAR(var / ((1.0 / E) * (1 - 1.0 / E) / (E * alpha + 1)), 1.0, 0.5);
  EXPECT_EQ(expert_shares(dirichlet(alpha, 3), E), d);

  Routing h;
  h.distribution = RoutingDistribution::histogram;
  h.histogram = {1, 3, 0, 4};
  EXPECT_EQ(expert_shares(h, 4), (std::vector<double>{1.0 / 8, 3.0 / 8, 0.0, 4.0 / 8}));
  EXPECT_THROW(expert_shares(h, 5), std::invalid_argument);
}

TEST(Routing, InvalidInputThrows) {
  const RouterSpec none;
  EXPECT_THROW(expected_loads(Routing{}, none, 64, 65, 8, 100), std::invalid_argument);  // k > E
  EXPECT_THROW(expected_loads(Routing{}, none, 64, 8, 6, 100), std::invalid_argument);   // 6 does not divide 64
  EXPECT_THROW(expected_loads(Routing{}, none, 64, 8, 8, -1), std::invalid_argument);
  EXPECT_THROW(expected_loads(zipf(1.0), deepseek_groups(), 64, 8, 8, 100), std::invalid_argument);
  RouterSpec tight = deepseek_groups();
  tight.topk_groups = 1;  // 1 group of 8 experts cannot hold 9 picks
  EXPECT_THROW(expected_loads(Routing{}, tight, 64, 9, 8, 100), std::invalid_argument);
  EXPECT_THROW(expected_tile_rows(Routing{}, none, 64, 8, 8, 100, 0), std::invalid_argument);
  EXPECT_THROW(expected_distinct_nodes(Routing{}, none, 64, 8, 8, 0), std::invalid_argument);
  EXPECT_THROW(expert_shares(dirichlet(0.0), 64), std::invalid_argument);
}

// ---------------------------------------------------------------- Plackett-Luce per token
TEST(Routing, PlackettLuceInclusionAndDistinctRanksMatchExactEnumeration) {
  Routing h;
  h.distribution = RoutingDistribution::histogram;
  h.histogram = {9, 1, 4, 2, 7, 0.5, 3, 6};  // 8 experts, 4 ranks of 2, 2 nodes of 2 ranks
  const int E = 8, k = 3, R = 4;
  // The histogram is rows per expert: the draw weights are solved so that each expert's inclusion
  // is k x its share of the rows (its own weight would flatten the skew).
  const std::vector<double> w = draw_weights(h, E, k);
  const std::vector<double> rows = expert_shares(h, E);
  std::vector<double> inclusion(E, 0.0);
  double ranks = 0, nodes = 0;
  enumerate_plackett_luce(w, k, [&](const std::vector<int>& picks, double prob) {
    std::set<int> r, n;
    for (int e : picks) {
      inclusion[e] += prob;
      r.insert(e / 2);
      n.insert(e / 4);
    }
    ranks += prob * static_cast<double>(r.size());
    nodes += prob * static_cast<double>(n.size());
  });
  const std::vector<double> pi = expert_inclusion(h, RouterSpec{}, E, k);
  for (int e = 0; e < E; ++e) EXPECT_NEAR(pi[e], inclusion[e], 1e-9) << "expert " << e;
  for (int e = 0; e < E; ++e) EXPECT_NEAR(inclusion[e], k * rows[e], 1e-9) << "expert " << e;  // the measured rows
  EXPECT_NEAR(expected_loads(h, RouterSpec{}, E, k, R, 1000).expected_distinct_ranks, ranks, 1e-9);
  EXPECT_NEAR(expected_distinct_nodes(h, RouterSpec{}, E, k, R, 2), nodes, 1e-9);
}

// A histogram is rows per expert: no expert can take more than 1/k of them (a token picks it once),
// and at least k experts must have rows.
TEST(Routing, AHistogramMustBeRowsATokenCanPick) {
  Routing h;
  h.distribution = RoutingDistribution::histogram;
  h.histogram = {5, 1, 1, 1};  // 5/8 of the rows on expert 0: more than every token with k = 2
  EXPECT_THROW(draw_weights(h, 4, 2), std::invalid_argument);
  EXPECT_NO_THROW(draw_weights(h, 4, 1));
  h.histogram = {1, 1, 0, 0};
  EXPECT_NO_THROW(draw_weights(h, 4, 2));  // both, always
  EXPECT_THROW(draw_weights(h, 4, 3), std::invalid_argument);
  EXPECT_THROW(expected_loads(h, RouterSpec{}, 4, 3, 2, 100), std::invalid_argument);
  // An expert just short of every token (k x share = 1 - 1e-4 and 1 - 1e-6): solved all the same,
  // where the inclusions' own ratio stalled (1 - k x gap of the error left per round).
  for (const double gap : {1e-4, 1e-6}) {
    Routing hot;
    hot.distribution = RoutingDistribution::histogram;
    const double s0 = (1 - gap) / 8;
    hot.histogram.assign(256, (1 - s0) / 255);
    hot.histogram[0] = s0;
    const std::vector<double> pi = expert_inclusion(hot, RouterSpec{}, 256, 8);
    EXPECT_NEAR(pi[0], 1 - gap, 1e-9 * (1 - gap)) << gap;
    EXPECT_NEAR(pi[1], 8 * (1 - s0) / 255, 1e-9) << gap;
  }
  // One expert within 1e-9 of every token (taken as certain) beside three near it: the others'
  // targets are rescaled to the picks left, so it solves (it ran out of rounds before); with k
  // certain experts the rest are never picked.
  Routing near;
  near.distribution = RoutingDistribution::histogram;
  const double g = 1e-10;
  near.histogram = {1 - g, 0.9999, 0.9999, 0.9999};
  for (int i = 0; i < 12; ++i) near.histogram.push_back((3e-4 + g) / 12);
  const std::vector<double> pn = expert_inclusion(near, RouterSpec{}, 16, 4);
  EXPECT_NEAR(pn[0], 1.0, 1e-9);
  EXPECT_NEAR(pn[1], 0.9999, 1e-9);
  EXPECT_NEAR(pn[5], 3e-4 / 12, 1e-9);
  Routing full;
  full.distribution = RoutingDistribution::histogram;
  full.histogram = {1, 1, 1e-12, 0};
  const std::vector<double> pf = expert_inclusion(full, RouterSpec{}, 4, 2);
  EXPECT_NEAR(pf[0] + pf[1], 2.0, 1e-9);
  EXPECT_NEAR(pf[2], 0.0, 1e-9);
}

TEST(Routing, InclusionSumsToTopK) {
  for (const Routing& r : {zipf(1.0), zipf(2.0), dirichlet(0.2), dirichlet(3.0)}) {
    const std::vector<double> pi = expert_inclusion(r, RouterSpec{}, 256, 8);
    EXPECT_NEAR(std::accumulate(pi.begin(), pi.end(), 0.0), 8.0, 1e-9);
    for (double x : pi) EXPECT_LE(x, 1.0);
  }
  for (double x : expert_inclusion(Routing{}, deepseek_groups(), 256, 8)) EXPECT_DOUBLE_EQ(x, 8.0 / 256);
}

// ---------------------------------------------------------------- distinct ranks and nodes
TEST(Routing, UniformDistinctRanksClosedForm) {
  for (int R : {1, 4, 8, 64}) {
    const int E = 256, k = 8, per = E / R;
    // R (1 - C(E - E/R, k) / C(E, k)): each rank is missed with that hypergeometric chance.
    const double closed = R * (1 - choose_ratio(E - per, E, k));
    EXPECT_NEAR(expected_loads(Routing{}, RouterSpec{}, E, k, R, 4096).expected_distinct_ranks, closed, 1e-12 * R);
    EXPECT_NEAR(expected_distinct_nodes(Routing{}, RouterSpec{}, E, k, R, 1), closed, 1e-12 * R);
  }
  // Nodes of 4 ranks out of 64: 16 nodes of 16 experts, the same closed form with E/16.
  EXPECT_NEAR(expected_distinct_nodes(Routing{}, RouterSpec{}, 256, 8, 64, 4), 16 * (1 - choose_ratio(256 - 16, 256, 8)),
              1e-12);
  // Balanced routing forces the totals, not a token's picks: same as uniform.
  EXPECT_NEAR(expected_loads(balanced(), RouterSpec{}, 256, 8, 8, 4096).expected_distinct_ranks,
              8 * (1 - choose_ratio(256 - 32, 256, 8)), 1e-12);
}

TEST(Routing, GroupLimitedDistinctRanks) {
  const RouterSpec g = deepseek_groups();
  const int E = 64, k = 8, M = g.topk_groups, per_group = E / g.groups, pool = M * per_group;
  // One rank per group: a token meets its kept groups, and under DeepSeek's rule (kept for their
  // top-2 scores) nearly always all of them: 3.98 of 4 here, where k picks drawn uniformly from the
  // pooled experts would miss a kept group with chance C(pool - per_group, k) / C(pool, k) (3.72).
  const double one_per_group = expected_loads(Routing{}, g, E, k, g.groups, 512).expected_distinct_ranks;
  EXPECT_GT(one_per_group, 1.05 * M * (1 - choose_ratio(pool - per_group, pool, k)));
  EXPECT_LE(one_per_group, M);
  // Against brute force of the rule on other scores (uniform, where the model's table draws
  // sigmoids of normals: the law barely depends on them), 2,000 micro-batches of 512 tokens: one
  // rank per group, ranks holding two groups, groups spread over two ranks.
  for (int R : {8, 4, 16}) {
    const double model = expected_loads(Routing{}, g, E, k, R, 512).expected_distinct_ranks;
    const Simulated sim = simulate(router_for(Routing{}, g, E, k), R, 512, 16, 2000, 11);
    EXPECT_NEAR(model, sim.distinct_ranks, 0.005 * sim.distinct_ranks) << "R = " << R;  // measured <= 0.12 %
  }
}

// Many small groups: 64 experts in 32 groups of 2, 8 kept (the rule's table) or 16 kept (more than
// kMaxRuleGroups: the pooled law), top-4. One rank holds every expert: every pick lands on it
// (before, a rank spanning 32 groups enumerated 2^32 subsets and counted none); two ranks split
// the picks evenly on average and hit 1 or 2 of them.
TEST(Routing, GroupLimitedRoutingWithManyGroupsStaysExactAndFast) {
  for (int kept : {8, 16}) {
    RouterSpec g;
    g.groups = 32, g.topk_groups = kept;
    const LoadStats one = expected_loads(Routing{}, g, 64, 4, 1, 1024);
    EXPECT_NEAR(one.expected_max_rank_rows, 4096, 1e-6) << kept;
    EXPECT_NEAR(one.expected_distinct_ranks, 1.0, 1e-9) << kept;
    const LoadStats two = expected_loads(Routing{}, g, 64, 4, 2, 1024);
    EXPECT_NEAR(two.mean_rank_rows, 2048, 1e-9);
    EXPECT_GT(two.expected_max_rank_rows, 2048);
    EXPECT_LT(two.expected_max_rank_rows, 2048 * 1.05);
    EXPECT_GT(two.expected_distinct_ranks, 1.5);
    EXPECT_LT(two.expected_distinct_ranks, 2.0);
  }
}

// A de-duplicating dispatch sends a rank each token once: the busiest rank by distinct tokens is far
// less above the mean than the busiest by rows under a skewed router (a popular expert's rank gets
// many rows from tokens that also picked its neighbours). Zipf 1 over 64 experts, top-8, 8 ranks,
// 512 tokens: against brute force within 2 % (and uniform routing alike).
TEST(Routing, TheBusiestRanksDistinctTokensMatchBruteForce) {
  for (const Routing& r : {zipf(1.0), Routing{}}) {
    const LoadStats l = expected_loads(r, RouterSpec{}, 64, 8, 8, 512);
    const Simulated sim = simulate(router_for(r, RouterSpec{}, 64, 8), 8, 512, 16, 4000, 5);
    EXPECT_NEAR(l.mean_rank_tokens, 512 * l.expected_distinct_ranks / 8, 1e-9);
    EXPECT_NEAR(l.expected_max_rank_tokens, sim.max_rank_tokens, 0.02 * sim.max_rank_tokens);
    EXPECT_GE(l.expected_max_rank_tokens, l.mean_rank_tokens);
    if (r.distribution == RoutingDistribution::zipf) {  // rows 1.48x their mean, tokens 1.37x
      EXPECT_GT(l.imbalance, l.expected_max_rank_tokens / l.mean_rank_tokens + 0.07);
    }
  }
}

// DeepSeek-V3's group rule as a law of picks per kept group (8 groups of 32, 4 kept, top-8): each
// marginal a distribution; a kept group's mean picks k / M exactly (exchangeable); every kept group
// hit by 3.95 of 4 on average (a simulation of the rule on three score laws gave 3.944-3.972; picks
// uniform over the pooled experts: 3.629); and a rank's mean picks k x its share of the experts.
TEST(Routing, DeepSeeksGroupRuleSpreadsThePicksOverTheKeptGroups) {
  using namespace routing_detail;
  const auto& law = group_count_law(32, 8, 4, 8);
  ASSERT_EQ(law.size(), 5u);
  for (size_t m = 0; m < law.size(); ++m) {
    double total = 0, mean = 0;
    for (const auto& [c, q] : law[m]) {
      ASSERT_EQ(c.size(), m);
      total += q;
      if (m > 0) mean += q * c[0];
    }
    EXPECT_NEAR(total, 1.0, 1e-12) << m;
    if (m > 0) {
      EXPECT_NEAR(mean, 2.0, 1e-12) << m;
    }
  }
  double hit = 0;
  for (const auto& [c, q] : law[4])
    for (int x : c) hit += q * (x > 0);
  EXPECT_GT(hit, 3.93);
  EXPECT_LT(hit, 3.98);
  Process p;
  p.experts = 256, p.top_k = 8, p.groups = 8, p.topk_groups = 4;
  for (auto [b, e] : {std::pair{0, 8}, std::pair{0, 32}, std::pair{24, 40}, std::pair{0, 64}}) {
    const Moments x = moments(subset_pmf(p, b, e));
    EXPECT_NEAR(x.mean, 8.0 * (e - b) / 256, 1e-9) << b << "-" << e;
  }
  // A whole group is hit with the law's chance of a kept group being hit: 1/2 x 3.95 / 4.
  EXPECT_NEAR(1 - subset_pmf(p, 0, 32)[0], 0.5 * hit / 4, 1e-9);
  // The same law is returned again (cached), and is deterministic.
  EXPECT_EQ(&group_count_law(32, 8, 4, 8), &law);
}

// ---------------------------------------------------------------- expected maxima
TEST(Routing, UniformMaxRankMatchesBruteForce) {
  struct Case {
    int tokens, experts, top_k, ranks, samples;
  };
  // 25,000 micro-batches: T=512, E=64, k=8, R=8 (1e8 draws, ~0.5 s at -O3); and a wider group.
  for (const Case& c : {Case{512, 64, 8, 8, 25000}, Case{256, 256, 8, 32, 25000}}) {
    const LoadStats l = expected_loads(Routing{}, RouterSpec{}, c.experts, c.top_k, c.ranks, c.tokens);
    const Simulated sim = simulate(router_for(Routing{}, RouterSpec{}, c.experts, c.top_k), c.ranks, c.tokens, 16,
                                   c.samples, 7);
    const double mean = static_cast<double>(c.tokens) * c.top_k / c.ranks;
    EXPECT_DOUBLE_EQ(l.mean_rank_rows, mean);
    EXPECT_NEAR(l.expected_max_rank_rows, sim.max_rank_rows, 0.01 * sim.max_rank_rows);
    // The excess over the mean, which the 1 % above hardly tests: within 3 % (measured < 0.2 % at
    // 100,000 micro-batches; the simulation's standard error at 25,000 is ~0.4 % of it).
    EXPECT_NEAR(l.expected_max_rank_rows - mean, sim.max_rank_rows - mean, 0.03 * (sim.max_rank_rows - mean));
    EXPECT_NEAR(l.imbalance, l.expected_max_rank_rows / mean, 1e-15);
    EXPECT_NEAR(l.expected_max_expert_rows, sim.max_expert_rows, 0.01 * sim.max_expert_rows);
  }
}

TEST(Routing, SkewedSharesRaiseTheMaxAndMatchBruteForce) {
  const int T = 512, E = 64, k = 8, R = 8;
  const double uniform = expected_loads(Routing{}, RouterSpec{}, E, k, R, T).expected_max_rank_rows;
  for (const Routing& r : {zipf(1.0, 7), dirichlet(0.5, 7)}) {
    const LoadStats l = expected_loads(r, RouterSpec{}, E, k, R, T);
    EXPECT_GT(l.expected_max_rank_rows, uniform);  // by 55 % (zipf) and 27 % (dirichlet) here
    // 10,000 micro-batches: standard error ~0.02 % of the maximum.
    const Simulated sim = simulate(router_for(r, RouterSpec{}, E, k), R, T, 16, 10000, 13);
    EXPECT_NEAR(l.expected_max_rank_rows, sim.max_rank_rows, 0.02 * sim.max_rank_rows);
    EXPECT_NEAR(l.expected_max_rank_rows, sim.max_rank_rows, 0.002 * sim.max_rank_rows);  // measured < 0.03 %
    EXPECT_NEAR(l.expected_max_expert_rows, sim.max_expert_rows, 0.002 * sim.max_expert_rows);
    EXPECT_NEAR(l.expected_distinct_ranks, sim.distinct_ranks, 0.001 * sim.distinct_ranks);
  }
}

TEST(Routing, GroupLimitedMaxMatchesBruteForce) {
  const RouterSpec g = deepseek_groups();
  for (int R : {8, 16}) {  // a group per rank; a group over two ranks (two-level model)
    const LoadStats l = expected_loads(Routing{}, g, 64, 8, R, 512);
    const Simulated sim = simulate(router_for(Routing{}, g, 64, 8), R, 512, 16, 5000, 17);
    EXPECT_NEAR(l.expected_max_rank_rows, sim.max_rank_rows, 0.005 * sim.max_rank_rows) << "R = " << R;
    EXPECT_NEAR(l.expected_max_expert_rows, sim.max_expert_rows, 0.005 * sim.max_expert_rows) << "R = " << R;
  }
}

TEST(Routing, LargeBatchApproachesTheExchangeableNormalLimit) {
  // Uniform, T = 196,608: rank loads are normal with the hypergeometric per-token variance
  // V = k (1/R)(1 - 1/R)(E - k)/(E - 1), summing to T k, so E[max] = T k/R + sqrt(T V R/(R - 1)) e_R
  // (e_R: the expected max of R standard normals). The model's skewness term adds
  // g/6 (E[Z_max^2] - 1) of the spread, g the loads' skewness (~(1 - 2/R) / sqrt(T k / R)): 0.1 %
  // of it at R = 8, 0.5 % at R = 64; 1 % bounds both.
  const int E = 256, k = 8;
  const int64_t T = 196608;
  for (int R : {8, 64}) {
    const double V = k * (1.0 / R) * (1 - 1.0 / R) * (E - k) / (E - 1.0);
    const double spread = std::sqrt(T * V * R / (R - 1.0));
    const LoadStats l = expected_loads(Routing{}, RouterSpec{}, E, k, R, T);
    const double normal_limit = static_cast<double>(T) * k / R + spread * iid_normal_max_reference(R);
    EXPECT_NEAR(l.expected_max_rank_rows, normal_limit, 0.01 * spread);
    EXPECT_GT(l.expected_max_rank_rows, normal_limit);  // positive skew: a longer upper tail
  }
}

TEST(Routing, BalancedIsExact) {
  const int E = 256, k = 8, R = 8;
  const int64_t T = 4096;
  const LoadStats l = expected_loads(balanced(), RouterSpec{}, E, k, R, T);
  EXPECT_DOUBLE_EQ(l.mean_rank_rows, 4096.0 * 8 / 8);
  EXPECT_DOUBLE_EQ(l.expected_max_rank_rows, 4096.0 * 8 / 8);
  EXPECT_DOUBLE_EQ(l.expected_max_expert_rows, 4096.0 * 8 / 256);
  EXPECT_DOUBLE_EQ(l.imbalance, 1.0);
}

TEST(Routing, AllMassOnOneExpert) {
  const int E = 64, k = 8, R = 8, per = E / R;
  const int64_t T = 4096;
  Routing h;
  h.distribution = RoutingDistribution::histogram;
  // Measured rows: expert 11 one in k of them (every token), the rest alike.
  h.histogram.assign(E, (k - 1.0) / (E - 1));
  h.histogram[11] = 1;  // rank 1
  const LoadStats l = expected_loads(h, RouterSpec{}, E, k, R, T);
  // Every token picks expert 11 first (T rows), then k - 1 uniformly among the other E - 1, of
  // which per - 1 sit on rank 1: that rank gets T (1 + (k - 1)(per - 1)/(E - 1)) rows on average,
  // the others T (k - 1) per/(E - 1) = half as many, some 60 standard deviations below: the
  // maximum is rank 1's mean, and the busiest expert is expert 11 with exactly T rows.
  EXPECT_NEAR(l.expected_max_rank_rows, T * (1 + (k - 1.0) * (per - 1) / (E - 1)), 1e-9 * T);
  EXPECT_NEAR(l.expected_max_expert_rows, static_cast<double>(T), 1e-9 * T);
  // Distinct ranks: rank 1 always, each other rank unless all k - 1 picks miss its per experts.
  EXPECT_NEAR(l.expected_distinct_ranks, 1 + (R - 1) * (1 - choose_ratio(E - 1 - per, E - 1, k - 1)), 1e-9);
  // (The certain expert draws with 1e15 x the others' weight: within 1e-12 of always first.)
  const std::vector<double> pi = expert_inclusion(h, RouterSpec{}, E, k);
  EXPECT_NEAR(pi[11], 1.0, 1e-12);
  EXPECT_NEAR(pi[0], (k - 1.0) / (E - 1), 1e-12);
}

TEST(Routing, NoTokensNoRows) {
  const LoadStats l = expected_loads(zipf(1.0), RouterSpec{}, 64, 8, 8, 0);
  EXPECT_EQ(l.mean_rank_rows, 0.0);
  EXPECT_EQ(l.expected_max_rank_rows, 0.0);
  EXPECT_EQ(l.imbalance, 1.0);
  EXPECT_EQ(expected_tile_rows(Routing{}, RouterSpec{}, 64, 8, 8, 0, 128), 0.0);
}

// ---------------------------------------------------------------- padding to a tile
TEST(Routing, TileRowsBalancedClosedForm) {
  const int E = 256, k = 8, R = 8;
  const int64_t T = 4096;  // m = T k / E = 128 rows per expert
  for (int tile : {1, 64, 128, 96, 200}) {
    const double m = 4096.0 * 8 / 256;
    EXPECT_DOUBLE_EQ(expected_tile_rows(balanced(), RouterSpec{}, E, k, R, T, tile),
                     (E / R) * std::ceil(m / tile) * tile);
  }
}

TEST(Routing, TileOfOneRowIsTheRowMaximum) {
  for (int64_t T : {4096, 196608}) {
    const LoadStats l = expected_loads(Routing{}, RouterSpec{}, 256, 8, 8, T);
    EXPECT_NEAR(expected_tile_rows(Routing{}, RouterSpec{}, 256, 8, 8, T, 1), l.expected_max_rank_rows,
                1e-9 * l.expected_max_rank_rows);
  }
}

struct TileCase {
  Routing routing;
  RouterSpec router;
  int experts, ranks, tokens, tile;
};
// Coarse tiles (lattice path: ranks spread over a few tiles) and fine ones (normal path), uniform,
// Zipf and group-limited routing.
std::vector<TileCase> tile_cases() {
  return {
      {Routing{}, RouterSpec{}, 64, 8, 512, 16},        {Routing{}, RouterSpec{}, 64, 64, 512, 16},
      {Routing{}, RouterSpec{}, 64, 8, 512, 2},         {zipf(1.0, 7), RouterSpec{}, 64, 8, 512, 16},
      {Routing{}, deepseek_groups(), 64, 8, 512, 16},   {Routing{}, deepseek_groups(), 64, 64, 512, 16},
  };
}

TEST(Routing, TileRowsMatchBruteForce) {
  for (const TileCase& c : tile_cases()) {
    const double model = expected_tile_rows(c.routing, c.router, c.experts, 8, c.ranks, c.tokens, c.tile);
    const Simulated sim = simulate(router_for(c.routing, c.router, c.experts, 8), c.ranks, c.tokens, c.tile, 5000, 19);
    EXPECT_NEAR(model, sim.tile_rows, 0.01 * sim.tile_rows)
        << "R = " << c.ranks << ", tile = " << c.tile << ", groups = " << c.router.groups;
  }
}

// The deterministic half of TileRowsMatchBruteForce (whose Monte Carlo loop runs in the first CI pass
// only): every path of expected_tile_rows, the group-limited enumeration and whole-group ranks
// included, under the sanitizers too. A rank's padded rows lie between its rows and its rows plus
// a tile less one per local expert, so the busiest rank's expected padded rows lie between those
// bounds of its expected rows.
TEST(Routing, TileRowsLieBetweenTheBusiestRanksRowsAndTheirPadding) {
  for (const TileCase& c : tile_cases()) {
    const double tiles = expected_tile_rows(c.routing, c.router, c.experts, 8, c.ranks, c.tokens, c.tile);
    const LoadStats l = expected_loads(c.routing, c.router, c.experts, 8, c.ranks, c.tokens);
    const double per_rank = static_cast<double>(c.experts / c.ranks);
    EXPECT_GE(tiles, l.expected_max_rank_rows * (1 - 1e-9)) << "R = " << c.ranks << ", tile = " << c.tile << ", groups = " << c.router.groups;
    EXPECT_LE(tiles, l.expected_max_rank_rows + per_rank * (c.tile - 1) + 1e-9)
        << "R = " << c.ranks << ", tile = " << c.tile << ", groups = " << c.router.groups;
  }
}

// The two identities the lattice path leans on to price a million experts in under a second: n
// experts of one law sum to its n-th power (by squaring), and R ranks of one law are one block of R
// members. Both against the plain sequential form.
TEST(Routing, OneLawsExpertsAreItsPowerAndItsRanksOneBlock) {
  using namespace routing_detail;
  const TileLaw law = tile_law(512, 8.0 / 64, 16);
  ASSERT_GT(law.mass.size(), 2u);
  TileLaw sum{0, {1.0}};
  for (int e = 0; e < 8; ++e) sum = convolve(sum, law);
  const TileLaw pow8 = power(law, 8);
  ASSERT_EQ(pow8.first, sum.first);
  ASSERT_EQ(pow8.mass.size(), sum.mass.size());
  for (size_t i = 0; i < sum.mass.size(); ++i) EXPECT_NEAR(pow8.mass[i], sum.mass[i], 1e-14) << i;
  const std::vector<LatticeBlock> ranks(8, LatticeBlock{{1.0}, {sum}, 1});
  const double one_block = lattice_max({LatticeBlock{{1.0}, {sum}, 8}});
  EXPECT_NEAR(one_block, lattice_max(ranks), 1e-12 * one_block);
  EXPECT_GT(one_block, lattice_max({LatticeBlock{{1.0}, {sum}, 1}}));  // the busiest of 8 exceeds one
}

}  // namespace
}  // namespace moeperf
