// Times the MoE kernels of kernels/moe_kernels.h at DeepSeek-V3 sizes (docs/executor.md: T = 8192,
// k = 8, H = 7168, E = 256, I = 2048) on device 0. Each kernel first passes a correctness gate
// against its CPU reference (on a prefix of rows where the full reference would take minutes);
// then 5 warm-up and 50 timed launches with CUDA events, a 256 MB memset flushing L2 before every
// timed launch of a memory-bound kernel; small kernels are timed as 20 launches under CUDA-graph
// replay. Prints achieved / limit (bytes / 4.3 TB/s, the measured H200 copy ceiling, or the time
// target) and writes JSON to argv[1]. Without a GPU it prints why and exits 0.
//
//   bench_kernels out/kernels.json
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device.h"
#include "kernels/event_timer.h"
#include "kernels/moe_kernels.h"
#include "kernels/reference/moe_ref.h"
#include "kernels/reference/mxfp8_ref.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mk = moeperf::kernels;
namespace ref = moeperf::ref;

namespace {

constexpr double kCopyCeilingBytesPerSecond = 4.3e12;  // measured H200 copy ceiling (docs/executor.md)
constexpr int kWarmup = 5, kIters = 50, kGraphLaunches = 20;
constexpr size_t kFlushBytes = size_t{256} << 20;

template <class T>
using Buf = moeperf::kernels::DeviceBuffer<T>;
using moeperf::kernels::random_floats;

struct Timing {
  double median_s = 0, mean_s = 0;
};

// Per-launch time: memory-bound kernels one launch per event pair after an L2 flush; small ones
// as kGraphLaunches launches captured in a graph, replay time / kGraphLaunches.
Timing time_kernel(const std::function<void(cudaStream_t)>& launch, bool flush_l2, cudaStream_t s, void* flush) {
  moeperf::kernels::EventTimer timer;
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t graph = nullptr;
  if (!flush_l2) {
    MOEPERF_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kGraphLaunches; ++i) launch(s);
    MOEPERF_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    MOEPERF_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  }
  auto once = [&] {
    if (exec) MOEPERF_CUDA_CHECK(cudaGraphLaunch(exec, s));
    else launch(s);
  };
  for (int i = 0; i < kWarmup; ++i) once();
  std::vector<double> t;
  for (int i = 0; i < kIters; ++i) {
    if (flush_l2) MOEPERF_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xFF, kFlushBytes, s));
    t.push_back(timer.seconds(s, once) / (exec ? kGraphLaunches : 1));
  }
  if (exec) MOEPERF_CUDA_CHECK(cudaGraphExecDestroy(exec));
  if (graph) MOEPERF_CUDA_CHECK(cudaGraphDestroy(graph));
  std::sort(t.begin(), t.end());
  Timing r;
  r.median_s = t[t.size() / 2];
  for (double x : t) r.mean_s += x / static_cast<double>(t.size());
  return r;
}

struct Report {
  nlohmann::json results = nlohmann::json::array();
  bool all_correct = true;

  // bytes > 0: scored against the copy ceiling; else against target_s.
  void add(const std::string& name, const std::string& shape, bool correct, const Timing& t, double bytes,
           double target_fraction, double target_s) {
    all_correct = all_correct && correct;
    nlohmann::json j{{"kernel", name}, {"shape", shape}, {"correct", correct}, {"median_s", t.median_s}, {"mean_s", t.mean_s}};
    if (!correct) {
      std::printf("%-22s %-34s WRONG (gate failed, not timed)\n", name.c_str(), shape.c_str());
    } else if (bytes > 0) {
      const double bw = bytes / t.median_s, frac = bw / kCopyCeilingBytesPerSecond;
      j.update({{"bytes", bytes}, {"bytes_per_s", bw}, {"fraction_of_copy_ceiling", frac}, {"target_fraction", target_fraction},
                {"meets_target", frac >= target_fraction}});
      std::printf("%-22s %-34s %9.2f us  %5.2f TB/s = %5.1f %% of 4.3 TB/s (target %.0f %%)%s\n", name.c_str(),
                  shape.c_str(), t.median_s * 1e6, bw * 1e-12, 100 * frac, 100 * target_fraction,
                  frac >= target_fraction ? "" : "  BELOW TARGET");
    } else {
      j.update({{"target_s", target_s}, {"meets_target", t.median_s <= target_s}});
      std::printf("%-22s %-34s %9.2f us  (target <= %.0f us)%s\n", name.c_str(), shape.c_str(), t.median_s * 1e6,
                  target_s * 1e6, t.median_s <= target_s ? "" : "  ABOVE TARGET");
    }
    if (!correct) j["median_s"] = nullptr;
    results.push_back(j);
  }
};

const Timing kNotTimed{};

int run(const char* json_path) {
  const mk::DeviceInfo dev = mk::query_devices();
  if (dev.count == 0) {
    std::printf("bench_kernels: skipped: %s\n", dev.reason.c_str());
    return 0;
  }
  MOEPERF_CUDA_CHECK(cudaSetDevice(0));
  cudaStream_t s;
  MOEPERF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Buf<uint8_t> flush(kFlushBytes);
  Report rep;
  std::printf("bench_kernels on %s (sm_%d%d, %d SMs)\n", dev.devices[0].name.c_str(), dev.devices[0].cc_major,
              dev.devices[0].cc_minor, dev.devices[0].sms);

  const int64_t T = 8192, E = 256, H = 7168, I = 2048;
  const int k = 8;
  const int64_t R = T * k;  // 65,536 routed rows
  const std::string shape_router = "T=8192 E=256 k=8 G=8/4 sigmoid";

  // Router (DeepSeek-V3: sigmoid, bias, 8 groups keep 4).
  const auto logits = random_floats(static_cast<size_t>(T * E), -4.f, 4.f, 1);
  const auto bias = random_floats(static_cast<size_t>(E), -0.1f, 0.1f, 2);
  Buf<float> d_logits(logits), d_bias(bias), d_w(static_cast<size_t>(R));
  Buf<int32_t> d_idx(static_cast<size_t>(R));
  mk::RouterParams rp{T, E, k, 8, 4, mk::Score::sigmoid, true};
  std::vector<int32_t> idx(static_cast<size_t>(R));
  std::vector<float> w(static_cast<size_t>(R));
  {
    ref::router_topk(logits.data(), bias.data(), {T, E, k, 8, 4, ref::Score::sigmoid, true}, idx.data(), w.data());
    mk::router_topk(d_logits.get(), d_bias.get(), rp, d_idx.get(), d_w.get(), s);
    const auto gi = d_idx.download(idx.size());
    const auto gw = d_w.download(w.size());
    bool ok = gi == idx;
    for (size_t i = 0; ok && i < w.size(); ++i) ok = std::fabs(gw[i] - w[i]) <= 1e-6f;
    const Timing t = ok ? time_kernel([&](cudaStream_t st) { mk::router_topk(d_logits.get(), d_bias.get(), rp, d_idx.get(), d_w.get(), st); },
                                      false, s, flush.get())
                        : kNotTimed;
    rep.add("router_topk", shape_router, ok, t, 0, 0, 15e-6);
  }

  // Counts / offsets and the map over the router's 64k slots.
  const size_t ws_bytes = mk::routing_workspace_bytes(R, E);
  Buf<uint8_t> ws(ws_bytes);
  Buf<int64_t> d_counts(static_cast<size_t>(E)), d_offsets(static_cast<size_t>(E + 1)), d_ros(static_cast<size_t>(R)),
      d_sor(static_cast<size_t>(R));
  std::vector<int64_t> counts(static_cast<size_t>(E)), offsets(static_cast<size_t>(E + 1)), ros(static_cast<size_t>(R)),
      sor(static_cast<size_t>(R));
  ref::expert_counts(idx.data(), T, k, E, counts.data(), offsets.data());
  ref::permute_map(idx.data(), T, k, E, offsets.data(), ros.data(), sor.data());
  {
    mk::expert_counts_offsets(d_idx.get(), T, k, E, d_counts.get(), d_offsets.get(), ws.get(), ws_bytes, s);
    const bool ok = d_counts.download(counts.size()) == counts && d_offsets.download(offsets.size()) == offsets;
    const Timing t = ok ? time_kernel([&](cudaStream_t st) {
                            mk::expert_counts_offsets(d_idx.get(), T, k, E, d_counts.get(), d_offsets.get(), ws.get(), ws_bytes, st);
                          }, false, s, flush.get())
                        : kNotTimed;
    rep.add("expert_counts_offsets", "64k slots, E=256", ok, t, 0, 0, 15e-6);
  }
  {
    mk::permute_map(d_idx.get(), T, k, E, d_offsets.get(), d_ros.get(), d_sor.get(), ws.get(), ws_bytes, s);
    const bool ok = d_ros.download(ros.size()) == ros && d_sor.download(sor.size()) == sor;
    const Timing t = ok ? time_kernel([&](cudaStream_t st) {
                            mk::permute_map(d_idx.get(), T, k, E, d_offsets.get(), d_ros.get(), d_sor.get(), ws.get(), ws_bytes, st);
                          }, false, s, flush.get())
                        : kNotTimed;
    rep.add("permute_map", "64k slots, E=256", ok, t, 0, 0, 15e-6);
  }

  // Permute / un-permute: 65,536 rows of 7168 fp32. Gate on the first 4096 rows / 512 tokens.
  const auto x = random_floats(static_cast<size_t>(T * H), -1.f, 1.f, 3);
  Buf<float> d_x(x), d_rows(static_cast<size_t>(R * H)), d_out(static_cast<size_t>(T * H));
  const int64_t gate_tokens = 512;
  {
    mk::permute(d_x.get(), T, H, k, d_sor.get(), d_rows.get(), s);
    std::vector<float> want(static_cast<size_t>(gate_tokens * k * H));
    ref::permute(x.data(), gate_tokens, H, k, sor.data(), want.data());
    const bool ok = d_rows.download(want.size()) == want;
    const Timing t = ok ? time_kernel([&](cudaStream_t st) { mk::permute(d_x.get(), T, H, k, d_sor.get(), d_rows.get(), st); },
                                      true, s, flush.get())
                        : kNotTimed;
    // Reads each token once per slot and writes every row: 2 * rows * H * 4 bytes (+ the map).
    rep.add("permute", "65536 x 7168 fp32", ok, t, 2.0 * static_cast<double>(R * H) * 4 + static_cast<double>(R) * 8, 0.80, 0);
  }
  {
    mk::unpermute(d_rows.get(), T, H, k, d_ros.get(), d_w.get(), d_out.get(), s);
    // rows as the reference sees them: x gathered (bit-exact, checked above).
    std::vector<float> rows_host(static_cast<size_t>(R * H));
    ref::permute(x.data(), T, H, k, sor.data(), rows_host.data());
    std::vector<float> want(static_cast<size_t>(gate_tokens * H));
    ref::unpermute(rows_host.data(), gate_tokens, H, k, ros.data(), w.data(), want.data());
    const auto got = d_out.download(want.size());
    bool ok = true;
    for (size_t i = 0; ok && i < want.size(); ++i) ok = std::fabs(got[i] - want[i]) <= 4.0f * k * 0x1p-24f;
    const Timing t = ok ? time_kernel([&](cudaStream_t st) { mk::unpermute(d_rows.get(), T, H, k, d_ros.get(), d_w.get(), d_out.get(), st); },
                                      true, s, flush.get())
                        : kNotTimed;
    rep.add("unpermute", "65536 x 7168 fp32 -> 8192", ok, t,
            static_cast<double>(R * H + T * H) * 4 + static_cast<double>(R) * 12, 0.75, 0);
  }

  // SwiGLU on [65536 x 2I] -> [65536 x I]; gate on the first 256 rows (within one ulp).
  {
    const int64_t gate_rows = 256;
    Buf<float> d_gu(static_cast<size_t>(R * 2 * I)), d_act(static_cast<size_t>(R * I)), d_dgu(static_cast<size_t>(R * 2 * I));
    // Fill on the device from rows of x (values in [-1, 1]); the gate reads them back.
    MOEPERF_CUDA_CHECK(cudaMemcpy(d_gu.get(), d_rows.get(), static_cast<size_t>(R * 2 * I) * 4, cudaMemcpyDeviceToDevice));
    const auto gu = d_gu.download(static_cast<size_t>(gate_rows * 2 * I));
    std::vector<float> want(static_cast<size_t>(gate_rows * I)), want_b(static_cast<size_t>(gate_rows * 2 * I));
    ref::swiglu_fwd(gu.data(), gate_rows, I, want.data());
    mk::swiglu_fwd(d_gu.get(), R, I, d_act.get(), s);
    const auto got = d_act.download(want.size());
    auto close = [](float a, float b) { return std::fabs(a - b) <= 2.0f * std::fabs(b) * 0x1p-24f + 1e-30f; };
    bool ok = true;
    for (size_t i = 0; ok && i < want.size(); ++i) ok = close(got[i], want[i]);
    Timing t = ok ? time_kernel([&](cudaStream_t st) { mk::swiglu_fwd(d_gu.get(), R, I, d_act.get(), st); }, true, s, flush.get())
                  : kNotTimed;
    rep.add("swiglu_fwd", "65536 x 2048 fp32", ok, t, static_cast<double>(R * 3 * I) * 4, 0.85, 0);

    // Backward with dout = act itself.
    const auto dy = d_act.download(static_cast<size_t>(gate_rows * I));
    ref::swiglu_bwd(gu.data(), dy.data(), gate_rows, I, want_b.data());
    mk::swiglu_bwd(d_gu.get(), d_act.get(), R, I, d_dgu.get(), s);
    const auto got_b = d_dgu.download(want_b.size());
    ok = true;
    for (size_t i = 0; ok && i < want_b.size(); ++i) ok = close(got_b[i], want_b[i]);
    t = ok ? time_kernel([&](cudaStream_t st) { mk::swiglu_bwd(d_gu.get(), d_act.get(), R, I, d_dgu.get(), st); }, true, s, flush.get())
           : kNotTimed;
    rep.add("swiglu_bwd", "65536 x 2048 fp32", ok, t, static_cast<double>(R * 5 * I) * 4, 0.85, 0);
  }

  // MXFP8 quantize / dequantize of the 65,536 permuted rows; gate (bit-exact) on the first 256 rows.
  {
    const int64_t n = R * H, gate_n = 256 * H;
    Buf<uint8_t> d_q(static_cast<size_t>(n)), d_s(static_cast<size_t>(n / 32));
    const auto xs = d_rows.download(static_cast<size_t>(gate_n));
    std::vector<uint8_t> q(static_cast<size_t>(gate_n)), sc(static_cast<size_t>(gate_n / 32));
    ref::mxfp8_quantize(xs.data(), gate_n, q.data(), sc.data());
    mk::mxfp8_quantize(d_rows.get(), n, d_q.get(), d_s.get(), s);
    bool ok = d_q.download(q.size()) == q && d_s.download(sc.size()) == sc;
    Timing t = ok ? time_kernel([&](cudaStream_t st) { mk::mxfp8_quantize(d_rows.get(), n, d_q.get(), d_s.get(), st); }, true, s, flush.get())
                  : kNotTimed;
    rep.add("mxfp8_quantize", "65536 x 7168 fp32 -> e4m3", ok, t, static_cast<double>(n) * (4 + 1 + 1.0 / 32), 0.80, 0);

    std::vector<float> y(static_cast<size_t>(gate_n));
    ref::mxfp8_dequantize(q.data(), sc.data(), gate_n, y.data());
    mk::mxfp8_dequantize(d_q.get(), d_s.get(), n, d_rows.get(), s);
    const auto gy = d_rows.download(y.size());
    ok = std::memcmp(gy.data(), y.data(), y.size() * 4) == 0;
    t = ok ? time_kernel([&](cudaStream_t st) { mk::mxfp8_dequantize(d_q.get(), d_s.get(), n, d_rows.get(), st); }, true, s, flush.get())
           : kNotTimed;
    rep.add("mxfp8_dequantize", "65536 x 7168 e4m3 -> fp32", ok, t, static_cast<double>(n) * (4 + 1 + 1.0 / 32), 0.80, 0);
  }

  MOEPERF_CUDA_CHECK(cudaStreamDestroy(s));
  nlohmann::json out{{"device", dev.devices[0].name}, {"cc", std::to_string(dev.devices[0].cc_major) + "." + std::to_string(dev.devices[0].cc_minor)},
                     {"copy_ceiling_bytes_per_s", kCopyCeilingBytesPerSecond}, {"iterations", kIters}, {"all_correct", rep.all_correct},
                     {"results", rep.results}};
  if (json_path) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench_kernels: cannot write %s\n", json_path);
      return 1;
    }
  }
  return rep.all_correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
}
