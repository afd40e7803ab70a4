// Times the expert GEMMs of kernels/expert_gemm.h three ways, plus one dense cuBLASLt GEMM of the
// same FLOPs, at DeepSeek-V3 sizes on device 0: H = 7168, I = 2048, 32 local experts; FC1 (N = 2I =
// 4096, K = H) and FC2 (N = H, K = I); rows per expert ragged in [2048, 2560) ("large") and in
// [256, 512] ("small", docs/executor.md's two targets). BF16 inputs, FP32 accumulate, BF16 out.
//
// Each way first passes a correctness gate: one row per expert (its middle row) and 256 spread
// columns against a CPU dot product in double, within BF16 output rounding plus FP32 accumulation
// error. Then 3 warm-up and 20 timed runs between CUDA events on one stream (side streams join
// back into it); the median is reported with TFLOP/s of the useful FLOPs (2 sum(m) N K), the
// fraction of the 790 TFLOP/s H200 BF16 ceiling, the fraction of the dense GEMM's rate measured in
// the same run, and the tile waste sum(ceil(m/128)*128)/sum(m). The padded loop's time includes
// gathering rows into and out of the padded buffers. The host copy of the counts
// (ExpertGemm::sync_counts, the op "moe.count_sync" every way needs first) is timed on its own.
// FP8: the same GEMMs with E4M3 inputs through ExpertGemm::run_fp8 (a cuBLASLt matmul per expert on
// 4 side streams), fp8_block128 (FP32 scale per 128 elements along K; compute capability 9.x) and
// mxfp8 (E8M0 scale per 32; >= 10.0): a precision the device lacks is skipped and says why (MXFP8
// on Hopper). Inputs are uniform floats quantized on the GPU (the activation quantization is timed
// on its own), weights K-major; each passes a gate against a CPU dot product of the dequantized
// operands, then is timed beside a dense FP8 GEMM of the same rows (one expert holding them all).
// Their fraction of ceiling is against 2 x 790 = 1580 TFLOP/s, an ASSUMED FP8 ceiling (twice the
// measured BF16 one, not measured), said in the output and the JSON; their time includes
// rearranging the scales into cuBLASLt's layout, which run_fp8 does every call.
// Writes JSON to argv[1]. Without a GPU it prints why and exits 0. About 20 s on an H200.
//
//   bench_expert_gemm out/expert_gemm.json
#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "kernels/event_timer.h"
#include "kernels/expert_gemm.h"
#include "kernels/moe_kernels.h"
#include "kernels/reference/mxfp8_ref.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace mk = moeperf::kernels;

namespace {

constexpr double kBf16CeilingFlops = 790e12;  // measured H200 dense BF16 GEMM ceiling (docs/executor.md)
constexpr double kFp8CeilingFlops = 2 * kBf16CeilingFlops;  // ASSUMED: twice BF16, not measured
constexpr int kFp8GateCols = 64;
constexpr int kWarmup = 3, kIters = 20;
constexpr int64_t kExperts = 32, kHidden = 7168, kInter = 2048;
constexpr int kGateCols = 256;

struct Gemm {
  const char* name;
  int64_t n, k;
};
struct Scenario {
  const char* name;
  std::vector<int64_t> counts;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of `f` enqueued on `s`, between events.
double time_on_stream(const std::function<void()>& f, cudaStream_t s) {
  moeperf::kernels::EventTimer timer;
  for (int i = 0; i < kWarmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < kIters; ++i) t.push_back(timer.seconds(s, f));
  return median_of(t);
}

std::vector<uint16_t> download_row(const uint16_t* d, int64_t row, int64_t width) {
  std::vector<uint16_t> h(static_cast<size_t>(width));
  MOEPERF_CUDA_CHECK(cudaMemcpy(h.data(), d + row * width, h.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  return h;
}

// The reference of one output column of a row: (dot product in double, sum of |products|).
using ColumnRef = std::function<std::pair<double, double>(int64_t col)>;

// Checks the middle row of each expert with rows, `cols` columns spread over n (offset by j %
// `jitter`), against row_ref(expert, row); tolerance 2^-8 |s| (BF16 output rounding) + `acc` x
// sum |products| (accumulation) + 1e-6.
bool gate_rows(const Scenario& sc, const Gemm& g, const uint16_t* d_c, int cols, int jitter, double acc,
               const std::function<ColumnRef(size_t, int64_t)>& row_ref, std::string& why) {
  MOEPERF_CUDA_CHECK(cudaDeviceSynchronize());
  int64_t row = 0;
  for (size_t e = 0; e < sc.counts.size(); ++e) {
    const int64_t m = sc.counts[e];
    if (m == 0) continue;
    const int64_t r = row + m / 2;
    const auto c = download_row(d_c, r, g.n);
    const ColumnRef ref = row_ref(e, r);
    for (int j = 0; j < cols; ++j) {
      const int64_t col = j * (g.n / cols) + (j % jitter);
      const auto [s, mag] = ref(col);
      const double got = mk::bf16_bits_to_float(c[static_cast<size_t>(col)]);
      const double tol = 0x1p-8 * std::fabs(s) + acc * mag + 1e-6;
      if (!(std::fabs(got - s) <= tol)) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "expert %zu row %lld col %lld: got %g, want %g (tolerance %g)", e, static_cast<long long>(r),
                      static_cast<long long>(col), got, s, tol);
        why = buf;
        return false;
      }
    }
    row += m;
  }
  return true;
}

// The BF16 gate: kGateCols columns, against the BF16 operands' dot product in double.
bool gate(const Scenario& sc, const Gemm& g, const uint16_t* d_a, const std::vector<uint16_t>& w, const uint16_t* d_c,
          std::string& why) {
  return gate_rows(sc, g, d_c, kGateCols, 7, 1e-5, [&](size_t e, int64_t r) -> ColumnRef {
    const auto a = download_row(d_a, r, g.k);
    const uint16_t* we = w.data() + static_cast<int64_t>(e) * g.k * g.n;
    return [a, we, &g](int64_t col) {
      double s = 0, mag = 0;
      for (int64_t x = 0; x < g.k; ++x) {
        const double p = static_cast<double>(mk::bf16_bits_to_float(a[static_cast<size_t>(x)])) *
                         mk::bf16_bits_to_float(we[x * g.n + col]);
        s += p, mag += std::fabs(p);
      }
      return std::make_pair(s, mag);
    };
  }, why);
}

// Dequantized row `row` of a [rows x k] FP8 matrix (codes + row-major scales) on the host.
std::vector<float> fp8_row(mk::GemmPrecision p, const uint8_t* d_q, const void* d_s, int64_t row, int64_t k) {
  const int64_t b = mk::scale_block(p), sb = p == mk::GemmPrecision::mxfp8 ? 1 : 4;
  std::vector<uint8_t> q(static_cast<size_t>(k)), s(static_cast<size_t>(k / b * sb));
  MOEPERF_CUDA_CHECK(cudaMemcpy(q.data(), d_q + row * k, q.size(), cudaMemcpyDeviceToHost));
  MOEPERF_CUDA_CHECK(cudaMemcpy(s.data(), static_cast<const uint8_t*>(d_s) + row * (k / b) * sb, s.size(), cudaMemcpyDeviceToHost));
  std::vector<float> x(static_cast<size_t>(k));
  if (p == mk::GemmPrecision::mxfp8) {
    moeperf::ref::mxfp8_dequantize(q.data(), s.data(), k, x.data());
  } else {
    std::vector<float> sf(s.size() / 4);
    std::memcpy(sf.data(), s.data(), s.size());
    moeperf::ref::fp8_block128_dequantize(q.data(), sf.data(), k, x.data());
  }
  return x;
}

// The FP8 gate: the middle row of each expert with rows, kFp8GateCols columns, against the
// dequantized operands' dot product in double; BF16 output rounding plus FP32 (and Hopper's
// narrower FP8) accumulation error.
bool gate_fp8(mk::GemmPrecision p, const Scenario& sc, const Gemm& g, const mk::Fp8Operands& in, const uint16_t* d_c, std::string& why) {
  return gate_rows(sc, g, d_c, kFp8GateCols, 5, 0x1p-10, [&](size_t e, int64_t r) -> ColumnRef {
    const auto a = fp8_row(p, in.a, in.a_scale, r, g.k);
    return [a, e, p, &in, &g](int64_t col) {
      const auto w = fp8_row(p, in.w, in.w_scale, static_cast<int64_t>(e) * g.n + col, g.k);
      double s = 0, mag = 0;
      for (int64_t x = 0; x < g.k; ++x) {
        const double prod = static_cast<double>(a[static_cast<size_t>(x)]) * w[static_cast<size_t>(x)];
        s += prod, mag += std::fabs(prod);
      }
      return std::make_pair(s, mag);
    };
  }, why);
}

int run(const char* json_path) {
  const mk::DeviceInfo dev = mk::query_devices();
  if (dev.count == 0) {
    std::printf("bench_expert_gemm: skipped: %s\n", dev.reason.c_str());
    return 0;
  }
  MOEPERF_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t s;
  MOEPERF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("bench_expert_gemm on %s (sm_%d%d, %d SMs): BF16 in, FP32 accumulate, BF16 out; %lld experts, %d timed runs\n",
              dev.devices[0].name.c_str(), dev.devices[0].cc_major, dev.devices[0].cc_minor, dev.devices[0].sms,
              static_cast<long long>(kExperts), kIters);

  const std::vector<Gemm> gemms{{"fc1", 2 * kInter, kHidden}, {"fc2", kHidden, kInter}};
  std::vector<Scenario> scenarios{{"large", {}}, {"small", {}}};
  for (int64_t e = 0; e < kExperts; ++e) {
    scenarios[0].counts.push_back(2048 + (e * 193) % 512);  // ragged in [2048, 2560)
    scenarios[1].counts.push_back(256 + (e * 37) % 257);    // ragged in [256, 512]
  }
  int64_t max_rows = 0, max_nk = 0, max_n = 0, max_k = 0;
  for (const auto& sc : scenarios) max_rows = std::max(max_rows, std::accumulate(sc.counts.begin(), sc.counts.end(), int64_t{0}));
  for (const auto& g : gemms) max_nk = std::max(max_nk, g.n * g.k), max_n = std::max(max_n, g.n), max_k = std::max(max_k, g.k);

  mk::DeviceBuffer<uint16_t> d_a(static_cast<size_t>(max_rows * max_k)), d_w(static_cast<size_t>(kExperts * max_nk)),
      d_c(static_cast<size_t>(max_rows * max_n));
  auto owner = std::make_unique<mk::ExpertGemm>(s, 4);
  mk::ExpertGemm& eg = *owner;

  nlohmann::json results = nlohmann::json::array();
  bool all_correct = true;

  // moe.count_sync: the counts device -> host, waited for.
  double count_sync_s = 0;
  {
    mk::DeviceBuffer<int64_t> d_counts(scenarios[0].counts);
    std::vector<double> t;
    for (int i = 0; i < kWarmup + kIters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto h = eg.sync_counts(d_counts.get(), kExperts);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (h != scenarios[0].counts) throw std::runtime_error("sync_counts returned wrong counts");
      if (i >= kWarmup) t.push_back(dt);
    }
    count_sync_s = median_of(t);
    std::printf("moe.count_sync (32 int64 counts device -> host, waited): %.2f us (host clock)\n", count_sync_s * 1e6);
  }

  std::printf("%-6s %-6s %-15s %10s %9s %8s %9s %6s\n", "gemm", "rows", "way", "time", "TFLOP/s", "of 790", "of dense", "waste");
  for (const Gemm& g : gemms) {
    mk::fill_bf16(d_a.get(), max_rows * g.k, 100 + static_cast<uint64_t>(g.k), -1.0f, 1.0f, false, s);
    mk::fill_bf16(d_w.get(), kExperts * g.k * g.n, 200 + static_cast<uint64_t>(g.n), -1.0f, 1.0f, false, s);
    const std::vector<uint16_t> w = d_w.download(static_cast<size_t>(kExperts * g.k * g.n));
    for (const Scenario& sc : scenarios) {
      const int64_t rows = std::accumulate(sc.counts.begin(), sc.counts.end(), int64_t{0});
      const int64_t mn = *std::min_element(sc.counts.begin(), sc.counts.end()), mx = *std::max_element(sc.counts.begin(), sc.counts.end());
      const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(g.n) * static_cast<double>(g.k);
      const double waste = mk::tile_waste(sc.counts);
      const std::string shape = std::string(g.name) + " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) + ", " +
                                std::to_string(rows) + " rows, " + std::to_string(mn) + ".." + std::to_string(mx) + " per expert";
      // Dense reference: the same rows against expert 0's weight in one GEMM.
      const double dense_s = time_on_stream([&] { eg.dense(d_a.get(), d_w.get(), rows, g.n, g.k, d_c.get()); }, s);
      const double dense_rate = flops / dense_s;
      std::printf("%-6s %-6s %-15s %8.3f ms %9.1f %7.1f%% %8.1f%% %6.3f\n", g.name, sc.name, "dense (ref)", dense_s * 1e3,
                  dense_rate * 1e-12, 100 * dense_rate / kBf16CeilingFlops, 100.0, 1.0);
      results.push_back({{"gemm", g.name}, {"scenario", sc.name}, {"precision", "bf16"}, {"shape", shape}, {"way", "dense"}, {"n", g.n}, {"k", g.k},
                         {"rows", rows}, {"correct", true}, {"median_s", dense_s}, {"flops", flops}, {"flops_per_s", dense_rate},
                         {"fraction_of_ceiling", dense_rate / kBf16CeilingFlops}, {"fraction_of_dense", 1.0}});
      for (mk::ExpertGemmWay way : mk::kExpertGemmWays) {
        MOEPERF_CUDA_CHECK(cudaMemsetAsync(d_c.get(), 0xFF, static_cast<size_t>(rows * g.n) * 2, s));  // NaN: unwritten rows fail
        eg.run(way, sc.counts, d_a.get(), d_w.get(), g.n, g.k, d_c.get());
        std::string why;
        const bool ok = gate(sc, g, d_a.get(), w, d_c.get(), why);
        nlohmann::json j{{"gemm", g.name}, {"scenario", sc.name}, {"precision", "bf16"}, {"shape", shape}, {"way", mk::to_string(way)}, {"n", g.n}, {"k", g.k},
                         {"rows", rows}, {"counts", sc.counts}, {"tile_waste", waste}, {"correct", ok}, {"flops", flops}};
        if (!ok) {
          all_correct = false;
          std::printf("%-6s %-6s %-15s WRONG (gate failed, not timed): %s\n", g.name, sc.name, mk::to_string(way), why.c_str());
          j["median_s"] = nullptr;
          j["error"] = why;
          results.push_back(j);
          continue;
        }
        const double t = time_on_stream([&] { eg.run(way, sc.counts, d_a.get(), d_w.get(), g.n, g.k, d_c.get()); }, s);
        const double rate = flops / t;
        std::printf("%-6s %-6s %-15s %8.3f ms %9.1f %7.1f%% %8.1f%% %6.3f\n", g.name, sc.name, mk::to_string(way), t * 1e3, rate * 1e-12,
                    100 * rate / kBf16CeilingFlops, 100 * rate / dense_rate, waste);
        j.update({{"median_s", t}, {"flops_per_s", rate}, {"fraction_of_ceiling", rate / kBf16CeilingFlops},
                  {"fraction_of_dense", rate / dense_rate}, {"median_s_with_count_sync", t + count_sync_s}});
        results.push_back(j);
      }
    }
  }
  std::printf("(padded_loop pads every expert to the busiest one's rows and includes the gather/scatter copies; "
              "its TFLOP/s count useful FLOPs only.)\n");

  // ---- FP8: E4M3 inputs with block scales, FP32 accumulate, BF16 out.
  nlohmann::json skipped = nlohmann::json::array();
  std::printf("\nFP8 expert GEMMs (cuBLASLt loop on 4 side streams; \"of 1580\" is against an ASSUMED FP8 ceiling of 2 x 790 "
              "TFLOP/s, not measured; times include the per-call scale rearrangement)\n");
  owner.reset();  // the BF16 buffers' GEMM object goes; FP8 gets its own
  auto fp8_owner = std::make_unique<mk::ExpertGemm>(s, 4);
  for (mk::GemmPrecision p : {mk::GemmPrecision::fp8_block128, mk::GemmPrecision::mxfp8}) {
    std::string why;
    if (!mk::precision_supported(p, dev.devices[0].cc_major, dev.devices[0].cc_minor, &why)) {
      std::printf("%s: skipped: %s\n", mk::to_string(p), why.c_str());
      skipped.push_back({{"precision", mk::to_string(p)}, {"reason", why}});
      continue;
    }
    const int64_t blk = mk::scale_block(p), sbytes = p == mk::GemmPrecision::mxfp8 ? 1 : 4;
    std::printf("%-6s %-6s %-22s %10s %9s %8s %9s\n", "gemm", "rows", "precision / way", "time", "TFLOP/s", "of 1580", "of dense");
    for (const Gemm& g : gemms) {
      // Floats in [-1, 1) quantized on the GPU: A [max_rows x k], W^T [experts x n x k].
      mk::DeviceBuffer<float> fa(static_cast<size_t>(max_rows * g.k)), fw(static_cast<size_t>(kExperts * g.n * g.k));
      mk::DeviceBuffer<uint8_t> qa(static_cast<size_t>(max_rows * g.k)), qw(static_cast<size_t>(kExperts * g.n * g.k)),
          sa(static_cast<size_t>(max_rows * g.k / blk * sbytes)), sw(static_cast<size_t>(kExperts * g.n * g.k / blk * sbytes));
      mk::fill_f32_random(fa.get(), max_rows * g.k, 300 + static_cast<uint64_t>(g.k), -1.0f, 1.0f, s);
      mk::fill_f32_random(fw.get(), kExperts * g.n * g.k, 400 + static_cast<uint64_t>(g.n), -1.0f, 1.0f, s);
      auto quantize = [&](const float* x, int64_t n, uint8_t* q, void* sc) {
        if (p == mk::GemmPrecision::mxfp8)
          mk::mxfp8_quantize(x, n, q, static_cast<uint8_t*>(sc), s);
        else
          mk::fp8_block128_quantize(x, n, q, static_cast<float*>(sc), s);
      };
      quantize(fw.get(), kExperts * g.n * g.k, qw.get(), sw.get());
      const mk::Fp8Operands in{qa.get(), sa.get(), qw.get(), sw.get()};
      for (const Scenario& sc : scenarios) {
        const int64_t rows = std::accumulate(sc.counts.begin(), sc.counts.end(), int64_t{0});
        const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(g.n) * static_cast<double>(g.k);
        const double quant_s = time_on_stream([&] { quantize(fa.get(), rows * g.k, qa.get(), sa.get()); }, s);
        const double dense_s = time_on_stream([&] { fp8_owner->run_fp8(p, {rows}, in, g.n, g.k, d_c.get()); }, s);
        const double dense_rate = flops / dense_s;
        const std::string label = std::string(mk::to_string(p)) + " dense (ref)";
        std::printf("%-6s %-6s %-22s %8.3f ms %9.1f %7.1f%% %8.1f%%   (A quantize %.3f ms)\n", g.name, sc.name, label.c_str(),
                    dense_s * 1e3, dense_rate * 1e-12, 100 * dense_rate / kFp8CeilingFlops, 100.0, quant_s * 1e3);
        results.push_back({{"gemm", g.name}, {"scenario", sc.name}, {"precision", mk::to_string(p)}, {"way", "dense"}, {"n", g.n},
                           {"k", g.k}, {"rows", rows}, {"correct", true}, {"median_s", dense_s}, {"flops", flops},
                           {"flops_per_s", dense_rate}, {"fraction_of_ceiling", dense_rate / kFp8CeilingFlops},
                           {"ceiling_assumed", true}, {"fraction_of_dense", 1.0}, {"quantize_a_s", quant_s}});
        MOEPERF_CUDA_CHECK(cudaMemsetAsync(d_c.get(), 0xFF, static_cast<size_t>(rows * g.n) * 2, s));
        fp8_owner->run_fp8(p, sc.counts, in, g.n, g.k, d_c.get());
        std::string gwhy;
        const bool ok = gate_fp8(p, sc, g, in, d_c.get(), gwhy);
        nlohmann::json j{{"gemm", g.name}, {"scenario", sc.name}, {"precision", mk::to_string(p)}, {"way", "lt_multistream"},
                         {"n", g.n}, {"k", g.k}, {"rows", rows}, {"counts", sc.counts}, {"tile_waste", mk::tile_waste(sc.counts)},
                         {"correct", ok}, {"flops", flops}, {"quantize_a_s", quant_s}, {"ceiling_assumed", true}};
        const std::string wl = std::string(mk::to_string(p)) + " lt_multistream";
        if (!ok) {
          all_correct = false;
          std::printf("%-6s %-6s %-22s WRONG (gate failed, not timed): %s\n", g.name, sc.name, wl.c_str(), gwhy.c_str());
          j["median_s"] = nullptr;
          j["error"] = gwhy;
          results.push_back(j);
          continue;
        }
        const double t = time_on_stream([&] { fp8_owner->run_fp8(p, sc.counts, in, g.n, g.k, d_c.get()); }, s);
        const double rate = flops / t;
        std::printf("%-6s %-6s %-22s %8.3f ms %9.1f %7.1f%% %8.1f%%\n", g.name, sc.name, wl.c_str(), t * 1e3, rate * 1e-12,
                    100 * rate / kFp8CeilingFlops, 100 * rate / dense_rate);
        j.update({{"median_s", t}, {"flops_per_s", rate}, {"fraction_of_ceiling", rate / kFp8CeilingFlops},
                  {"fraction_of_dense", rate / dense_rate}, {"median_s_with_count_sync", t + count_sync_s}});
        results.push_back(j);
      }
      MOEPERF_CUDA_CHECK(cudaStreamSynchronize(s));
    }
  }

  MOEPERF_CUDA_CHECK(cudaStreamSynchronize(s));
  fp8_owner.reset();  // drains and frees before its stream goes
  MOEPERF_CUDA_CHECK(cudaStreamDestroy(s));
  nlohmann::json out{{"device", dev.devices[0].name},
                     {"cc", std::to_string(dev.devices[0].cc_major) + "." + std::to_string(dev.devices[0].cc_minor)},
                     {"bf16_ceiling_flops_per_s", kBf16CeilingFlops},
                     {"fp8_ceiling_flops_per_s", kFp8CeilingFlops},
                     {"fp8_ceiling_note", "assumed: twice the measured BF16 ceiling, not measured"},
                     {"skipped", skipped},
                     {"experts", kExperts},
                     {"iterations", kIters},
                     {"count_sync_s", count_sync_s},
                     {"all_correct", all_correct},
                     {"results", results}};
  if (json_path) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench_expert_gemm: cannot write %s\n", json_path);
      return 1;
    }
  }
  return all_correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_expert_gemm: %s\n", e.what());
    return 1;
  }
}
