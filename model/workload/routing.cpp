// Routing / load-imbalance model: per-token count laws (hypergeometric, Plackett-Luce through
// exponential clocks), normal loads over T tokens, expected maxima by numerical integration.
#include "model/routing.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>

namespace moeperf {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("routing: " + what); }

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

// ---------------------------------------------------------------- validation
void check_layout(int experts, int top_k) {
  if (experts < 1) fail("experts must be >= 1, got " + std::to_string(experts));
  if (top_k < 1 || top_k > experts)
    fail("top_k must be in [1, experts = " + std::to_string(experts) + "], got " + std::to_string(top_k));
}

void check_ranks(int experts, int ranks) {
  if (ranks < 1 || experts % ranks != 0)
    fail("ranks must divide the " + std::to_string(experts) + " experts, got " + std::to_string(ranks));
}

// ---------------------------------------------------------------- the routing process
struct Process {
  enum class Kind { balanced, subsets, plackett_luce } kind = Kind::subsets;
  int experts = 0, top_k = 0;
  int groups = 1, topk_groups = 1;  // subsets: a token picks topk_groups of groups, then k experts
  std::vector<double> shares;       // plackett_luce
};

Process make_process(const Routing& r, const RouterSpec& router, int experts, int top_k) {
  check_layout(experts, top_k);
  if (router.groups < 1 || experts % router.groups != 0)
    fail("router groups must divide the " + std::to_string(experts) + " experts, got " +
         std::to_string(router.groups));
  if (router.topk_groups < 1 || router.topk_groups > router.groups)
    fail("router topk_groups must be in [1, groups], got " + std::to_string(router.topk_groups));
  const bool limited = router.topk_groups < router.groups;
  if (limited && router.topk_groups * (experts / router.groups) < top_k)
    fail("topk_groups x experts per group is fewer than top_k");
  Process p;
  p.experts = experts;
  p.top_k = top_k;
  if (limited) {
    p.groups = router.groups;
    p.topk_groups = router.topk_groups;
  }
  switch (r.distribution) {
    case RoutingDistribution::balanced: p.kind = Process::Kind::balanced; return p;
    case RoutingDistribution::uniform: p.kind = Process::Kind::subsets; return p;
    default: break;
  }
  p.shares = expert_shares(r, experts);
  const bool alike = std::all_of(p.shares.begin(), p.shares.end(), [&](double s) { return s == p.shares[0]; });
  if (alike) {
    p.shares.clear();
    p.kind = Process::Kind::subsets;  // equal shares: Plackett-Luce picks a uniform k-subset
    return p;
  }
  if (limited)
    fail("group-limited routing (groups " + std::to_string(router.groups) + ", topk_groups " +
         std::to_string(router.topk_groups) +
         ") is modelled for uniform shares only; use RouterSpec{} to route by the shares alone");
  p.kind = Process::Kind::plackett_luce;
  return p;
}

// Contiguous sets of experts: set s is [bounds[s], bounds[s+1]).
using Bounds = std::vector<int>;

Bounds blocks(int experts, int block) {
  Bounds b;
  for (int e = 0; e < experts; e += block) b.push_back(e);
  b.push_back(experts);
  return b;
}

// ---------------------------------------------------------------- per-token count laws
// A law of a count on {0..k}: pmf[j] = P(X = j).
using Pmf = std::vector<double>;

struct Moments {
  double mean = 0, var = 0, third = 0;  // third: third central moment (cumulant)
};

Moments moments(const Pmf& p) {
  Moments m;
  for (size_t j = 0; j < p.size(); ++j) m.mean += static_cast<double>(j) * p[j];
  for (size_t j = 0; j < p.size(); ++j) {
    const double d = static_cast<double>(j) - m.mean;
    m.var += d * d * p[j];
    m.third += d * d * d * p[j];
  }
  return m;
}

// P(j successes in `draws` draws without replacement from `pop` items of which `good` are good):
// C(draws, j) [good]_j [pop - good]_(draws - j) / [pop]_draws, falling factorials; draws is small.
double hypergeometric(int pop, int good, int draws, int j) {
  if (j < 0 || j > draws || j > good || draws - j > pop - good) return 0.0;
  double p = 1.0;
  for (int i = 0; i < j; ++i) p *= static_cast<double>(good - i) * (draws - i) / ((pop - i) * (i + 1.0));
  for (int i = 0; i < draws - j; ++i) p *= static_cast<double>(pop - good - i) / (pop - j - i);
  return p;
}

// ln C(n, r), by a sum of logs (no lgamma: it is not thread-safe in glibc).
double log_choose(int n, int r) {
  if (r < 0 || r > n) return -INFINITY;
  r = std::min(r, n - r);
  double s = 0;
  for (int i = 1; i <= r; ++i) s += std::log(static_cast<double>(n - r + i) / i);
  return s;
}

// Count of a token's picks in [begin, end) under uniform (possibly group-limited) routing: given
// the chosen groups the count is hypergeometric over their pooled experts; the number of the set's
// experts in the pool follows from which of the groups overlapping the set are chosen.
Pmf subset_pmf(const Process& p, int begin, int end) {
  const int E = p.experts, k = p.top_k, G = p.groups, M = p.topk_groups, per = E / G, pool = M * per;
  std::vector<int> overlap;  // experts of the set in each group it overlaps
  for (int g = begin / per; g * per < end; ++g)
    overlap.push_back(std::min(end, (g + 1) * per) - std::max(begin, g * per));
  const int I = static_cast<int>(overlap.size()), size = end - begin;
  // ways[m][n]: subsets of m overlapping groups holding n of the set's experts.
  std::vector<std::vector<double>> ways(I + 1, std::vector<double>(size + 1, 0.0));
  ways[0][0] = 1;
  for (int c : overlap)
    for (int m = I; m >= 1; --m)
      for (int n = size; n >= c; --n) ways[m][n] += ways[m - 1][n - c];
  Pmf pmf(k + 1, 0.0);
  const double all = log_choose(G, M);
  for (int m = 0; m <= std::min(I, M); ++m) {
    const double rest = std::exp(log_choose(G - I, M - m) - all);  // the other groups chosen
    if (rest == 0) continue;
    for (int n = 0; n <= size; ++n) {
      if (ways[m][n] == 0) continue;
      const double w = ways[m][n] * rest;
      for (int j = 0; j <= k; ++j) pmf[j] += w * hypergeometric(pool, n, k, j);
    }
  }
  return pmf;
}

// Plackett-Luce counts of a token's picks in each set of several partitions of the experts.
// Exponential clocks: expert e fires at an Exp(w_e) time; the k first to fire are the picks, in
// Plackett-Luce order. For a set S, X_S >= j iff S's j-th firing precedes the others' (k-j+1)-th:
//   P(X_S >= j) = int_0^inf f_j(t) P(N_-S(t) <= k - j) dt,  f_j(t) = d/dt P(N_S(t) >= j)
//               = E[rate of S's unfired clocks; N_S(t) = j - 1],
// with N the number of fired clocks (independent Bernoulli(1 - e^(-w t)), a Poisson-binomial law
// kept by a DP truncated at k - 1 that also carries the unfired rate). The integral runs over
// x = ln t with the trapezoid rule, which converges geometrically for this smooth integrand; below
// t0 the integrand is ~ t^j and the sum is extended to -inf in closed form.
std::vector<std::vector<Pmf>> plackett_luce_pmfs(const std::vector<double>& shares, int k,
                                                 const std::vector<Bounds>& partitions) {
  const int E = static_cast<int>(shares.size());
  // Shares below 1e-200 of the total are treated as 0: the clock integral would have to reach
  // t ~ 1e200 for them, and they are picked only when the positive ones run out.
  std::vector<int> pos;
  for (int e = 0; e < E; ++e)
    if (shares[e] > 1e-200) pos.push_back(e);
  const int P = static_cast<int>(pos.size());
  std::vector<std::vector<Pmf>> out(partitions.size());

  if (P <= k) {  // every positive-share expert is picked; the rest uniformly among the others
    for (size_t q = 0; q < partitions.size(); ++q) {
      const Bounds& b = partitions[q];
      for (size_t s = 0; s + 1 < b.size(); ++s) {
        int positive = 0;
        for (int e : pos) positive += (e >= b[s] && e < b[s + 1]);
        const int zero = b[s + 1] - b[s] - positive;
        Pmf pmf(k + 1, 0.0);
        for (int j = 0; j + positive <= k; ++j) pmf[j + positive] = hypergeometric(E - P, zero, k - P, j);
        out[q].push_back(pmf);
      }
    }
    return out;
  }

  std::vector<double> w(P);
  for (int i = 0; i < P; ++i) w[i] = shares[pos[i]];
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= total;

  struct Part {
    std::vector<int> first;  // set s holds positive experts [first[s], first[s+1]) (indices into w)
    int sets = 0;
    std::vector<double> pn, un;    // per set: P(N_S = j), E[unfired rate; N_S = j], j < k
    std::vector<double> pre, suf;  // prefix / suffix convolutions over sets, truncated to j < k
    std::vector<double> tail;      // per set: sum of the integrand of P(X_S >= j), j = 1..k
    bool single = true;            // every set holds at most one positive expert
  };
  std::vector<Part> parts(partitions.size());
  for (size_t q = 0; q < partitions.size(); ++q) {
    Part& pt = parts[q];
    const Bounds& b = partitions[q];
    pt.sets = static_cast<int>(b.size()) - 1;
    for (size_t s = 0; s < b.size(); ++s)
      pt.first.push_back(static_cast<int>(std::lower_bound(pos.begin(), pos.end(), b[s]) - pos.begin()));
    for (int s = 0; s < pt.sets; ++s) pt.single = pt.single && pt.first[s + 1] - pt.first[s] <= 1;
    pt.pn.assign(static_cast<size_t>(pt.sets) * k, 0.0);
    pt.un.assign(pt.pn.size(), 0.0);
    pt.pre.assign(static_cast<size_t>(std::max(pt.sets, P) + 1) * k, 0.0);
    pt.suf.assign(pt.pre.size(), 0.0);
    pt.tail.assign(static_cast<size_t>(pt.sets) * (k + 1), 0.0);
  }

  // Step in ln t: the error of the trapezoid rule falls like exp(-2 pi d / h) with d the half-width
  // of the strip where the integrand is analytic (~pi/2 here): 0.25 gives means that sum to k within
  // 1e-10 (0.2: 1e-13, 0.3: 1e-8).
  const double h = 0.25, t0 = 1e-6;
  std::vector<double> below(k + 1);  // sum_{i>=1} exp(-j h i): the nodes below t0 for a t^j integrand
  for (int j = 1; j <= k; ++j) below[j] = std::exp(-j * h) / (1.0 - std::exp(-j * h));
  std::vector<double> keep(P), fire(P), cdf(k);
  bool past_half = false;
  int quiet = 0;
  // The loop ends once the chance that fewer than k clocks have fired, times t, is negligible:
  // it bounds the sum of all integrands. 10,000 steps reach t = 1e863, beyond any positive share.
  for (int i = 0; i < 10000; ++i) {
    const double t = t0 * std::exp(i * h);
    for (int e = 0; e < P; ++e) {  // one transcendental each, the small one of the pair exact
      const double x = w[e] * t;
      if (x < 0.5) {
        fire[e] = -std::expm1(-x);
        keep[e] = 1 - fire[e];
      } else {
        keep[e] = std::exp(-x);
        fire[e] = 1 - keep[e];
      }
    }
    double unfinished = 0;
    for (size_t q = 0; q < parts.size(); ++q) {
      Part& pt = parts[q];
      const int S = pt.sets;
      if (pt.single) {
        // One expert per set (the per-expert partition): prefix laws and suffix CDFs over the
        // positive experts, each a two-term step (an expert fires or not).
        double* pre = pt.pre.data();
        double* suf = pt.suf.data();
        std::fill(pre, pre + k, 0.0);
        pre[0] = 1;
        for (int e = 0; e < P; ++e) {
          const double* a = pre + static_cast<size_t>(e) * k;
          double* c = pre + static_cast<size_t>(e + 1) * k;
          c[0] = a[0] * keep[e];
          for (int j = 1; j < k; ++j) c[j] = a[j] * keep[e] + a[j - 1] * fire[e];
        }
        std::fill(suf + static_cast<size_t>(P) * k, suf + static_cast<size_t>(P + 1) * k, 1.0);
        for (int e = P - 1; e >= 0; --e) {
          const double* a = suf + static_cast<size_t>(e + 1) * k;
          double* c = suf + static_cast<size_t>(e) * k;
          c[0] = a[0] * keep[e];
          for (int j = 1; j < k; ++j) c[j] = a[j] * keep[e] + a[j - 1] * fire[e];
        }
        if (q == 0)
          for (int j = 0; j < k; ++j) unfinished += pre[static_cast<size_t>(P) * k + j];
        for (int s = 0; s < S; ++s) {
          if (pt.first[s + 1] == pt.first[s]) continue;
          const int e = pt.first[s];
          const double* a = pre + static_cast<size_t>(e) * k;
          const double* b = suf + static_cast<size_t>(e + 1) * k;
          double others = 0;  // P(N_-e(t) <= k - 1)
          for (int l = 0; l < k; ++l) others += a[l] * b[k - 1 - l];
          const double f = t * w[e] * keep[e] * others;
          pt.tail[static_cast<size_t>(s) * (k + 1) + 1] += i == 0 ? f * (1.0 + below[1]) : f;
        }
        continue;
      }
      for (int s = 0; s < S; ++s) {
        double* pn = &pt.pn[static_cast<size_t>(s) * k];
        double* un = &pt.un[static_cast<size_t>(s) * k];
        std::fill(pn, pn + k, 0.0);
        std::fill(un, un + k, 0.0);
        pn[0] = 1;
        int n = 0;
        for (int e = pt.first[s]; e < pt.first[s + 1]; ++e, ++n) {
          const int top = std::min(n + 1, k - 1);
          for (int j = top; j >= 1; --j) un[j] = (un[j] + w[e] * pn[j]) * keep[e] + un[j - 1] * fire[e];
          un[0] = (un[0] + w[e] * pn[0]) * keep[e];
          for (int j = top; j >= 1; --j) pn[j] = pn[j] * keep[e] + pn[j - 1] * fire[e];
          pn[0] *= keep[e];
        }
      }
      // c = a * b truncated to k terms; b has `len` leading terms that can be non-zero (a set of
      // n experts: n + 1). Sets of one expert, the common case, take the two-term loop.
      auto convolve = [k](const double* a, const double* b, double* c, int len) {
        if (len == 1) {
          std::copy(a, a + k, c);
        } else if (len == 2) {
          c[0] = a[0] * b[0];
          for (int j = 1; j < k; ++j) c[j] = a[j] * b[0] + a[j - 1] * b[1];
        } else {
          for (int j = 0; j < k; ++j) {
            double x = 0;
            for (int l = 0; l <= std::min(j, len - 1); ++l) x += b[l] * a[j - l];
            c[j] = x;
          }
        }
      };
      std::fill(pt.pre.begin(), pt.pre.begin() + k, 0.0);
      pt.pre[0] = 1;
      for (int s = 0; s < S; ++s) {
        const int len = std::min(pt.first[s + 1] - pt.first[s] + 1, k);
        convolve(&pt.pre[static_cast<size_t>(s) * k], &pt.pn[static_cast<size_t>(s) * k],
                 &pt.pre[static_cast<size_t>(s + 1) * k], len);
      }
      std::fill(pt.suf.begin() + static_cast<ptrdiff_t>(S) * k, pt.suf.end(), 0.0);
      pt.suf[static_cast<size_t>(S) * k] = 1;
      for (int s = S - 1; s >= 0; --s) {
        const int len = std::min(pt.first[s + 1] - pt.first[s] + 1, k);
        convolve(&pt.suf[static_cast<size_t>(s + 1) * k], &pt.pn[static_cast<size_t>(s) * k],
                 &pt.suf[static_cast<size_t>(s) * k], len);
      }
      if (q == 0)
        for (int j = 0; j < k; ++j) unfinished += pt.pre[static_cast<size_t>(S) * k + j];
      for (int s = 0; s < S; ++s) {
        const int n = pt.first[s + 1] - pt.first[s];
        if (n == 0) continue;
        const double* pre = &pt.pre[static_cast<size_t>(s) * k];
        const double* suf = &pt.suf[static_cast<size_t>(s + 1) * k];
        double c = 0;
        for (int j = 0; j < k; ++j) cdf[j] = (c += suf[j]);
        const double* un = &pt.un[static_cast<size_t>(s) * k];
        double* tail = &pt.tail[static_cast<size_t>(s) * (k + 1)];
        for (int j = 1; j <= std::min(k, n); ++j) {
          double others = 0;  // P(N_-S(t) <= k - j)
          for (int l = 0; l <= k - j; ++l) others += pre[l] * cdf[k - j - l];
          const double f = t * un[j - 1] * others;
          tail[j] += i == 0 ? f * (1.0 + below[j]) : f;
        }
      }
    }
    if (unfinished < 0.5) past_half = true;
    quiet = (past_half && t * unfinished < 1e-17) ? quiet + 1 : 0;
    if (quiet >= 3) break;
  }

  for (size_t q = 0; q < parts.size(); ++q) {
    const Part& pt = parts[q];
    for (int s = 0; s < pt.sets; ++s) {
      const double* tail = &pt.tail[static_cast<size_t>(s) * (k + 1)];
      std::vector<double> ge(k + 2, 0.0);  // P(X >= j)
      ge[0] = 1;
      for (int j = 1; j <= k; ++j) ge[j] = std::clamp(h * tail[j], 0.0, ge[j - 1]);
      Pmf pmf(k + 1);
      for (int j = 0; j <= k; ++j) pmf[j] = ge[j] - ge[j + 1];
      out[q].push_back(pmf);
    }
  }
  return out;
}

// Per-token count laws of each set of each partition, whatever the process (balanced counts as
// uniform: its per-token picks are uniform, only the totals are forced).
std::vector<std::vector<Pmf>> count_pmfs(const Process& p, const std::vector<Bounds>& partitions) {
  if (p.kind == Process::Kind::plackett_luce) return plackett_luce_pmfs(p.shares, p.top_k, partitions);
  std::vector<std::vector<Pmf>> out;
  for (const Bounds& b : partitions) {
    std::vector<Pmf> sets;
    for (size_t s = 0; s + 1 < b.size(); ++s) sets.push_back(subset_pmf(p, b[s], b[s + 1]));
    out.push_back(std::move(sets));
  }
  return out;
}

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

// A load: mean, standard deviation, skewness.
struct Normal {
  double mean = 0, sd = 0, skew = 0;
  bool operator==(const Normal&) const = default;
};

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

// How the loads of one partition (ranks or experts) are modelled: two-level when uniform
// group-limited routing correlates members of a group, else independent surrogates.
struct LoadModel {
  bool two_level = false;
  int n = 0, G = 0;  // two_level: G groups of n exchangeable sets
  double mean = 0, a = 0, b = 0, third = 0;  // two_level: third cumulant of a member's surrogate
  std::vector<Normal> sets;                  // independent: per set
};

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

// ---------------------------------------------------------------- padding to a tile
// For m ~ Binomial(T, p) and c = ceil(m / tile) * tile: E[c], and c's regression on m
// (slope beta, residual variance). When sd(m) >= 2 tiles, m mod tile is uniform to within
// exp(-2 pi^2 sd^2 / tile^2) < 1e-34, so the padding is independent of m with mean (tile - 1)/2 and
// variance (tile^2 - 1)/12 (integer rows); otherwise the pmf is summed outward from the mode by the
// ratio recurrence and normalized by its own sum.
struct PaddedRows {
  double mean = 0, slope = 0, residual_var = 0, rows_var = 0;
};

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

// Law of ceil(m / tile) for m ~ Binomial(T, p): mass[i] = P(ceil(m / tile) = first + i), summed
// outward from the mode as in padded_rows and normalized by its own sum.
struct TileLaw {
  int64_t first = 0;
  std::vector<double> mass;
};

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

// Independent blocks; block b's maximum has P(max <= d) = sum_i weight_i F_i(d)^members (a mixture
// over a common factor of `members` iid variables). E[max] = lo + sum_{d >= lo} (1 - P(max <= d)),
// lo the smallest value the maximum can take.
struct LatticeBlock {
  std::vector<double> weight;
  std::vector<TileLaw> law;
  int members = 1;
};

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
    std::vector<TileLaw> law;
    for (size_t e = 0; e < per_expert.size(); ++e)  // uniform routing: one law for all experts
      law.push_back(e > 0 && per_expert[e][1] == per_expert[e - 1][1] ? law.back()
                                                                      : tile_law(tokens, per_expert[e][1], tile));
    for (int q = 0; q < ranks; ++q) {
      TileLaw sum{0, {1.0}};
      for (int e = q * per_rank; e < (q + 1) * per_rank; ++e) sum = convolve(sum, law[e]);
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

}  // namespace

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
    l.expected_max_rank_rows = l.mean_rank_rows;
    l.expected_max_expert_rows = T * top_k / experts;
    l.imbalance = 1;
    return l;
  }
  const auto pmfs = count_pmfs(p, {by_expert, by_rank});
  for (const Pmf& x : pmfs[1]) l.expected_distinct_ranks += 1 - x[0];
  if (tokens == 0) return l;
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
