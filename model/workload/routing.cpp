// Routing / load-imbalance model, the public functions of routing.h: expert shares and inclusion,
// expected loads, padded tile rows and distinct nodes. The per-token count laws are in
// routing_laws.cpp, the loads over T tokens and their expected maxima in expected_max.cpp.
#include "model/workload/routing.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>

#include "model/workload/expected_max.h"

namespace moeperf {

using namespace routing_detail;

// ---------------------------------------------------------------- public functions
std::vector<double> expert_shares(const Routing& r, int experts) {
  if (experts < 1) fail("experts must be >= 1, got " + std::to_string(experts));
  const size_t E = static_cast<size_t>(experts);
  std::vector<double> w(E, 1.0);
  switch (r.distribution) {
    case RoutingDistribution::uniform:
    case RoutingDistribution::balanced: break;
    case RoutingDistribution::zipf: {
      const double s = r.zipf_exponent;
      if (!std::isfinite(s) || s < 0) fail("zipf_exponent must be finite and >= 0");
      std::vector<int> id(E);
      std::iota(id.begin(), id.end(), 0);
      SplitMix64 rng(r.seed);
      for (size_t i = E - 1; i > 0; --i)  // Fisher-Yates
        std::swap(id[i], id[std::min(i, static_cast<size_t>(rng.uniform() * static_cast<double>(i + 1)))]);
      for (size_t i = 0; i < E; ++i) w[id[i]] = std::pow(static_cast<double>(i + 1), -s);
      break;
    }
    case RoutingDistribution::dirichlet: {
      const double alpha = r.dirichlet_alpha;
      if (!std::isfinite(alpha) || alpha <= 0) fail("dirichlet_alpha must be finite and > 0");
      SplitMix64 rng(r.seed);
      for (double& x : w) x = rng.log_gamma_sample(alpha);
      const double top = *std::max_element(w.begin(), w.end());
      for (double& x : w) x = std::exp(x - top);
      break;
    }
    case RoutingDistribution::histogram: {
      if (r.histogram.size() != E)
        fail("histogram has " + std::to_string(r.histogram.size()) + " entries for " + std::to_string(experts) +
             " experts");
      w = r.histogram;
      for (double x : w)
        if (!std::isfinite(x) || x < 0) fail("histogram entries must be finite and >= 0");
      break;
    }
  }
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  if (!(sum > 0)) fail("histogram has no positive entry");
  for (double& x : w) x /= sum;
  return w;
}

std::vector<double> expert_inclusion(const Routing& r, const RouterSpec& router, int experts, int top_k) {
  const Process p = make_process(r, router, experts, top_k);
  if (p.kind != Process::Kind::plackett_luce) return std::vector<double>(experts, static_cast<double>(top_k) / experts);
  const std::vector<Pmf> one = plackett_luce_pmfs(p.shares, top_k, {blocks(experts, 1)})[0];
  std::vector<double> pi;
  for (const Pmf& x : one) pi.push_back(x[1]);
  return pi;
}

LoadStats expected_loads(const Routing& r, const RouterSpec& router, int experts, int top_k, int ranks,
                         int64_t tokens) {
  const Process p = make_process(r, router, experts, top_k);
  check_ranks(experts, ranks);
  if (tokens < 0) fail("tokens must be >= 0");
  const double T = static_cast<double>(tokens);
  const Bounds by_expert = blocks(experts, 1), by_rank = blocks(experts, experts / ranks);
  LoadStats l;
  l.mean_rank_rows = static_cast<double>(tokens) * top_k / ranks;
  if (p.kind == Process::Kind::balanced) {
    Process uniform = p;
    uniform.kind = Process::Kind::subsets;
    const auto pmfs = count_pmfs(uniform, {by_rank});
    for (const Pmf& x : pmfs[0]) l.expected_distinct_ranks += 1 - x[0];
    l.mean_rank_tokens = l.expected_max_rank_tokens = T * l.expected_distinct_ranks / ranks;
    l.expected_max_rank_rows = l.mean_rank_rows;
    l.expected_max_expert_rows = T * top_k / experts;
    l.imbalance = 1;
    return l;
  }
  const auto pmfs = count_pmfs(p, {by_expert, by_rank});
  for (const Pmf& x : pmfs[1]) l.expected_distinct_ranks += 1 - x[0];
  l.mean_rank_tokens = T * l.expected_distinct_ranks / ranks;
  if (tokens == 0) return l;
  {
    // Each rank's indicator per token (hit at least once), its loads by the sets' model (the
    // groups' two-level form is for counts that sum to k, which indicators do not).
    std::vector<Pmf> hit;
    for (const Pmf& x : pmfs[1]) hit.push_back({x[0], 1 - x[0]});
    Process flat = p;
    flat.groups = 1;
    l.expected_max_rank_tokens = std::max(l.mean_rank_tokens, expected_max(load_model(flat, experts / ranks, hit, T)));
  }
  l.expected_max_expert_rows = expected_max(load_model(p, 1, pmfs[0], T));
  l.expected_max_rank_rows = expected_max(load_model(p, experts / ranks, pmfs[1], T));
  l.imbalance = l.expected_max_rank_rows / l.mean_rank_rows;
  return l;
}

double expected_tile_rows(const Routing& r, const RouterSpec& router, int experts, int top_k, int ranks,
                          int64_t tokens, int tile) {
  const Process p = make_process(r, router, experts, top_k);
  check_ranks(experts, ranks);
  if (tokens < 0) fail("tokens must be >= 0");
  if (tile < 1) fail("tile must be >= 1, got " + std::to_string(tile));
  const int per_rank = experts / ranks;
  const double t = tile;
  if (p.kind == Process::Kind::balanced)
    return per_rank * std::ceil(static_cast<double>(tokens) * top_k / experts / t) * t;
  if (tokens == 0) return 0;
  const auto pmfs = count_pmfs(p, {blocks(experts, 1), blocks(experts, per_rank)});
  const LoadModel rows = load_model(p, per_rank, pmfs[1], static_cast<double>(tokens));
  // Ranks whose rows spread over fewer than 16 tiles are lumpy once padded: take the lattice path.
  double widest = rows.two_level ? std::hypot(rows.a, rows.b) : 0.0;
  for (const Normal& x : rows.sets) widest = std::max(widest, x.sd);
  if (widest < 16 * t) return padded_lattice_max(p, pmfs[0], tokens, ranks, tile);
  return padded_normal_max(rows, pmfs[0], tokens, ranks, tile);
}

double expected_distinct_nodes(const Routing& r, const RouterSpec& router, int experts, int top_k, int ranks,
                               int ranks_per_node) {
  Process p = make_process(r, router, experts, top_k);
  check_ranks(experts, ranks);
  if (ranks_per_node < 1) fail("ranks_per_node must be >= 1, got " + std::to_string(ranks_per_node));
  if (p.kind == Process::Kind::balanced) p.kind = Process::Kind::subsets;
  const int block = std::min(ranks_per_node, ranks) * (experts / ranks);
  double nodes = 0;
  const auto pmfs = count_pmfs(p, {blocks(experts, block)});
  for (const Pmf& x : pmfs[0]) nodes += 1 - x[0];
  return nodes;
}

}  // namespace moeperf
