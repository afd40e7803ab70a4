// GPU tests (label "gpu") of kernels/expert_gemm.h: the three expert-GEMM ways and the dense GEMM
// against a CPU loop, bit for bit. Inputs are small integers (-1, 0, 1) and k <= 256, so every BF16
// product, every FP32 partial sum and the BF16 output are exact whatever the summation order:
// results are compared with ==. Counts cover the traps of docs/executor.md: experts with zero rows,
// one row each, every row on one expert, ragged counts off the 128-row tile, and no rows at all.
// Rows of C past the routed rows must stay untouched (a NaN sentinel checks it). Tests that need a
// device skip with the runtime's reason without one; the host helpers are tested everywhere.
// The FP8 expert GEMMs (run_fp8: fp8_block128 on compute capability 9.x, mxfp8 on >= 10) are
// checked the same way with exactly quantizable inputs (see below), each skipping with the reason
// where the device lacks it; the block-128 quantizer bit for bit against its CPU reference.
#include "../gpu_skip.h"
#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "kernels/expert_gemm.h"
#include "kernels/moe_kernels.h"
#include "kernels/reference/mxfp8_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace moeperf::kernels {

// Test names read "Ways/ExpertGemmGpu.X/padded_loop  # GetParam() = padded_loop" (ADL finds it here).
void PrintTo(ExpertGemmWay w, std::ostream* os) { *os << to_string(w); }

namespace {

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

// ---------------------------------------------------------------------------------------------
// FP8 expert GEMMs (run_fp8). Inputs are exact: every element is -1, 0 or 1 times its block's
// power of two (2^-1..2^1 for A, 2^-1..2^0 for W), so the GPU quantizer (mxfp8_quantize or
// fp8_block128_quantize) turns each into the code +-256 or 0 and a power-of-two scale exactly,
// every product and partial sum is a multiple of 2^-2 below 2^10 (exact in FP32 and within the
// ~14 bits Hopper's FP8 accumulation keeps), and the BF16 output is the round-to-nearest-even
// of the exact sum, computed on the CPU in double: compared with ==. This covers the quantizer,
// the scale rearrangement into cuBLASLt's layouts (wrong positions give wrong powers of two) and
// the GEMM. Each precision runs only where the device supports it and skips with the reason
// otherwise (MXFP8 on compute capability < 10, fp8_block128 off 9.x).

// Floats v * 2^s: v in {-1, 0, 1} per element, s in [s_lo, s_hi] per `block` consecutive elements.
std::vector<float> block_pow2(size_t n, int64_t block, int s_lo, int s_hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(-1, 1), sc(s_lo, s_hi);
  std::vector<float> x(n);
  int s = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % static_cast<size_t>(block) == 0) s = sc(rng);
    x[i] = std::ldexp(static_cast<float>(v(rng)), s);
  }
  return x;
}

// C = A W^T per expert (W^T stored [experts x n x k]), exact in double, rounded to BF16.
std::vector<uint16_t> cpu_fp8_gemm(const std::vector<int64_t>& counts, const std::vector<float>& a, const std::vector<float>& wt,
                                   int64_t n, int64_t k, int64_t c_rows) {
  std::vector<uint16_t> c(static_cast<size_t>(c_rows * n), kSentinel);
  int64_t row = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    for (int64_t r = row; r < row + counts[e]; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        const float* we = wt.data() + (static_cast<int64_t>(e) * n + j) * k;
        for (int64_t x = 0; x < k; ++x) s += static_cast<double>(a[static_cast<size_t>(r * k + x)]) * we[x];
        c[static_cast<size_t>(r * n + j)] = float_to_bf16_bits(static_cast<float>(s));
      }
    row += counts[e];
  }
  return c;
}

// x [n] floats -> e4m3 codes + row-major scales with the precision's GPU quantizer.
void quantize_on_gpu(GemmPrecision p, const float* x, int64_t n, uint8_t* q, void* scale) {
  if (p == GemmPrecision::mxfp8)
    mxfp8_quantize(x, n, q, static_cast<uint8_t*>(scale), nullptr);
  else
    fp8_block128_quantize(x, n, q, static_cast<float*>(scale), nullptr);
}

class ExpertGemmFp8Gpu : public ::testing::TestWithParam<GemmPrecision> {};

TEST_P(ExpertGemmFp8Gpu, QuantizedExactAgainstCpuLoop) {
  SKIP_WITHOUT_GPU();
  const GemmPrecision p = GetParam();
  const DeviceInfo d = query_devices();
  std::string why;
  if (!precision_supported(p, d.devices[0].cc_major, d.devices[0].cc_minor, &why)) GTEST_SKIP() << why;
  const int64_t block = scale_block(p);
  const size_t scale_bytes = p == GemmPrecision::mxfp8 ? 1 : 4;
  struct Fp8Case {
    const char* name;
    std::vector<int64_t> counts;
    int64_t n, k;
  };
  const std::vector<Fp8Case> fp8_cases{
      {"zero-row experts", {0, 5, 0, 0, 3, 0}, 64, 128},
      {"one row each", {1, 1, 1, 1, 1, 1}, 64, 256},
      {"all rows on one expert", {0, 0, 300, 0}, 160, 256},
      {"ragged, off the 128-row tile", {130, 1, 0, 257, 64, 129}, 160, 256},
      {"no rows at all", {0, 0, 0}, 64, 128},
  };
  ExpertGemm g(nullptr, 4);
  for (const Fp8Case& c : fp8_cases) {
    SCOPED_TRACE(std::string(to_string(p)) + ", " + c.name);
    const int64_t rows = std::accumulate(c.counts.begin(), c.counts.end(), int64_t{0});
    const int64_t extra = 7, experts = static_cast<int64_t>(c.counts.size());
    const auto a = block_pow2(static_cast<size_t>((rows + extra) * c.k), block, -1, 1, 11 + static_cast<uint64_t>(rows));
    const auto wt = block_pow2(static_cast<size_t>(experts * c.n * c.k), block, -1, 0, 12 + static_cast<uint64_t>(experts));
    const auto want = cpu_fp8_gemm(c.counts, a, wt, c.n, c.k, rows + extra);
    DeviceBuffer<float> da(a), dw(wt);
    DeviceBuffer<uint8_t> qa(a.size()), qw(wt.size()), sa(a.size() / static_cast<size_t>(block) * scale_bytes),
        sw(wt.size() / static_cast<size_t>(block) * scale_bytes);
    quantize_on_gpu(p, da.get(), static_cast<int64_t>(a.size()), qa.get(), sa.get());
    quantize_on_gpu(p, dw.get(), static_cast<int64_t>(wt.size()), qw.get(), sw.get());
    DeviceBuffer<uint16_t> dc(std::vector<uint16_t>(static_cast<size_t>((rows + extra) * c.n), kSentinel));
    const Fp8Operands in{qa.get(), sa.get(), qw.get(), sw.get()};
    g.run_fp8(p, c.counts, in, c.n, c.k, dc.get());
    const auto got = dc.download();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "row " << static_cast<int64_t>(i) / c.n << " col " << static_cast<int64_t>(i) % c.n
                                 << (static_cast<int64_t>(i) / c.n >= rows ? " (past the routed rows: must be untouched)" : "");
    g.run_fp8(p, c.counts, in, c.n, c.k, dc.get());
    EXPECT_EQ(dc.download(), got);
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, ExpertGemmFp8Gpu, ::testing::Values(GemmPrecision::fp8_block128, GemmPrecision::mxfp8),
                         [](const ::testing::TestParamInfo<GemmPrecision>& i) { return std::string(to_string(i.param)); });

TEST(ExpertGemmFp8GpuMisc, UnavailablePrecisionThrowsWithTheReason) {
  SKIP_WITHOUT_GPU();
  const DeviceInfo d = query_devices();
  ExpertGemm g(nullptr);
  DeviceBuffer<uint8_t> buf(static_cast<size_t>(64 * 128 * 4));
  const Fp8Operands in{buf.get(), buf.get(), buf.get(), buf.get()};
  for (GemmPrecision p : {GemmPrecision::fp8_block128, GemmPrecision::mxfp8}) {
    std::string why;
    if (precision_supported(p, d.devices[0].cc_major, d.devices[0].cc_minor, &why)) continue;
    try {
      g.run_fp8(p, {8}, in, 64, 128, buf.get());
      ADD_FAILURE() << to_string(p) << " ran on a device that does not support it";
    } catch (const PrecisionUnavailable& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(g.run_fp8(GemmPrecision::bf16, {8}, in, 64, 128, buf.get()), std::invalid_argument);
  EXPECT_THROW(g.run_fp8(GemmPrecision::mxfp8, {8}, in, 72, 128, buf.get()), std::invalid_argument);   // n % 16
  EXPECT_THROW(g.run_fp8(GemmPrecision::mxfp8, {8}, in, 64, 96, buf.get()), std::invalid_argument);    // k % 128
  EXPECT_THROW(g.run_fp8(GemmPrecision::mxfp8, {-1}, in, 64, 128, buf.get()), std::invalid_argument);
}

TEST(ExpertGemmFp8GpuMisc, Block128QuantizeBitExactWithReference) {
  SKIP_WITHOUT_GPU();
  const int64_t n = 128 * 40;
  std::vector<float> x = random_floats(static_cast<size_t>(n), -3.0f, 3.0f, 21);
  for (int64_t b = 0; b < n / 128; ++b) x[static_cast<size_t>(b * 128 + b % 128)] *= std::ldexp(1.0f, static_cast<int>(b) * 6 - 120);
  x[130] = std::nanf("");
  x[131] = -INFINITY;
  for (int64_t i = 256; i < 384; ++i) x[static_cast<size_t>(i)] = i % 2 ? INFINITY : -std::nanf("");  // an all-NaN block
  for (int64_t i = 384; i < 512; ++i) x[static_cast<size_t>(i)] = 0.0f;                              // amax 0: 2^-127
  x[600] = 3.0e38f;
  x[700] = 1e-40f;
  std::vector<uint8_t> q(static_cast<size_t>(n));
  std::vector<float> sc(static_cast<size_t>(n / 128));
  ref::fp8_block128_quantize(x.data(), n, q.data(), sc.data());
  DeviceBuffer<float> dx(x), ds(static_cast<size_t>(n / 128));
  DeviceBuffer<uint8_t> dq(static_cast<size_t>(n));
  fp8_block128_quantize(dx.get(), n, dq.get(), ds.get(), nullptr);
  EXPECT_EQ(dq.download(), q);
  const auto got = ds.download();
  for (size_t b = 0; b < sc.size(); ++b) {
    uint32_t gb, wb;
    std::memcpy(&gb, &got[b], 4);
    std::memcpy(&wb, &sc[b], 4);
    if (std::isnan(sc[b]))
      EXPECT_TRUE(std::isnan(got[b])) << b;
    else
      EXPECT_EQ(gb, wb) << "block " << b;
  }
  EXPECT_THROW(fp8_block128_quantize(dx.get(), 96, dq.get(), ds.get(), nullptr), std::invalid_argument);
}

// Host helpers: run without a device.
TEST(ExpertGemmHost, PrecisionGates) {
  std::string why;
  EXPECT_TRUE(precision_supported(GemmPrecision::bf16, 9, 0, &why));
  EXPECT_TRUE(why.empty());
  EXPECT_TRUE(precision_supported(GemmPrecision::fp8_block128, 9, 0));
  EXPECT_FALSE(precision_supported(GemmPrecision::mxfp8, 9, 0, &why));
  EXPECT_NE(why.find("compute capability >= 10.0"), std::string::npos) << why;
  EXPECT_NE(why.find("9.0"), std::string::npos) << why;
  EXPECT_TRUE(precision_supported(GemmPrecision::mxfp8, 10, 0));
  EXPECT_TRUE(precision_supported(GemmPrecision::mxfp8, 12, 0));
  EXPECT_FALSE(precision_supported(GemmPrecision::fp8_block128, 10, 0, &why));
  EXPECT_NE(why.find("use mxfp8"), std::string::npos) << why;
  EXPECT_FALSE(precision_supported(GemmPrecision::fp8_block128, 8, 9));
  EXPECT_FALSE(precision_supported(GemmPrecision::bf16, 7, 5));
  EXPECT_EQ(scale_block(GemmPrecision::mxfp8), 32);
  EXPECT_EQ(scale_block(GemmPrecision::fp8_block128), 128);
}

TEST(ExpertGemmHost, Mxfp8ScaleLayoutIsTheDocumented128x4Tiling) {
  const GemmPrecision p = GemmPrecision::mxfp8;
  // k = 256: 8 K-blocks, two 4-wide tile columns; 200 rows pad to 256: 2 x 2 tiles of 512 bytes.
  EXPECT_EQ(cublaslt_scale_elements(p, 200, 256), 256 * 8);
  EXPECT_EQ(cublaslt_scale_elements(p, 1, 128), 128 * 4);
  EXPECT_EQ(cublaslt_scale_offset(p, 0, 0, 200, 256), 0);
  EXPECT_EQ(cublaslt_scale_offset(p, 0, 1, 200, 256), 1);
  EXPECT_EQ(cublaslt_scale_offset(p, 0, 3, 200, 256), 3);
  EXPECT_EQ(cublaslt_scale_offset(p, 32, 0, 200, 256), 4);
  EXPECT_EQ(cublaslt_scale_offset(p, 96, 3, 200, 256), 15);
  EXPECT_EQ(cublaslt_scale_offset(p, 1, 0, 200, 256), 16);
  EXPECT_EQ(cublaslt_scale_offset(p, 31, 0, 200, 256), 31 * 16);
  EXPECT_EQ(cublaslt_scale_offset(p, 0, 4, 200, 256), 512);       // next tile along K
  EXPECT_EQ(cublaslt_scale_offset(p, 128, 0, 200, 256), 1024);    // next tile row: after both K tiles
  EXPECT_EQ(cublaslt_scale_offset(p, 199, 7, 200, 256), 1024 + 512 + (199 % 32) * 16 + ((199 % 128) / 32) * 4 + 3);
  // A bijection of the real entries into the padded tensor.
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 200; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      const int64_t o = cublaslt_scale_offset(p, r, c, 200, 256);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, cublaslt_scale_elements(p, 200, 256));
      ASSERT_TRUE(seen.insert(o).second) << r << ", " << c;
    }
  EXPECT_THROW(cublaslt_scale_offset(p, 200, 0, 200, 256), std::invalid_argument);
  EXPECT_THROW(cublaslt_scale_offset(GemmPrecision::bf16, 0, 0, 8, 128), std::invalid_argument);
}

TEST(ExpertGemmHost, Block128ScaleLayoutIsOuterMajor) {
  const GemmPrecision p = GemmPrecision::fp8_block128;
  // 6 rows pad to 8 (16 bytes of floats); 2 K-blocks: [2][8], the rows contiguous.
  EXPECT_EQ(cublaslt_scale_elements(p, 6, 256), 16);
  EXPECT_EQ(cublaslt_scale_offset(p, 0, 0, 6, 256), 0);
  EXPECT_EQ(cublaslt_scale_offset(p, 5, 0, 6, 256), 5);
  EXPECT_EQ(cublaslt_scale_offset(p, 0, 1, 6, 256), 8);
  EXPECT_EQ(cublaslt_scale_offset(p, 5, 1, 6, 256), 13);
  EXPECT_EQ(cublaslt_scale_elements(p, 4096, 7168), 56 * 4096);
}


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
