// The system graph of a report as plain data for the topology view: the vertices drawn tier by
// tier (CPUs, NVLink switch chips, GPUs, NICs, leaf, spine and core switches, present kinds only),
// the links between drawn vertices, and the step's utilization of each communication resource.
// Rows from the bottom: CPUs, NVLink switch chips, GPUs, NICs, leaf, spine, core. Systems up to kFullGraphGpus GPUs are drawn whole; larger ones draw the first NVLink domain (its
// GPUs and the CPUs, NICs and NVLink switches they link to) and each fabric tier as one box with
// its count. Utilization is the busiest rank class's simulated SimClass::utilization, averaged
// over the step (time-weighted, 0..1), per resource (nvlink, nic, fabric, host).
//
//   TopologyData d = build_topology_data(*report.topology, step_utilization(report));
//   for (const TopoNode& n : d.nodes) box(d.tiers[n.tier], n.slot);
//   color(d.utilization[static_cast<size_t>(e.resource)]);
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/pricing/collective.h"
#include "model/study/predict.h"
#include "model/hardware/topology.h"

namespace moeperf::gui {

inline constexpr int64_t kFullGraphGpus = 256;

struct TopoTier {
  VertexKind kind = VertexKind::gpu;
  int64_t total = 0;   // vertices of this kind in the topology
  int64_t drawn = 0;   // boxes in the row: every vertex, or 1 for an aggregated fabric tier
  bool aggregated = false;
};

struct TopoNode {
  int64_t vertex = -1;  // -1 for an aggregated tier's box
  int tier = 0;         // index in TopologyData::tiers
  int64_t slot = 0;     // position in the row, 0 .. tiers[tier].drawn - 1
};

struct TopoEdge {
  int a = 0, b = 0;  // TopologyData::nodes indices (one edge per vertex pair, both directions)
  LinkKind kind = LinkKind::nvlink;
  Resource resource = Resource::nvlink;
};

struct TopologyData {
  std::vector<TopoTier> tiers;  // bottom (CPUs) to top (core), only kinds present
  std::vector<TopoNode> nodes;
  std::vector<TopoEdge> edges;
  std::array<double, kResourceCount> utilization{};
  bool whole = true;  // false: one domain and the fabric tiers as counts
  int64_t drawn(VertexKind k) const;  // nodes drawn of kind k (boxes, aggregated tiers count 1)
};

Resource resource_of(LinkKind k);

// Time-weighted mean of the busiest class's utilization samples over [0, step time].
std::array<double, kResourceCount> step_utilization(const StepReport& r);

TopologyData build_topology_data(const Topology& t, const std::array<double, kResourceCount>& utilization);

}  // namespace moeperf::gui
