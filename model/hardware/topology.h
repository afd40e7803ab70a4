// The physical topology of a system as a directed graph: GPUs, CPUs, NICs, NVLink switch chips
// and InfiniBand leaf/spine/core switches joined by directed links with a bandwidth (per
// direction) and a latency. Built from a SystemSpec and a GPU count; routes GPU-to-GPU traffic
// over shortest paths with ECMP shares.
//
//   Topology t = Topology::build(system, 1024);
//   Route r = t.route(0, 700);            // links used, each with the share of the bytes it carries
//   Seconds s = bytes / t.link(r.links[0].link).bandwidth * r.links[0].share;
//
// Vertex ids are dense and grouped by kind; GPU g (the job's rank g) is vertex g. The graph is
// Boost.Graph's compressed sparse row graph inside topology.cpp; no Boost type appears here.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/specs.h"
#include "model/units.h"

namespace moeperf {

enum class VertexKind : uint8_t { gpu, cpu, nic, nvswitch, leaf, spine, core };
inline constexpr int kVertexKinds = 7;

// nvlink: GPU<->NVLink switch; host: GPU<->CPU (NVLink-C2C or PCIe); nic: GPU<->NIC (PCIe); ib: InfiniBand.
enum class LinkKind : uint8_t { nvlink, host, nic, ib };

struct LinkInfo {
  int64_t from = 0, to = 0;
  LinkKind kind = LinkKind::nvlink;
  BytesPerSecond bandwidth;  // per direction: this link carries traffic from `from` to `to`
  Seconds latency;
};

struct LinkShare {
  int64_t link = 0;
  double share = 0.0;  // fraction of the flow's bytes crossing this link
};

struct Route {
  std::vector<LinkShare> links;
  int hops = 0;     // links on every shortest path
  Seconds latency;  // along one shortest path (all have the same hop count and link classes)
};

class Topology {
 public:
  // Lays `gpus` GPUs out on the system's NVLink domains (filling `gpus_per_domain_when_spanning`
  // per domain when one is not enough) and joins the domains with its fat tree. Throws InputError
  // when the count does not fit (no fabric, or more NICs than the fabric's tiers can hold).
  static Topology build(const SystemSpec& system, int64_t gpus);

  int64_t gpus() const;
  int64_t domains() const;              // NVLink domains (racks, nodes) in use
  int64_t gpus_per_domain() const;      // GPUs of the job in each full domain
  int64_t domain_of(int64_t gpu) const;
  int fabric_tiers() const;             // 0 without a fabric
  int64_t leaf_of(int64_t gpu) const;   // leaf switch index of the GPU's NIC (-1 without a fabric)
  int64_t pod_of(int64_t gpu) const;    // pod of that leaf (0 in a 2-tier tree)
  BytesPerSecond leaf_uplink_bandwidth() const;  // per leaf, per direction
  int leaf_uplinks() const;                      // uplink ports per leaf (0 without a fabric)
  int64_t gpus_on_leaf(int64_t leaf) const;      // the job's GPUs whose NIC is on that leaf
  bool adaptive_routing() const;                 // the fabric's switches route adaptively (else static ECMP)
  // The GPU's memory bandwidth when the NVLink domain's transport is host memory (its cores copy
  // and reduce themselves, NvlinkDomainSpec::host_memory); zero otherwise.
  BytesPerSecond host_memory_bandwidth() const;

  int64_t vertex_count() const;
  int64_t link_count() const;
  int64_t count(VertexKind k) const;
  VertexKind kind(int64_t vertex) const;
  const LinkInfo& link_class(int64_t link) const;  // shared per class of identical links
  LinkInfo link(int64_t link) const;
  std::vector<int64_t> out_links(int64_t vertex) const;

  // Per-direction bandwidth of one GPU into NVLink and out through its NIC.
  BytesPerSecond nvlink_bandwidth_per_gpu() const;
  BytesPerSecond scaleout_bandwidth_per_gpu() const;
  // True where the NIC's host link (PCIe), not its port, sets scaleout_bandwidth_per_gpu.
  bool scaleout_host_link_bound() const;
  // Bisection (per direction): of one NVLink domain, and of the scale-out fabric (the smallest
  // of the tier cuts: half of all capacity going up from each tier).
  BytesPerSecond nvlink_domain_bisection() const;
  BytesPerSecond scaleout_bisection() const;

  // All shortest paths from GPU a to GPU b (never through another GPU or a CPU), with the share
  // of the bytes on each link when every switch splits over its equal-cost next hops in
  // proportion to their bandwidth (ECMP).
  Route route(int64_t gpu_a, int64_t gpu_b) const;

  // Approximate bytes held by the graph (for the benchmark and the README).
  int64_t memory_bytes() const;

 private:
  struct Impl;
  explicit Topology(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// GPUs of a `gpus`-GPU job in each full NVLink domain, as Topology::build lays them out (without
// building the graph).
int64_t job_gpus_per_domain(const SystemSpec& system, int64_t gpus);

const char* to_string(VertexKind k);
const char* to_string(LinkKind k);

}  // namespace moeperf
