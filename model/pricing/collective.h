// Collectives priced on the topology graph. A collective over a group of GPUs becomes a traffic
// matrix for its algorithm (rings for all-gather / reduce-scatter / all-reduce, NVLink-switch
// in-network reduction for all-reduce inside one switch domain, direct pairwise exchange for
// all-to-all), routed over the graph with ECMP shares. Loads are kept per resource class:
//
//   time(bytes) = launch + steps x hop latency + bytes x max over resources (seconds per byte),
//
// where a resource's seconds per byte is its most loaded link's load per byte over that link's
// achieved bandwidth (link rate x the NVLink/IB/host efficiency parameter). The simulator shares
// each resource class between concurrent collectives (fluid, max-min fair).
//
//   CollectiveCost c = collective_cost(Collective::all_gather, members, topo, cal);
//   Seconds t = c.time(gibibytes(1));
//
// Bus bandwidth factors (nccl-tests): all-gather, reduce-scatter, all-to-all: (n-1)/n; all-reduce:
// 2(n-1)/n (bus_factor below).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/params.h"
#include "model/specs.h"
#include "model/workload/step.h"
#include "model/hardware/topology.h"
#include "model/units.h"

namespace moeperf {

// What a collective's bytes load, per GPU of the busiest rank class.
enum class Resource : uint8_t { nvlink, nic, fabric, host, kCount };
inline constexpr int kResourceCount = static_cast<int>(Resource::kCount);
const char* to_string(Resource r);

struct CollectiveCost {
  Seconds latency;                                 // launch + steps x per-step latency
  std::array<double, kResourceCount> s_per_byte{};  // per byte of the collective's size
  // A kernel's own limit per resource, per byte of the size, apart from what it takes of the
  // links (s_per_byte): a fused EP kernel at the SMs it holds (and the combine's sums, the API's
  // buffer copies) reaches less than the links would carry, and its links stay free for other
  // traffic meanwhile; alone it runs at the slowest of these. All 0: none (NCCL's kernels, whose
  // rates are the links' own fractions).
  std::array<double, kResourceCount> own_s_per_byte{};
  double own_bottleneck_s_per_byte() const;
  int steps = 0;
  const char* algorithm = "";
  // HBM bytes a member reads and writes per byte of the collective's size, which the simulator
  // takes from memory-bound kernels beside it: 2 when it reads what it sends and writes what it
  // receives (all-gather, all-to-all, send/receive, NVLS); a ring reduce-scatter also reads its own
  // chunk to add it in (3); a ring or tree all-reduce is a reduce-scatter then an all-gather (5).
  double hbm_bytes_per_byte = 2.0;
  // Over a host-memory transport (NvlinkDomainSpec::host_memory) a small collective's buffers stay
  // in the CPU's caches: the link's seconds per byte at size S are s / (1 + (cache_speedup - 1) x
  // cache_bytes / (cache_bytes + S)). cache_speedup 1: no such effect (every GPU transport).
  double cache_bytes = 0, cache_speedup = 1;
  // These costs at a collective of `b` bytes (the cache applied); time() prices through it.
  CollectiveCost at(Bytes b) const;
  Seconds time(Bytes b) const;
  double bottleneck_s_per_byte() const;
};

// nccl-tests bus bandwidth factor: busbw = algbw x factor.
double bus_factor(Collective c, int64_t n);

// GPUs of the group of kind `g` that contains `rank`, under the rank order tp, cp, ep, fsdp, dp, pp.
std::vector<int64_t> group_members(Group g, const Parallelism& p, int64_t rank);
int64_t group_size(Group g, const Parallelism& p);
// Among the groups of kind `g` in the first pipeline stage, the one that spans the most NVLink
// domains of `t` (then the one with the smallest piece in a domain), the first such from rank 0:
// the one whose collective is slowest, which a synchronized step waits for. Rank 0's group when
// every group spans alike (the usual layout). Later stages are taken to straddle as the first.
std::vector<int64_t> widest_group(Group g, const Parallelism& p, const Topology& t, int64_t gpus);

// NCCL's double binary tree over n nodes (graph/trees.cc): the parent of node r in tree 0 or 1,
// -1 for that tree's root. The tree all-reduce between NVLink domains runs over it.
int64_t nccl_btree_parent(int64_t n, int64_t r);
int64_t nccl_dtree_parent(int64_t n, int64_t r, int tree);

// E[the fullest of `bins` bins] when `balls` balls fall uniformly and independently: exact up to
// 200 balls, Poissonized above (independent Poisson counts, exact on the lattice; within 0.5 % of
// the exact law). Cached.
double expected_max_balls(int64_t balls, int bins);
// Static ECMP: a group's `flows` share a leaf's `uplinks` with `concurrent` - 1 times as many flows of
// the other groups running the same collective; the busiest link carries E[max] of all of them
// hashed, each of this group's flow size: this many times this group's mean share F / U (1 with
// adaptive routing; with one group alone, one flow per link on average, never below 1).
double ecmp_collision_factor(int64_t flows, int uplinks, double concurrent = 1.0);

// Cost of a collective whose `size` semantics follow Op::bytes. For all-to-all, `size` is what each
// member sends to the others (spread evenly over them). This is the first of the algorithms below
// that applies: NVLS all-reduce in one switch domain, else ring; direct all-to-all.
// allow_nvls = false: a ring all-reduce even where NVLS could run.
CollectiveCost collective_cost(Collective c, const std::vector<int64_t>& members, const Topology& t,
                               const Calibration& cal, bool allow_nvls = true);

// What one token's rows do in an all-to-all (dispatch or combine). fanout: destination ranks per
// token (k, or the distinct ranks when de-duplicated per rank); node_fanout: distinct NVLink domains
// per token (own one included) when the dispatcher crosses each remote domain once and fans out
// over NVLink there; 0 when it does not de-duplicate per domain.
struct AllToAllShape {
  double fanout = 1;
  double node_fanout = 0;
};

// Every algorithm NCCL-like libraries would consider for this collective on this group; the caller
// (Pricer) takes the fastest at its message size, as NCCL's tuner does:
//  - all-reduce: NVLS inside one switch domain; ring (rail-aligned channels); tree when the group
//    spans domains (NVLink chain inside each domain, double binary tree between domains: at most
//    the ring's NIC bytes, half of them for two domains, and 2 log2(D) network steps instead of
//    2 (D - 1)); NVLS tree where the domains have NVLink switches (in-switch reduction inside);
//  - all-to-all: direct (every pair over its own route); hierarchical when the group spans domains
//    (each row crosses the network once to the GPU on the destination's rail in its domain, then
//    NVLink; with node_fanout > 0 a token crosses to a remote domain once, the only way offered then);
//  - others: collective_cost.
// The members split by NVLink domain, in member order (members sorted by GPU id).
std::vector<std::vector<int64_t>> by_domain(const Topology& t, const std::vector<int64_t>& members);

std::vector<CollectiveCost> collective_algorithms(Collective c, const std::vector<int64_t>& members, const Topology& t,
                                                  const Calibration& cal, const AllToAllShape& shape = {});
// nvls: the domains reduce in their NVLink switches (NCCL's NVLS tree) instead of a chain.
CollectiveCost all_reduce_tree_cost(const std::vector<int64_t>& members, const Topology& t, const Calibration& cal,
                                    bool nvls = false);
CollectiveCost all_to_all_hierarchical_cost(const std::vector<int64_t>& members, const Topology& t,
                                            const Calibration& cal, const AllToAllShape& shape);

namespace detail {
// The direct and the hierarchical all-to-all with every pair added one by one, O(n^2): the
// references the closed forms above (add_all_pairs, the summed NVLink forwarding) are tested against.
CollectiveCost all_to_all_direct_pairwise(const std::vector<int64_t>& members, const Topology& t, const Calibration& cal);
CollectiveCost all_to_all_hierarchical_pairwise(const std::vector<int64_t>& members, const Topology& t,
                                                const Calibration& cal, const AllToAllShape& shape);
}  // namespace detail

// Host <-> device copy of one GPU over its CPU link (offload); d2h: device to host.
CollectiveCost host_copy_cost(const Topology& t, const SystemSpec& sys, const Calibration& cal, bool d2h = false);

}  // namespace moeperf
