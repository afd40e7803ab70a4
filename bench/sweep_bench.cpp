// Benchmark: `moeperf sweep`'s engine on DeepSeek-V3 layouts on GB300 (EP x micro-batch x global
// batch x expert GEMM format, FSDP derived), points per second on 1 thread and on every core, the
// rows identical.
//   build/bin/bench_sweep [POINTS]      (default 40 of the 1,000; all of them: 1000)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "model/io/sweep.h"

using namespace moeperf;
using Clock = std::chrono::steady_clock;

// Every `stride`-th point of the sweep, as `moeperf sweep` computes its rows.
static std::vector<std::string> rows(const io::SweepSpec& sp, size_t n, size_t stride, unsigned threads, double* seconds) {
  std::vector<std::string> out(n);
  std::atomic<size_t> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) out[i] = io::sweep_csv_row(sp, io::run_point(sp, i * stride));
    });
  for (auto& t : pool) t.join();
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

int main(int argc, char** argv) {
  const size_t want = argc > 1 ? static_cast<size_t>(std::stoul(argv[1])) : 40;
  // The README's 1,000-point sweep (examples/studies/README.md): EP x micro-batch x global batch x
  // expert GEMM format, FSDP derived; the benchmark takes every (1000 / POINTS)-th point.
  io::SweepSpec sp;
  sp.scenario = std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb300-optimized.json";
  sp.axes.push_back(io::parse_vary("parallelism.ep=1,2,4,8,16,32,64,128"));
  sp.axes.push_back(io::parse_vary("batch.micro_batch=1,2,3,6,12"));
  sp.axes.push_back(io::parse_vary("batch.global_batch=768..3840+768"));
  sp.axes.push_back(io::parse_vary("precision.expert_gemm=bf16,fp16,fp8,mxfp8,nvfp4"));
  sp.derive.push_back(io::parse_derive("parallelism.fsdp=gpus/(ep*tp*pp*dp)"));
  const size_t all = io::sweep_size(sp), n = std::min(want, all), stride = all / n;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  double t1 = 0, tn = 0;
  const auto a = rows(sp, n, stride, 1, &t1);
  const auto b = rows(sp, n, stride, cores, &tn);
  size_t ok = 0;
  for (const auto& r : a) ok += r.find(",ok,") != std::string::npos;
  std::printf("sweep: %zu of the %zu DeepSeek-V3 layouts on 128 GB300 (every %zu-th; %zu feasible)\n", n, all, stride, ok);
  std::printf("  1 thread:  %7.2f s  %7.1f points/s\n", t1, static_cast<double>(n) / t1);
  std::printf("  %u threads: %7.2f s  %7.1f points/s  (x%.2f of 1 thread)\n", cores, tn, static_cast<double>(n) / tn, t1 / tn);
  if (a != b) {
    std::printf("FAILED: the rows differ between 1 and %u threads\n", cores);
    return 1;
  }
  std::printf("  rows identical on 1 and %u threads\n", cores);
  return 0;
}
