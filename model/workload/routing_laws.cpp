// The routing process and per-token count laws (routing_laws.h): hypergeometric for uniform
// routing, Plackett-Luce through exponential clocks for shares, group-limited mixing.
#include "model/workload/routing_laws.h"

#include <map>
#include <mutex>
#include <tuple>

namespace moeperf::routing_detail {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("routing: " + what); }

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
  p.shares = draw_weights(r, experts, top_k);
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

Bounds blocks(int experts, int block) {
  Bounds b;
  for (int e = 0; e < experts; e += block) b.push_back(e);
  b.push_back(experts);
  return b;
}

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

namespace {

std::vector<CountLaw> simulate_group_law(int per, int G, int M, int k) {
  constexpr int kTokens = 1 << 14;
  SplitMix64 rng(0x6d6f657065726621ull);  // deterministic: the same table on every run and library
  const int E = per * G;
  std::vector<double> score(static_cast<size_t>(E));
  std::vector<std::pair<double, int>> group(static_cast<size_t>(G));
  std::vector<std::pair<double, int>> pool;
  std::map<std::vector<int>, double> sorted;  // descending counts of the kept groups
  for (int t = 0; t < kTokens; ++t) {
    for (double& x : score) x = 1.0 / (1.0 + std::exp(-rng.normal()));  // sigmoid of a logit
    for (int g = 0; g < G; ++g) {
      double a = -1, b = -1;  // the group's two highest
      for (int e = g * per; e < (g + 1) * per; ++e) {
        const double x = score[static_cast<size_t>(e)];
        if (x > a) b = a, a = x;
        else if (x > b) b = x;
      }
      group[static_cast<size_t>(g)] = {a + (per > 1 ? b : 0.0), g};
    }
    std::partial_sort(group.begin(), group.begin() + M, group.end(), std::greater<>());
    pool.clear();
    for (int i = 0; i < M; ++i)
      for (int e = group[static_cast<size_t>(i)].second * per; e < (group[static_cast<size_t>(i)].second + 1) * per; ++e)
        pool.push_back({score[static_cast<size_t>(e)], i});
    std::nth_element(pool.begin(), pool.begin() + (k - 1), pool.end(), std::greater<>());
    std::vector<int> counts(static_cast<size_t>(M), 0);
    for (int i = 0; i < k; ++i) ++counts[static_cast<size_t>(pool[static_cast<size_t>(i)].second)];
    std::sort(counts.begin(), counts.end(), std::greater<>());
    sorted[counts] += 1.0 / kTokens;
  }
  // Kept groups are exchangeable: each sorted composition spread evenly over its arrangements, and
  // the law of m given kept groups is that of the first m places.
  std::vector<std::map<std::vector<int>, double>> marg(static_cast<size_t>(M + 1));
  for (const auto& [desc, q] : sorted) {
    std::vector<int> c(desc.rbegin(), desc.rend());  // ascending: next_permutation walks them all
    std::vector<std::vector<int>> arrangements;
    do arrangements.push_back(c);
    while (std::next_permutation(c.begin(), c.end()));
    for (const auto& a : arrangements)
      for (int m = 0; m <= M; ++m) marg[static_cast<size_t>(m)][std::vector<int>(a.begin(), a.begin() + m)] += q / static_cast<double>(arrangements.size());
  }
  std::vector<CountLaw> out(static_cast<size_t>(M + 1));
  for (int m = 0; m <= M; ++m) out[static_cast<size_t>(m)].assign(marg[static_cast<size_t>(m)].begin(), marg[static_cast<size_t>(m)].end());
  return out;
}

}  // namespace

const std::vector<CountLaw>& group_count_law(int per_group, int groups, int topk_groups, int top_k) {
  static std::map<std::tuple<int, int, int, int>, std::vector<CountLaw>> cache;
  static std::mutex mu;
  const auto key = std::make_tuple(per_group, groups, topk_groups, top_k);
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto law = simulate_group_law(per_group, groups, topk_groups, top_k);
  const std::lock_guard<std::mutex> lock(mu);
  return cache.try_emplace(key, std::move(law)).first->second;  // std::map: references stay valid
}

// Picks uniform over the kept groups' pooled experts (the law for more than kMaxRuleGroups kept
// groups): given the kept groups the count is hypergeometric over the pool; the number of the set's
// experts in the pool follows from which of the groups overlapping the set are kept.
Pmf pooled_subset_pmf(const Process& p, const std::vector<int>& overlap, int size) {
  const int k = p.top_k, G = p.groups, M = p.topk_groups, per = p.experts / G, pool = M * per;
  const int I = static_cast<int>(overlap.size());
  std::vector<std::vector<double>> ways(I + 1, std::vector<double>(size + 1, 0.0));  // [m][n]
  ways[0][0] = 1;
  for (int c : overlap)
    for (int m = I; m >= 1; --m)
      for (int n = size; n >= c; --n) ways[m][n] += ways[m - 1][n - c];
  Pmf pmf(k + 1, 0.0);
  const double all = log_choose(G, M);
  for (int m = 0; m <= std::min(I, M); ++m) {
    const double rest = std::exp(log_choose(G - I, M - m) - all);
    if (rest == 0) continue;
    for (int n = 0; n <= size; ++n) {
      if (ways[m][n] == 0) continue;
      for (int j = 0; j <= k; ++j) pmf[j] += ways[m][n] * rest * hypergeometric(pool, n, k, j);
    }
  }
  return pmf;
}

Pmf subset_pmf(const Process& p, int begin, int end) {
  const int E = p.experts, k = p.top_k, G = p.groups, M = p.topk_groups, per = E / G;
  Pmf pmf(k + 1, 0.0);
  if (G <= 1) {
    for (int j = 0; j <= k; ++j) pmf[j] = hypergeometric(E, end - begin, k, j);
    return pmf;
  }
  std::vector<int> overlap;  // experts of the set in each group it overlaps
  for (int g = begin / per; g * per < end; ++g)
    overlap.push_back(std::min(end, (g + 1) * per) - std::max(begin, g * per));
  if (M > kMaxRuleGroups) return pooled_subset_pmf(p, overlap, end - begin);
  const int I = static_cast<int>(overlap.size());
  // The overlapping groups by overlap size (whole groups inside the set, at most two partial ends):
  // which of them are kept is enumerated per size class, j of its n kept in C(n, j) ways.
  std::map<int, int> by_size;
  for (int o : overlap) ++by_size[o];
  const std::vector<std::pair<int, int>> classes(by_size.begin(), by_size.end());
  const std::vector<CountLaw>& law = group_count_law(per, G, M, k);
  const double all = log_choose(G, M);
  std::vector<int> kept(classes.size(), 0);
  // Each choice of kept overlapping groups (the other M - m from the G - I others), the picks in
  // them by the law of m kept groups, hypergeometric inside each.
  auto visit = [&](auto&& self, size_t c, int m, double ways) -> void {
    if (c == classes.size()) {
      const double chosen = ways * std::exp(log_choose(G - I, M - m) - all);
      if (chosen == 0) return;
      std::vector<int> in;
      for (size_t i = 0; i < classes.size(); ++i) in.insert(in.end(), static_cast<size_t>(kept[i]), classes[i].first);
      for (const auto& [counts, q] : law[static_cast<size_t>(m)]) {
        Pmf x(k + 1, 0.0);
        x[0] = 1;
        for (size_t i = 0; i < in.size(); ++i) {
          if (counts[i] == 0) continue;
          Pmf y(k + 1, 0.0);
          for (int u = 0; u <= k; ++u) {
            if (x[u] == 0) continue;
            for (int v = 0; v <= counts[i] && u + v <= k; ++v) y[u + v] += x[u] * hypergeometric(per, in[i], counts[i], v);
          }
          x.swap(y);
        }
        for (int j = 0; j <= k; ++j) pmf[j] += chosen * q * x[j];
      }
      return;
    }
    for (int j = 0; j <= classes[c].second && m + j <= M; ++j) {
      kept[c] = j;
      self(self, c + 1, m + j, ways * std::exp(log_choose(classes[c].second, j)));
    }
  };
  visit(visit, 0, 0, 1.0);
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

}  // namespace moeperf::routing_detail
