#include "gui/models/topology_data.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "model/sim/sim.h"

namespace moeperf::gui {

namespace {
// Bottom to top: a GPU's NVLink switches below it and its NIC above, so the dense NVLink bundle
// and the scale-out links each join adjacent rows (only the one CPU link per GPU skips a row).
constexpr VertexKind kOrder[] = {VertexKind::cpu,  VertexKind::nvswitch, VertexKind::gpu,  VertexKind::nic,
                                 VertexKind::leaf, VertexKind::spine,    VertexKind::core};
bool fabric_kind(VertexKind k) { return k == VertexKind::leaf || k == VertexKind::spine || k == VertexKind::core; }
}  // namespace

int64_t TopologyData::drawn(VertexKind k) const {
  int64_t n = 0;
  for (const TopoNode& node : nodes) n += tiers[static_cast<size_t>(node.tier)].kind == k;
  return n;
}

Resource resource_of(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return Resource::nvlink;
    case LinkKind::host: return Resource::host;
    case LinkKind::nic: return Resource::nic;
    case LinkKind::ib: return Resource::fabric;
  }
  return Resource::nvlink;
}

std::array<double, kResourceCount> step_utilization(const StepReport& r) {
  std::array<double, kResourceCount> out{};
  if (!r.sim || r.sim->classes.empty()) return out;
  const SimClass& c = r.sim->classes[static_cast<size_t>(r.busiest_class)];
  const double end = r.step_time.value();
  if (!(end > 0)) return out;
  for (size_t i = 0; i < c.utilization.size(); ++i) {
    const double t0 = std::min(c.utilization[i].time.value(), end);
    const double t1 = i + 1 < c.utilization.size() ? std::min(c.utilization[i + 1].time.value(), end) : end;
    if (t1 <= t0) continue;
    for (size_t k = 0; k < out.size(); ++k) out[k] += c.utilization[i].util[k] * (t1 - t0);
  }
  for (double& u : out) u /= end;
  return out;
}

TopologyData build_topology_data(const Topology& t, const std::array<double, kResourceCount>& utilization) {
  TopologyData d;
  d.utilization = utilization;
  d.whole = t.gpus() <= kFullGraphGpus;
  // Vertices drawn one by one: all of them, or the first domain's GPUs and their neighbors
  // (CPUs, NICs, NVLink switches); the fabric tiers then become one box each.
  std::vector<bool> keep(static_cast<size_t>(t.vertex_count()), d.whole);
  if (!d.whole) {
    for (int64_t g = 0; g < t.gpus(); ++g) {
      if (t.domain_of(g) != 0) continue;
      keep[static_cast<size_t>(g)] = true;
      for (int64_t l : t.out_links(g)) {
        const int64_t v = t.link(l).to;
        if (!fabric_kind(t.kind(v))) keep[static_cast<size_t>(v)] = true;
      }
    }
  }
  std::map<VertexKind, int> tier_of;
  for (VertexKind k : kOrder) {
    if (t.count(k) == 0) continue;
    tier_of[k] = static_cast<int>(d.tiers.size());
    d.tiers.push_back({k, t.count(k), 0, !d.whole && fabric_kind(k)});
  }
  std::vector<int> node_of(static_cast<size_t>(t.vertex_count()), -1);
  std::map<VertexKind, int> aggregate_node;
  for (int64_t v = 0; v < t.vertex_count(); ++v) {
    const VertexKind k = t.kind(v);
    TopoTier& tier = d.tiers[static_cast<size_t>(tier_of[k])];
    if (tier.aggregated) {
      auto [it, added] = aggregate_node.try_emplace(k, static_cast<int>(d.nodes.size()));
      if (added) d.nodes.push_back({-1, tier_of[k], tier.drawn++});
      node_of[static_cast<size_t>(v)] = it->second;
    } else if (keep[static_cast<size_t>(v)]) {
      node_of[static_cast<size_t>(v)] = static_cast<int>(d.nodes.size());
      d.nodes.push_back({v, tier_of[k], tier.drawn++});
    }
  }
  // One edge per pair of drawn nodes (links are directed; both directions share the edge).
  std::set<std::pair<int, int>> seen;
  for (int64_t l = 0; l < t.link_count(); ++l) {
    const LinkInfo li = t.link(l);
    int a = node_of[static_cast<size_t>(li.from)], b = node_of[static_cast<size_t>(li.to)];
    if (a < 0 || b < 0 || a == b) continue;
    if (!keep[static_cast<size_t>(li.from)] && !keep[static_cast<size_t>(li.to)]) continue;  // fabric-internal: tier to tier once
    if (a > b) std::swap(a, b);
    if (seen.insert({a, b}).second) d.edges.push_back({a, b, li.kind, resource_of(li.kind)});
  }
  // Aggregated tiers: one edge between consecutive fabric boxes (leaf-spine, spine-core).
  const VertexKind fabric[] = {VertexKind::leaf, VertexKind::spine, VertexKind::core};
  for (size_t i = 0; i + 1 < std::size(fabric); ++i) {
    const auto lo = aggregate_node.find(fabric[i]), hi = aggregate_node.find(fabric[i + 1]);
    if (lo != aggregate_node.end() && hi != aggregate_node.end())
      d.edges.push_back({lo->second, hi->second, LinkKind::ib, Resource::fabric});
  }
  return d;
}

}  // namespace moeperf::gui
