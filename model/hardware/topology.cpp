// Topology graph: expansion of a SystemSpec into a Boost.Graph CSR graph, and ECMP routing.
#include "model/hardware/topology.h"

#include <algorithm>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/range/iterator_range.hpp>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "model/error.h"

namespace moeperf {
namespace {

struct EdgeProp {
  uint16_t link_class = 0;  // index into Impl::classes: links of one class are identical
};
using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeProp,
                                                 boost::no_property, uint32_t, uint32_t>;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

struct Topology::Impl {
  Graph g;
  std::vector<LinkInfo> classes;                 // from/to unused (-1)
  std::array<int64_t, kVertexKinds + 1> first{};  // vertex id ranges per kind
  int64_t gpus = 0, domains = 0, per_domain = 0;
  int tiers = 0;
  BytesPerSecond nic_port;                       // zero without a fabric
  BytesPerSecond nic_host_link;                  // the NIC's PCIe link to its GPU, per direction
  BytesPerSecond leaf_up;                        // per leaf, per direction
  int leaf_uplinks = 0;
  std::vector<int32_t> leaf_gpus;                // the job's GPUs whose NIC is on each leaf
  bool adaptive_routing = true;
  BytesPerSecond host_memory;                    // NvlinkDomainSpec::host_memory: the GPU's memory bandwidth
  int64_t half = 0, rails = 1, trays_per_domain = 0, tray_gpus = 1;
  bool rail_optimized = true;
  BytesPerSecond domain_bisection, fabric_bisection;
  BytesPerSecond nvlink_per_gpu;                 // GPU 0's NVLink links summed (set once built)

  // Leaf switch of GPU g's NIC: rail-optimized, NIC i of every tray on the leaves of rail i, one
  // leaf per rail for every R/2 trays; otherwise R/2 consecutive NICs per leaf.
  int64_t leaf(int64_t gpu) const {
    if (tiers == 0) return -1;
    const int64_t d = gpu / per_domain, local = gpu % per_domain;
    const int64_t global_tray = d * trays_per_domain + local / tray_gpus, slot = local % tray_gpus;
    return rail_optimized ? (global_tray / half) * rails + slot % rails : gpu / half;
  }

  VertexKind kind(int64_t v) const {
    for (int k = 0; k < kVertexKinds; ++k)
      if (v < first[k + 1]) return static_cast<VertexKind>(k);
    throw std::out_of_range("vertex id out of range");
  }
};

namespace {

// Accumulates vertices and directed links before the CSR graph is built.
class Builder {
 public:
  uint16_t add_class(LinkKind kind, BytesPerSecond bw, Seconds latency) {
    for (size_t i = 0; i < classes.size(); ++i)
      if (classes[i].kind == kind && classes[i].bandwidth == bw && classes[i].latency == latency)
        return static_cast<uint16_t>(i);
    classes.push_back(LinkInfo{-1, -1, kind, bw, latency});
    return static_cast<uint16_t>(classes.size() - 1);
  }
  // A cable or port bundle between a and b: one directed link each way.
  void connect(int64_t a, int64_t b, uint16_t ab, uint16_t ba) {
    edges.emplace_back(static_cast<uint32_t>(a), static_cast<uint32_t>(b));
    props.push_back(EdgeProp{ab});
    edges.emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(a));
    props.push_back(EdgeProp{ba});
  }
  std::vector<LinkInfo> classes;
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  std::vector<EdgeProp> props;
};

struct FatTreeShape {
  int tiers = 0;
  int64_t leaves = 0;
};

FatTreeShape fat_tree_shape(const FatTreeSpec& f, int64_t leaves) {
  const int64_t radix = f.sw.ports, half = radix / 2;
  const int64_t max2 = radix;          // a 2-tier spine has one port per leaf at most
  const int64_t max3 = radix * half;   // R pods of R/2 leaves (a core has one port per pod)
  int tiers = 0;
  switch (f.tiers) {
    case FatTreeTiers::two: tiers = 2; break;
    case FatTreeTiers::three: tiers = 3; break;
    case FatTreeTiers::automatic: tiers = leaves <= max2 ? 2 : 3; break;
  }
  const int64_t cap = tiers == 2 ? max2 : max3;
  if (leaves > cap)
    throw InputError("fabric '" + f.name + "': " + std::to_string(leaves) + " leaf switches needed, but a " +
                     std::to_string(tiers) + "-tier fat tree of radix " + std::to_string(radix) +
                     " holds at most " + std::to_string(cap) + " (" + std::to_string(cap * half) +
                     " NICs)");
  return {tiers, leaves};
}

}  // namespace

Topology::Topology(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

int64_t job_gpus_per_domain(const SystemSpec& sys, int64_t gpus) {
  const int64_t domain_gpus = sys.domain.gpus();
  if (gpus <= domain_gpus) return gpus;
  return sys.gpus_per_domain_when_spanning > 0 ? sys.gpus_per_domain_when_spanning : domain_gpus;
}

Topology Topology::build(const SystemSpec& sys, int64_t gpus) {
  const NvlinkDomainSpec& dom = sys.domain;
  const ComputeTraySpec& tray = dom.tray;
  if (gpus <= 0) throw InputError("GPU count must be positive, got " + std::to_string(gpus));
  if (tray.gpus <= 0 || dom.trays <= 0) throw InputError("system '" + sys.name + "' has no GPUs");
  auto impl = std::make_shared<Impl>();
  const int64_t domain_gpus = dom.gpus();
  if (gpus > domain_gpus && !sys.fabric)
    throw InputError("system '" + sys.name + "' is one NVLink domain of " + std::to_string(domain_gpus) +
                     " GPUs with no scale-out fabric: " + std::to_string(gpus) + " GPUs do not fit");
  const int64_t per = job_gpus_per_domain(sys, gpus);
  const int64_t domains = ceil_div(gpus, per);
  const int64_t trays_per_domain = ceil_div(per, tray.gpus);
  const int64_t total_trays = (domains - 1) * trays_per_domain + ceil_div(gpus - (domains - 1) * per, tray.gpus);
  const int64_t gpus_per_cpu = tray.cpus > 0 ? ceil_div(tray.gpus, tray.cpus) : 0;
  const bool with_fabric = sys.fabric.has_value() && tray.nics > 0;

  // ---- vertex ranges: gpu, cpu, nic, nvswitch, leaf, spine, core ----
  std::array<int64_t, kVertexKinds> n{};
  n[0] = gpus;
  n[1] = total_trays * tray.cpus;
  n[2] = with_fabric ? gpus : 0;
  n[3] = domains * dom.switch_chips;
  FatTreeShape shape;
  int64_t rails = 1, half = 0, sus = 0;
  std::vector<int64_t> pod_leaves, plane_spines, plane_cores;
  if (with_fabric) {
    const FatTreeSpec& f = *sys.fabric;
    half = f.sw.ports / 2;
    if (half <= 0) throw InputError("fabric '" + f.name + "': switch '" + f.sw.name + "' has no ports");
    rails = f.rail_optimized ? tray.nics : 1;
    const int64_t nic_groups = f.rail_optimized ? total_trays : gpus;  // NICs per rail, or all NICs
    sus = ceil_div(nic_groups, half);
    shape = fat_tree_shape(f, sus * rails);
    n[4] = shape.leaves;
    if (shape.tiers == 2) {
      n[5] = ceil_div(shape.leaves * half, f.sw.ports);
      n[6] = 0;
    } else {
      const int64_t pods = ceil_div(shape.leaves, half);
      for (int64_t p = 0; p < pods; ++p) pod_leaves.push_back(std::min(half, shape.leaves - p * half));
      n[5] = shape.leaves;  // a pod has as many spines as leaves (R/2 down each)
      plane_spines.assign(static_cast<size_t>(std::min(half, shape.leaves)), 0);
      for (int64_t l : pod_leaves)
        for (int64_t j = 0; j < l; ++j) ++plane_spines[static_cast<size_t>(j)];
      for (int64_t s : plane_spines) plane_cores.push_back(ceil_div(s * half, f.sw.ports));
      n[6] = std::accumulate(plane_cores.begin(), plane_cores.end(), int64_t{0});
    }
  }
  impl->first[0] = 0;
  for (int k = 0; k < kVertexKinds; ++k) impl->first[k + 1] = impl->first[k] + n[k];
  const int64_t vertices = impl->first[kVertexKinds];
  if (vertices >= int64_t{1} << 32) throw InputError("topology too large: " + std::to_string(vertices) + " vertices");
  auto id = [&](VertexKind k, int64_t i) { return impl->first[static_cast<int>(k)] + i; };

  Builder b;
  impl->per_domain = per;
  impl->tiers = with_fabric ? shape.tiers : 0;
  impl->half = half;
  impl->rails = rails;
  impl->trays_per_domain = trays_per_domain;
  impl->tray_gpus = tray.gpus;
  impl->rail_optimized = with_fabric && sys.fabric->rail_optimized;
  // ---- NVLink: every GPU to every switch chip of its domain, each link at the slower of its two
  // ends (the GPU's link, the switch's port) ----
  std::vector<uint16_t> chip_class;
  BytesPerSecond per_link = tray.gpu.nvlink_bandwidth_per_link;
  if (dom.nvswitch && dom.nvswitch->port_bandwidth.value() > 0) per_link = std::min(per_link, dom.nvswitch->port_bandwidth);
  for (int c = 0; c < dom.switch_chips; ++c) {
    const int links = dom.gpu_links_per_chip.at(static_cast<size_t>(c));
    chip_class.push_back(b.add_class(LinkKind::nvlink, per_link * links, dom.nvlink_latency / 2.0));
  }
  // ---- host links: a CPU's link bandwidth is shared by the GPUs it serves ----
  uint16_t host_class = 0;
  if (tray.cpus > 0)
    host_class = b.add_class(LinkKind::host,
                             tray.cpu.gpu_link_bidirectional / 2.0 / static_cast<double>(gpus_per_cpu), Seconds{});
  uint16_t pcie_class = 0, up_nic = 0, down_nic = 0;
  if (with_fabric) {
    const FatTreeSpec& f = *sys.fabric;
    pcie_class = b.add_class(LinkKind::nic, tray.nic.host_link_bandwidth, Seconds{});
    impl->nic_port = std::min(tray.nic.port_bandwidth, f.sw.port_bandwidth);
    impl->nic_host_link = tray.nic.host_link_bandwidth;
    up_nic = b.add_class(LinkKind::ib, impl->nic_port, f.nic_to_leaf_latency);
    down_nic = b.add_class(LinkKind::ib, impl->nic_port, f.sw.latency + f.nic_to_leaf_latency);
  }
  for (int64_t g = 0; g < gpus; ++g) {
    const int64_t d = g / per, local = g % per, t = local / tray.gpus, slot = local % tray.gpus;
    const int64_t global_tray = d * trays_per_domain + t;
    for (int c = 0; c < dom.switch_chips; ++c)
      if (dom.gpu_links_per_chip[static_cast<size_t>(c)] > 0)
        b.connect(g, id(VertexKind::nvswitch, d * dom.switch_chips + c), chip_class[static_cast<size_t>(c)],
                  chip_class[static_cast<size_t>(c)]);
    if (tray.cpus > 0)
      b.connect(g, id(VertexKind::cpu, global_tray * tray.cpus + slot / gpus_per_cpu), host_class, host_class);
    if (with_fabric) {
      const int64_t nic = id(VertexKind::nic, g);
      b.connect(g, nic, pcie_class, pcie_class);
      b.connect(nic, id(VertexKind::leaf, impl->leaf(g)), up_nic, down_nic);
    }
  }
  // ---- switch tiers ----
  if (with_fabric) {
    const FatTreeSpec& f = *sys.fabric;
    const BytesPerSecond port = f.sw.port_bandwidth;
    if (shape.tiers == 2) {
      const int64_t spines = n[5];
      const uint16_t c = b.add_class(LinkKind::ib, port * (static_cast<double>(half) / static_cast<double>(spines)), f.sw.latency);
      for (int64_t l = 0; l < shape.leaves; ++l)
        for (int64_t s = 0; s < spines; ++s) b.connect(id(VertexKind::leaf, l), id(VertexKind::spine, s), c, c);
    } else {
      std::vector<int64_t> core_first(plane_cores.size(), 0);
      for (size_t j = 1; j < plane_cores.size(); ++j) core_first[j] = core_first[j - 1] + plane_cores[j - 1];
      for (size_t p = 0; p < pod_leaves.size(); ++p) {
        const int64_t l_in_pod = pod_leaves[p], base = static_cast<int64_t>(p) * half;
        const uint16_t c = b.add_class(LinkKind::ib, port * (static_cast<double>(half) / static_cast<double>(l_in_pod)), f.sw.latency);
        for (int64_t i = 0; i < l_in_pod; ++i)
          for (int64_t j = 0; j < l_in_pod; ++j) {
            b.connect(id(VertexKind::leaf, base + i), id(VertexKind::spine, base + j), c, c);
          }
        for (int64_t j = 0; j < l_in_pod; ++j) {
          const int64_t cores = plane_cores[static_cast<size_t>(j)];
          const uint16_t cc = b.add_class(LinkKind::ib, port * (static_cast<double>(half) / static_cast<double>(cores)), f.sw.latency);
          for (int64_t k = 0; k < cores; ++k)
            b.connect(id(VertexKind::spine, base + j), id(VertexKind::core, core_first[static_cast<size_t>(j)] + k), cc, cc);
        }
      }
    }
  }
  if (b.classes.size() > 65535) throw std::logic_error("too many link classes");

  impl->g = Graph(boost::edges_are_unsorted_multi_pass, b.edges.begin(), b.edges.end(), b.props.begin(),
                  static_cast<uint32_t>(vertices));
  impl->classes = std::move(b.classes);
  impl->gpus = gpus;
  impl->domains = domains;
  if (sys.domain.host_memory) impl->host_memory = sys.domain.tray.gpu.hbm_bandwidth;
  if (with_fabric) {
    impl->leaf_up = sys.fabric->sw.port_bandwidth * static_cast<double>(half);
    impl->leaf_uplinks = static_cast<int>(half);
    impl->adaptive_routing = sys.fabric->sw.adaptive_routing;
    impl->leaf_gpus.assign(static_cast<size_t>(shape.leaves), 0);
    for (int64_t g = 0; g < gpus; ++g) ++impl->leaf_gpus.at(static_cast<size_t>(impl->leaf(g)));
  }

  // ---- bisection (per direction) ----
  for (auto e : boost::make_iterator_range(boost::out_edges(0u, impl->g))) {
    const LinkInfo& c = impl->classes[impl->g[e].link_class];
    if (c.kind == LinkKind::nvlink) impl->nvlink_per_gpu += c.bandwidth;
  }
  const Topology t(impl);
  const int64_t dom0_gpus = std::min(per, gpus);
  // Half the GPUs on each side of the cut (an odd count leaves one GPU with the larger half).
  impl->domain_bisection = t.nvlink_bandwidth_per_gpu() * static_cast<double>(dom0_gpus / 2);
  if (with_fabric) {
    // Tier cuts: half the capacity going up out of each tier (NICs, leaves, spines).
    std::array<BytesPerSecond, 3> up{};
    const auto& g = impl->g;
    for (int64_t v = impl->first[2]; v < impl->first[kVertexKinds]; ++v) {
      const VertexKind kv = impl->kind(v);
      for (auto e : boost::make_iterator_range(boost::out_edges(static_cast<uint32_t>(v), g))) {
        const VertexKind kt = impl->kind(boost::target(e, g));
        const BytesPerSecond bw = impl->classes[g[e].link_class].bandwidth;
        if (kv == VertexKind::nic && kt == VertexKind::leaf) up[0] += bw;
        if (kv == VertexKind::leaf && kt == VertexKind::spine) up[1] += bw;
        if (kv == VertexKind::spine && kt == VertexKind::core) up[2] += bw;
      }
    }
    BytesPerSecond cut = up[0];
    for (int i = 1; i < shape.tiers; ++i) cut = std::min(cut, up[static_cast<size_t>(i)]);
    impl->fabric_bisection = cut / 2.0;
  }
  return Topology(std::move(impl));
}

int64_t Topology::gpus() const { return impl_->gpus; }
int64_t Topology::domains() const { return impl_->domains; }
int64_t Topology::gpus_per_domain() const { return impl_->per_domain; }
int64_t Topology::domain_of(int64_t gpu) const { return gpu / impl_->per_domain; }
int Topology::fabric_tiers() const { return impl_->tiers; }
int64_t Topology::leaf_of(int64_t g) const { return impl_->leaf(g); }
int64_t Topology::pod_of(int64_t g) const { return impl_->tiers == 3 ? leaf_of(g) / impl_->half : 0; }
BytesPerSecond Topology::leaf_uplink_bandwidth() const { return impl_->leaf_up; }
int Topology::leaf_uplinks() const { return impl_->leaf_uplinks; }
int64_t Topology::gpus_on_leaf(int64_t leaf) const {
  return leaf >= 0 && leaf < static_cast<int64_t>(impl_->leaf_gpus.size()) ? impl_->leaf_gpus[static_cast<size_t>(leaf)] : 0;
}
bool Topology::adaptive_routing() const { return impl_->adaptive_routing; }
BytesPerSecond Topology::host_memory_bandwidth() const { return impl_->host_memory; }
int64_t Topology::vertex_count() const { return static_cast<int64_t>(boost::num_vertices(impl_->g)); }
int64_t Topology::link_count() const { return static_cast<int64_t>(boost::num_edges(impl_->g)); }
int64_t Topology::count(VertexKind k) const {
  const int i = static_cast<int>(k);
  return impl_->first[i + 1] - impl_->first[i];
}
VertexKind Topology::kind(int64_t v) const { return impl_->kind(v); }

const LinkInfo& Topology::link_class(int64_t link) const {
  const auto e = boost::edge_from_index(static_cast<uint32_t>(link), impl_->g);
  return impl_->classes[impl_->g[e].link_class];
}

LinkInfo Topology::link(int64_t link) const {
  const auto& g = impl_->g;
  const auto e = boost::edge_from_index(static_cast<uint32_t>(link), g);
  LinkInfo info = impl_->classes[g[e].link_class];
  info.from = boost::source(e, g);
  info.to = boost::target(e, g);
  return info;
}

std::vector<int64_t> Topology::out_links(int64_t vertex) const {
  std::vector<int64_t> out;
  const auto& g = impl_->g;
  for (auto e : boost::make_iterator_range(boost::out_edges(static_cast<uint32_t>(vertex), g)))
    out.push_back(static_cast<int64_t>(boost::get(boost::edge_index, g, e)));
  return out;
}

// Summed once when built: the collective pricing asks for it per ring edge.
BytesPerSecond Topology::nvlink_bandwidth_per_gpu() const { return impl_->nvlink_per_gpu; }
BytesPerSecond Topology::scaleout_bandwidth_per_gpu() const {
  // Every byte a GPU sends or receives over the fabric crosses its NIC's host link (PCIe) and its
  // port: the narrower sets the rate (a 400G port behind PCIe Gen4 x16, 32 GB/s, runs at 32).
  const BytesPerSecond host = impl_->nic_host_link;
  return host.value() > 0 ? std::min(impl_->nic_port, host) : impl_->nic_port;
}
bool Topology::scaleout_host_link_bound() const {
  return impl_->nic_host_link.value() > 0 && impl_->nic_host_link < impl_->nic_port;
}
BytesPerSecond Topology::nvlink_domain_bisection() const { return impl_->domain_bisection; }
BytesPerSecond Topology::scaleout_bisection() const { return impl_->fabric_bisection; }

Route Topology::route(int64_t a, int64_t b) const {
  const Impl& m = *impl_;
  const auto& g = m.g;
  if (a < 0 || a >= m.gpus || b < 0 || b >= m.gpus)
    throw std::out_of_range("route: GPU index out of range");
  Route r;
  if (a == b) return r;
  // Breadth-first search from a; GPUs other than a and CPUs are endpoints, never transit.
  const size_t vn = boost::num_vertices(g);
  std::vector<int32_t> dist(vn, -1);
  struct Arc { uint32_t from, to, edge; };
  std::vector<Arc> arcs;  // every edge u->w with dist[w] == dist[u] + 1
  std::vector<uint32_t> frontier{static_cast<uint32_t>(a)}, next;
  dist[static_cast<size_t>(a)] = 0;
  int32_t level = 0;
  while (!frontier.empty() && dist[static_cast<size_t>(b)] < 0) {
    next.clear();
    for (uint32_t u : frontier) {
      const VertexKind ku = m.kind(u);
      if ((ku == VertexKind::gpu && u != static_cast<uint32_t>(a)) || ku == VertexKind::cpu) continue;
      for (auto e : boost::make_iterator_range(boost::out_edges(u, g))) {
        const uint32_t w = boost::target(e, g);
        if (dist[w] < 0) {
          dist[w] = level + 1;
          next.push_back(w);
        }
        if (dist[w] == level + 1)
          arcs.push_back(Arc{u, static_cast<uint32_t>(w), static_cast<uint32_t>(boost::get(boost::edge_index, g, e))});
      }
    }
    frontier.swap(next);
    ++level;
  }
  if (dist[static_cast<size_t>(b)] < 0) throw std::logic_error("route: GPUs are not connected");
  // Keep the arcs on some shortest path to b: walk back from b level by level.
  std::vector<char> on_path(vn, 0);
  on_path[static_cast<size_t>(b)] = 1;
  std::sort(arcs.begin(), arcs.end(), [&](const Arc& x, const Arc& y) { return dist[x.to] > dist[y.to]; });
  std::vector<Arc> dag;
  for (const Arc& arc : arcs)  // sorted by decreasing level of the head, so heads are final
    if (on_path[arc.to]) {
      on_path[arc.from] = 1;
      dag.push_back(arc);
    }
  // Split the flow at each vertex over its DAG out-arcs in proportion to bandwidth.
  std::sort(dag.begin(), dag.end(), [&](const Arc& x, const Arc& y) {
    return dist[x.from] != dist[y.from] ? dist[x.from] < dist[y.from] : x.from < y.from;
  });
  std::vector<double> flow(vn, 0.0);
  flow[static_cast<size_t>(a)] = 1.0;
  for (size_t i = 0; i < dag.size();) {
    size_t j = i;
    double total = 0.0;
    while (j < dag.size() && dag[j].from == dag[i].from) {
      total += m.classes[g[boost::edge_from_index(dag[j].edge, g)].link_class].bandwidth.value();
      ++j;
    }
    const double f = flow[dag[i].from];
    for (size_t k = i; k < j; ++k) {
      const double bw = m.classes[g[boost::edge_from_index(dag[k].edge, g)].link_class].bandwidth.value();
      const double share = f * bw / total;
      flow[dag[k].to] += share;
      r.links.push_back({dag[k].edge, share});
    }
    i = j;
  }
  r.hops = dist[static_cast<size_t>(b)];
  // Latency along one shortest path: follow the first DAG arc out of each vertex.
  for (uint32_t v = static_cast<uint32_t>(a); v != static_cast<uint32_t>(b);) {
    auto it = std::find_if(dag.begin(), dag.end(), [&](const Arc& x) { return x.from == v; });
    r.latency += m.classes[g[boost::edge_from_index(it->edge, g)].link_class].latency;
    v = it->to;
  }
  return r;
}

int64_t Topology::memory_bytes() const {
  const auto& g = impl_->g;
  return static_cast<int64_t>(boost::num_edges(g) * (sizeof(uint32_t) + sizeof(EdgeProp)) +
                              (boost::num_vertices(g) + 1) * sizeof(uint32_t));
}

const char* to_string(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return "gpu";
    case VertexKind::cpu: return "cpu";
    case VertexKind::nic: return "nic";
    case VertexKind::nvswitch: return "nvswitch";
    case VertexKind::leaf: return "leaf";
    case VertexKind::spine: return "spine";
    case VertexKind::core: return "core";
  }
  return "?";
}

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::host: return "host";
    case LinkKind::nic: return "pcie";
    case LinkKind::ib: return "ib";
  }
  return "?";
}

}  // namespace moeperf
