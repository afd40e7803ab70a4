// GPU tests (label "gpu") of kernels/moe_kernels.h against the CPU references in
// kernels/reference: random data plus the traps of docs/executor.md (zero-token experts, every token
// on one expert, run twice and compare bits, offsets past 2^31 elements, MXFP8 NaN/Inf bit-exact).
// Every test skips with the runtime's reason when no device is present.
#include "../gpu_skip.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/device.h"
#include "kernels/moe_kernels.h"
#include "kernels/reference/moe_ref.h"
#include "kernels/reference/mxfp8_ref.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace moeperf::kernels {
namespace {

template <class T>
using Buf = moeperf::kernels::DeviceBuffer<T>;
using moeperf::kernels::random_floats;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Distance in float ulps (same-sign finite values).
int64_t ulps(float a, float b) { return std::llabs(int64_t{static_cast<int32_t>(bits(a))} - static_cast<int32_t>(bits(b))); }

// ---------------------------------------------------------------- router
struct RouterCase {
  int64_t tokens, experts;
  int top_k, groups, topk_groups;
  Score score;
  bool bias, normalize;
};

void check_router(const RouterCase& c, uint64_t seed) {
  std::vector<float> logits = random_floats(static_cast<size_t>(c.tokens * c.experts), -4.f, 4.f, seed);
  std::vector<float> bias = random_floats(static_cast<size_t>(c.experts), -0.1f, 0.1f, seed + 1);
  // Exact ties on purpose: the lower id must win.
  for (int64_t t = 0; t < c.tokens; t += 7) logits[static_cast<size_t>(t * c.experts + 1)] = logits[static_cast<size_t>(t * c.experts)];
  ref::RouterParams rp{c.tokens, c.experts, c.top_k, c.groups, c.topk_groups,
                       c.score == Score::softmax ? ref::Score::softmax : ref::Score::sigmoid, c.normalize};
  RouterParams p{c.tokens, c.experts, c.top_k, c.groups, c.topk_groups, c.score, c.normalize};
  const size_t tk = static_cast<size_t>(c.tokens * c.top_k);
  std::vector<int32_t> idx_ref(tk);
  std::vector<float> w_ref(tk);
  ref::router_topk(logits.data(), c.bias ? bias.data() : nullptr, rp, idx_ref.data(), w_ref.data());

  Buf<float> d_logits(logits), d_bias(bias), d_w(tk);
  Buf<int32_t> d_idx(tk);
  router_topk(d_logits.get(), c.bias ? d_bias.get() : nullptr, p, d_idx.get(), d_w.get(), nullptr);
  const auto idx = d_idx.download();
  const auto w = d_w.download();
  for (size_t i = 0; i < tk; ++i) {
    ASSERT_EQ(idx[i], idx_ref[i]) << "slot " << i;
    ASSERT_NEAR(w[i], w_ref[i], 1e-6) << "slot " << i;
  }
}

TEST(MoeKernelsGpu, RouterSoftmaxPlainTopK) {
  SKIP_WITHOUT_GPU();
  check_router({1000, 64, 6, 1, 1, Score::softmax, false, false}, 11);
  check_router({1000, 64, 6, 1, 1, Score::softmax, true, true}, 12);
}

TEST(MoeKernelsGpu, RouterSigmoidGroupLimitedDeepSeekV3) {
  SKIP_WITHOUT_GPU();
  check_router({2048, 256, 8, 8, 4, Score::sigmoid, true, true}, 21);
}

TEST(MoeKernelsGpu, RouterEdgeShapes) {
  SKIP_WITHOUT_GPU();
  check_router({257, 512, 16, 16, 4, Score::softmax, true, true}, 31);  // the launcher's maxima
  check_router({33, 5, 5, 5, 5, Score::sigmoid, false, true}, 32);      // one expert per group
  check_router({1, 1, 1, 1, 1, Score::softmax, false, true}, 33);
}

// ---------------------------------------------------------------- counts, map, permute
struct Routing {
  int64_t tokens, experts;
  int top_k;
  std::vector<int32_t> idx;
};

// Random distinct experts per token, restricted to `active` experts (others receive zero tokens).
Routing random_routing(int64_t tokens, int top_k, int64_t experts, int64_t active, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Routing r{tokens, experts, top_k, std::vector<int32_t>(static_cast<size_t>(tokens * top_k))};
  std::vector<int32_t> pool(static_cast<size_t>(active));
  for (int64_t e = 0; e < active; ++e) pool[static_cast<size_t>(e)] = static_cast<int32_t>(e * (experts / active));
  for (int64_t t = 0; t < tokens; ++t) {
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int j = 0; j < top_k; ++j) r.idx[static_cast<size_t>(t * top_k + j)] = pool[static_cast<size_t>(j % active)];
  }
  return r;
}

struct MapResult {
  std::vector<int64_t> counts, offsets, row_of_slot, slot_of_row;
};

MapResult gpu_map(const Routing& r) {
  const int64_t slots = r.tokens * r.top_k;
  const size_t ws_bytes = routing_workspace_bytes(slots, r.experts);
  Buf<uint8_t> ws(ws_bytes);
  Buf<int32_t> d_idx(r.idx);
  Buf<int64_t> counts(static_cast<size_t>(r.experts)), offsets(static_cast<size_t>(r.experts + 1)),
      ros(static_cast<size_t>(slots)), sor(static_cast<size_t>(slots));
  expert_counts_offsets(d_idx.get(), r.tokens, r.top_k, r.experts, counts.get(), offsets.get(), ws.get(), ws_bytes, nullptr);
  permute_map(d_idx.get(), r.tokens, r.top_k, r.experts, offsets.get(), ros.get(), sor.get(), ws.get(), ws_bytes, nullptr);
  return {counts.download(), offsets.download(), ros.download(), sor.download()};
}

void check_map(const Routing& r) {
  const int64_t slots = r.tokens * r.top_k;
  MapResult ref_m{std::vector<int64_t>(static_cast<size_t>(r.experts)), std::vector<int64_t>(static_cast<size_t>(r.experts + 1)),
                  std::vector<int64_t>(static_cast<size_t>(slots)), std::vector<int64_t>(static_cast<size_t>(slots))};
  ref::expert_counts(r.idx.data(), r.tokens, r.top_k, r.experts, ref_m.counts.data(), ref_m.offsets.data());
  ref::permute_map(r.idx.data(), r.tokens, r.top_k, r.experts, ref_m.offsets.data(), ref_m.row_of_slot.data(),
                   ref_m.slot_of_row.data());
  const MapResult g = gpu_map(r);
  EXPECT_EQ(g.counts, ref_m.counts);
  EXPECT_EQ(g.offsets, ref_m.offsets);
  EXPECT_EQ(g.offsets.back(), slots);  // dropless: the sum of counts is T*k
  EXPECT_EQ(g.row_of_slot, ref_m.row_of_slot);
  EXPECT_EQ(g.slot_of_row, ref_m.slot_of_row);
}

TEST(MoeKernelsGpu, CountsAndMapMatchReferenceRandom) {
  SKIP_WITHOUT_GPU();
  check_map(random_routing(8192, 8, 256, 256, 41));  // 64k slots: many chunks
  check_map(random_routing(777, 3, 17, 17, 42));     // ragged chunk tail
}

TEST(MoeKernelsGpu, CountsAndMapZeroTokenExperts) {
  SKIP_WITHOUT_GPU();
  check_map(random_routing(3000, 4, 256, 8, 51));  // 248 experts receive nothing
  check_map(random_routing(3000, 1, 64, 1, 52));   // every token on one expert
  check_map(random_routing(0, 8, 256, 8, 53));     // no tokens at all: counts 0, offsets 0
  Routing one{1, 64, 1, {63}};                      // one slot: counts 0 and 1
  check_map(one);
}

TEST(MoeKernelsGpu, PermuteUnpermuteMatchReferenceAndRoundTrip) {
  SKIP_WITHOUT_GPU();
  for (const int64_t hidden : {int64_t{7168}, int64_t{33}}) {  // vector and scalar paths
    const int64_t T = 1024;
    const int k = 4;
    const Routing r = random_routing(T, k, 64, 16, 61);
    const MapResult m = gpu_map(r);
    const auto x = random_floats(static_cast<size_t>(T * hidden), -1.f, 1.f, 62);
    std::vector<float> w = random_floats(static_cast<size_t>(T * k), 0.f, 1.f, 63);
    Buf<float> d_x(x), d_rows(static_cast<size_t>(T * k * hidden)), d_out(static_cast<size_t>(T * hidden)), d_w(w);
    Buf<int64_t> d_sor(m.slot_of_row), d_ros(m.row_of_slot);
    permute(d_x.get(), T, hidden, k, d_sor.get(), d_rows.get(), nullptr);
    std::vector<float> rows_ref(static_cast<size_t>(T * k * hidden));
    ref::permute(x.data(), T, hidden, k, m.slot_of_row.data(), rows_ref.data());
    const auto rows = d_rows.download();
    ASSERT_EQ(0, std::memcmp(rows.data(), rows_ref.data(), rows.size() * sizeof(float))) << "permute is a copy";

    unpermute(d_rows.get(), T, hidden, k, d_ros.get(), d_w.get(), d_out.get(), nullptr);
    std::vector<float> out_ref(static_cast<size_t>(T * hidden));
    ref::unpermute(rows_ref.data(), T, hidden, k, m.row_of_slot.data(), w.data(), out_ref.data());
    const auto out = d_out.download();
    // Same operation sequence as the reference; a reference built with FMA contraction would
    // differ by rounding only: |sum of k products| < k, one rounding each: 4 * k * 2^-24.
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], out_ref[i], 4.0 * k * 0x1p-24) << i;

    // Oracle: permute then un-permute is the identity when slot 0 has weight 1 and the others 0
    // (x * 1 + (+-0) ... == x, compared as floats so -0 == +0).
    for (size_t s = 0; s < w.size(); ++s) w[s] = s % k == 0 ? 1.f : 0.f;
    d_w.upload(w);
    unpermute(d_rows.get(), T, hidden, k, d_ros.get(), d_w.get(), d_out.get(), nullptr);
    ASSERT_EQ(d_out.download(), x);
  }
}

TEST(MoeKernelsGpu, UnpermuteIsDeterministicBitForBit) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 2048, H = 1024;
  const int k = 8;
  const Routing r = random_routing(T, k, 256, 256, 71);
  const MapResult m = gpu_map(r);
  Buf<float> d_rows(random_floats(static_cast<size_t>(T * k * H), -3.f, 3.f, 72)), d_w(random_floats(static_cast<size_t>(T * k), 0.f, 1.f, 73)),
      d_out(static_cast<size_t>(T * H));
  Buf<int64_t> d_ros(m.row_of_slot);
  unpermute(d_rows.get(), T, H, k, d_ros.get(), d_w.get(), d_out.get(), nullptr);
  const auto a = d_out.download();
  unpermute(d_rows.get(), T, H, k, d_ros.get(), d_w.get(), d_out.get(), nullptr);
  const auto b = d_out.download();
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // Same for the map: the counting sort is stable, so twice gives the same rows.
  const MapResult m2 = gpu_map(r);
  EXPECT_EQ(m.row_of_slot, m2.row_of_slot);
}

// rows x hidden past 2^31 floats: the output index must be 64-bit. Checked on sampled rows (a
// full CPU reference would need 8.6 GB of host memory); skipped when the GPU lacks ~10 GB free.
TEST(MoeKernelsGpu, PermuteOffsetsPast2To31Elements) {
  SKIP_WITHOUT_GPU();
  const int64_t H = 7168, k = 8, T = 37450;  // T * k * H = 2,147,532,800 > 2^31
  ASSERT_GT(T * k * H, int64_t{1} << 31);
  size_t free_b = 0, total_b = 0;
  MOEPERF_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const size_t need = static_cast<size_t>((T * k * H + T * H) * 4 + T * k * 8) + (size_t{1} << 30);
  if (free_b < need) GTEST_SKIP() << "needs " << need / (1u << 20) << " MiB free on the device, has " << free_b / (1u << 20);
  // x[t, :] = t (exact in float for t < 2^24); row r holds token (T*k - 1 - r) / k.
  std::vector<float> x(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t) std::fill_n(x.begin() + t * H, H, static_cast<float>(t));
  std::vector<int64_t> sor(static_cast<size_t>(T * k));
  for (int64_t r = 0; r < T * k; ++r) sor[static_cast<size_t>(r)] = T * k - 1 - r;
  Buf<float> d_x(x), d_out(static_cast<size_t>(T * k * H));
  Buf<int64_t> d_sor(sor);
  permute(d_x.get(), T, H, static_cast<int>(k), d_sor.get(), d_out.get(), nullptr);
  MOEPERF_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> row(static_cast<size_t>(H));
  for (const int64_t r : {int64_t{0}, (int64_t{1} << 31) / H, (int64_t{1} << 31) / H + 1, T * k - 1}) {
    MOEPERF_CUDA_CHECK(cudaMemcpy(row.data(), d_out.get() + r * H, static_cast<size_t>(H) * 4, cudaMemcpyDeviceToHost));
    const float want = static_cast<float>((T * k - 1 - r) / k);
    for (int64_t h = 0; h < H; ++h) ASSERT_EQ(row[static_cast<size_t>(h)], want) << "row " << r << " col " << h;
  }
}

// ---------------------------------------------------------------- SwiGLU
TEST(MoeKernelsGpu, SwigluForwardBackwardWithinOneUlp) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 300, inter = 1000;
  const auto gu = random_floats(static_cast<size_t>(rows * 2 * inter), -8.f, 8.f, 81);
  const auto dy = random_floats(static_cast<size_t>(rows * inter), -1.f, 1.f, 82);
  std::vector<float> out_ref(static_cast<size_t>(rows * inter)), dgu_ref(gu.size());
  ref::swiglu_fwd(gu.data(), rows, inter, out_ref.data());
  ref::swiglu_bwd(gu.data(), dy.data(), rows, inter, dgu_ref.data());
  Buf<float> d_gu(gu), d_dy(dy), d_out(out_ref.size()), d_dgu(gu.size());
  swiglu_fwd(d_gu.get(), rows, inter, d_out.get(), nullptr);
  swiglu_bwd(d_gu.get(), d_dy.get(), rows, inter, d_dgu.get(), nullptr);
  const auto out = d_out.download(), dgu = d_dgu.download();
  // Both evaluate in double with the same operation order and round once to float; CUDA's double
  // exp may differ from glibc's in the last double bit, which moves a float by at most one ulp.
  for (size_t i = 0; i < out.size(); ++i) ASSERT_LE(ulps(out[i], out_ref[i]), 1) << i << ": " << out[i] << " vs " << out_ref[i];
  for (size_t i = 0; i < dgu.size(); ++i) ASSERT_LE(ulps(dgu[i], dgu_ref[i]), 1) << i << ": " << dgu[i] << " vs " << dgu_ref[i];
}

// ---------------------------------------------------------------- MXFP8
bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b);
  return bits(a) == bits(b);
}

void check_mxfp8(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q_ref(x.size()), s_ref(x.size() / 32);
  ref::mxfp8_quantize(x.data(), n, q_ref.data(), s_ref.data());
  std::vector<float> y_ref(x.size());
  ref::mxfp8_dequantize(q_ref.data(), s_ref.data(), n, y_ref.data());
  Buf<float> d_x(x), d_y(x.size());
  Buf<uint8_t> d_q(x.size()), d_s(x.size() / 32);
  mxfp8_quantize(d_x.get(), n, d_q.get(), d_s.get(), nullptr);
  mxfp8_dequantize(d_q.get(), d_s.get(), n, d_y.get(), nullptr);
  const auto q = d_q.download(), s = d_s.download();
  const auto y = d_y.download();
  for (size_t b = 0; b < s.size(); ++b) ASSERT_EQ(s[b], s_ref[b]) << "block " << b;
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], q_ref[i]) << "element " << i << " x = " << x[i];
  for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(same_float(y[i], y_ref[i])) << i << ": " << y[i] << " vs " << y_ref[i];
}

TEST(MoeKernelsGpu, Mxfp8BitExactRandomAndEveryBitPattern) {
  SKIP_WITHOUT_GPU();
  check_mxfp8(random_floats(32 * 4096, -100.f, 100.f, 91));
  // Random bit patterns: subnormals, huge values, NaN and Inf mixed into blocks.
  std::mt19937 rng(92);
  std::vector<float> x(32 * 65536);
  for (auto& v : x) {
    const auto b = static_cast<uint32_t>(rng());
    std::memcpy(&v, &b, sizeof v);
  }
  check_mxfp8(x);
}

TEST(MoeKernelsGpu, Mxfp8NanInfZeroAndRangeEdges) {
  SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(32 * 8, 0.f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = i % 2 ? -nan : nan;  // all-NaN block: scale 0xFF
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = i % 2 ? -inf : inf;   // all-Inf: 0xFF too
  x[64] = nan, x[65] = -inf, x[66] = 3.f;                                            // NaN/Inf do not poison the scale
  for (int i = 96; i < 128; ++i) x[static_cast<size_t>(i)] = i % 2 ? -0.f : 0.f;       // zeros: e = -127, signed zeros
  x[128] = std::numeric_limits<float>::max(), x[129] = -0x1.f0p127f;                 // top of the range
  x[160] = std::numeric_limits<float>::denorm_min(), x[161] = 0x1p-126f;             // bottom of the range
  x[192] = 448.f, x[193] = 448.f * 0x1p-3f, x[194] = 0x1p-10f;                       // exact fits, ties to zero
  x[224] = 449.f;                                                                    // just over 448: e rounds up
  check_mxfp8(x);
}

TEST(MoeKernelsGpu, LaunchersRejectBadArguments) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(mxfp8_quantize(nullptr, 33, nullptr, nullptr, nullptr), std::invalid_argument);
  RouterParams p{1, 600, 1, 1, 1, Score::softmax, true};
  EXPECT_THROW(router_topk(nullptr, nullptr, p, nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(expert_counts_offsets(nullptr, 100, 8, 256, nullptr, nullptr, nullptr, 0, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace moeperf::kernels
