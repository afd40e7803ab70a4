// GPU tests (label "gpu") of the executor's CUDA backend: every op against the CPU backend on the
// same small random inputs (GEMMs in all four transpose combinations and with accumulation, grouped
// GEMMs with an expert that gets no rows, whose weight gradient must be exact zeros, the router,
// counts, maps, permutes and their backward), then `moeperf run --backend cuda` passing its gates.
// Without a device every test skips with the runtime's reason.
#include "../gpu_skip.h"
#include "executor/backend.h"
#include "kernels/device.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace moeperf::exec {
namespace {

std::vector<float> rnd(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// A host vector and its copy in a backend's memory.
template <class T>
struct On {
  Backend& be;
  std::vector<T> h;
  T* p;
  On(Backend& b, std::vector<T> v) : be(b), h(std::move(v)), p(static_cast<T*>(b.alloc(h.size() * sizeof(T)))) {
    be.upload(p, h.data(), h.size() * sizeof(T));
  }
  ~On() { be.release(p); }
  std::vector<T> get() {
    be.synchronize();
    std::vector<T> r(h.size());
    be.download(r.data(), p, r.size() * sizeof(T));
    return r;
  }
};

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rel, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double mag = 0;
  for (float v : b) mag = std::max(mag, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::fabs(static_cast<double>(a[i]) - b[i]), rel * std::max(mag, 1e-30)) << what << " at " << i;
}

struct Pair {
  std::unique_ptr<Backend> cpu = make_backend("cpu"), gpu = make_backend("cuda");
};

TEST(CudaBackendGpu, GemmsMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Pair b;
  const int64_t m = 37, n = 29, k = 53;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc) {
        const auto A = rnd(static_cast<size_t>(m * k), 1), B = rnd(static_cast<size_t>(k * n), 2), C0 = rnd(static_cast<size_t>(m * n), 3);
        On<float> ca(*b.cpu, A), cb(*b.cpu, B), cc(*b.cpu, C0), ga(*b.gpu, A), gb(*b.gpu, B), gc(*b.gpu, C0);
        b.cpu->gemm(ca.p, cb.p, cc.p, m, n, k, ta != 0, tb != 0, acc != 0);
        b.gpu->gemm(ga.p, gb.p, gc.p, m, n, k, ta != 0, tb != 0, acc != 0);
        expect_close(gc.get(), cc.get(), 1e-5, "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " acc=" + std::to_string(acc));
      }
}

// The suite's memory reference: a device-to-device copy of the whole buffer (a one-row gather ran
// it on one thread block).
TEST(CudaBackendGpu, CopyMovesEveryByte) {
  SKIP_WITHOUT_GPU();
  Pair b;
  const auto A = rnd(size_t{1} << 20, 5);
  On<float> ga(*b.gpu, A), gb(*b.gpu, std::vector<float>(A.size(), 0.0f));
  b.gpu->copy(gb.p, ga.p, A.size() * sizeof(float));
  EXPECT_EQ(gb.get(), A) << "device copy";
}

// time_work is the device's time for the op's work alone: a queued GEMM's time between its events,
// without the host's launch or synchronize latency (an op that queues nothing times near zero), and
// its L2 flush is said where the measurements are written.
TEST(CudaBackendGpu, TimeWorkIsTheDevicesTimeBehindAFlush) {
  SKIP_WITHOUT_GPU();
  Pair b;
  Backend& g = *b.gpu;
  EXPECT_LT(g.time_work([] {}), 20e-6) << "no work queued: the events bracket nothing";
  EXPECT_NE(g.timing_method().find("MiB memset (L2 flush"), std::string::npos) << g.timing_method();
  // A tiny kernel: a few microseconds of device work, where the host's launch and synchronize
  // around it (the clock this replaced) took 8 us or more.
  On<float> tiny(g, rnd(256, 8));
  double least = 1e9;
  for (int i = 0; i < 5; ++i) least = std::min(least, g.time_work([&] { g.fill(tiny.p, 256, 1.0f); }));
  EXPECT_LT(least, 5e-6) << "the launch latency is inside the timed span";
  const int64_t n = 2048;
  On<float> a(g, rnd(static_cast<size_t>(3 * n * n), 9));
  auto sgemm = [&] { g.gemm(a.p, a.p + n * n, a.p + 2 * n * n, n, n, n, false, false, false); };
  sgemm();
  // Four GEMMs queued back to back take about four times one (the same kernel, no host gaps).
  double one = 1e9, four = 1e9;
  for (int i = 0; i < 3; ++i) {
    one = std::min(one, g.time_work(sgemm));
    four = std::min(four, g.time_work([&] {
      for (int r = 0; r < 4; ++r) sgemm();
    }));
  }
  EXPECT_GT(one, 0.0);
  EXPECT_NEAR(four / one, 4.0, 0.4) << one << " s and " << four << " s";
  // The host clock around a synchronize is never shorter than the events' time.
  g.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  sgemm();
  g.synchronize();
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.9 * one);
}

TEST(CudaBackendGpu, GroupedGemmsWithAnIdleExpert) {
  SKIP_WITHOUT_GPU();
  Pair b;
  const std::vector<int64_t> off{0, 5, 5, 40, 41};  // expert 1 gets no rows
  const int64_t rows = off.back(), k = 24, n = 40, e = 4;
  const auto A = rnd(static_cast<size_t>(rows * k), 4), W = rnd(static_cast<size_t>(e * k * n), 5), DC = rnd(static_cast<size_t>(rows * n), 6);
  On<float> ca(*b.cpu, A), cw(*b.cpu, W), cdc(*b.cpu, DC), cc(*b.cpu, std::vector<float>(static_cast<size_t>(rows * n))),
      cda(*b.cpu, std::vector<float>(static_cast<size_t>(rows * k))), cdw(*b.cpu, std::vector<float>(static_cast<size_t>(e * k * n)));
  On<float> ga(*b.gpu, A), gw(*b.gpu, W), gdc(*b.gpu, DC), gc(*b.gpu, std::vector<float>(static_cast<size_t>(rows * n))),
      gda(*b.gpu, std::vector<float>(static_cast<size_t>(rows * k))), gdw(*b.gpu, std::vector<float>(static_cast<size_t>(e * k * n), NAN));
  b.cpu->grouped_gemm(ca.p, cw.p, off, k, n, cc.p);
  b.gpu->grouped_gemm(ga.p, gw.p, off, k, n, gc.p);
  expect_close(gc.get(), cc.get(), 1e-5, "grouped_gemm");
  b.cpu->grouped_dgrad(cdc.p, cw.p, off, k, n, cda.p);
  b.gpu->grouped_dgrad(gdc.p, gw.p, off, k, n, gda.p);
  expect_close(gda.get(), cda.get(), 1e-5, "grouped_dgrad");
  b.cpu->grouped_wgrad(ca.p, cdc.p, off, k, n, cdw.p);
  b.gpu->grouped_wgrad(ga.p, gdc.p, off, k, n, gdw.p);
  const auto got = gdw.get();
  expect_close(got, cdw.get(), 1e-5, "grouped_wgrad");
  for (int64_t i = k * n; i < 2 * k * n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], 0.0f) << "idle expert's gradient";
}

TEST(CudaBackendGpu, RoutingPermutesAndBackwardMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  Pair b;
  const int64_t T = 300, E = 16, H = 40;
  const int K = 4;
  for (ref::Score score : {ref::Score::softmax, ref::Score::sigmoid}) {
    ref::RouterParams p;
    p.tokens = T, p.experts = E, p.top_k = K, p.groups = 4, p.topk_groups = 2, p.score = score, p.normalize = true;
    const auto logits = rnd(static_cast<size_t>(T * E), 7), x = rnd(static_cast<size_t>(T * H), 8), dy = rnd(static_cast<size_t>(T * H), 9);
    const auto R = static_cast<size_t>(T * K);
    auto run = [&](Backend& be) {
      On<float> l(be, logits), xs(be, x), d(be, dy), w(be, std::vector<float>(R)), rows(be, std::vector<float>(R * H)),
          y(be, std::vector<float>(static_cast<size_t>(T * H))), drows(be, std::vector<float>(R * H)), dw(be, std::vector<float>(R)),
          dx(be, std::vector<float>(static_cast<size_t>(T * H))), dl(be, std::vector<float>(static_cast<size_t>(T * E))),
          g(be, std::vector<float>(R * H));
      On<int32_t> idx(be, std::vector<int32_t>(R));
      On<int64_t> counts(be, std::vector<int64_t>(static_cast<size_t>(E))), offsets(be, std::vector<int64_t>(static_cast<size_t>(E + 1))),
          ros(be, std::vector<int64_t>(R)), sor(be, std::vector<int64_t>(R));
      be.router_topk(l.p, nullptr, p, idx.p, w.p);
      be.expert_counts(idx.p, T, K, E, counts.p, offsets.p);
      be.permute_map(idx.p, T, K, E, offsets.p, ros.p, sor.p);
      be.permute(xs.p, T, H, K, sor.p, rows.p);
      be.unpermute(rows.p, T, H, K, ros.p, w.p, y.p);
      be.unpermute_bwd(rows.p, d.p, T, H, K, ros.p, w.p, drows.p, dw.p);
      be.permute_bwd(drows.p, T, H, K, ros.p, dx.p);
      be.router_bwd(l.p, idx.p, dw.p, p, dl.p);
      be.gather_rows(rows.p, sor.p, static_cast<int64_t>(R), H, g.p);  // any index vector in range
      return std::make_tuple(idx.get(), w.get(), counts.get(), offsets.get(), ros.get(), sor.get(), rows.get(), y.get(), drows.get(), dw.get(),
                             dx.get(), dl.get(), g.get());
    };
    const auto c = run(*b.cpu), gg = run(*b.gpu);
    const std::string s = score == ref::Score::softmax ? "softmax: " : "sigmoid: ";
    EXPECT_EQ(std::get<0>(gg), std::get<0>(c)) << s << "top-k ids";
    expect_close(std::get<1>(gg), std::get<1>(c), 1e-6, s + "top-k weights");
    EXPECT_EQ(std::get<2>(gg), std::get<2>(c)) << s << "counts";
    EXPECT_EQ(std::get<3>(gg), std::get<3>(c)) << s << "offsets";
    EXPECT_EQ(std::get<4>(gg), std::get<4>(c)) << s << "row_of_slot";
    EXPECT_EQ(std::get<5>(gg), std::get<5>(c)) << s << "slot_of_row";
    EXPECT_EQ(std::get<6>(gg), std::get<6>(c)) << s << "permute";
    expect_close(std::get<7>(gg), std::get<7>(c), 1e-6, s + "unpermute");
    expect_close(std::get<8>(gg), std::get<8>(c), 1e-6, s + "unpermute_bwd rows");
    expect_close(std::get<9>(gg), std::get<9>(c), 1e-5, s + "unpermute_bwd weights");
    expect_close(std::get<10>(gg), std::get<10>(c), 1e-6, s + "permute_bwd");
    expect_close(std::get<11>(gg), std::get<11>(c), 1e-5, s + "router_bwd");
    EXPECT_EQ(std::get<12>(gg), std::get<12>(c)) << s << "gather_rows";
  }
}

// Runs a shell command, returns (exit status or -1, stdout + stderr).
std::pair<int, std::string> shell(const std::string& cmd) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), f)) out.append(buf.data(), n);
  const int st = pclose(f);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// The other side: on a machine without a usable device (this one in CI) --backend cuda exits 1 with
// the runtime's reason, before any CUDA object of the backend is made (an event created before the
// check failed with a bare runtime error instead).
TEST(CudaBackendGpu, WithoutADeviceTheRunSaysWhy) {
  if (kernels::query_devices().count > 0) GTEST_SKIP() << "a GPU is present: MoeperfRunPassesItsGates runs instead";
  const auto [code, out] = shell(std::string(MOEPERF_CLI) + " run " + MOEPERF_SOURCE_DIR + "/examples/executor/cpu-small.json --backend cuda");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--backend cuda: no usable GPU: "), std::string::npos) << out;
  EXPECT_EQ(out.find("event_timer"), std::string::npos) << out;
}

TEST(CudaBackendGpu, MoeperfRunPassesItsGates) {
  SKIP_WITHOUT_GPU();
  const std::string json = ::testing::TempDir() + "moeperf-cuda-run.json";
  const auto [code, out] = shell(std::string(MOEPERF_CLI) + " run " + MOEPERF_SOURCE_DIR +
                                 "/examples/executor/cpu-small.json --backend cuda --steps 2 --warmup 1 --out " + json);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("gate ok: multi-rank output equals the single-rank FP32 reference"), std::string::npos) << out;
  EXPECT_NE(out.find("gate ok: two runs of the expert path and combine give identical bits"), std::string::npos) << out;
  // The peak is the device's (cuBLAS SGEMM), never the CPU's Eigen GEMM; the machine block names the GPU.
  EXPECT_NE(out.find("(measured: 4096^3 FP32 cuBLAS SGEMM"), std::string::npos) << out;
  EXPECT_EQ(out.find("Eigen"), std::string::npos) << out;
  EXPECT_NE(out.find("communicator loopback, 1 rank"), std::string::npos) << out;
  std::ifstream in(json);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string j = ss.str();
  const kernels::DeviceInfo d = kernels::query_devices();
  EXPECT_NE(j.find("\"gpu\": {"), std::string::npos) << j;
  EXPECT_NE(j.find(d.devices[0].name), std::string::npos) << j;
  EXPECT_NE(j.find("\"max_sm_clock_khz\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"communicator\": \"loopback\""), std::string::npos) << j;
  std::printf("%s\n", out.c_str());
}

// Two ranks over MPI on two GPUs: dispatch, combine and the count exchange through NCCL on device
// buffers, the gates passing. Needs NCCL in the build, mpirun and two GPUs (one GPU cannot host two
// NCCL ranks).
TEST(CudaBackendGpu, MoeperfRunOverNcclWithTwoRanks) {
  SKIP_WITHOUT_GPU();
  const kernels::DeviceInfo d = kernels::query_devices();
  if (d.count < 2) GTEST_SKIP() << "needs two GPUs (this machine has " << d.count << ")";
#ifndef MOEPERF_HAVE_MPI
  GTEST_SKIP() << "this moeperf is built without MPI (MOEPERF_WITH_MPI): it refuses to run under mpirun";
#endif
  if (shell("command -v mpirun").first != 0) GTEST_SKIP() << "mpirun not found";
  const auto [code, out] = shell("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun -np 2 " +
                                 std::string(MOEPERF_CLI) + " run " + MOEPERF_SOURCE_DIR +
                                 "/examples/executor/cpu-small.json --backend cuda --steps 2 --warmup 1");
  ASSERT_EQ(code, 0) << out;
  if (out.find("communicator mpi, 2 ranks") != std::string::npos)
    GTEST_SKIP() << "this build has no NCCL communicator: the host communicator was used";
  EXPECT_NE(out.find("communicator nccl, 2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("gate ok: payload"), std::string::npos) << out;
  EXPECT_NE(out.find("gate ok: multi-rank output equals the single-rank FP32 reference"), std::string::npos) << out;
  std::printf("%s\n", out.c_str());
}

}  // namespace
}  // namespace moeperf::exec
