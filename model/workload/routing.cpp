// Routing / load-imbalance model, the public functions of routing.h: expert shares and inclusion,
// expected loads, padded tile rows and distinct nodes. The per-token count laws are in
// routing_laws.cpp, the loads over T tokens and their expected maxima in expected_max.cpp.
#include "model/workload/routing.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <mutex>
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

namespace {

// Solves a histogram's draw weights (w: its shares, normalized; top_k >= 2): see draw_weights.
std::vector<double> solve_draw_weights(std::vector<double> w, int experts, int top_k) {
  const size_t E = w.size();
  const double k = top_k;
  // Experts every token picks (k x share = 1, within rounding): a weight far above the others'
  // (1e15 x), so they come first and the rest draw the remaining picks among themselves.
  std::vector<bool> certain(E, false);
  int positive = 0;
  for (size_t e = 0; e < E; ++e) {
    if (k * w[e] > 1.0 + 1e-9)
      fail("histogram: expert " + std::to_string(e) + " has " + std::to_string(100 * w[e]) +
           " % of the rows; a token picks an expert at most once, so no expert can take more than 1/top_k (" +
           std::to_string(100 / k) + " %)");
    certain[e] = k * w[e] >= 1.0 - 1e-9;
    positive += w[e] > 0;
  }
  if (positive < top_k)
    fail("histogram: " + std::to_string(positive) + " experts have rows, fewer than top_k = " + std::to_string(top_k) +
         " (each token picks top_k distinct experts)");
  std::vector<double> target(E);
  for (size_t e = 0; e < E; ++e) target[e] = k * w[e];
  // The certain experts take C of the k picks; the others share the k - C left (their targets as
  // given add up to within C x 1e-9 of that, which no weights meet: rescaled to it exactly). With
  // none left, every other expert's weight is 0.
  {
    double sure = 0, rest = 0;
    for (size_t e = 0; e < E; ++e) {
      if (certain[e]) sure += 1;
      else rest += target[e];
    }
    const double left = k - sure;
    for (size_t e = 0; e < E; ++e)
      if (!certain[e]) target[e] = left > 0.5 && rest > 0 ? target[e] * left / rest : 0.0;
    if (left < 0.5) {
      for (size_t e = 0; e < E; ++e) w[e] = certain[e] ? 1.0 : 0.0;
      return w;
    }
  }
  auto settle = [&] {
    double rest = 0;
    for (size_t e = 0; e < E; ++e)
      if (!certain[e]) rest += w[e];
    for (size_t e = 0; e < E; ++e) w[e] = certain[e] ? 1e15 : (rest > 0 ? w[e] / rest : 0.0);
  };
  settle();
  // Equal targets among the uncertain experts with rows: Plackett-Luce draws them uniformly.
  double first = -1;
  bool alike = true;
  for (size_t e = 0; e < E; ++e) {
    if (certain[e] || target[e] <= 0) continue;
    if (first < 0) first = target[e];
    alike = alike && target[e] == first;
  }
  if (alike) return w;
  // Fixed point on the odds: w_e <- w_e x (odds(target_e) / odds(inclusion_e(w)))^a_e. Raising an
  // expert's weight raises its inclusion; on the odds the step keeps its pace for an expert picked
  // by nearly every token (a ratio of inclusions stalls there: 1 - k x gap of the error left per
  // round), but there the inclusion answers the weight steeply, so each expert's exponent a_e is
  // halved whenever its error changes sign (it overshot) and grows back while it does not.
  auto odds = [](double p) { return p / std::max(1e-300, 1.0 - p); };
  std::vector<double> step(E, 0.5);
  std::vector<int> side(E, 0);
  for (int it = 0; it < 1000; ++it) {
    const std::vector<Pmf> one = plackett_luce_pmfs(w, top_k, {blocks(experts, 1)})[0];
    double worst = 0;
    for (size_t e = 0; e < E; ++e) {
      if (certain[e] || target[e] <= 0) continue;
      const double pi = one[e].size() > 1 ? one[e][1] : 0.0;
      if (!(pi > 0)) fail("histogram: the draw weights could not be solved (expert " + std::to_string(e) + ")");
      worst = std::max(worst, std::abs(pi / target[e] - 1));
      const int now = pi > target[e] ? 1 : pi < target[e] ? -1 : 0;
      step[e] = now != 0 && now == -side[e] ? step[e] / 2 : std::min(1.0, step[e] * 1.25);
      side[e] = now;
      w[e] *= std::pow(odds(target[e]) / odds(std::min(pi, 1.0 - 1e-15)), step[e]);
    }
    settle();
    // The laws' own accuracy is some 1e-11.
    if (worst < 1e-9) return w;
  }
  fail("histogram: the draw weights did not converge in 1000 iterations");
}

}  // namespace

std::vector<double> draw_weights(const Routing& r, int experts, int top_k) {
  std::vector<double> w = expert_shares(r, experts);
  if (r.distribution != RoutingDistribution::histogram) return w;
  if (top_k < 1 || top_k > experts) fail("top_k must be in [1, experts], got " + std::to_string(top_k));
  if (top_k == 1) return w;  // one pick: the weights are the rows' fractions
  // A prediction asks for the same histogram's weights several times (expected loads, inclusion,
  // distinct ranks, the executor's draw), a plan or sweep for every candidate: the solution
  // (milliseconds at 256 experts) is kept per (shares, top_k). Failures are not kept; the few
  // histograms a run holds fit a small map, cleared when it fills.
  static std::mutex mutex;
  static std::map<std::pair<std::vector<double>, int>, std::vector<double>> solved;
  auto key = std::make_pair(std::move(w), top_k);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = solved.find(key); it != solved.end()) return it->second;
  }
  std::vector<double> weights = solve_draw_weights(key.first, experts, top_k);
  const std::lock_guard<std::mutex> lock(mutex);
  if (solved.size() >= 64) solved.clear();
  solved.emplace(std::move(key), weights);
  return weights;
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
