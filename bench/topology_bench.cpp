// Benchmark: build the topology graph of a large GB300 NVL72 cluster and print time and memory
// against the targets (a 100,000-GPU graph "in seconds and bounded memory").
//   build/bin/bench_topology [GPUS]      (default 100000)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/io/load.h"
#include "model/hardware/topology.h"

int main(int argc, char** argv) {
  using namespace moeperf;
  const int64_t gpus = argc > 1 ? std::atoll(argv[1]) : 100000;
  const SystemSpec sys = io::load_system(std::string(MOEPERF_SOURCE_DIR) + "/topologies/gb300-nvl72.json");
  constexpr double kTimeLimitS = 5.0, kMemoryLimitMB = 1024.0;

  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const Topology t = Topology::build(sys, gpus);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Correctness gate: the graph's bisection equals the closed form N/2 x NIC bandwidth.
  const double expect = static_cast<double>(gpus) / 2.0 * sys.domain.tray.nic.port_bandwidth.value();
  if (std::abs(t.scaleout_bisection().value() - expect) > 1e-6 * expect) {
    std::fprintf(stderr, "FAILED: bisection %.6g != %.6g\n", t.scaleout_bisection().value(), expect);
    return 1;
  }
  const auto t1 = std::chrono::steady_clock::now();
  const Route r = t.route(0, gpus - 1);
  const double route_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  const double peak_mb = static_cast<double>(after.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux

  std::printf("topology build: %lld GPUs, %lld vertices, %lld directed links, %d fabric tiers\n",
              static_cast<long long>(gpus), static_cast<long long>(t.vertex_count()),
              static_cast<long long>(t.link_count()), t.fabric_tiers());
  std::printf("  build time      %8.3f s   (limit %.1f s: %.3f of limit)\n", build_s, kTimeLimitS, build_s / kTimeLimitS);
  std::printf("  graph memory    %8.1f MB  (CSR arrays)\n", static_cast<double>(t.memory_bytes()) / 1e6);
  std::printf("  peak RSS        %8.1f MiB (limit %.0f MiB: %.3f of limit; process total incl. build buffers)\n",
              peak_mb, kMemoryLimitMB, peak_mb / kMemoryLimitMB);
  std::printf("  one route       %8.3f ms  (GPU 0 -> GPU %lld, %d hops, %zu links)\n", route_s * 1e3,
              static_cast<long long>(gpus - 1), r.hops, r.links.size());
  return build_s <= kTimeLimitS && peak_mb <= kMemoryLimitMB ? 0 : 1;
}
