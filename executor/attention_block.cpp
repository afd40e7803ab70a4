// The attention block `moeperf run` executes before the MoE block (executor/attention_block.h).
#include "executor/attention_block.h"

#include <Eigen/Dense>
#include <cmath>
#include <complex>
#include <tuple>

#include "executor/attention_ref.h"
#include "model/workload/flops.h"

namespace moeperf::exec::detail {

namespace {

enum : uint64_t { kGammaSeed = 31, kWSeed = 32, kProbeSeed = 35, kNormSeed = 36 };
constexpr float kEps = 1e-6f;
constexpr double kRopeBase = 10000.0;  // RoPE's theta (Llama, Mixtral, DeepSeek-V3); the base only sets the angles
double D(int64_t v) { return static_cast<double>(v); }
size_t Z(int64_t v) { return static_cast<size_t>(v); }
// Bytes of an FP32 GEMM that reads A and B and writes C once.
double gemm_bytes(double m, double n, double k) { return 4.0 * (m * k + k * n + m * n); }

// RMSNorm of `rows` rows of `cols` values (row stride ld): out = x r g, r = 1 / sqrt(mean(x^2) + eps).
void rms_fwd(const float* x, int64_t rows, int64_t cols, int64_t ld, const float* g, float* out, float* rstd) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* xr = x + t * ld;
    double ss = 0;
    for (int64_t i = 0; i < cols; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float r = 1.0f / std::sqrt(static_cast<float>(ss / D(cols)) + kEps);
    rstd[t] = r;
    for (int64_t i = 0; i < cols; ++i) out[t * cols + i] = xr[i] * r * g[i];
  }
}
// Its backward: dx = r g dy - r^3 x (sum_j g_j dy_j x_j) / cols (written at stride dx_ld, or added).
void rms_bwd(const float* x, int64_t rows, int64_t cols, int64_t ld, const float* g, const float* rstd, const float* dy, float* dx,
             int64_t dx_ld, bool accumulate) {
  for (int64_t t = 0; t < rows; ++t) {
    const float r = rstd[t];
    const float* xr = x + t * ld;
    const float* gy = dy + t * cols;
    double dot = 0;
    for (int64_t i = 0; i < cols; ++i) dot += static_cast<double>(gy[i]) * g[i] * xr[i];
    const float c = static_cast<float>(dot / D(cols)) * r * r * r;
    for (int64_t i = 0; i < cols; ++i) {
      const float v = r * g[i] * gy[i] - c * xr[i];
      dx[t * dx_ld + i] = accumulate ? dx[t * dx_ld + i] + v : v;
    }
  }
}

// RoPE, rotate-half form (GPT-NeoX, Hugging Face's rotate_half, Megatron's default): in each of
// `heads` heads (head_stride apart, rows row_stride apart), on the r dims from `off`, dims j and
// j + r/2 turn by the angle of the token's position in its sequence times base^(-2j / r), read
// from the tables cs/sn (seq x r/2); `inverse` turns them back (the backward: the rotation's
// transpose).
void rope_apply(float* x, int64_t rows, int64_t seq, int64_t heads, int64_t head_stride, int64_t row_stride, int64_t off, int64_t r,
                const std::vector<float>& cs, const std::vector<float>& sn, bool inverse) {
  const int64_t half = r / 2;
  for (int64_t t = 0; t < rows; ++t) {
    const float* c = cs.data() + (t % seq) * half;
    const float* s = sn.data() + (t % seq) * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* e = x + t * row_stride + h * head_stride + off;
      for (int64_t j = 0; j < half; ++j) {
        const float a = e[j], b = e[j + half], sj = inverse ? -s[j] : s[j];
        e[j] = a * c[j] - b * sj;
        e[j + half] = b * c[j] + a * sj;
      }
    }
  }
}

// The dims RoPE turns in each head: MLA's rope part, a GQA/MHA head whole; even.
int64_t rope_dims(const Dims& d) {
  if (!d.mla && !d.rope) return 0;  // a NoPE layer (Llama 4): no rotation
  const int64_t r = d.mla ? d.rope_dim : d.head_dim;
  return r - r % 2;
}

AttentionBlock::Layout layout_of(const Dims& d) {
  AttentionBlock::Layout l;
  const int64_t H = d.hidden, qd = d.heads * d.head_dim, cd = d.heads * d.v_dim;
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t o = at;
    at += n;
    return o;
  };
  if (!d.mla) {
    l.qb = take(H * qd), l.kva = take(H * (d.kv_heads * d.head_dim + d.kv_heads * d.v_dim));
  } else {
    if (d.q_lora > 0) l.qa = take(H * d.q_lora), l.qb = take(d.q_lora * qd);
    else l.qb = take(H * qd);
    l.kva = take(H * (d.kv_lora + d.rope_dim));
    l.kvb = take(d.kv_lora * d.heads * (d.head_dim - d.rope_dim + d.v_dim));
  }
  l.o = take(cd * H);
  l.total = at;
  return l;
}

}  // namespace

std::vector<float> AttentionBlock::full_weights(const Dims& d, const Layout& l) {
  std::vector<float> w(Z(l.total));
  // Each matrix scaled by 1 / sqrt(its fan-in), from one seed per matrix.
  const int64_t H = d.hidden, qd = d.heads * d.head_dim, cd = d.heads * d.v_dim;
  auto put = [&](int64_t off, int64_t n, int64_t fan_in, uint64_t k) {
    fill(w.data() + off, n, kWSeed + k, static_cast<float>(1.0 / std::sqrt(D(fan_in))));
  };
  if (!d.mla) {
    put(l.qb, H * qd, H, 0);
    put(l.kva, l.o - l.kva, H, 1);
  } else {
    if (d.q_lora > 0) put(l.qa, H * d.q_lora, H, 2), put(l.qb, d.q_lora * qd, d.q_lora, 0);
    else put(l.qb, H * qd, H, 0);
    put(l.kva, l.kvb - l.kva, H, 1);
    put(l.kvb, l.o - l.kvb, d.kv_lora, 3);
  }
  put(l.o, cd * H, cd, 4);
  return w;
}

AttentionBlock::AttentionBlock(const Dims& dims, int rank, int ranks) : d_(dims), ranks_(ranks) {
  if (d_.v_dim == 0) d_.v_dim = d_.head_dim;
  if (d_.mla) d_.kv_heads = d_.heads, d_.qk_norm = false;  // MLA's latent norms are inside its projections
  const Dims& d = d_;
  lay_ = layout_of(d);
  qd_ = d.heads * d.head_dim;
  kd_ = d.kv_heads * d.head_dim;
  vd_ = d.kv_heads * d.v_dim;
  at_ = BlockedAttention{d.seq, d.head_dim, d.window, true, d.chunk};
  group_ = d.heads / d.kv_heads;
  // The cost model's count of the core: 2 x keys x heads x (qk + v dims) per query.
  keys_ = attended_keys(d.seq, static_cast<int>(d.window), d.chunk);
  edges_ = masked_edges(true, d.window, d.seq);  // causal, and the window's far edge
  core_flops_ = D(d.tokens) * 2.0 * keys_ * D(d.heads) * D(d.head_dim + d.v_dim);
  rope_ = rope_dims(d);
  rope_cos_.resize(Z(d.seq * (rope_ / 2))), rope_sin_.resize(rope_cos_.size());
  for (int64_t p = 0; p < d.seq; ++p)
    for (int64_t j = 0; j < rope_ / 2; ++j) {
      const double th = D(p) * std::pow(kRopeBase, -2.0 * D(j) / D(rope_));
      rope_cos_[Z(p * (rope_ / 2) + j)] = static_cast<float>(std::cos(th));
      rope_sin_[Z(p * (rope_ / 2) + j)] = static_cast<float>(std::sin(th));
    }
  auto norm_weights = [](std::vector<float>& g, int64_t n, uint64_t seed) {
    g.resize(Z(n));
    fill(g.data(), n, seed, 0.1f);
    for (float& x : g) x += 1.0f;
  };
  norm_weights(gamma_, d.hidden, kGammaSeed);
  if (d.mla) norm_weights(gq_, d.q_lora, kNormSeed), norm_weights(gkv_, d.kv_lora, kNormSeed + 1);
  if (d.qk_norm) norm_weights(gqn_, d.head_dim, kNormSeed + 2), norm_weights(gkn_, d.head_dim, kNormSeed + 3);
  full_ = full_weights(d, lay_);
  if (d.fsdp) {  // keep this rank's shard; full_ is gathered before each forward
    own_.assign(Z(shard()), 0.0f);
    for (int64_t i = 0; i < shard(); ++i)
      if (const int64_t g = rank * shard() + i; g < lay_.total) own_[Z(i)] = full_[Z(g)];
    std::fill(full_.begin(), full_.end(), std::nanf(""));  // a forward without the gather would show
  }
}

void AttentionBlock::gather(Communicator& comm, Recorder& rec) {
  std::vector<float> all(Z(shard() * ranks_));
  rec.wait("fsdp.all_gather", comm);
  rec.time("fsdp.all_gather", 4.0 * D(shard() * ranks_), 0,
           [&] { comm.allgather(own_.data(), shard() * static_cast<int64_t>(sizeof(float)), all.data()); });
  std::copy(all.begin(), all.begin() + lay_.total, full_.begin());
}

void AttentionBlock::rotate_qk(float* q, float* k, bool inverse) const {
  // Q: every head, rows of qd_. K: GQA's K/V heads in rows of K then V; MLA's heads in rows of K.
  const int64_t hd = d_.head_dim, off = d_.mla ? hd - d_.rope_dim : 0;
  rope_apply(q, d_.tokens, d_.seq, d_.heads, hd, qd_, off, rope_, rope_cos_, rope_sin_, inverse);
  rope_apply(k, d_.tokens, d_.seq, d_.kv_heads, hd, d_.mla ? kd_ : kd_ + vd_, off, rope_, rope_cos_, rope_sin_, inverse);
}

void AttentionBlock::forward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, float* x) {
  if (d_.fsdp) gather(comm, rec);
  const int64_t T = d_.tokens, H = d_.hidden, hd = d_.head_dim, vh = d_.v_dim, cd = d_.heads * vh;
  const double fT = D(T), fH = D(H), fq = D(qd_), fc = D(cd);
  norm_.resize(Z(T * H)), rstd_.resize(Z(T)), q_.resize(Z(T * qd_)), ctx_.resize(Z(T * cd));
  rec.time("attn.norm", 8.0 * fT * fH, 0, [&] { rms_fwd(x0, T, H, H, gamma_.data(), norm_.data(), rstd_.data()); });
  // The projections, priced as the model prices them: an MLA projection is its down GEMM, the norm
  // and its up GEMM, rated by their FLOPs at the up projection's shape.
  const int64_t ql = d_.q_lora, kl = d_.kv_lora, rope = d_.rope_dim, nope = hd - rope, kvw = d_.heads * (nope + vh);
  if (!d_.mla || ql == 0) {
    rec.time("attn.q_proj", gemm_bytes(fT, fq, fH), 2.0 * fT * fq * fH, GemmShape{fT, fq, fH},
             [&] { be.gemm(norm_.data(), w(lay_.qb), q_.data(), T, qd_, H, false, false, false); });
  } else {
    qa_.resize(Z(T * ql)), qan_.resize(Z(T * ql)), qrstd_.resize(Z(T));
    rec.time("attn.q_proj", gemm_bytes(fT, D(ql), fH) + 8.0 * fT * D(ql) + gemm_bytes(fT, fq, D(ql)), 2.0 * fT * D(ql) * (fH + fq),
             GemmShape{fT, fq, D(ql)}, [&] {
               be.gemm(norm_.data(), w(lay_.qa), qa_.data(), T, ql, H, false, false, false);
               rms_fwd(qa_.data(), T, ql, ql, gq_.data(), qan_.data(), qrstd_.data());
               be.gemm(qan_.data(), w(lay_.qb), q_.data(), T, qd_, ql, false, false, false);
             });
  }
  if (!d_.mla) {
    k_.resize(Z(T * (kd_ + vd_)));
    const double n = D(kd_ + vd_);
    rec.time("attn.kv_proj", gemm_bytes(fT, n, fH), 2.0 * fT * n * fH, GemmShape{fT, n, fH},
             [&] { be.gemm(norm_.data(), w(lay_.kva), k_.data(), T, kd_ + vd_, H, false, false, false); });
  } else {
    ckv_.resize(Z(T * (kl + rope))), cn_.resize(Z(T * kl)), crstd_.resize(Z(T)), kvb_.resize(Z(T * kvw));
    k_.resize(Z(T * kd_)), v_.resize(Z(T * vd_));
    rec.time("attn.kv_proj", gemm_bytes(fT, D(kl + rope), fH) + 8.0 * fT * D(kl) + gemm_bytes(fT, D(kvw), D(kl)),
             2.0 * fT * (fH * D(kl + rope) + D(kl) * D(kvw)), GemmShape{fT, D(d_.heads * (hd + vh)), D(kl)}, [&] {
               be.gemm(norm_.data(), w(lay_.kva), ckv_.data(), T, kl + rope, H, false, false, false);
               rms_fwd(ckv_.data(), T, kl, kl + rope, gkv_.data(), cn_.data(), crstd_.data());
               be.gemm(cn_.data(), w(lay_.kvb), kvb_.data(), T, kvw, kl, false, false, false);
             });
  }
  // QK-norm: each head of Q and K RMS-normalized, its inputs kept for the backward.
  if (d_.qk_norm) {
    qpre_.assign(q_.begin(), q_.end()), kpre_.resize(Z(T * kd_)), qnr_.resize(Z(T * d_.heads)), knr_.resize(Z(T * d_.kv_heads));
    rec.time("attn.qk_norm", 8.0 * fT * (fq + D(kd_)), 0, [&] {
      rms_fwd(qpre_.data(), T * d_.heads, hd, hd, gqn_.data(), q_.data(), qnr_.data());
      for (int64_t t = 0; t < T; ++t) {
        std::copy(k_.data() + t * (kd_ + vd_), k_.data() + t * (kd_ + vd_) + kd_, kpre_.data() + t * kd_);
        rms_fwd(kpre_.data() + t * kd_, d_.kv_heads, hd, hd, gkn_.data(), k_.data() + t * (kd_ + vd_), knr_.data() + t * d_.kv_heads);
      }
    });
  }
  // RoPE on Q and K, one pass as the model prices it; MLA's also assembles each head's K (its nope
  // part and the shared rope part) and V, as Megatron's fused MLA rope kernels do.
  if (!d_.mla) {
    if (d_.rope) rec.time("attn.rope", 8.0 * fT * (fq + D(kd_)), 0, [&] { rotate_qk(q_.data(), k_.data(), false); });
  } else {
    rec.time("attn.rope", 4.0 * fT * (2.0 * fq + D(kvw) + D(rope) + D(kd_ + vd_)), 0, [&] {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < d_.heads; ++h) {
          const float* src = kvb_.data() + t * kvw + h * (nope + vh);
          std::copy(src, src + nope, k_.data() + t * kd_ + h * hd);
          std::copy(ckv_.data() + t * (kl + rope) + kl, ckv_.data() + t * (kl + rope) + kl + rope, k_.data() + t * kd_ + h * hd + nope);
          std::copy(src + nope, src + nope + vh, v_.data() + t * vd_ + h * vh);
        }
      rotate_qk(q_.data(), k_.data(), false);
    });
  }
  const float* K = k_.data();
  const float* V = d_.mla ? v_.data() : k_.data() + kd_;
  const int64_t kld = d_.mla ? kd_ : kd_ + vd_, vld = d_.mla ? vd_ : kd_ + vd_;
  const double io = 4.0 * fT * (fq + D(kd_ + vd_) + fc);  // reads Q, K, V, writes O
  const BlockedAttention& at = at_;
  const int64_t group = group_;
  rec.time_attention("attn.core", io, core_flops_, AttentionShape{keys_, D(hd + vh) / 2.0, false, edges_}, [&] {
    for (int64_t b = 0; b < T / d_.seq; ++b)
      for (int64_t h = 0; h < d_.heads; ++h) {
        const int64_t g = h / group, t0 = b * d_.seq;
        at.forward(head_view(q_.data() + t0 * qd_ + h * hd, d_.seq, hd, qd_), head_view(K + t0 * kld + g * hd, d_.seq, hd, kld),
                   head_view(V + t0 * vld + g * vh, d_.seq, vh, vld), head_view(ctx_.data() + t0 * cd + h * vh, d_.seq, vh, cd));
      }
  });
  std::copy(x0, x0 + T * H, x);  // the residual; the output projection adds to it
  rec.time("attn.out_proj", gemm_bytes(fT, fH, fc), 2.0 * fT * fH * fc, GemmShape{fT, fH, fc},
           [&] { be.gemm(ctx_.data(), w(lay_.o), x, T, H, cd, false, false, true); });
}

void AttentionBlock::backward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, const float* dx, float* dx0) {
  const int64_t T = d_.tokens, H = d_.hidden, hd = d_.head_dim, vh = d_.v_dim, cd = d_.heads * vh;
  const int64_t ql = d_.q_lora, kl = d_.kv_lora, rope = d_.rope_dim, nope = hd - rope, kvw = d_.heads * (nope + vh);
  const double fT = D(T), fH = D(H), fq = D(qd_), fc = D(cd);
  grad_.assign(Z(lay_.total), 0.0f);
  auto g = [&](int64_t off) { return grad_.data() + off; };
  std::vector<float> dctx(Z(T * cd)), dq(Z(T * qd_)), dk(Z(T * (d_.mla ? kd_ : kd_ + vd_)), 0.0f), dv(Z(d_.mla ? T * vd_ : 0), 0.0f),
      dn(Z(T * H));
  rec.time("attn.out_proj.dgrad", gemm_bytes(fT, fc, fH), 2.0 * fT * fc * fH, GemmShape{fT, fc, fH},
           [&] { be.gemm(dx, w(lay_.o), dctx.data(), T, cd, H, false, true, false); });
  rec.time("attn.out_proj.wgrad", gemm_bytes(fc, fH, fT), 2.0 * fT * fc * fH, GemmShape{fc, fH, fT},
           [&] { be.gemm(ctx_.data(), dx, g(lay_.o), cd, H, T, true, false, false); });
  const float* K = k_.data();
  const float* V = d_.mla ? v_.data() : k_.data() + kd_;
  float* dK = dk.data();
  float* dV = d_.mla ? dv.data() : dk.data() + kd_;
  const int64_t kld = d_.mla ? kd_ : kd_ + vd_, vld = d_.mla ? vd_ : kd_ + vd_;
  const BlockedAttention& at = at_;
  const int64_t group = group_;
  // The backward's matmuls as the model counts them (attention_bwd_work: 2.5 x the forward's at equal
  // head dims); its bytes FlashAttention's 2.5 x.
  rec.time_attention("attn.core.bwd", kAttentionBwdWork * 4.0 * fT * (fq + D(kd_ + vd_) + fc), attention_bwd_work(D(hd), D(vh)) * core_flops_, AttentionShape{keys_, D(hd + vh) / 2.0, true, edges_, attention_bwd_work(D(hd), D(vh))},
                     [&] {
                       std::fill(dk.begin(), dk.end(), 0.0f);
                       std::fill(dv.begin(), dv.end(), 0.0f);
                       for (int64_t b = 0; b < T / d_.seq; ++b)
                         for (int64_t h = 0; h < d_.heads; ++h) {
                           const int64_t kv = h / group, t0 = b * d_.seq, S = d_.seq;
                           at.backward(head_view(q_.data() + t0 * qd_ + h * hd, S, hd, qd_), head_view(K + t0 * kld + kv * hd, S, hd, kld),
                                       head_view(V + t0 * vld + kv * vh, S, vh, vld), head_view(ctx_.data() + t0 * cd + h * vh, S, vh, cd),
                                       head_view(dctx.data() + t0 * cd + h * vh, S, vh, cd),
                                       head_view(dq.data() + t0 * qd_ + h * hd, S, hd, qd_), head_view(dK + t0 * kld + kv * hd, S, hd, kld),
                                       head_view(dV + t0 * vld + kv * vh, S, vh, vld));
                         }
                     });
  // RoPE's backward: the gradients of Q and K turned back; MLA's also takes each head's K and V
  // gradients back to the up projection's layout, the rope part's summed over the heads.
  std::vector<float> dkvb(Z(d_.mla ? T * kvw : 0)), dckv(Z(d_.mla ? T * (kl + rope) : 0), 0.0f);
  if (!d_.mla) {
    if (d_.rope) rec.time("attn.rope.bwd", 8.0 * fT * (fq + D(kd_)), 0, [&] { rotate_qk(dq.data(), dk.data(), true); });
  } else {
    rec.time("attn.rope.bwd", 4.0 * fT * (2.0 * fq + D(kd_ + vd_) + D(kvw) + D(rope)), 0, [&] {
      rotate_qk(dq.data(), dk.data(), true);
      std::fill(dckv.begin(), dckv.end(), 0.0f);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < d_.heads; ++h) {
          const float* dkh = dk.data() + t * kd_ + h * hd;
          std::copy(dkh, dkh + nope, dkvb.data() + t * kvw + h * (nope + vh));
          std::copy(dv.data() + t * vd_ + h * vh, dv.data() + t * vd_ + (h + 1) * vh, dkvb.data() + t * kvw + h * (nope + vh) + nope);
          for (int64_t j = 0; j < rope; ++j) dckv[Z(t * (kl + rope) + kl + j)] += dkh[nope + j];
        }
    });
  }
  if (d_.qk_norm) {  // QK-norm's backward, in place on the gradients of Q and K
    rec.time("attn.qk_norm.bwd", 12.0 * fT * (fq + D(kd_)), 0, [&] {
      rms_bwd(qpre_.data(), T * d_.heads, hd, hd, gqn_.data(), qnr_.data(), dq.data(), dq.data(), hd, false);
      for (int64_t t = 0; t < T; ++t)
        rms_bwd(kpre_.data() + t * kd_, d_.kv_heads, hd, hd, gkn_.data(), knr_.data() + t * d_.kv_heads, dk.data() + t * (kd_ + vd_),
                dk.data() + t * (kd_ + vd_), hd, false);
    });
  }
  if (!d_.mla) {
    const double n = D(kd_ + vd_);
    rec.time("attn.kv_proj.dgrad", gemm_bytes(fT, fH, n), 2.0 * fT * n * fH, GemmShape{fT, fH, n},
             [&] { be.gemm(dk.data(), w(lay_.kva), dn.data(), T, H, kd_ + vd_, false, true, false); });
    rec.time("attn.kv_proj.wgrad", gemm_bytes(fH, n, fT), 2.0 * fT * n * fH, GemmShape{fH, n, fT},
             [&] { be.gemm(norm_.data(), dk.data(), g(lay_.kva), H, kd_ + vd_, T, true, false, false); });
  } else {
    std::vector<float> dcn(Z(T * kl));
    const double flops = 2.0 * fT * (fH * D(kl + rope) + D(kl) * D(kvw));
    const GemmShape shape{fT, D(d_.heads * (hd + vh)), D(kl)};  // the forward's, as the model prices it
    rec.time("attn.kv_proj.dgrad", gemm_bytes(fT, D(kl), D(kvw)) + 12.0 * fT * D(kl) + gemm_bytes(fT, fH, D(kl + rope)), flops,
             GemmShape{shape.m, shape.k, shape.n}, [&] {
      be.gemm(dkvb.data(), w(lay_.kvb), dcn.data(), T, kl, kvw, false, true, false);
      rms_bwd(ckv_.data(), T, kl, kl + rope, gkv_.data(), crstd_.data(), dcn.data(), dckv.data(), kl + rope, false);
      be.gemm(dckv.data(), w(lay_.kva), dn.data(), T, H, kl + rope, false, true, false);
    });
    rec.time("attn.kv_proj.wgrad", gemm_bytes(D(kl), D(kvw), fT) + gemm_bytes(fH, D(kl + rope), fT), flops, GemmShape{shape.k, shape.n, shape.m},
             [&] {
               be.gemm(cn_.data(), dkvb.data(), g(lay_.kvb), kl, kvw, T, true, false, false);
               be.gemm(norm_.data(), dckv.data(), g(lay_.kva), H, kl + rope, T, true, false, false);
             });
  }
  if (!d_.mla || ql == 0) {
    rec.time("attn.q_proj.dgrad", gemm_bytes(fT, fH, fq), 2.0 * fT * fq * fH, GemmShape{fT, fH, fq},
             [&] { be.gemm(dq.data(), w(lay_.qb), dn.data(), T, H, qd_, false, true, true); });
    rec.time("attn.q_proj.wgrad", gemm_bytes(fH, fq, fT), 2.0 * fT * fq * fH, GemmShape{fH, fq, fT},
             [&] { be.gemm(norm_.data(), dq.data(), g(lay_.qb), H, qd_, T, true, false, false); });
  } else {
    std::vector<float> dqan(Z(T * ql)), dqa(Z(T * ql));
    const double flops = 2.0 * fT * D(ql) * (fH + fq);
    rec.time("attn.q_proj.dgrad", gemm_bytes(fT, D(ql), fq) + 12.0 * fT * D(ql) + gemm_bytes(fT, fH, D(ql)), flops, GemmShape{fT, D(ql), fq}, [&] {
      be.gemm(dq.data(), w(lay_.qb), dqan.data(), T, ql, qd_, false, true, false);
      rms_bwd(qa_.data(), T, ql, ql, gq_.data(), qrstd_.data(), dqan.data(), dqa.data(), ql, false);
      be.gemm(dqa.data(), w(lay_.qa), dn.data(), T, H, ql, false, true, true);
    });
    rec.time("attn.q_proj.wgrad", gemm_bytes(D(ql), fq, fT) + gemm_bytes(fH, D(ql), fT), flops, GemmShape{D(ql), fq, fT}, [&] {
      be.gemm(qan_.data(), dq.data(), g(lay_.qb), ql, qd_, T, true, false, false);
      be.gemm(norm_.data(), dqa.data(), g(lay_.qa), H, ql, T, true, false, false);
    });
  }
  // RMSNorm backward plus the residual.
  rec.time("attn.norm.bwd", 16.0 * fT * fH, 0, [&] {
    std::copy(dx, dx + T * H, dx0);
    rms_bwd(x0, T, H, H, gamma_.data(), rstd_.data(), dn.data(), dx0, H, true);
  });
  if (d_.fsdp) {
    std::vector<float> padded(Z(shard() * ranks_), 0.0f);
    std::copy(grad_.begin(), grad_.end(), padded.begin());
    grad_shard_.assign(Z(shard()), 0.0f);
    rec.wait("fsdp.reduce_scatter", comm);
    rec.time("fsdp.reduce_scatter", 4.0 * D(shard() * ranks_), 0,
             [&] { comm.reduce_scatter_sum(padded.data(), grad_shard_.data(), shard()); });
    shard_sum_ = grad_sum_ = 0;
    for (float v : grad_shard_) shard_sum_ += static_cast<double>(v);
    for (float v : grad_) grad_sum_ += static_cast<double>(v);
  }
}

namespace {

using RM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
Eigen::MatrixXd mat(const std::vector<float>& w, int64_t off, int64_t r, int64_t c) {
  return Eigen::Map<const RM>(w.data() + off, r, c).cast<double>();
}
Eigen::MatrixXd rms(const Eigen::MatrixXd& x, const std::vector<float>& g) {
  Eigen::MatrixXd n(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const double r = 1.0 / std::sqrt(x.row(t).squaredNorm() / static_cast<double>(x.cols()) + static_cast<double>(kEps));
    for (Eigen::Index i = 0; i < x.cols(); ++i) n(t, i) = x(t, i) * r * g[Z(i)];
  }
  return n;
}

// The block's forward for the first sequence, in double, from the weights as written: each
// projection as its textbook product, the attention from the full score matrix.
Eigen::MatrixXd naive_block(const Dims& d, const AttentionBlock::Layout& l, const std::vector<float>& w, const std::vector<float>& gamma,
                            const std::vector<float>& gq, const std::vector<float>& gkv, const std::vector<float>& gqn,
                            const std::vector<float>& gkn, const float* x0, const Eigen::MatrixXd* shift) {
  const int64_t S = d.seq, H = d.hidden, hd = d.head_dim, vh = d.v_dim, heads = d.heads, kvh = d.kv_heads;
  Eigen::MatrixXd x = Eigen::Map<const RM>(x0, S, H).cast<double>();
  if (shift) x += *shift;
  const Eigen::MatrixXd n = rms(x, gamma);
  Eigen::MatrixXd q, k(S, kvh * hd), v(S, kvh * vh);
  if (!d.mla) {
    q = n * mat(w, l.qb, H, heads * hd);
    const Eigen::MatrixXd kv = n * mat(w, l.kva, H, kvh * (hd + vh));
    k = kv.leftCols(kvh * hd), v = kv.rightCols(kvh * vh);
  } else {
    const int64_t ql = d.q_lora, kl = d.kv_lora, rope = d.rope_dim, nope = hd - rope;
    q = ql > 0 ? Eigen::MatrixXd(rms(n * mat(w, l.qa, H, ql), gq) * mat(w, l.qb, ql, heads * hd)) : Eigen::MatrixXd(n * mat(w, l.qb, H, heads * hd));
    const Eigen::MatrixXd ckv = n * mat(w, l.kva, H, kl + rope);
    const Eigen::MatrixXd kvb = rms(ckv.leftCols(kl), gkv) * mat(w, l.kvb, kl, heads * (nope + vh));
    for (int64_t h = 0; h < heads; ++h) {
      k.middleCols(h * hd, nope) = kvb.middleCols(h * (nope + vh), nope);
      k.middleCols(h * hd + nope, rope) = ckv.rightCols(rope);
      v.middleCols(h * vh, vh) = kvb.middleCols(h * (nope + vh) + nope, vh);
    }
  }
  // RoPE in double from its definition: each pair (j, j + r/2) of a head's rotated dims, read as
  // the complex number a + ib, times exp(i p base^(-2j/r)) at position p.
  const int64_t r = rope_dims(d), off = d.mla ? hd - d.rope_dim : 0;
  auto rotate = [&](Eigen::MatrixXd& m, int64_t nh) {
    for (int64_t p = 0; p < S; ++p)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t j = 0; j < r / 2; ++j) {
          const std::complex<double> z(m(p, h * hd + off + j), m(p, h * hd + off + j + r / 2));
          const std::complex<double> y = z * std::polar(1.0, D(p) * std::pow(kRopeBase, -2.0 * D(j) / D(r)));
          m(p, h * hd + off + j) = y.real(), m(p, h * hd + off + j + r / 2) = y.imag();
        }
  };
  if (d.qk_norm)  // each head's Q and K over its RMS, times the norm's weights
    for (auto [m, nh, g] : {std::tuple{&q, heads, &gqn}, std::tuple{&k, kvh, &gkn}})
      for (int64_t h = 0; h < nh; ++h) {
        const Eigen::MatrixXd block = m->middleCols(h * hd, hd);
        m->middleCols(h * hd, hd) = rms(block, *g);
      }
  rotate(q, heads);
  rotate(k, kvh);
  Eigen::MatrixXd ctx = Eigen::MatrixXd::Zero(S, heads * vh);
  const double scale = 1.0 / std::sqrt(D(hd));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / (heads / kvh);
    const Eigen::MatrixXd s = q.middleCols(h * hd, hd) * k.middleCols(g * hd, hd).transpose() * scale;
    for (int64_t i = 0; i < S; ++i) {
      Eigen::VectorXd p(S);
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        const bool masked = j > i || (d.window > 0 && j < i - d.window + 1) || (d.chunk > 0 && j / d.chunk != i / d.chunk);
        p(j) = masked ? -INFINITY : s(i, j);
        mx = std::max(mx, p(j));
      }
      p = (p.array() - mx).exp();
      p /= p.sum();
      ctx.row(i).segment(h * vh, vh) = p.transpose() * v.middleCols(g * vh, vh);
    }
  }
  return x + ctx * mat(w, l.o, heads * vh, H);
}

}  // namespace

std::string AttentionBlock::check_forward(const float* x0, const float* x) const {
  const std::vector<float> w = full_weights(d_, lay_);
  const Eigen::MatrixXd ref = naive_block(d_, lay_, w, gamma_, gq_, gkv_, gqn_, gkn_, x0, nullptr);
  double err = 0, mag = 0;
  for (int64_t t = 0; t < d_.seq; ++t)
    for (int64_t i = 0; i < d_.hidden; ++i)
      err = std::max(err, std::fabs(ref(t, i) - x[t * d_.hidden + i])), mag = std::max(mag, std::fabs(ref(t, i)));
  if (!(err <= 1e-4 * std::max(mag, 1e-30)))
    return fmt("attention block: the first sequence differs from the naive double reference: max |diff| %.3g vs max |y| %.3g", err, mag);
  const_cast<AttentionBlock*>(this)->fwd_err_ = err / mag;
  return "";
}

std::string AttentionBlock::check_backward(const float* x0, const float* dx, const float* dx0) const {
  const std::vector<float> w = full_weights(d_, lay_);
  const int64_t S = d_.seq, H = d_.hidden;
  Eigen::MatrixXd u(S, H);
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < H; ++i) u(t, i) = 2 * uniform(kProbeSeed, static_cast<uint64_t>(t * H + i)) - 1;
  const double eps = 1e-3;
  const Eigen::MatrixXd up = eps * u, dn = -eps * u;
  const Eigen::MatrixXd yp = naive_block(d_, lay_, w, gamma_, gq_, gkv_, gqn_, gkn_, x0, &up), ym = naive_block(d_, lay_, w, gamma_, gq_, gkv_, gqn_, gkn_, x0, &dn);
  double fd = 0, an = 0, scale = 0;
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < H; ++i) {
      fd += static_cast<double>(dx[t * H + i]) * (yp(t, i) - ym(t, i)) / (2 * eps);
      an += static_cast<double>(dx0[t * H + i]) * u(t, i);
      scale += std::fabs(static_cast<double>(dx0[t * H + i]) * u(t, i));
    }
  if (!(std::fabs(fd - an) <= 1e-5 * std::max(scale, 1e-30)))
    return fmt("attention block backward: the input gradient along a random direction is %.6g, a central difference of the naive FP64 forward says %.6g", an, fd);
  const_cast<AttentionBlock*>(this)->bwd_err_ = std::fabs(fd - an) / scale;
  return "";
}

std::string AttentionBlock::check_fsdp(Communicator& comm) const {
  if (!d_.fsdp) return "";
  const std::vector<float> w = full_weights(d_, lay_);
  if (std::memcmp(w.data(), full_.data(), sizeof(float) * w.size()) != 0)
    return "FSDP all-gather: the gathered attention weights differ from the full weights";
  double sums[2] = {shard_sum_, grad_sum_};
  comm.allreduce_sum(sums, 2);
  if (std::fabs(sums[0] - sums[1]) > 1e-3 * (1 + std::fabs(sums[1])))
    return "FSDP reduce-scatter: the attention gradient shards do not add up to the ranks' summed gradient";
  return "";
}

std::vector<std::string> AttentionBlock::gates() const {
  std::vector<std::string> g;
  const std::string kind = d_.mla ? std::string("MLA") + (d_.q_lora > 0 ? " (low-rank Q)" : "") : d_.heads == d_.kv_heads ? "MHA" : "GQA";
  g.push_back("attention block (RMSNorm, Q/KV projections, " + std::string(d_.qk_norm ? "QK-norm, " : "") + std::string(rope_ > 0 ? "RoPE, " : "no RoPE, ") + std::string(d_.window > 0 ? "windowed " : "") + std::string(d_.chunk > 0 ? "chunked " : "") + "causal " + kind +
              " core, output projection, residual): the first sequence equals a naive FP64 reference within 1e-4 of max |y| (" +
              fmt("%.2g", fwd_err_) + ")");
  g.push_back("attention block backward: the first sequence's input gradient along a random direction equals a central difference of "
              "the FP64 forward within 1e-5 of the sum of |terms| (" + fmt("%.2g", bwd_err_) + ")");
  if (d_.fsdp)
    g.push_back("FSDP: the attention weights gathered from " + std::to_string(ranks_) +
                " shards equal the full weights bit for bit; their gradient shards add up to the ranks' summed gradient");
  return g;
}

}  // namespace moeperf::exec::detail
