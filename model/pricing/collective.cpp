// Collective algorithms as traffic on the topology. Every GPU pair's route is classed by the
// graph: same NVLink domain (NVLink through the switch chips), same leaf, same pod, or across the
// core. ECMP splits a flow evenly over parallel equal links (or in proportion to their bandwidth),
// so a GPU's NVLink links, its NIC, and a leaf's uplinks each carry the sums computed here; the
// most loaded of each class sets that resource's seconds per byte.
#include "model/pricing/collective.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string_view>

#include "model/workload/step.h"

namespace moeperf {
namespace {

// Dense slots for a set of ids (a group's GPUs, their leaves): a direct table over the ids' range
// when it is not much wider than the set, else a binary search.
class Slots {
 public:
  explicit Slots(std::vector<int64_t> ids) : keys_(std::move(ids)) {
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    if (keys_.empty()) return;
    const int64_t range = keys_.back() - keys_.front() + 1;
    if (range <= 16 * static_cast<int64_t>(keys_.size()) + 4096) {
      table_.assign(static_cast<size_t>(range), -1);
      for (size_t i = 0; i < keys_.size(); ++i) table_[static_cast<size_t>(keys_[i] - keys_.front())] = static_cast<int32_t>(i);
    }
  }
  size_t size() const { return keys_.size(); }
  int64_t key(size_t slot) const { return keys_[slot]; }
  size_t operator()(int64_t id) const {
    if (!table_.empty()) {
      const int64_t off = id - keys_.front();
      if (off >= 0 && off < static_cast<int64_t>(table_.size()) && table_[static_cast<size_t>(off)] >= 0)
        return static_cast<size_t>(table_[static_cast<size_t>(off)]);
    } else if (const auto it = std::lower_bound(keys_.begin(), keys_.end(), id); it != keys_.end() && *it == id) {
      return static_cast<size_t>(it - keys_.begin());
    }
    throw std::logic_error("collective pricing: an endpoint outside the group");
  }

 private:
  std::vector<int64_t> keys_;
  std::vector<int32_t> table_;
};

std::vector<int64_t> leaves_of(const Topology& t, const std::vector<int64_t>& members) {
  std::vector<int64_t> out;
  out.reserve(members.size());
  for (int64_t m : members) out.push_back(t.leaf_of(m));
  return out;
}

// A collective's bytes per GPU and per leaf switch, summed over its steps. Every endpoint is a
// member of the group, so the sums are dense arrays over the members (and their leaves): a ring
// over thousands of GPUs adds a hundred thousand edges, and a hash map cost more than the pricing.
struct Loads {
  Slots gpu, leaf;
  std::vector<double> nvl_out, nvl_in, nic_out, nic_in;  // per member GPU
  std::vector<double> leaf_up, leaf_down;                 // per leaf
  std::vector<int64_t> flows_up, flows_down;              // flows crossing each leaf
  std::vector<int64_t> members_on_leaf;                   // the group's GPUs whose NIC is on each leaf
  Seconds max_latency;      // of any step added
  Seconds nvl_latency;      // of an NVLink step
  Seconds net_latency;      // of the slowest network step

  Loads(const Topology& t, const std::vector<int64_t>& members) : gpu(members), leaf(leaves_of(t, members)) {
    for (auto* v : {&nvl_out, &nvl_in, &nic_out, &nic_in}) v->assign(gpu.size(), 0.0);
    leaf_up.assign(leaf.size(), 0.0), leaf_down.assign(leaf.size(), 0.0);
    flows_up.assign(leaf.size(), 0), flows_down.assign(leaf.size(), 0);
    members_on_leaf.assign(leaf.size(), 0);
    if (t.fabric_tiers() > 0)
      for (int64_t m : members) ++members_on_leaf[leaf(t.leaf_of(m))];
  }

  void add(const Topology& t, int64_t a, int64_t b, double bytes, const std::map<int, Seconds>& hop_latency) {
    if (a == b || bytes == 0) return;
    const size_t ia = gpu(a), ib = gpu(b);
    if (t.domain_of(a) == t.domain_of(b) && t.nvlink_bandwidth_per_gpu().value() > 0) {
      nvl_out[ia] += bytes;
      nvl_in[ib] += bytes;
      max_latency = std::max(max_latency, hop_latency.at(2));
      nvl_latency = std::max(nvl_latency, hop_latency.at(2));
      return;
    }
    nic_out[ia] += bytes;
    nic_in[ib] += bytes;
    const int64_t la = t.leaf_of(a), lb = t.leaf_of(b);
    int hops = 4;
    if (la != lb) {
      const size_t ua = leaf(la), ub = leaf(lb);
      leaf_up[ua] += bytes;
      leaf_down[ub] += bytes;
      ++flows_up[ua];
      ++flows_down[ub];
      hops = t.pod_of(a) == t.pod_of(b) ? 6 : 8;
    }
    auto it = hop_latency.find(hops);
    if (it != hop_latency.end()) {
      max_latency = std::max(max_latency, it->second);
      net_latency = std::max(net_latency, it->second);
    }
  }
};

// A direct all-to-all: add(a, b, bytes) for each of the members' n (n - 1) ordered pairs, in
// closed form. A pair's class (NVLink inside one domain; else the NIC, on one leaf, on another
// leaf of the pod, or in another pod) follows from the two GPUs' domain, leaf and pod, so each
// member's loads are its counts of peers per class: O(n log n) where the pairs took O(n^2) (131,072
// GPUs: milliseconds, not minutes). Leaves nest in pods, as the topology builds them.
void add_all_pairs(Loads& L, const Topology& t, const std::vector<int64_t>& members, double bytes,
                   const std::map<int, Seconds>& hop_latency) {
  const int64_t n = static_cast<int64_t>(members.size());
  if (n < 2 || bytes == 0) return;
  const bool nvl = t.nvlink_bandwidth_per_gpu().value() > 0;
  std::map<int64_t, int64_t> in_dom, in_leaf, in_pod;
  std::map<std::pair<int64_t, int64_t>, int64_t> dom_leaf, dom_pod;
  for (int64_t m : members) {
    const int64_t d = t.domain_of(m), l = t.leaf_of(m), p = t.pod_of(m);
    ++in_dom[d], ++in_leaf[l], ++in_pod[p], ++dom_leaf[{d, l}], ++dom_pod[{d, p}];
  }
  bool nvl_pairs_seen = false, hop[9] = {};
  for (int64_t m : members) {
    const int64_t d = t.domain_of(m), l = t.leaf_of(m), p = t.pod_of(m);
    const size_t i = L.gpu(m);
    const int64_t over_nvl = nvl ? in_dom[d] - 1 : 0;  // peers in its domain
    const int64_t over_nic = n - 1 - over_nvl;
    // Of the NIC's peers: those on another leaf, and of these those in another pod (peers of its own
    // domain elsewhere go over NVLink, not counted).
    const int64_t other_leaf = n - in_leaf[l] - (nvl ? in_dom[d] - dom_leaf[{d, l}] : 0);
    const int64_t other_pod = n - in_pod[p] - (nvl ? in_dom[d] - dom_pod[{d, p}] : 0);
    const double b_nvl = static_cast<double>(over_nvl) * bytes, b_nic = static_cast<double>(over_nic) * bytes;
    L.nvl_out[i] += b_nvl, L.nvl_in[i] += b_nvl;  // the relation is symmetric: as many peers send to it
    L.nic_out[i] += b_nic, L.nic_in[i] += b_nic;
    if (other_leaf > 0) {
      const size_t u = L.leaf(l);
      L.leaf_up[u] += static_cast<double>(other_leaf) * bytes, L.leaf_down[u] += static_cast<double>(other_leaf) * bytes;
      L.flows_up[u] += other_leaf, L.flows_down[u] += other_leaf;
    }
    nvl_pairs_seen = nvl_pairs_seen || over_nvl > 0;
    hop[4] = hop[4] || over_nic - other_leaf > 0;
    hop[6] = hop[6] || other_leaf - other_pod > 0;
    hop[8] = hop[8] || other_pod > 0;
  }
  if (nvl_pairs_seen) {
    L.max_latency = std::max(L.max_latency, hop_latency.at(2));
    L.nvl_latency = std::max(L.nvl_latency, hop_latency.at(2));
  }
  for (int h : {4, 6, 8})
    if (auto it = hop_latency.find(h); hop[h] && it != hop_latency.end()) {
      L.max_latency = std::max(L.max_latency, it->second);
      L.net_latency = std::max(L.net_latency, it->second);
    }
}

double max_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, x);
  return m;
}

// Latency of one algorithm step per pair class (2: NVLink; 4, 6, 8: network through 1, 3, 5
// switches): the software step of the library (nvlink_step_s, network_step_s) with the route's wire
// and switch latency, from one representative route on the graph per class, as its floor.
std::map<int, Seconds> hop_latencies(const Topology& t, const std::vector<int64_t>& members, const Calibration& cal) {
  std::map<int, Seconds> out;
  const int64_t a = members.front();
  for (int64_t b : members) {
    if (b == a) continue;
    int cls = 2;
    if (t.domain_of(a) != t.domain_of(b))
      cls = t.leaf_of(a) == t.leaf_of(b) ? 4 : t.pod_of(a) == t.pod_of(b) ? 6 : 8;
    if (!out.count(cls)) out[cls] = t.route(a, b).latency;
  }
  // Classes the first member does not see from its position (e.g. a ring edge between two other leaves).
  for (int cls : {2, 4, 6, 8})
    if (!out.count(cls) && !out.empty()) out[cls] = out.rbegin()->second;
  for (auto& [cls, l] : out)
    l = std::max(l, Seconds(cal[cls == 2 ? Param::nvlink_step_s : Param::network_step_s]));
  return out;
}

// Ring orders for multi-domain groups: one channel per member of a domain, each rotated so that
// every channel leaves the domain from a different GPU (NCCL builds rail-aligned rings so every
// NIC carries traffic). A group inside one domain uses one ring.
std::vector<std::vector<int64_t>> rings(const Topology& t, const std::vector<int64_t>& members) {
  const auto per_domain = by_domain(t, members);
  if (per_domain.size() == 1) return {members};
  size_t channels = per_domain.front().size();
  for (auto& d : per_domain) channels = std::min(channels, d.size());
  // Channel c enters every domain and leaves it at the same local index (the same rail), so its
  // bytes cross between domains on one rail's leaves: even domains are walked up from local index
  // c (leaving at c - 1), odd ones down from c - 1 (leaving at c). With an even number of domains
  // the closing edge is aligned too; with an odd number that one edge changes rails.
  std::vector<std::vector<int64_t>> out(channels);
  for (size_t c = 0; c < channels; ++c)
    for (size_t k = 0; k < per_domain.size(); ++k) {
      const auto& d = per_domain[k];
      const size_t g = d.size();
      for (size_t i = 0; i < g; ++i)
        out[c].push_back(k % 2 == 0 ? d[(c + i) % g] : d[(c + 2 * g - 1 - i) % g]);
    }
  return out;
}

// Seconds per byte of each resource: its most loaded link's load over the achieved bandwidth.
// With `nvls` the NVLink loads are the switch's multicast and reduction traffic (NVLink SHARP),
// which runs at its own efficiency.
void set_rates(CollectiveCost& cost, const Loads& loads, const Topology& t, const Calibration& cal, bool nvls = false) {
  const double nvl = t.nvlink_bandwidth_per_gpu().value() * cal[nvls ? Param::nvls_fraction : Param::nvlink_fraction];
  const double nic = t.scaleout_bandwidth_per_gpu().value() * cal[Param::ib_fraction];
  const double up = t.leaf_uplink_bandwidth().value() * cal[Param::ib_fraction];
  auto& s = cost.s_per_byte;
  if (nvl > 0) s[static_cast<int>(Resource::nvlink)] = std::max(max_of(loads.nvl_out), max_of(loads.nvl_in)) / nvl;
  if (nic > 0) s[static_cast<int>(Resource::nic)] = std::max(max_of(loads.nic_out), max_of(loads.nic_in)) / nic;
  if (up > 0) {
    double load = std::max(max_of(loads.leaf_up), max_of(loads.leaf_down));
    if (!t.adaptive_routing() && t.leaf_uplinks() > 1) {
      // Static ECMP: each flow is hashed to one uplink (and each spine's downlink), so the busiest
      // link carries E[max] of the flows over U links, not their mean: this group's load times
      // E[max] / (F / U), flows taken as equal. The other groups of the same kind run the same
      // collective at the same time and hash onto the same uplinks: a leaf with d of the job's
      // GPUs, m of them this group's, carries d / m times this group's F flows (the groups laid out
      // alike), so the busiest uplink holds E[max] of F d / m flows, each of this group's size.
      const int u = t.leaf_uplinks();
      auto worst = [&](const std::vector<double>& bytes, const std::vector<int64_t>& flows) {
        double v = 0;
        for (size_t i = 0; i < bytes.size(); ++i)
          if (flows[i] > 0) {
            const double m = static_cast<double>(std::max<int64_t>(1, loads.members_on_leaf[i]));
            const double d = std::max(m, static_cast<double>(t.gpus_on_leaf(loads.leaf.key(i))));
            v = std::max(v, bytes[i] * ecmp_collision_factor(flows[i], u, d / m));
          }
        return v;
      };
      load = std::max(worst(loads.leaf_up, loads.flows_up), worst(loads.leaf_down, loads.flows_down));
    }
    s[static_cast<int>(Resource::fabric)] = load / up;
  }
}

}  // namespace

// The members split by NVLink domain, in member order (members are sorted by GPU id, so each
// domain's members are consecutive).
std::vector<std::vector<int64_t>> by_domain(const Topology& t, const std::vector<int64_t>& members) {
  std::vector<std::vector<int64_t>> per_domain;
  int64_t cur = -1;
  for (int64_t m : members) {
    if (per_domain.empty() || t.domain_of(m) != cur) {
      per_domain.emplace_back();
      cur = t.domain_of(m);
    }
    per_domain.back().push_back(m);
  }
  return per_domain;
}

double expected_max_balls(int64_t balls, int bins) {
  if (balls <= 0 || bins <= 0) return 0.0;
  if (bins == 1) return static_cast<double>(balls);
  static std::map<std::pair<int64_t, int>, double> cache;
  static std::mutex mu;
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find({balls, bins}); it != cache.end()) return it->second;
  }
  double e = 0;
  const double mean = static_cast<double>(balls) / bins;
  if (balls <= 200) {
    // Exact: P(max <= m) = n! [x^n] (sum_{j<=m} x^j / (j! U^j))^U, as a binomial convolution
    // c_n = sum_i C(n, i) a_i b_(n-i) of probability-like terms (no overflow), raised to the U-th
    // power by squaring; E[max] = sum_m P(max > m).
    const int64_t n = balls;
    std::vector<std::vector<double>> binom(static_cast<size_t>(n + 1));
    for (int64_t i = 0; i <= n; ++i) {
      binom[static_cast<size_t>(i)].assign(static_cast<size_t>(i + 1), 1.0);
      for (int64_t j = 1; j < i; ++j)
        binom[static_cast<size_t>(i)][static_cast<size_t>(j)] =
            binom[static_cast<size_t>(i - 1)][static_cast<size_t>(j - 1)] + binom[static_cast<size_t>(i - 1)][static_cast<size_t>(j)];
    }
    auto mul = [&](const std::vector<double>& a, const std::vector<double>& b) {
      std::vector<double> c(static_cast<size_t>(n + 1), 0.0);
      for (int64_t k = 0; k <= n; ++k) {
        double s = 0;
        for (int64_t i = 0; i <= k; ++i)
          s += binom[static_cast<size_t>(k)][static_cast<size_t>(i)] * a[static_cast<size_t>(i)] * b[static_cast<size_t>(k - i)];
        c[static_cast<size_t>(k)] = s;
      }
      return c;
    };
    for (int64_t m = static_cast<int64_t>(std::ceil(mean)) - 1; m < n; ++m) {
      if (m < 0) continue;
      std::vector<double> a(static_cast<size_t>(n + 1), 0.0), r(static_cast<size_t>(n + 1), 0.0);
      for (int64_t j = 0; j <= std::min(m, n); ++j) a[static_cast<size_t>(j)] = std::pow(1.0 / bins, static_cast<double>(j));
      r[0] = 1.0;
      for (int p = bins; p > 0; p >>= 1) {
        if (p & 1) r = mul(r, a);
        if (p > 1) a = mul(a, a);
      }
      const double below = r[static_cast<size_t>(n)];  // P(max <= m)
      e += 1.0 - below;
      if (1.0 - below < 1e-12) break;
    }
    // The terms for m below ceil(mean) - 1 are 1 each (the maximum is at least the mean).
    e += std::max(0.0, std::ceil(mean) - 1.0);
  } else {
    // Many flows: Poissonized, each link's count an independent Poisson of mean F / U, whose
    // maximum is exact on the integer lattice: E[max] = sum_m (1 - P(N <= m)^U). Against the exact
    // law: 106.153 for 201 flows on 2 links (exact 106.163), 9.486 for 288 on 72 (exact 9.488);
    // the fixed total hardly matters, where a normal of variance F p (1 - p) missed the counts'
    // skew and their spread (8.74 for 288 on 72, and it fell from 19.11 to 18.62 as 200 flows on
    // 16 links became 201). Terms 10 sd or more below the mean are 1 each (the Poisson's mass
    // there is below 1e-23); the PMF is built upwards from there, its first term in logs.
    const double lambda = mean;
    const double start = std::max(0.0, std::floor(lambda - 10 * std::sqrt(lambda)));
    e = start;
    int sign = 0;  // lgamma_r: no global signgam written beside other threads
    double pmf = std::exp(start * std::log(lambda) - lambda - lgamma_r(start + 1, &sign)), cdf = pmf;
    // Past 12 sd above the mean the terms are below 1e-30 x bins even where the CDF's rounding
    // leaves it a hair under 1 (which would keep `above` from falling under the tolerance).
    const double end = std::min(static_cast<double>(balls), lambda + 12 * std::sqrt(lambda) + 10);
    for (double m = start; m < end; ++m) {
      const double above = 1.0 - std::pow(cdf, bins);
      e += above;
      if (m > lambda && above < 1e-12) break;
      pmf *= lambda / (m + 1);
      cdf += pmf;
    }
  }
  const std::lock_guard<std::mutex> lock(mu);
  cache[{balls, bins}] = e;
  return e;
}

double ecmp_collision_factor(int64_t flows, int uplinks, double concurrent) {
  if (flows <= 0 || uplinks <= 1) return 1.0;
  const auto all = std::max<int64_t>(flows, std::llround(static_cast<double>(flows) * std::max(1.0, concurrent)));
  return expected_max_balls(all, uplinks) / (static_cast<double>(flows) / uplinks);
}

const char* to_string(Resource r) {
  switch (r) {
    case Resource::nvlink: return "nvlink";
    case Resource::nic: return "nic";
    case Resource::fabric: return "fabric";
    case Resource::host: return "host";
    case Resource::kCount: break;
  }
  return "?";
}

CollectiveCost CollectiveCost::at(Bytes b) const {
  CollectiveCost c = *this;
  if (cache_speedup != 1 && cache_bytes > 0)
    c.s_per_byte[static_cast<int>(Resource::nvlink)] /= 1 + (cache_speedup - 1) * cache_bytes / (cache_bytes + b.value());
  c.cache_speedup = 1;
  return c;
}

Seconds CollectiveCost::time(Bytes b) const { return latency + Seconds(b.value() * at(b).bottleneck_s_per_byte()); }

double CollectiveCost::own_bottleneck_s_per_byte() const {
  return *std::max_element(own_s_per_byte.begin(), own_s_per_byte.end());
}

double CollectiveCost::bottleneck_s_per_byte() const {
  return std::max(own_bottleneck_s_per_byte(), *std::max_element(s_per_byte.begin(), s_per_byte.end()));
}

double bus_factor(Collective c, int64_t n) {
  const double f = n > 0 ? static_cast<double>(n - 1) / static_cast<double>(n) : 0.0;
  switch (c) {
    case Collective::all_reduce: return 2 * f;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return f;
    default: return 1.0;
  }
}

int64_t group_size(Group g, const Parallelism& p) {
  if (p.folded) {
    switch (g) {
      case Group::dp:
      case Group::dense_dp: return p.cp * p.dp;
      case Group::expert_dp: return p.expert_data_parallel();
      case Group::etp: return p.etp;
      case Group::fsdp: return 1;
      case Group::dense_shard: return p.ep;
      default: break;
    }
  }
  switch (g) {
    case Group::none: return 1;
    case Group::tp: return p.tp;
    case Group::cp: return p.cp;
    case Group::ep: return p.ep;
    case Group::fsdp: return p.fsdp;
    case Group::dense_shard: return p.ep * p.fsdp;
    case Group::dp: return p.cp * p.dp;
    case Group::dense_dp: return p.cp * p.ep * p.dp;
    case Group::pp: return p.pp;
    case Group::expert_dp: return p.tp * p.cp * p.dp;
    case Group::etp: return 1;
  }
  return 1;
}

std::vector<int64_t> group_members(Group g, const Parallelism& p, int64_t rank) {
  // Strides of the mesh axes, innermost first: tp, cp, ep, fsdp, dp, pp.
  const int64_t s_tp = 1, s_cp = p.tp, s_ep = s_cp * p.cp, s_fsdp = s_ep * p.ep, s_dp = s_fsdp * p.fsdp,
                s_pp = s_dp * p.dp;
  std::vector<std::pair<int64_t, int64_t>> axes;  // (stride, size)
  if (p.folded) {
    // Dense mesh tp, cp, dp, pp; expert mesh etp, ep, edp over the same GPUs of a stage.
    const int64_t stage = p.stage_gpus();
    switch (g) {
      case Group::none: return {rank};
      case Group::tp: axes = {{1, p.tp}}; break;
      case Group::cp: axes = {{p.tp, p.cp}}; break;
      case Group::dp:
      case Group::dense_dp: axes = {{p.tp, p.cp * p.dp}}; break;  // cp and dp, adjacent
      case Group::pp: axes = {{stage, p.pp}}; break;
      case Group::etp: axes = {{1, p.etp}}; break;
      case Group::ep:
      case Group::dense_shard: axes = {{p.etp, p.ep}}; break;
      case Group::expert_dp: axes = {{p.etp * p.ep, p.expert_data_parallel()}}; break;
      case Group::fsdp: return {rank};
    }
  } else {
  switch (g) {
    case Group::none: return {rank};
    case Group::tp: axes = {{s_tp, p.tp}}; break;
    case Group::cp: axes = {{s_cp, p.cp}}; break;
    case Group::ep: axes = {{s_ep, p.ep}}; break;
    case Group::fsdp: axes = {{s_fsdp, p.fsdp}}; break;
    case Group::dense_shard: axes = {{s_ep, p.ep}, {s_fsdp, p.fsdp}}; break;
    case Group::dp: axes = {{s_cp, p.cp}, {s_dp, p.dp}}; break;
    // The experts' replicas: tp and cp (adjacent axes) and dp, FSDP having reduce-scattered its own.
    case Group::expert_dp: axes = {{s_tp, p.tp * p.cp}, {s_dp, p.dp}}; break;
    case Group::dense_dp: axes = {{s_cp, p.cp}, {s_ep, p.ep}, {s_dp, p.dp}}; break;
    case Group::pp: axes = {{s_pp, p.pp}}; break;
    case Group::etp: return {rank};
  }
  }
  // The coordinates of `rank` on the group's axes are zeroed, then every combination is enumerated.
  int64_t base = rank;
  for (auto [stride, size] : axes) base -= ((rank / stride) % size) * stride;
  std::vector<int64_t> out{base};
  for (auto [stride, size] : axes) {
    std::vector<int64_t> next;
    for (int64_t i = 0; i < size; ++i)
      for (int64_t b : out) next.push_back(b + i * stride);
    out.swap(next);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> widest_group(Group g, const Parallelism& p, const Topology& t, int64_t gpus) {
  std::vector<int64_t> best = group_members(g, p, 0);
  if (best.size() <= 1 || t.gpus() < gpus) return best;
  // Slower: more domains, then a smaller piece in one of them (a ring runs as many channels across
  // domains as the smallest piece has GPUs).
  auto score = [&](const std::vector<int64_t>& m) {
    int64_t n = 0, prev = -1, piece = 0, smallest = std::numeric_limits<int64_t>::max();
    for (int64_t x : m) {  // members are sorted and a domain holds consecutive GPUs
      const int64_t d = t.domain_of(x);
      if (d != prev && prev >= 0) smallest = std::min(smallest, piece), piece = 0;
      n += d != prev;
      prev = d;
      ++piece;
    }
    smallest = std::min(smallest, piece);
    return std::make_pair(n, -smallest);
  };
  auto most = score(best);
  // The groups of the first pipeline stage (the stage rank 0 is in; the pricer is not per stage).
  // EP groups over every stage (expert_load counts the widest of them too; a later stage's group
  // that straddles a domain holds its stage, and the step, back).
  const int64_t ranks = g == Group::ep ? gpus : std::min(gpus, p.stage_gpus());
  std::vector<char> seen(static_cast<size_t>(ranks), 0);
  for (int64_t r = 0; r < ranks; ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    std::vector<int64_t> m = group_members(g, p, r);
    for (int64_t x : m)
      if (x >= 0 && x < ranks) seen[static_cast<size_t>(x)] = 1;
    if (const auto sc = score(m); sc > most) most = sc, best = std::move(m);
  }
  return best;
}

namespace {

// collective_cost, with `pairwise`: a direct all-to-all's pairs added one by one (the reference of
// the closed form, detail::all_to_all_direct_pairwise).
CollectiveCost collective_cost_impl(Collective c, const std::vector<int64_t>& members, const Topology& t,
                                    const Calibration& cal, bool allow_nvls, bool pairwise) {
  CollectiveCost cost;
  const int64_t n = static_cast<int64_t>(members.size());
  cost.latency = Seconds(cal[Param::collective_launch_s]);
  if (n <= 1) {
    cost.algorithm = "local";
    return cost;
  }
  const auto lat = hop_latencies(t, members, cal);
  Loads loads(t, members);
  const double frac = static_cast<double>(n - 1) / static_cast<double>(n);
  bool one_domain = true;
  for (int64_t m : members) one_domain = one_domain && t.domain_of(m) == t.domain_of(members.front());
  // Host memory reduces nothing in its "switch": no NVLS there.
  const bool switched = t.count(VertexKind::nvswitch) > 0 && t.host_memory_bandwidth().value() == 0;
  // Steps of a ring over D domains: n - 1, of which D - 1 cross the network and n - D stay on
  // NVLink (NCCL's latency model counts them so); all-reduce makes twice as many.
  int64_t domains = 1;
  for (size_t i = 1; i < members.size(); ++i) domains += t.domain_of(members[i]) != t.domain_of(members[i - 1]);
  const int64_t ring_steps = n - 1;
  auto ring_latency = [&](int64_t phases) {
    // Without NVLink every step is a network step.
    const bool nvl = loads.nvl_latency.value() > 0;
    return nvl ? (loads.nvl_latency * static_cast<double>(n - domains) + loads.net_latency * static_cast<double>(domains - 1)) *
                     static_cast<double>(phases)
               : loads.net_latency * static_cast<double>(phases * (n - 1));
  };
  Seconds step_latency;  // the whole collective's steps, set per algorithm below
  bool nvls = false;
  auto ring_traffic = [&](double per_edge_total) {
    const auto rs = rings(t, members);
    const double per_channel = per_edge_total / static_cast<double>(rs.size());
    for (const auto& r : rs)
      for (size_t i = 0; i < r.size(); ++i) loads.add(t, r[i], r[(i + 1) % r.size()], per_channel, lat);
  };
  switch (c) {
    case Collective::all_gather:
    case Collective::reduce_scatter:
      // Ring: every edge carries (n-1)/n of the buffer over n-1 steps.
      ring_traffic(frac);
      cost.steps = static_cast<int>(ring_steps);
      step_latency = ring_latency(1);
      cost.algorithm = "ring";
      cost.hbm_bytes_per_byte = c == Collective::reduce_scatter ? 3.0 : 2.0;
      break;
    case Collective::all_reduce:
      if (one_domain && switched && allow_nvls) {
        // NVLink SHARP (NVLS), as NCCL runs it: each GPU reduces its 1/n shard in the switches
        // (multimem.ld_reduce: the switches read the shard from all n GPUs, so each GPU serves its
        // whole buffer, S, and receives the reduced shard, S/n), then multicasts the shard
        // (multimem.st: S/n out, every shard in, S). S(1 + 1/n) each way: algbw <= B n / (n + 1).
        const double each = 1.0 + 1.0 / static_cast<double>(n);
        for (int64_t m : members) {
          loads.nvl_out[loads.gpu(m)] += each;
          loads.nvl_in[loads.gpu(m)] += each;
        }
        cost.steps = 2;
        step_latency = Seconds(cal[Param::nvls_step_s]) * 2.0;
        cost.algorithm = "nvls";
        nvls = true;
      } else {
        ring_traffic(2 * frac);  // reduce-scatter then all-gather
        cost.steps = static_cast<int>(2 * ring_steps);
        step_latency = ring_latency(2);
        cost.algorithm = "ring";
        cost.hbm_bytes_per_byte = 5.0;
      }
      break;
    case Collective::all_to_all:
      // Direct: each member sends 1/(n-1) of its send buffer to every other member.
      if (pairwise) {
        for (int64_t a : members)
          for (int64_t b : members) loads.add(t, a, b, 1.0 / static_cast<double>(n - 1), lat);
      } else {
        add_all_pairs(loads, t, members, 1.0 / static_cast<double>(n - 1), lat);
      }
      cost.steps = 1;
      step_latency = loads.max_latency;
      if (t.host_memory_bandwidth().value() > 0) {
        // Over host memory each rank's one core copies its peers' blocks one after another (each a
        // point-to-point message with its own handshake): n - 1 steps, as a ring's.
        cost.steps = static_cast<int>(n - 1);
        step_latency = loads.max_latency * static_cast<double>(n - 1);
      }
      cost.algorithm = "direct";
      break;
    case Collective::send_recv:
      loads.add(t, members[0], members[1], 1.0, lat);
      cost.steps = 1;
      step_latency = loads.max_latency;
      cost.algorithm = "p2p";
      break;
    default:
      cost.algorithm = "none";
      return cost;
  }
  cost.latency += step_latency;
  set_rates(cost, loads, t, cal, nvls);
  // Over host memory a ring's reduction follows each step's transfer on the same core and the same
  // memory: each member adds (n - 1) blocks of size/n into its own, 3 bytes of traffic per byte
  // (read both, write one), at host_reduce_fraction of its memory bandwidth, on top of the copy.
  if (const double mem = t.host_memory_bandwidth().value();
      mem > 0 && cost.algorithm == std::string_view("ring") && (c == Collective::reduce_scatter || c == Collective::all_reduce))
    cost.s_per_byte[static_cast<int>(Resource::nvlink)] += 3.0 * frac / (mem * cal[Param::host_reduce_fraction]);
  if (t.host_memory_bandwidth().value() > 0) cost.cache_bytes = cal[Param::host_cache_bytes], cost.cache_speedup = cal[Param::host_cache_speedup];
  return cost;
}

}  // namespace

CollectiveCost collective_cost(Collective c, const std::vector<int64_t>& members, const Topology& t,
                               const Calibration& cal, bool allow_nvls) {
  return collective_cost_impl(c, members, t, cal, allow_nvls, false);
}

namespace detail {
CollectiveCost all_to_all_direct_pairwise(const std::vector<int64_t>& members, const Topology& t, const Calibration& cal) {
  return collective_cost_impl(Collective::all_to_all, members, t, cal, true, true);
}
}  // namespace detail

// NCCL's double binary tree over n nodes (src/graph/trees.cc: ncclGetBtree, ncclGetDtree): node r's
// parent, -1 for a root. Tree 0: the root 0 has one child, the highest power of two below n; a node
// with lowest set bit b hangs under (r ^ b) | 2b, or r ^ b when that is out of range. Tree 1: tree 0
// mirrored (r -> n - 1 - r) for even n, shifted by one rank for odd n.
int64_t nccl_btree_parent(int64_t n, int64_t r) {
  if (r == 0) return -1;
  int64_t bit = 1;
  while (bit < n && (bit & r) == 0) bit <<= 1;
  const int64_t up = (r ^ bit) | (bit << 1);
  return up < n ? up : r ^ bit;
}
int64_t nccl_dtree_parent(int64_t n, int64_t r, int tree) {
  if (tree == 0) return nccl_btree_parent(n, r);
  if (n % 2 == 1) {
    const int64_t u = nccl_btree_parent(n, (r - 1 + n) % n);
    return u < 0 ? -1 : (u + 1) % n;
  }
  const int64_t u = nccl_btree_parent(n, n - 1 - r);
  return u < 0 ? -1 : n - 1 - u;
}

CollectiveCost all_reduce_tree_cost(const std::vector<int64_t>& members, const Topology& t, const Calibration& cal,
                                    bool nvls) {
  CollectiveCost cost;
  cost.latency = Seconds(cal[Param::collective_launch_s]);
  cost.algorithm = nvls ? "nvls_tree" : "tree";
  const auto doms = by_domain(t, members);
  const int64_t D = static_cast<int64_t>(doms.size());
  if (members.size() <= 1) return cost;
  const auto lat = hop_latencies(t, members, cal);
  Loads loads(t, members);
  // Inside each domain a chain: an interior GPU receives the whole buffer and passes it on in the
  // reduce, and again in the broadcast: 2 buffers each way (the chain's two ends 1; the busiest
  // GPU sets the time). With NVLink SHARP the switches reduce and multicast: S(1 + 1/g) each way,
  // as for NVLS in one domain.
  for (const auto& d : doms) {
    const double g = static_cast<double>(d.size());
    // A domain of one GPU has no NVLink peer: nothing moves over NVLink there, NVLS or not.
    const double each = g <= 1 ? 0.0 : nvls ? 1.0 + 1.0 / g : g >= 3 ? 2.0 : g - 1;
    for (int64_t m : d) {
      loads.nvl_out[loads.gpu(m)] += each;
      loads.nvl_in[loads.gpu(m)] += each;
    }
  }
  if (!nvls) cost.hbm_bytes_per_byte = 5.0;
  // Between domains: one channel per local GPU index, each carrying 1/g of the buffer over NCCL's
  // double binary tree of the domains (half the channel's bytes each): up in the reduce and down in
  // the broadcast. A node interior in one tree is a leaf in the other, so a NIC sends and receives
  // about 2/g of the buffer, as the ring's rail channels do (at 4 domains exactly that: nodes 1 and
  // 2 are each the root's one child in one tree, with three edges there and one in the other).
  size_t g_min = doms.front().size();
  for (const auto& d : doms) g_min = std::min(g_min, d.size());
  if (D > 1) {
    const double w = 1.0 / static_cast<double>(g_min) / 2.0;
    for (size_t c = 0; c < g_min; ++c)
      for (int tree = 0; tree < 2; ++tree)
        for (int64_t i = 0; i < D; ++i) {
          const int64_t parent = nccl_dtree_parent(D, i, tree);
          if (parent < 0) continue;
          const int64_t a = doms[static_cast<size_t>(i)][c], b = doms[static_cast<size_t>(parent)][c];
          loads.add(t, a, b, w, lat);  // reduce: child to parent
          loads.add(t, b, a, w, lat);  // broadcast: parent to child
        }
  }
  // Levels of the tree in NCCL's latency model: floor(log2 D) (log2i; its trees are that deep at powers of two).
  int depth = 0;
  while ((int64_t{2} << depth) <= D) ++depth;
  // The longest chain (the largest domain) sets the NVLink steps; the smallest, the channel count.
  size_t g_max = 0;
  for (const auto& d : doms) g_max = std::max(g_max, d.size());
  // NVLink steps per phase (none when every domain holds one GPU: no NVLink hop, NVLS or not).
  const int64_t intra = g_max <= 1 ? 0 : nvls ? 1 : static_cast<int64_t>(g_max) - 1;
  cost.steps = static_cast<int>(2 * (depth + intra));
  // Latency: NVLink steps inside the domains, network steps between them.
  // An NVLS phase inside a domain is the switches' reduction or multicast (nvls_step_s), not a ring step.
  const Seconds nvl_lat = nvls ? Seconds(cal[Param::nvls_step_s]) : lat.count(2) ? lat.at(2) : Seconds(0);
  cost.latency += nvl_lat * static_cast<double>(2 * intra) + loads.net_latency * static_cast<double>(2 * depth);
  set_rates(cost, loads, t, cal, nvls);
  return cost;
}

namespace {

// all_to_all_hierarchical_cost, with `pairwise`: the NVLink forwarding added pair by pair (the
// reference of its sums, detail::all_to_all_hierarchical_pairwise).
CollectiveCost all_to_all_hierarchical_impl(const std::vector<int64_t>& members, const Topology& t,
                                            const Calibration& cal, const AllToAllShape& shape, bool pairwise) {
  CollectiveCost cost;
  cost.latency = Seconds(cal[Param::collective_launch_s]);
  cost.algorithm = shape.node_fanout > 0 ? "hierarchical-dedup" : "hierarchical";
  const int64_t n = static_cast<int64_t>(members.size());
  if (n <= 1) return cost;
  const auto doms = by_domain(t, members);
  const double D = static_cast<double>(doms.size());
  const auto lat = hop_latencies(t, members, cal);
  Loads loads(t, members);
  // Per token a source sends `fanout` rows, one to each of `fanout` distinct ranks placed uniformly
  // over the n members; the collective's size is what leaves the GPU, fanout x (n-1)/n rows. So a
  // row to one given member weighs 1/(n-1) of the size.
  const double fan = std::max(shape.fanout, 1e-12);
  const double unit = 1.0 / (fan * static_cast<double>(n - 1) / static_cast<double>(n));
  const double per_member = 1.0 / static_cast<double>(n - 1);
  // forwarded[db][j]: the sources in other domains whose rows land on domain db's GPU j, which
  // forwards each source's share to the domain's other GPUs over NVLink (summed here, added below:
  // the pairs one by one were O(n^2)).
  std::vector<std::vector<double>> forwarded(doms.size());
  for (size_t db = 0; db < doms.size(); ++db) forwarded[db].assign(doms[db].size(), 0.0);
  for (size_t da = 0; da < doms.size(); ++da)
    for (size_t ia = 0; ia < doms[da].size(); ++ia) {
      const int64_t a = doms[da][ia];
      for (size_t db = 0; db < doms.size(); ++db) {
        const auto& B = doms[db];
        if (db == da) {
          for (int64_t b : B) loads.add(t, a, b, per_member, lat);
          continue;
        }
        // Over the network once to the GPU of domain B on a's rail (same local index, so the same
        // leaf in a rail-optimized fabric), then over NVLink to the destinations there.
        const size_t j = ia % B.size();
        // Rows crossing to B per token: one per destination rank there, or one per domain hit.
        const double rows = shape.node_fanout > 0 ? shape.node_fanout / D
                                                  : fan * static_cast<double>(B.size()) / static_cast<double>(n);
        loads.add(t, a, B[j], rows * unit, lat);
        forwarded[db][j] += 1;
      }
    }
  // The forwarding: GPU j of B sends per_member of each source it received for to each other GPU
  // of B, so j sends forwarded[j] x (|B| - 1) and GPU k receives (sum - forwarded[k]) shares.
  const bool nvl = t.nvlink_bandwidth_per_gpu().value() > 0;
  for (size_t db = 0; db < doms.size(); ++db) {
    const auto& B = doms[db];
    if (B.size() < 2) continue;
    double sum = 0;
    for (double f : forwarded[db]) sum += f;
    if (sum == 0) continue;
    if (!nvl || pairwise) {  // no NVLink: the network's own accounting, one flow per source forwarded (leaves, ECMP flows), as add() keeps it
      for (size_t j = 0; j < B.size(); ++j)
        for (int64_t f = 0; f < static_cast<int64_t>(forwarded[db][j]); ++f)
          for (int64_t b : B)
            if (b != B[j]) loads.add(t, B[j], b, per_member, lat);
      continue;
    }
    for (size_t j = 0; j < B.size(); ++j) {
      const size_t g = loads.gpu(B[j]);
      loads.nvl_out[g] += forwarded[db][j] * per_member * static_cast<double>(B.size() - 1);
      loads.nvl_in[g] += (sum - forwarded[db][j]) * per_member;
    }
    loads.max_latency = std::max(loads.max_latency, lat.at(2));
    loads.nvl_latency = std::max(loads.nvl_latency, lat.at(2));
  }
  cost.steps = 2;
  // A network step, then an NVLink step, unless every domain holds one member (no NVLink hop;
  // hop_latencies fills the NVLink class from the network's then).
  bool nvlink_hop = false;
  for (const auto& d : doms) nvlink_hop = nvlink_hop || d.size() > 1;
  const Seconds nvl_lat = nvlink_hop && lat.count(2) ? lat.at(2) : Seconds(0);
  cost.latency += loads.net_latency + nvl_lat;
  set_rates(cost, loads, t, cal);
  return cost;
}

}  // namespace

CollectiveCost all_to_all_hierarchical_cost(const std::vector<int64_t>& members, const Topology& t,
                                            const Calibration& cal, const AllToAllShape& shape) {
  return all_to_all_hierarchical_impl(members, t, cal, shape, false);
}

namespace detail {
CollectiveCost all_to_all_hierarchical_pairwise(const std::vector<int64_t>& members, const Topology& t,
                                                const Calibration& cal, const AllToAllShape& shape) {
  return all_to_all_hierarchical_impl(members, t, cal, shape, true);
}
}  // namespace detail

std::vector<CollectiveCost> collective_algorithms(Collective c, const std::vector<int64_t>& members, const Topology& t,
                                                  const Calibration& cal, const AllToAllShape& shape) {
  bool spans = false;
  for (int64_t m : members) spans = spans || t.domain_of(m) != t.domain_of(members.front());
  if (c == Collective::all_to_all && spans) {
    if (shape.node_fanout > 0) return {all_to_all_hierarchical_cost(members, t, cal, shape)};
    return {collective_cost(c, members, t, cal), all_to_all_hierarchical_cost(members, t, cal, shape)};
  }
  if (c == Collective::all_reduce && spans) {
    std::vector<CollectiveCost> out{collective_cost(c, members, t, cal), all_reduce_tree_cost(members, t, cal)};
    // NVLS needs switches that reduce: not host memory's (as inside one domain, below).
    if (t.count(VertexKind::nvswitch) > 0 && t.host_memory_bandwidth().value() == 0)
      out.push_back(all_reduce_tree_cost(members, t, cal, true));
    return out;
  }
  // Inside one switched domain NCCL's tuner weighs NVLS against a ring at each size. Two GPUs run
  // the ring: it moves S each way, NVLS S (1 + 1/2), at a lower efficiency and with two switch phases.
  if (c == Collective::all_reduce && t.count(VertexKind::nvswitch) > 0 && t.host_memory_bandwidth().value() == 0) {
    if (members.size() == 2) return {collective_cost(c, members, t, cal, false)};
    if (members.size() > 2) return {collective_cost(c, members, t, cal), collective_cost(c, members, t, cal, false)};
  }
  return {collective_cost(c, members, t, cal)};
}

CollectiveCost host_copy_cost(const Topology& t, const SystemSpec& sys, const Calibration& cal, bool d2h) {
  (void)t;
  CollectiveCost c;
  c.algorithm = "copy";
  c.steps = 1;
  c.latency = Seconds(cal[Param::kernel_launch_s]);
  const ComputeTraySpec& tray = sys.domain.tray;
  if (tray.cpus == 0) return c;
  const int gpus_per_cpu = (tray.gpus + tray.cpus - 1) / tray.cpus;
  const double bw = tray.cpu.gpu_link_bidirectional.value() / 2.0 / gpus_per_cpu *
                    cal[d2h ? Param::host_link_d2h_fraction : Param::host_link_fraction];
  c.s_per_byte[static_cast<int>(Resource::host)] = 1.0 / bw;
  return c;
}

}  // namespace moeperf
