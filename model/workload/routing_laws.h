// Internal to model/workload: the routing process and the per-token count laws it implies
// (routing_laws.cpp): which experts a token picks (uniform, group-limited, Plackett-Luce over
// shares), and the distribution of how many of its k picks fall into a block of experts (a rank, a
// node). expected_max.h turns these laws into expected maxima over T tokens; routing.cpp is the
// public surface (routing.h).
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/specs.h"
#include "model/workload/routing.h"

namespace moeperf::routing_detail {

[[noreturn]] void fail(const std::string& what);
// ---------------------------------------------------------------- seeded random numbers
// SplitMix64 (Steele, Lea & Flood, OOPSLA 2014; the constants are the published ones): our own
// generator and samplers so the shares a seed gives are the same with every standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform on (0, 1): the 53 high bits, shifted half a step off 0.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {  // Box-Muller
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }
  // ln of a Gamma(a, 1) sample: Marsaglia & Tsang (2000) for a >= 1; for a < 1,
  // Gamma(a) = Gamma(a + 1) * U^(1/a), kept in logs so tiny a does not underflow to 0.
  double log_gamma_sample(double a) {
    if (a < 1.0) return log_gamma_sample(a + 1.0) + std::log(uniform()) / a;
    const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      const double x = normal(), v1 = 1.0 + c * x;
      if (v1 <= 0.0) continue;
      const double v = v1 * v1 * v1, u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d * v);
    }
  }

 private:
  uint64_t state_;
};

void check_layout(int experts, int top_k);
void check_ranks(int experts, int ranks);
// ---------------------------------------------------------------- the routing process
struct Process {
  enum class Kind { balanced, subsets, plackett_luce } kind = Kind::subsets;
  int experts = 0, top_k = 0;
  int groups = 1, topk_groups = 1;  // subsets: a token picks topk_groups of groups, then k experts
  std::vector<double> shares;       // plackett_luce
};

Process make_process(const Routing& r, const RouterSpec& router, int experts, int top_k);
// Contiguous sets of experts: set s is [bounds[s], bounds[s+1]).
using Bounds = std::vector<int>;

Bounds blocks(int experts, int block);
// ---------------------------------------------------------------- per-token count laws
// A law of a count on {0..k}: pmf[j] = P(X = j).
using Pmf = std::vector<double>;

struct Moments {
  double mean = 0, var = 0, third = 0;  // third: third central moment (cumulant)
};

Moments moments(const Pmf& p);
// P(j successes in `draws` draws without replacement from `pop` items of which `good` are good):
// C(draws, j) [good]_j [pop - good]_(draws - j) / [pop]_draws, falling factorials; draws is small.
double hypergeometric(int pop, int good, int draws, int j);
// ln C(n, r), by a sum of logs (no lgamma: it is not thread-safe in glibc).
double log_choose(int n, int r);
// Count of a token's picks in [begin, end) under uniform (possibly group-limited) routing. Without
// groups: hypergeometric. Group-limited: every M-subset of groups is equally likely to be chosen,
// and the picks fall into the chosen groups by the law of DeepSeek's rule (group_count_law); inside
// a group a token's c picks are a uniform c-subset of its experts (hypergeometric per group).
Pmf subset_pmf(const Process& p, int begin, int end);
// DeepSeek-V3's group-limited rule (modeling_deepseek.py MoEGate, topk_method noaux_tc; Megatron's
// group-limited top-k alike): each group scores the sum of its two highest expert scores, the M
// best groups are kept, and the token's k picks are the k highest scores among their experts. With
// exchangeable scores (uniform routing: sigmoid of i.i.d. normal logits, no bias) every M-subset of
// groups is equally likely, but the picks are not uniform over the pooled experts: a kept group
// holds a high score, so it nearly always gets a pick (E[groups hit] ~3.95 of 4 for DeepSeek-V3,
// 3.63 for uniform picks from the pool). law[m]: the joint law of the picks in m given kept groups
// (exchangeable), as (counts, probability), tabulated once per shape by a deterministic simulation
// of 16,384 tokens and cached.
// More kept groups than kMaxRuleGroups (the table's arrangements grow like C(M, k)) fall back to
// picks uniform over the kept groups' pooled experts.
using CountLaw = std::vector<std::pair<std::vector<int>, double>>;
inline constexpr int kMaxRuleGroups = 8;
const std::vector<CountLaw>& group_count_law(int per_group, int groups, int topk_groups, int top_k);
// Plackett-Luce counts of a token's picks in each set of several partitions of the experts.
// Exponential clocks: expert e fires at an Exp(w_e) time; the k first to fire are the picks, in
// Plackett-Luce order. For a set S, X_S >= j iff S's j-th firing precedes the others' (k-j+1)-th:
//   P(X_S >= j) = int_0^inf f_j(t) P(N_-S(t) <= k - j) dt,  f_j(t) = d/dt P(N_S(t) >= j)
//               = E[rate of S's unfired clocks; N_S(t) = j - 1],
// with N the number of fired clocks (independent Bernoulli(1 - e^(-w t)), a Poisson-binomial law
// kept by a DP truncated at k - 1 that also carries the unfired rate). The integral runs over
// x = ln t with the trapezoid rule, which converges geometrically for this smooth integrand; below
// t0 the integrand is ~ t^j and the sum is extended to -inf in closed form.
std::vector<std::vector<Pmf>> plackett_luce_pmfs(const std::vector<double>& shares, int k, const std::vector<Bounds>& partitions);
// Per-token count laws of each set of each partition, whatever the process (balanced counts as
// uniform: its per-token picks are uniform, only the totals are forced).
std::vector<std::vector<Pmf>> count_pmfs(const Process& p, const std::vector<Bounds>& partitions);

}  // namespace moeperf::routing_detail
