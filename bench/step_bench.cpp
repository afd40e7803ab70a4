// Benchmark: the cost model's speed on DeepSeek-V3 at 1,024 and 100,000 GB300 GPUs, single thread,
// against the targets (lowering + pricing < 100 ms at 1,024 GPUs; simulation < 0.5 s at 1,024 and
// < 5 s at 100,000 with peak memory < 1 GB; Chrome trace of the 1,024-GPU step < 50 MB).
//   build/bin/bench_step
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>

#include "model/pricing/cost.h"
#include "model/io/load.h"
#include "model/io/trace.h"
#include "model/study/predict.h"
#include "model/sim/sim.h"

using namespace moeperf;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

static Scenario at(int64_t gpus) {
  const std::string f = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb300-scaling.json";
  const int64_t fsdp = gpus / 8;
  return io::load_scenario(f, {io::parse_override("gpus=" + std::to_string(gpus)),
                               io::parse_override("parallelism.fsdp=" + std::to_string(fsdp)),
                               io::parse_override("batch.global_batch=" + std::to_string(6 * gpus))});
}

int main() {
  const Calibration cal;
  int failures = 0;
  auto check = [&](const char* what, double value, double limit, const char* unit) {
    std::printf("  %-44s %10.3f %-3s (limit %.3g: %.3f of limit)%s\n", what, value, unit, limit, value / limit,
                value <= limit ? "" : "  OVER");
    failures += value > limit;
  };
  std::printf("cost model speed, DeepSeek-V3 on GB300 NVL72, optimized stack, single thread\n");
  {
    const Scenario s = at(1024);
    auto t0 = Clock::now();
    const Topology topo = Topology::build(s.system, s.gpus);
    const ExpertLoad load = expert_load(s, cal);
    const StepGraph g = lower_step(s, load);
    const Pricer pr(s, topo, cal);
    Seconds serial = serial_time(g.classes[0], pr);
    const double lower_price = since(t0);
    // Correctness gate: the ops' model FLOPs add up to the MaxText count for this rank's tokens.
    double mf = 0;
    for (const Op& op : g.classes[0].ops) mf += op.model_flops.value();
    if (std::abs(mf / (static_cast<double>(g.tokens_per_gpu) * g.model_flops_per_token) - 1) > 1e-9) {
      std::printf("FAILED: op FLOPs do not add up\n");
      return 1;
    }
    std::printf(" 1,024 GPUs: %zu ops, sum of op times %.3f s\n", g.classes[0].ops.size(), serial.value());
    check("topology + routing + lowering + pricing", lower_price * 1e3, 100, "ms");
    t0 = Clock::now();
    const StepReport r = predict(s, cal);
    check("predict (all of the above + simulation)", since(t0), 0.5, "s");
    std::ostringstream trace;
    io::write_chrome_trace(r, trace);
    check("Chrome trace size", static_cast<double>(trace.str().size()) / 1e6, 50, "MB");
    std::printf("  (step %.3f s, %.1f TFLOPS/GPU)\n", r.step_time.value(), r.model_tflops_per_gpu);
  }
  {
    // With a fleet speed spread: the slowest of 100,000 GPUs is computed (an integral), not sampled.
    Scenario s = at(100000);
    s.speed_sigma = 0.02;
    const auto t0 = Clock::now();
    const StepReport r = predict(s, cal);
    const double t = since(t0);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf(" 100,000 GPUs (fleet spread 2 %%: compute x %.4f): step %.3f s, %.1f TFLOPS/GPU\n",
                r.graph->fleet_slowdown, r.step_time.value(), r.model_tflops_per_gpu);
    check("predict (topology, lowering, simulation)", t, 5, "s");
    check("peak RSS of the process", static_cast<double>(ru.ru_maxrss) / 1024.0, 1024, "MiB");
  }
  return failures == 0 ? 0 : 1;
}
