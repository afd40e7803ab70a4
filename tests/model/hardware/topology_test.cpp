// Topology graph: counts, per-GPU and bisection bandwidth, and ECMP routes, each checked against
// the closed form computed from the system file's own figures.
#include "model/hardware/topology.h"

#include <gtest/gtest.h>

#include <map>

#include "model/error.h"
#include "model/io/load.h"

namespace moeperf {
namespace {

SystemSpec load(const std::string& name) { return io::load_system(std::string(MOEPERF_SOURCE_DIR) + "/topologies/" + name); }

double share_sum(const Route& r) {
  double s = 0;
  for (auto& l : r.links) s += l.share;
  return s;
}

TEST(Topology, Gb200Nvl72Rack) {
  const SystemSpec sys = load("gb200-nvl72.json");
  const Topology t = Topology::build(sys, sys.default_gpus);
  const GpuSpec& g = sys.gpu();
  EXPECT_EQ(t.gpus(), 72);
  EXPECT_EQ(t.count(VertexKind::gpu), 72);
  EXPECT_EQ(t.count(VertexKind::nvswitch), 18);
  EXPECT_EQ(t.count(VertexKind::cpu), 36);  // 18 trays x 2 Grace
  EXPECT_EQ(t.domains(), 1);
  // 18 links x 50 GB/s per direction = 900 GB/s.
  EXPECT_DOUBLE_EQ(t.nvlink_bandwidth_per_gpu().value(), g.nvlink_links * g.nvlink_bandwidth_per_link.value());
  EXPECT_DOUBLE_EQ(t.nvlink_bandwidth_per_gpu().value(), 900e9);
  // A non-blocking switch domain: half the GPUs' injection bandwidth crosses any balanced cut.
  EXPECT_DOUBLE_EQ(t.nvlink_domain_bisection().value(), 72 / 2.0 * 900e9);
}

// A link runs at the slower of its two ends: switch ports slower than the GPU's links cap the GPU's
// NVLink rate; an odd GPU count leaves the larger half on one side of the cut, one GPU none.
TEST(Topology, TheSwitchPortCapsALinkAndOddCountsCutUnevenly) {
  SystemSpec sys = load("gb200-nvl72.json");
  ASSERT_TRUE(sys.domain.nvswitch);
  EXPECT_DOUBLE_EQ(Topology::build(sys, 9).nvlink_domain_bisection().value(), 4 * 900e9);
  EXPECT_DOUBLE_EQ(Topology::build(sys, 1).nvlink_domain_bisection().value(), 0.0);
  sys.domain.nvswitch->port_bandwidth = BytesPerSecond(20e9);
  const Topology slow = Topology::build(sys, 72);
  EXPECT_DOUBLE_EQ(slow.nvlink_bandwidth_per_gpu().value(), 18 * 20e9);
}

TEST(Topology, Gb300ClusterOf1024) {
  const SystemSpec sys = load("gb300-nvl72.json");
  const Topology t = Topology::build(sys, 1024);
  const double port = sys.domain.tray.nic.port_bandwidth.value();
  EXPECT_DOUBLE_EQ(port, 800e9 / 8);  // CX-8: 800 Gb/s
  EXPECT_DOUBLE_EQ(t.scaleout_bandwidth_per_gpu().value(), port);
  EXPECT_EQ(t.domains(), 1024 / sys.gpus_per_domain_when_spanning);
  EXPECT_EQ(t.count(VertexKind::nvswitch), t.domains() * 18);
  // Rail-optimized 2-tier tree of radix R: per rail ceil(trays / (R/2)) leaves, spines = leaves x (R/2) / R.
  const int64_t half = sys.fabric->sw.ports / 2, trays = 1024 / 4;
  const int64_t leaves = ((trays + half - 1) / half) * 4;
  EXPECT_EQ(t.fabric_tiers(), 2);
  EXPECT_EQ(t.count(VertexKind::leaf), leaves);
  EXPECT_EQ(t.count(VertexKind::spine), (leaves * half + 2 * half - 1) / (2 * half));
  // Non-blocking fat tree: bisection = N/2 x NIC bandwidth.
  EXPECT_DOUBLE_EQ(t.scaleout_bisection().value(), 1024 / 2.0 * port);
}

TEST(Topology, RouteInsideOneDomainSpreadsOverEverySwitchChip) {
  const SystemSpec sys = load("gb200-nvl72.json");
  const Topology t = Topology::build(sys, 72);
  const Route r = t.route(0, 71);
  EXPECT_EQ(r.hops, 2);
  ASSERT_EQ(r.links.size(), 36u);  // 18 up to the chips, 18 down
  for (const LinkShare& l : r.links) {
    EXPECT_DOUBLE_EQ(l.share, 1.0 / 18);
    EXPECT_EQ(t.link(l.link).kind, LinkKind::nvlink);
  }
  EXPECT_DOUBLE_EQ(r.latency.value(), sys.domain.nvlink_latency.value());
}

TEST(Topology, RouteAcrossRacksOnOneRailStaysOnItsLeaf) {
  const SystemSpec sys = load("gb300-nvl72.json");
  const Topology t = Topology::build(sys, 128);
  // GPU 64 is slot 0 of the first tray of rack 1: same rail as GPU 0, same leaf.
  const Route r = t.route(0, 64);
  EXPECT_EQ(r.hops, 4);  // gpu -> nic -> leaf -> nic -> gpu
  ASSERT_EQ(r.links.size(), 4u);
  for (const LinkShare& l : r.links) EXPECT_DOUBLE_EQ(l.share, 1.0);
  const FatTreeSpec& f = *sys.fabric;
  EXPECT_DOUBLE_EQ(r.latency.value(), f.nic_to_leaf_latency.value() * 2 + f.sw.latency.value());
}

TEST(Topology, RouteAcrossRailsSplitsOverEverySpine) {
  const SystemSpec sys = load("gb300-nvl72.json");
  const Topology t = Topology::build(sys, 1024);
  const Route r = t.route(0, 65);  // rail 0 -> rail 1
  EXPECT_EQ(r.hops, 6);           // gpu nic leaf spine leaf nic gpu
  const int64_t spines = t.count(VertexKind::spine);
  std::map<LinkKind, double> per_kind;
  int spine_links = 0;
  for (const LinkShare& l : r.links) {
    const LinkInfo li = t.link(l.link);
    if (t.kind(li.from) == VertexKind::leaf && t.kind(li.to) == VertexKind::spine) {
      EXPECT_DOUBLE_EQ(l.share, 1.0 / static_cast<double>(spines));
      ++spine_links;
    }
  }
  EXPECT_EQ(spine_links, spines);
  EXPECT_NEAR(share_sum(r), r.hops, 1e-12);  // every hop carries the whole flow
}

TEST(Topology, EcmpSharesFollowLinkBandwidthInADgx) {
  const SystemSpec sys = load("dgx-h100-cluster.json");
  const Topology t = Topology::build(sys, 8);
  const Route r = t.route(0, 5);
  EXPECT_EQ(r.hops, 2);
  // DGX H100: 5, 4, 4, 5 NVLink links to the four NVSwitch chips.
  std::vector<double> up;
  for (const LinkShare& l : r.links)
    if (t.link(l.link).from == 0) up.push_back(l.share);
  ASSERT_EQ(up.size(), 4u);
  std::sort(up.begin(), up.end());
  EXPECT_DOUBLE_EQ(up[0], 4.0 / 18);
  EXPECT_DOUBLE_EQ(up[3], 5.0 / 18);
}

TEST(Topology, ThreeTiersWhenTwoDoNotFit) {
  const SystemSpec sys = load("gb300-nvl72.json");
  const int64_t n = 100000;
  const Topology t = Topology::build(sys, n);
  EXPECT_EQ(t.fabric_tiers(), 3);
  EXPECT_GT(t.count(VertexKind::core), 0);
  EXPECT_DOUBLE_EQ(t.scaleout_bisection().value(), static_cast<double>(n) / 2.0 * sys.domain.tray.nic.port_bandwidth.value());
  const Route r = t.route(0, n - 1);
  EXPECT_EQ(r.hops, 8);  // gpu nic leaf spine core spine leaf nic gpu
  EXPECT_NEAR(share_sum(r), r.hops, 1e-9);
}

TEST(Topology, CountsThatDoNotFitAreInputErrors) {
  EXPECT_THROW(Topology::build(load("h200-single.json"), 2), InputError);
  EXPECT_THROW(Topology::build(load("gb300-nvl72.json"), 0), InputError);
  SystemSpec sys = load("gb300-nvl72.json");
  sys.fabric->tiers = FatTreeTiers::two;
  try {
    Topology::build(sys, 100000);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("2-tier fat tree of radix 144 holds at most 144"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moeperf
