// Expected maxima of rank loads and padded tile rows (expected_max.h).
#include "model/workload/expected_max.h"

namespace moeperf::routing_detail {

// ---------------------------------------------------------------- expected maxima of normals
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

// CDF of a standardized variable of skewness g by the normal-power (first-order Cornish-Fisher)
// approximation x = z + g/6 (z^2 - 1), inverted on its increasing branch; skewness is capped at
// +-1, beyond which this approximation is no longer monotone over the range that matters.
double skewed_cdf(double x, double g) {
  g = std::clamp(g, -1.0, 1.0);
  if (std::abs(g) < 1e-12) return normal_cdf(x);
  const double c = g / 6, disc = 1 + 4 * c * (c + x);
  if (disc <= 0) return g > 0 ? 0.0 : 1.0;
  return normal_cdf(2 * (c + x) / (1 + std::sqrt(disc)));  // the root of c z^2 + z - (c + x) = 0
}

// Composite Simpson's rule with n (even) intervals.
template <class F>
double simpson(F f, double a, double b, int n) {
  const double h = (b - a) / n;
  double s = f(a) + f(b);
  for (int i = 1; i < n; ++i) s += (i % 2 ? 4.0 : 2.0) * f(a + i * h);
  return s * h / 3.0;
}

// E[max of independent loads] = L + int_L^hi (1 - prod F) dx, with L at or below where the max can
// fall and hi above every upper end (10 sd each way, 20 at skewness 1, where the normal-power
// tail reaches 8.4 sd);
// a load with sd 0 is a step, so the integral starts at the largest of those. Steps of 1/10 of the
// smallest sd of the loads that matter keep Simpson's error below 1e-9 sd. Equal loads are
// counted once and raised to their multiplicity.
double independent_max(const std::vector<Normal>& v) {
  double fixed = -INFINITY, lo = -INFINITY, hi = -INFINITY;
  auto tail = [](const Normal& x) { return (10 + 10 * std::min(std::abs(x.skew), 1.0)) * x.sd; };
  for (const Normal& x : v) {
    if (x.sd <= 0) {
      fixed = std::max(fixed, x.mean);
    } else {
      lo = std::max(lo, x.mean - tail(x));
      hi = std::max(hi, x.mean + tail(x));
    }
  }
  const double start = std::max(fixed, lo);
  if (!(hi > start)) return start;  // no random load, or none that can pass the fixed ones
  std::vector<std::pair<Normal, double>> live;  // distinct loads that can pass `start`, multiplicity
  double step = INFINITY;
  for (const Normal& x : v) {
    if (x.sd <= 0 || x.mean + tail(x) <= start) continue;
    auto same = std::find_if(live.begin(), live.end(), [&](const auto& l) { return l.first == x; });
    if (same != live.end()) {
      same->second += 1;
    } else {
      live.push_back({x, 1.0});
      step = std::min(step, x.sd / 10);
    }
  }
  int n = static_cast<int>(std::ceil((hi - start) / step));
  n = std::clamp(n + n % 2, 2, 20000);
  return start + simpson(
                     [&](double x) {
                       double prod = 1;
                       for (const auto& [y, count] : live) {
                         const double f = skewed_cdf((x - y.mean) / y.sd, y.skew);
                         prod *= count == 1 ? f : std::pow(f, count);
                       }
                       return 1.0 - prod;
                     },
                     start, hi, n);
}

// E[max over G groups of (a U_g + b max over the group's n members of W)], U standard normal, W
// standardized of skewness `skew`, all independent: the two-level model of loads positively
// correlated within a group. The law of one group is F(x) = int phi(u) F_W((x - a u) / b)^n du, by
// the trapezoid rule in u (spectrally accurate for a Gaussian weight at steps up to 0.5 and b / 4a);
// E[max] = lo + int_lo^hi (1 - F^G) by Simpson's rule at steps under sigma / 16. The x step is a
// whole number of (a du), so F_W^n is needed only on one lattice of arguments.
double two_level_max(double a, double b, double skew, int n, int G) {
  const double sigma = std::hypot(a, b);
  if (sigma <= 0) return 0.0;
  if (a < 1e-3 * sigma) return independent_max(std::vector<Normal>(static_cast<size_t>(n) * G, {0.0, sigma, skew}));
  if (b < 1e-3 * sigma) return independent_max(std::vector<Normal>(G, {0.0, sigma, 0.0}));
  const double du = std::min({0.5, b / (4 * a), sigma / (16 * a)});
  const int nu = static_cast<int>(std::ceil(9.0 / du));
  const int m = std::max(1, static_cast<int>(std::floor(sigma / (16 * a * du))));
  const double hx = m * a * du, tail = 10 + 10 * std::min(std::abs(skew), 1.0);
  const double lo = -tail * sigma;
  int steps = static_cast<int>(std::ceil(2 * tail * sigma / hx));
  steps += steps % 2;
  // g[k] = F_W((lo + a du (k - nu)) / b)^n for k = m i - j + nu, i in [0, steps], j in [-nu, nu].
  std::vector<double> g(static_cast<size_t>(m) * steps + 2 * nu + 1);
  for (size_t k = 0; k < g.size(); ++k)
    g[k] = std::pow(skewed_cdf((lo + a * du * (static_cast<double>(k) - nu)) / b, skew), n);
  std::vector<double> wu(2 * nu + 1);
  for (int j = -nu; j <= nu; ++j) wu[j + nu] = du * std::exp(-0.5 * j * du * j * du) / std::sqrt(2 * std::numbers::pi);
  double sum = 0;
  for (int i = 0; i <= steps; ++i) {
    double f = 0;
    for (int j = -nu; j <= nu; ++j) f += wu[j + nu] * g[static_cast<size_t>(m * i - j + nu)];
    const double v = 1.0 - std::pow(std::min(f, 1.0), G);
    sum += (i == 0 || i == steps ? 1.0 : i % 2 ? 4.0 : 2.0) * v;
  }
  return lo + sum * hx / 3.0;
}

// Loads that sum to a constant, replaced by independent surrogates with the same expected maximum.
// A set holding a share c = V / sum V of the variance: for covariance diag(A) - A A^T / sum A (exact
// for exchangeable sets, where c = 1/n) the load is Y - c sum Y with Y independent of variance
// A = V / (1 - c), and max(Y - c sum Y) = max Y - c sum Y has the mean of max Y. The third cumulant
// of Y - c sum Y is (1 - c)(1 - 2c) that of Y for exchangeable sets (as Poisson counts conditioned
// on their sum give a binomial), so Y's is the load's divided by that. The factor vanishes at
// c = 1/2 (two loads: the maximum m + |L - m| hardly feels skewness), so from c = 0.45 none is kept.
Normal free_load(double mean, double var, double third, double var_share) {
  const double c = var_share;
  if (var <= 0 || c >= 1) return {mean, 0.0, 0.0};
  const double a = var / (1 - c), k3 = c < 0.45 ? third / ((1 - c) * (1 - 2 * c)) : 0.0;
  return {mean, std::sqrt(a), k3 / (a * std::sqrt(a))};
}

// Per-token laws of the sets of one partition of the experts in equal blocks of `block` experts,
// turned into the loads of T tokens. Two-level: c_in (within a group) from the group's variance,
// c_out (across) from the fixed total; adding a common normal of variance -c_out shifts every load
// alike (not the maximum) and leaves groups independent: a^2 = c_in - c_out, b^2 = var - c_in.
LoadModel load_model(const Process& p, int block, const std::vector<Pmf>& pmfs, double tokens) {
  LoadModel m;
  const int S = static_cast<int>(pmfs.size());
  const int per_group = p.experts / p.groups;
  if (p.kind != Process::Kind::plackett_luce && p.groups > 1 && block < per_group && per_group % block == 0) {
    const Moments x = moments(pmfs[0]);
    const double group_var = moments(subset_pmf(p, 0, per_group)).var;
    m.two_level = true;
    m.n = per_group / block;
    m.G = S / m.n;
    m.mean = tokens * x.mean;
    const double c_in = (group_var - m.n * x.var) / (m.n * (m.n - 1.0));
    const double c_out = -(x.var + (m.n - 1) * c_in) / (S - m.n);
    m.a = std::sqrt(std::max(0.0, tokens * (c_in - c_out)));
    m.b = std::sqrt(std::max(0.0, tokens * (x.var - c_in)));
    const Normal y = free_load(0, tokens * x.var, tokens * x.third, 1.0 / S);
    m.third = y.skew * y.sd * y.sd * y.sd;
    return m;
  }
  std::vector<Moments> x;
  double sum = 0;
  for (const Pmf& pmf : pmfs) {
    x.push_back(moments(pmf));
    sum += x.back().var;
  }
  for (const Moments& y : x)
    m.sets.push_back(free_load(tokens * y.mean, tokens * y.var, tokens * y.third, sum > 0 ? y.var / sum : 1.0));
  return m;
}

double expected_max(const LoadModel& m) {
  if (m.two_level) return m.mean + two_level_max(m.a, m.b, m.b > 0 ? m.third / (m.b * m.b * m.b) : 0.0, m.n, m.G);
  return independent_max(m.sets);
}

PaddedRows padded_rows(int64_t T, double p, int tile) {
  const double mean = static_cast<double>(T) * p, var = mean * (1 - p), t = tile;
  PaddedRows r;
  r.rows_var = var;
  if (var <= 0) {
    r.mean = std::ceil(mean / t) * t;
    return r;
  }
  if (std::sqrt(var) >= 2 * t) {
    r.mean = mean + (t - 1) / 2;
    r.slope = 1;
    r.residual_var = (t * t - 1) / 12;
    return r;
  }
  const int64_t mode = std::min<int64_t>(T, static_cast<int64_t>(std::floor((static_cast<double>(T) + 1) * p)));
  const double odds = p / (1 - p);
  // Sums over m of pmf(m) times 1, m - mean, c - mean, (c - mean)^2, (m - mean)(c - mean), gathered
  // per tile (c is constant over one) from the mode outward by the ratio
  // pmf(m + 1) / pmf(m) = (T - m) / (m + 1) * p / (1 - p) until the terms fall below 1e-17 of the
  // mode's (8.8 standard deviations); the pmf is normalized by its own sum.
  double s0 = 0, s1 = 0, sc = 0, scc = 0, smc = 0, w0 = 0, w1 = 0;
  auto flush = [&](int64_t c) {
    const double dc = static_cast<double>(c) - mean;
    s0 += w0;
    s1 += w1;
    sc += w0 * dc;
    scc += w0 * dc * dc;
    smc += w1 * dc;
    w0 = w1 = 0;
  };
  const int64_t first_c = (mode + tile - 1) / tile * tile;
  double w = 1;
  int64_t c = first_c;
  for (int64_t m = mode; m <= T && w > 1e-17; ++m) {
    if (m > c) {
      flush(c);
      c += tile;
    }
    w0 += w;
    w1 += w * (static_cast<double>(m) - mean);
    w *= static_cast<double>(T - m) / (static_cast<double>(m) + 1.0) * odds;
  }
  flush(c);
  w = 1;
  c = first_c;
  for (int64_t m = mode; m > 0;) {
    w *= static_cast<double>(m) / (static_cast<double>(T - m) + 1.0) / odds;
    if (--m <= c - tile) {
      flush(c);
      c -= tile;
    }
    if (w <= 1e-17) break;
    w0 += w;
    w1 += w * (static_cast<double>(m) - mean);
  }
  flush(c);
  const double ec = sc / s0, cov = smc / s0 - (s1 / s0) * ec;
  r.mean = mean + ec;
  r.slope = cov / var;
  r.residual_var = std::max(0.0, scc / s0 - ec * ec - cov * cov / var);
  return r;
}

TileLaw tile_law(int64_t T, double p, int tile) {
  if (p <= 0) return {0, {1.0}};
  if (p >= 1) return {(T + tile - 1) / tile, {1.0}};
  const int64_t mode = std::min<int64_t>(T, static_cast<int64_t>(std::floor((static_cast<double>(T) + 1) * p)));
  const double odds = p / (1 - p);
  const int64_t mode_bin = (mode + tile - 1) / tile;
  std::vector<double> up{0.0}, down;  // bins mode_bin, mode_bin + 1, ... and mode_bin - 1, mode_bin - 2, ...
  double w = 1;
  for (int64_t m = mode, c = mode_bin * tile; m <= T && w > 1e-17; ++m) {
    if (m > c) {
      c += tile;
      up.push_back(0.0);
    }
    up.back() += w;
    w *= static_cast<double>(T - m) / (static_cast<double>(m) + 1.0) * odds;
  }
  w = 1;
  for (int64_t m = mode, c = mode_bin * tile; m > 0;) {
    w *= static_cast<double>(m) / (static_cast<double>(T - m) + 1.0) / odds;
    if (w <= 1e-17) break;
    if (--m <= c - tile) {
      c -= tile;
      down.push_back(0.0);
    }
    (down.empty() ? up[0] : down.back()) += w;
  }
  TileLaw law{mode_bin - static_cast<int64_t>(down.size()), {}};
  law.mass.assign(down.rbegin(), down.rend());
  law.mass.insert(law.mass.end(), up.begin(), up.end());
  const double sum = std::accumulate(law.mass.begin(), law.mass.end(), 0.0);
  for (double& x : law.mass) x /= sum;
  return law;
}

// The law of the sum of two independent lattice variables, its tails below 1e-18 dropped.
TileLaw convolve(const TileLaw& a, const TileLaw& b) {
  TileLaw c{a.first + b.first, std::vector<double>(a.mass.size() + b.mass.size() - 1, 0.0)};
  for (size_t i = 0; i < a.mass.size(); ++i)
    for (size_t j = 0; j < b.mass.size(); ++j) c.mass[i + j] += a.mass[i] * b.mass[j];
  size_t lo = 0, hi = c.mass.size();
  while (hi - lo > 1 && c.mass[lo] < 1e-18) ++lo;
  while (hi - lo > 1 && c.mass[hi - 1] < 1e-18) --hi;
  c.first += static_cast<int64_t>(lo);
  c.mass = std::vector<double>(c.mass.begin() + static_cast<ptrdiff_t>(lo), c.mass.begin() + static_cast<ptrdiff_t>(hi));
  return c;
}

TileLaw power(TileLaw a, int n) {  // the law of the sum of n independent copies, by squaring
  TileLaw r{0, {1.0}};
  while (n > 0) {
    if (n % 2) r = convolve(r, a);
    n /= 2;
    if (n > 0) a = convolve(a, a);
  }
  return r;
}

double lattice_max(const std::vector<LatticeBlock>& blocks) {
  int64_t lo = INT64_MIN, hi = INT64_MIN;
  std::vector<std::vector<std::vector<double>>> cdf(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    int64_t low = INT64_MAX;
    for (const TileLaw& l : blocks[b].law) {
      low = std::min(low, l.first);
      hi = std::max(hi, l.first + static_cast<int64_t>(l.mass.size()) - 1);
      cdf[b].emplace_back(l.mass.size());
      std::partial_sum(l.mass.begin(), l.mass.end(), cdf[b].back().begin());
    }
    lo = std::max(lo, low);
  }
  double e = static_cast<double>(lo);
  for (int64_t d = lo; d < hi; ++d) {
    double all = 1;
    for (size_t b = 0; b < blocks.size(); ++b) {
      double block = 0;
      for (size_t i = 0; i < blocks[b].law.size(); ++i) {
        const int64_t j = d - blocks[b].law[i].first;
        const double f = j < 0 ? 0.0 : j >= static_cast<int64_t>(cdf[b][i].size()) ? 1.0 : std::min(cdf[b][i][j], 1.0);
        block += blocks[b].weight[i] * (blocks[b].members == 1 ? f : std::pow(f, blocks[b].members));
      }
      all *= std::min(block, 1.0);
    }
    e += 1 - all;
  }
  return e;
}

// The padded rows of the busiest rank when a rank's padded rows spread over many tiles: padded rows
// of a rank = sum_e E[c_e] + beta (L - E L) + independent residual, with beta the variance-weighted
// slope of its experts (padded_rows); L's standard deviation and third cumulant scale by beta.
double padded_normal_max(const LoadModel& rows, const std::vector<Pmf>& per_expert, int64_t tokens, int ranks,
                         int tile) {
  const int per_rank = static_cast<int>(per_expert.size()) / ranks;
  std::vector<PaddedRows> pad;
  for (size_t e = 0; e < per_expert.size(); ++e)  // uniform routing: one law for all experts
    pad.push_back(e > 0 && per_expert[e][1] == per_expert[e - 1][1] ? pad.back()
                                                                    : padded_rows(tokens, per_expert[e][1], tile));
  std::vector<Normal> ranks_padded;
  for (int q = 0; q < ranks; ++q) {
    double mean = 0, cov = 0, var = 0, residual = 0;
    for (int e = q * per_rank; e < (q + 1) * per_rank; ++e) {
      mean += pad[e].mean;
      cov += pad[e].slope * pad[e].rows_var;
      var += pad[e].rows_var;
      residual += pad[e].residual_var;
    }
    const double beta = var > 0 ? cov / var : 0.0;
    if (rows.two_level) {  // every rank alike
      const double a = beta * rows.a, b = std::sqrt(beta * beta * rows.b * rows.b + residual);
      const double third = beta * beta * beta * rows.third;
      return mean + two_level_max(a, b, b > 0 ? third / (b * b * b) : 0.0, rows.n, rows.G);
    }
    const Normal& y = rows.sets[q];
    const double sd = std::sqrt(beta * beta * y.sd * y.sd + residual);
    const double third = beta * beta * beta * y.skew * y.sd * y.sd * y.sd;
    ranks_padded.push_back({mean, sd, sd > 0 ? third / (sd * sd * sd) : 0.0});
  }
  return independent_max(ranks_padded);
}

// The padded rows of the busiest rank when a rank's padded rows are lumpy (spread over few tiles):
// the exact lattice law of each expert's tiles, summed over the rank, and the expected maximum
// summed over the lattice. Experts are independent (their negative correlation through the fixed
// total is what the free_load variance inflation stands for). Under group-limited routing they are
// independent given n_g, the tokens that chose their group: rows ~ Binomial(n_g, k / (M E/G)), with
// n_g normal of mean T M/G and the free variance T (M/G)(1 - M/G) G/(G - 1), on every integer when
// its sd is under 16, else at steps of sd/2 (trapezoid rule in the standard normal) out to 8 sd.
double padded_lattice_max(const Process& p, const std::vector<Pmf>& per_expert, int64_t tokens, int ranks, int tile) {
  const int experts = p.experts, per_rank = experts / ranks, per_group = experts / p.groups;
  std::vector<LatticeBlock> blocks;
  if (p.groups == 1 || (per_rank % per_group != 0 && per_group % per_rank != 0)) {
    auto same_law = [&](int e, int f) { return per_expert[static_cast<size_t>(e)][1] == per_expert[static_cast<size_t>(f)][1]; };
    std::vector<TileLaw> law;
    for (int e = 0; e < static_cast<int>(per_expert.size()); ++e)  // uniform routing: one law for all experts
      law.push_back(e > 0 && same_law(e, e - 1) ? law.back() : tile_law(tokens, per_expert[static_cast<size_t>(e)][1], tile));
    // A run of experts with one law is a power of it (by squaring: log n convolutions, not n), and
    // a rank whose experts have the laws of the previous rank's is one more member of its block:
    // under uniform routing every rank is one law, however many experts (a million: bench CliLimits).
    for (int q = 0; q < ranks; ++q) {
      const int first = q * per_rank, end = (q + 1) * per_rank;
      bool as_before = q > 0;
      for (int e = first; as_before && e < end; ++e) as_before = same_law(e, e - per_rank);
      if (as_before) {
        ++blocks.back().members;
        continue;
      }
      TileLaw sum{0, {1.0}};
      for (int e = first; e < end;) {
        int run = 1;
        while (e + run < end && same_law(e + run, e)) ++run;
        sum = convolve(sum, run == 1 ? law[static_cast<size_t>(e)] : power(law[static_cast<size_t>(e)], run));
        e += run;
      }
      blocks.push_back({{1.0}, {std::move(sum)}, 1});
    }
    return tile * lattice_max(blocks);
  }
  const double T = static_cast<double>(tokens), chosen = static_cast<double>(p.topk_groups) / p.groups;
  const double mean_n = T * chosen, sd_n = std::sqrt(T * chosen * (1 - chosen) * p.groups / (p.groups - 1.0));
  std::vector<int64_t> n;
  if (sd_n < 16) {
    for (auto i = static_cast<int64_t>(std::floor(mean_n - 8.5 * sd_n)); static_cast<double>(i) <= mean_n + 8.5 * sd_n; ++i)
      if (i >= 0 && i <= tokens) n.push_back(i);
  } else {
    for (int i = -16; i <= 16; ++i) n.push_back(std::llround(mean_n + 0.5 * i * sd_n));
  }
  std::vector<double> weight;
  for (int64_t x : n) weight.push_back(std::exp(-0.5 * std::pow((static_cast<double>(x) - mean_n) / sd_n, 2)));
  const double sum = std::accumulate(weight.begin(), weight.end(), 0.0);
  for (double& x : weight) x /= sum;
  const double pick = static_cast<double>(p.top_k) / (p.topk_groups * per_group);
  std::vector<TileLaw> expert_given_n;
  for (int64_t x : n) expert_given_n.push_back(tile_law(x, pick, tile));
  if (per_rank % per_group == 0) {  // a rank holds whole groups: ranks independent
    std::vector<TileLaw> given;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const TileLaw& x : expert_given_n) {
      given.push_back(power(x, per_group));
      lo = std::min(lo, given.back().first);
      hi = std::max(hi, given.back().first + static_cast<int64_t>(given.back().mass.size()));
    }
    TileLaw group{lo, std::vector<double>(static_cast<size_t>(hi - lo), 0.0)};
    for (size_t i = 0; i < given.size(); ++i)
      for (size_t j = 0; j < given[i].mass.size(); ++j)
        group.mass[static_cast<size_t>(given[i].first - lo) + j] += weight[i] * given[i].mass[j];
    const TileLaw rank = power(group, per_rank / per_group);
    for (int q = 0; q < ranks; ++q) blocks.push_back({{1.0}, {rank}, 1});
  } else {  // a group spans per_group / per_rank ranks that share its n_g
    LatticeBlock block{weight, {}, per_group / per_rank};
    for (const TileLaw& x : expert_given_n) block.law.push_back(power(x, per_rank));
    for (int g = 0; g < p.groups; ++g) blocks.push_back(block);
  }
  return tile * lattice_max(blocks);
}

}  // namespace moeperf::routing_detail
