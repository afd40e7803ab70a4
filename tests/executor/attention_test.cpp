// The host attention the CPU backend runs (executor/attention_ref.h) against the textbook form, its
// backward against central differences, and the executor's attention block's gates: they pass on
// the block as run and fail on a corrupted output or gradient; the recorder pairs the median time with its call's work.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "executor/attention_block.h"
#include "executor/attention_ref.h"
#include "executor/backend.h"
#include "executor/comm.h"

namespace {

using moeperf::exec::BlockedAttention;
using moeperf::exec::head_view;
using moeperf::exec::RowMat;

RowMat random(int64_t r, int64_t c, uint64_t seed) {
  RowMat m(r, c);
  moeperf::exec::detail::fill(m.data(), r * c, seed, 1.0f);
  return m;
}

struct Case {
  int64_t seq, hd, window;
  bool causal;
  int64_t chunk = 0;
};

// Sequences that are not a multiple of the 64-query block, windows shorter and longer than a block,
// chunks (Llama 4's chunked layers) that a 64-query block straddles or fits, causal or not.
const Case kCases[] = {{100, 16, 0, false}, {100, 16, 0, true}, {200, 8, 30, true}, {130, 32, 100, true}, {64, 4, 1, true},
                       {200, 8, 0, true, 48}, {130, 16, 0, true, 64}, {100, 16, 0, false, 30}};

TEST(BlockedAttention, ForwardEqualsTheTextbookForm) {
  for (const Case& c : kCases) {
    const BlockedAttention a{c.seq, c.hd, c.window, c.causal, c.chunk};
    const RowMat q = random(c.seq, c.hd, 1), k = random(c.seq, c.hd, 2), v = random(c.seq, c.hd, 3);
    RowMat o(c.seq, c.hd), ref;
    a.forward(q, k, v, o);
    moeperf::exec::naive_attention(a, q, k, v, ref);
    EXPECT_LT((o - ref).cwiseAbs().maxCoeff(), 1e-5f) << c.seq << " " << c.window << " " << c.causal << " " << c.chunk;
  }
}

// Chunked attention is causal attention of each chunk on its own (an independent check of the
// mask, which the textbook form above shares).
TEST(BlockedAttention, ChunksAreSeparateCausalSequences) {
  const int64_t seq = 130, hd = 8, chunk = 48;
  const RowMat q = random(seq, hd, 21), k = random(seq, hd, 22), v = random(seq, hd, 23);
  RowMat o(seq, hd);
  BlockedAttention{seq, hd, 0, true, chunk}.forward(q, k, v, o);
  for (int64_t c0 = 0; c0 < seq; c0 += chunk) {
    const int64_t n = std::min(chunk, seq - c0);
    const RowMat qc = q.middleRows(c0, n), kc = k.middleRows(c0, n), vc = v.middleRows(c0, n);
    RowMat oc(n, hd);
    BlockedAttention{n, hd, 0, true}.forward(qc, kc, vc, oc);
    EXPECT_LT((oc - RowMat(o.middleRows(c0, n))).cwiseAbs().maxCoeff(), 1e-6f) << c0;
  }
  RowMat full(seq, hd);
  BlockedAttention{seq, hd, 0, true}.forward(q, k, v, full);
  EXPECT_GT((full.bottomRows(seq - chunk) - o.bottomRows(seq - chunk)).cwiseAbs().maxCoeff(), 1e-3f);  // the chunk matters
}

// A strided head inside a token-major buffer gives the same result as the contiguous copy.
TEST(BlockedAttention, HeadViewsOfAWideBufferEqualContiguousHeads) {
  const int64_t seq = 96, hd = 8, heads = 3, ld = heads * hd;
  const RowMat q = random(seq, ld, 4), k = random(seq, ld, 5), v = random(seq, ld, 6);
  RowMat o(seq, ld);
  const BlockedAttention a{seq, hd, 0, true};
  for (int64_t h = 0; h < heads; ++h)
    a.forward(head_view(q.data() + h * hd, seq, hd, ld), head_view(k.data() + h * hd, seq, hd, ld), head_view(v.data() + h * hd, seq, hd, ld),
              head_view(o.data() + h * hd, seq, hd, ld));
  for (int64_t h = 0; h < heads; ++h) {
    const RowMat qh = q.middleCols(h * hd, hd), kh = k.middleCols(h * hd, hd), vh = v.middleCols(h * hd, hd);
    RowMat oh(seq, hd);
    a.forward(qh, kh, vh, oh);
    EXPECT_EQ((oh - RowMat(o.middleCols(h * hd, hd))).cwiseAbs().maxCoeff(), 0.0f) << h;
  }
}

// d/dX of sum(dO . O) along a random direction against a central difference of the forward in double.
TEST(BlockedAttention, BackwardEqualsCentralDifferences) {
  for (const Case& c : kCases) {
    const BlockedAttention a{c.seq, c.hd, c.window, c.causal, c.chunk};
    const RowMat q = random(c.seq, c.hd, 7), k = random(c.seq, c.hd, 8), v = random(c.seq, c.hd, 9), dout = random(c.seq, c.hd, 10);
    RowMat o(c.seq, c.hd), dq(c.seq, c.hd), dk = RowMat::Zero(c.seq, c.hd), dv = RowMat::Zero(c.seq, c.hd);
    a.forward(q, k, v, o);
    a.backward(q, k, v, o, dout, dq, dk, dv);
    const RowMat u = random(c.seq, c.hd, 11);
    auto f = [&](int which, double eps) {
      RowMat qq = q, kk = k, vv = v, out;
      (which == 0 ? qq : which == 1 ? kk : vv) += (u * static_cast<float>(eps));
      moeperf::exec::naive_attention(a, qq, kk, vv, out);
      return (dout.cast<double>().array() * out.cast<double>().array()).sum();
    };
    const RowMat* grads[] = {&dq, &dk, &dv};
    for (int w = 0; w < 3; ++w) {
      const double eps = 1e-2;
      const double fd = (f(w, eps) - f(w, -eps)) / (2 * eps);
      const double an = (grads[w]->cast<double>().array() * u.cast<double>().array()).sum();
      EXPECT_NEAR(an, fd, 2e-3 * (1 + std::fabs(fd))) << "input " << w << ", seq " << c.seq << " window " << c.window << " causal " << c.causal << " chunk " << c.chunk;
    }
  }
}

// The block's gates: pass on the block and fail on either altered; GQA with a window, DeepSeek's
// MLA with and without its low-rank Q.
moeperf::exec::Dims block_dims(const std::string& kind) {
  moeperf::exec::Dims d;
  d.tokens = 256, d.hidden = 64, d.seq = 128;
  if (kind == "gqa" || kind == "gqa-qk-norm") d.heads = 4, d.kv_heads = 2, d.head_dim = d.v_dim = 16, d.window = 48, d.qk_norm = kind != "gqa";
  else if (kind == "gqa-chunked") d.heads = 4, d.kv_heads = 2, d.head_dim = d.v_dim = 16, d.chunk = 48, d.qk_norm = true;
  else if (kind == "gqa-nope") d.heads = 4, d.kv_heads = 2, d.head_dim = d.v_dim = 16, d.rope = false;
  else d.mla = true, d.heads = d.kv_heads = 3, d.head_dim = 24, d.rope_dim = 8, d.v_dim = 16, d.kv_lora = 20, d.q_lora = kind == "mla" ? 32 : 0;
  return d;
}

TEST(AttentionBlock, GatesPassOnTheBlockAndCatchACorruption) {
  using namespace moeperf::exec;
  for (const std::string kind : {"gqa", "gqa-qk-norm", "gqa-chunked", "gqa-nope", "mla", "mla-plain-q"}) {
    SCOPED_TRACE(kind);
    const Dims d = block_dims(kind);
    auto be = make_backend("cpu");
    auto comm = make_loopback();
    std::map<std::string, OpStats> ops;
    detail::Recorder rec{&ops, be.get()};
    rec.record = true;
    detail::AttentionBlock blk(d, 0, 1);
    std::vector<float> x0(256 * 64), x(x0.size()), dx(x0.size()), dx0(x0.size());
    detail::fill(x0.data(), 256 * 64, 3, 1.0f);
    detail::fill(dx.data(), 256 * 64, 4, 1.0f);
    blk.forward(*be, *comm, rec, x0.data(), x.data());
    blk.backward(*be, *comm, rec, x0.data(), dx.data(), dx0.data());
    EXPECT_EQ(blk.check_forward(x0.data(), x.data()), "");
    EXPECT_EQ(blk.check_backward(x0.data(), dx.data(), dx0.data()), "");
    for (auto& [name, st] : ops) detail::pick_median_call(st);  // as run() does before writing them
    for (const char* op : {"attn.norm", "attn.q_proj", "attn.kv_proj", "attn.core", "attn.out_proj", "attn.out_proj.dgrad",
                           "attn.out_proj.wgrad", "attn.core.bwd", "attn.kv_proj.dgrad", "attn.kv_proj.wgrad",
                           "attn.q_proj.dgrad", "attn.q_proj.wgrad", "attn.norm.bwd"})
      EXPECT_EQ(ops.count(op), 1u) << op;
    for (const char* op : {"attn.rope", "attn.rope.bwd"}) EXPECT_EQ(ops.count(op), d.rope ? 1u : 0u) << op;  // NoPE: none
    for (const char* op : {"attn.qk_norm", "attn.qk_norm.bwd"}) EXPECT_EQ(ops.count(op), d.qk_norm ? 1u : 0u) << op;
    EXPECT_TRUE(ops["attn.core"].attention);
    EXPECT_EQ(ops["attn.core"].attention_shape.masked_edges, d.window > 0 ? 2 : 1);  // causal, and the window's edge
    EXPECT_EQ(ops["attn.core.bwd"].attention_shape.masked_edges, d.window > 0 ? 2 : 1);
    // The model's FLOP count of the core: 2 x keys x heads x (qk + v dims) per token.
    // 128-token sequences: a 48-token window, or chunks of 48, 48 and 32 ((2 x 48^2 + 32^2) / 2 / 128 = 22).
    const double keys = d.window > 0 ? (48.0 * 49 / 2 + 80.0 * 48) / 128 : d.chunk > 0 ? 22.0 : 64.0;
    EXPECT_DOUBLE_EQ(ops["attn.core"].flops, 256.0 * 2 * keys * static_cast<double>(d.heads * (d.head_dim + d.v_dim)));
    EXPECT_DOUBLE_EQ(ops["attn.core"].attention_shape.head_dim, static_cast<double>(d.head_dim + d.v_dim) / 2);
    if (d.mla) {  // the projections as the model prices them: down and up together, at the up projection's shape
      EXPECT_DOUBLE_EQ(ops["attn.kv_proj"].flops, 2.0 * 256 * (64.0 * (20 + 8) + 20.0 * 3 * (16 + 16)));
    }
    std::vector<float> bad = x;
    bad[5 * 64 + 7] += 1e-2f;  // one element of the first sequence
    EXPECT_NE(blk.check_forward(x0.data(), bad.data()).find("differs from the naive double reference"), std::string::npos);
    for (float& g : dx0) g *= 1.1f;  // a gradient 10 % off
    EXPECT_NE(blk.check_backward(x0.data(), dx.data(), dx0.data()).find("central difference"), std::string::npos);
  }
}

// The routing changes every step, and with it an expert GEMM's rows: the median time is written
// beside the work of the call that took it, never beside the last call's. Even counts: the lower
// of the middle two, a call that ran.
TEST(Recorder, TheMedianTimeIsWrittenWithItsOwnCallsWork) {
  using moeperf::exec::OpStats;
  using moeperf::GemmShape;
  namespace detail = moeperf::exec::detail;
  OpStats o;
  const double secs[4] = {4.0, 1.0, 3.0, 2.0};
  for (int i = 0; i < 4; ++i) {
    o.seconds.push_back(secs[i]);
    GemmShape g;
    g.m = 100 * (i + 1);
    o.work.push_back(OpStats::Work{10.0 * (i + 1), 1000.0 * (i + 1), 7.0 * (i + 1), g});
  }
  detail::pick_median_call(o);
  EXPECT_EQ(o.median_s, 2.0);  // sorted 1, 2, 3, 4: the lower middle
  EXPECT_EQ(o.bytes, 40.0);     // the work of the call that took 2.0 (the fourth), not the last call's
  EXPECT_EQ(o.flops, 4000.0);
  EXPECT_EQ(o.rows, 28.0);
  EXPECT_EQ(o.shape.m, 400);
  o.seconds.push_back(2.5);
  o.work.push_back(OpStats::Work{50, 5000, 35, GemmShape{}});
  detail::pick_median_call(o);
  EXPECT_EQ(o.median_s, 2.5);  // odd count: the middle one
  EXPECT_EQ(o.flops, 5000.0);
}

}  // namespace
