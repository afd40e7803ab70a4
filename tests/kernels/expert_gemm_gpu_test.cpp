// GPU tests (label "gpu") of kernels/expert_gemm.h: the three expert-GEMM ways and the dense GEMM
// against a CPU loop, bit for bit. Inputs are small integers (-1, 0, 1) and k <= 256, so every BF16
// product, every FP32 partial sum and the BF16 output are exact whatever the summation order:
// results are compared with ==. Counts cover the traps of docs/executor.md: experts with zero rows,
// one row each, every row on one expert, ragged counts off the 128-row tile, and no rows at all.
// Rows of C past the routed rows must stay untouched (a NaN sentinel checks it). Tests that need a
// device skip with the runtime's reason without one; the host helpers are tested everywhere.
#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "kernels/expert_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <random>
#include <stdexcept>
#include <vector>

namespace moeperf::kernels {

// Test names read "Ways/ExpertGemmGpu.X/padded_loop  # GetParam() = padded_loop" (ADL finds it here).
void PrintTo(ExpertGemmWay w, std::ostream* os) { *os << to_string(w); }

namespace {

#define SKIP_WITHOUT_GPU()                      \
  do {                                          \
    const DeviceInfo d = query_devices();       \
    if (d.count == 0) GTEST_SKIP() << d.reason; \
  } while (0)

constexpr uint16_t kSentinel = 0x7FC1;  // a quiet NaN no exact integer result can equal

std::vector<uint16_t> small_ints(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-1, 1);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16_bits(static_cast<float>(d(rng)));
  return v;
}

// C = A W per expert, in float (exact for these inputs), as BF16 bits; rows past the routed ones
// keep the sentinel.
std::vector<uint16_t> cpu_expert_gemm(const std::vector<int64_t>& counts, const std::vector<uint16_t>& a,
                                      const std::vector<uint16_t>& w, int64_t n, int64_t k, int64_t c_rows) {
  std::vector<uint16_t> c(static_cast<size_t>(c_rows * n), kSentinel);
  int64_t row = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    const uint16_t* we = w.data() + static_cast<int64_t>(e) * k * n;
    for (int64_t r = row; r < row + counts[e]; ++r)
      for (int64_t j = 0; j < n; ++j) {
        float s = 0;
        for (int64_t x = 0; x < k; ++x) s += bf16_bits_to_float(a[static_cast<size_t>(r * k + x)]) * bf16_bits_to_float(we[x * n + j]);
        c[static_cast<size_t>(r * n + j)] = float_to_bf16_bits(s);
      }
    row += counts[e];
  }
  return c;
}

struct Case {
  const char* name;
  std::vector<int64_t> counts;
  int64_t n, k;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {"zero-row experts", {0, 5, 0, 0, 3, 0}, 64, 96},
      {"one row each", {1, 1, 1, 1, 1, 1}, 64, 96},
      {"all rows on one expert", {0, 0, 300, 0, 0, 0}, 136, 200},
      {"ragged", {130, 1, 0, 257, 64, 129}, 136, 256},
      {"no rows at all", {0, 0, 0, 0}, 64, 64},
  };
  return c;
}

void check_way(ExpertGemm& g, ExpertGemmWay way, const Case& c, cudaStream_t s) {
  SCOPED_TRACE(std::string(to_string(way)) + ", " + c.name);
  const int64_t rows = std::accumulate(c.counts.begin(), c.counts.end(), int64_t{0});
  const int64_t extra = 7, experts = static_cast<int64_t>(c.counts.size());
  const auto a = small_ints(static_cast<size_t>((rows + extra) * c.k), 1 + static_cast<uint64_t>(rows));
  const auto w = small_ints(static_cast<size_t>(experts * c.k * c.n), 2 + static_cast<uint64_t>(experts));
  const auto want = cpu_expert_gemm(c.counts, a, w, c.n, c.k, rows + extra);
  DeviceBuffer<uint16_t> da(a), dw(w), dc(std::vector<uint16_t>(static_cast<size_t>((rows + extra) * c.n), kSentinel));
  g.run(way, c.counts, da.get(), dw.get(), c.n, c.k, dc.get());
  MOEPERF_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto got = dc.download();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "row " << static_cast<int64_t>(i) / c.n << " col " << static_cast<int64_t>(i) % c.n
                               << (static_cast<int64_t>(i) / c.n >= rows ? " (past the routed rows: must be untouched)" : "");
  // A second run gives the same bits (it must: results are exact).
  g.run(way, c.counts, da.get(), dw.get(), c.n, c.k, dc.get());
  EXPECT_EQ(dc.download(), got);
}

class ExpertGemmGpu : public ::testing::TestWithParam<ExpertGemmWay> {};

TEST_P(ExpertGemmGpu, ExactAgainstCpuLoop) {
  SKIP_WITHOUT_GPU();
  cudaStream_t s;
  MOEPERF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    ExpertGemm g(s, 4);
    for (const Case& c : cases()) check_way(g, GetParam(), c, s);
  }
  MOEPERF_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST_P(ExpertGemmGpu, OneSideStreamToo) {
  SKIP_WITHOUT_GPU();
  cudaStream_t s;
  MOEPERF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    ExpertGemm g(s, 1);
    check_way(g, GetParam(), cases()[3], s);
  }
  MOEPERF_CUDA_CHECK(cudaStreamDestroy(s));
}

INSTANTIATE_TEST_SUITE_P(Ways, ExpertGemmGpu, ::testing::ValuesIn(kExpertGemmWays),
                         [](const ::testing::TestParamInfo<ExpertGemmWay>& i) { return std::string(to_string(i.param)); });

TEST(ExpertGemmGpuMisc, DenseExactAgainstCpuLoop) {
  SKIP_WITHOUT_GPU();
  ExpertGemm g(nullptr);
  for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{129}, int64_t{300}}) {
    const int64_t n = 72, k = 256;
    const auto a = small_ints(static_cast<size_t>((m + 1) * k), 5);
    const auto w = small_ints(static_cast<size_t>(k * n), 6);
    const auto want = cpu_expert_gemm({m}, a, w, n, k, m + 1);
    DeviceBuffer<uint16_t> da(a), dw(w), dc(std::vector<uint16_t>(static_cast<size_t>((m + 1) * n), kSentinel));
    g.dense(da.get(), dw.get(), m, n, k, dc.get());
    EXPECT_EQ(dc.download(), want) << "m = " << m;
  }
}

TEST(ExpertGemmGpuMisc, CountSyncAndShapeCache) {
  SKIP_WITHOUT_GPU();
  ExpertGemm g(nullptr);
  const std::vector<int64_t> counts{3, 0, 70000000000, 1};  // past 2^32: 64-bit all the way
  DeviceBuffer<int64_t> d(counts);
  EXPECT_EQ(g.sync_counts(d.get(), 4), counts);
  EXPECT_TRUE(g.sync_counts(d.get(), 0).empty());
  // Heuristics are cached per (m, n, k): the same counts twice add no shape.
  const std::vector<int64_t> c2{8, 0, 16};
  DeviceBuffer<uint16_t> da(static_cast<size_t>(24 * 64)), dw(static_cast<size_t>(3 * 64 * 64)), dc(static_cast<size_t>(24 * 64));
  fill_bf16(da.get(), 24 * 64, 1, -1, 1, true, nullptr);
  fill_bf16(dw.get(), 3 * 64 * 64, 2, -1, 1, true, nullptr);
  g.run(ExpertGemmWay::lt_multistream, c2, da.get(), dw.get(), 64, 64, dc.get());
  const size_t shapes = g.cached_shapes();
  EXPECT_EQ(shapes, 2u);
  g.run(ExpertGemmWay::lt_multistream, c2, da.get(), dw.get(), 64, 64, dc.get());
  EXPECT_EQ(g.cached_shapes(), shapes);
  MOEPERF_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(ExpertGemmGpuMisc, RejectsBadShapes) {
  SKIP_WITHOUT_GPU();
  ExpertGemm g(nullptr);
  EXPECT_THROW(g.run(ExpertGemmWay::cublas_grouped, {1}, nullptr, nullptr, 60, 64, nullptr), std::invalid_argument);
  EXPECT_THROW(g.run(ExpertGemmWay::padded_loop, {-1}, nullptr, nullptr, 64, 64, nullptr), std::invalid_argument);
  EXPECT_THROW(g.dense(nullptr, nullptr, 1, 64, 0, nullptr), std::invalid_argument);
}

TEST(ExpertGemmGpuMisc, FillIntegersAreSmallIntegers) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer<uint16_t> d(static_cast<size_t>(4096));
  fill_bf16(d.get(), 4096, 9, -1, 1, true, nullptr);
  int seen[3] = {0, 0, 0};
  for (uint16_t b : d.download()) {
    const float f = bf16_bits_to_float(b);
    ASSERT_TRUE(f == -1.0f || f == 0.0f || f == 1.0f) << f;
    ++seen[static_cast<int>(f) + 1];
  }
  for (int x : seen) EXPECT_GT(x, 1000);
}

// Host helpers: run without a device.
TEST(ExpertGemmHost, TileWaste) {
  EXPECT_DOUBLE_EQ(tile_waste({128, 256}), 1.0);
  EXPECT_DOUBLE_EQ(tile_waste({1, 0, 0}), 128.0);
  EXPECT_DOUBLE_EQ(tile_waste({129, 127}), 384.0 / 256.0);
  EXPECT_DOUBLE_EQ(tile_waste({}), 1.0);
  EXPECT_DOUBLE_EQ(tile_waste({0, 0}), 1.0);
}

TEST(ExpertGemmHost, Bf16Bits) {
  for (int i = -256; i <= 256; ++i) EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(i))), static_cast<float>(i));
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(257.0f), float_to_bf16_bits(256.0f));  // ties to even
  EXPECT_EQ(float_to_bf16_bits(259.0f), float_to_bf16_bits(260.0f));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::nanf("")))));
  EXPECT_EQ(float_to_bf16_bits(-INFINITY), 0xFF80);
}

}  // namespace
}  // namespace moeperf::kernels
