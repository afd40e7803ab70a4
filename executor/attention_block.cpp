// The attention block `moeperf run` executes before the MoE block (executor/attention_block.h).
#include "executor/attention_block.h"

#include <Eigen/Dense>
#include <cmath>

#include "executor/attention_ref.h"
#include "model/workload/flops.h"

namespace moeperf::exec::detail {

namespace {

enum : uint64_t { kGammaSeed = 31, kWqSeed = 32, kWkvSeed = 33, kWoSeed = 34, kProbeSeed = 35 };
constexpr float kEps = 1e-6f;
double D(int64_t v) { return static_cast<double>(v); }
// Bytes of an FP32 GEMM that reads A and B and writes C once.
double gemm_bytes(double m, double n, double k) { return 4.0 * (m * k + k * n + m * n); }

}  // namespace

void AttentionBlock::full_weights(const Dims& d, std::vector<float>& w) {
  const int64_t H = d.hidden, qd = d.heads * d.head_dim, kvd = 2 * d.kv_heads * d.head_dim;
  w.assign(static_cast<size_t>(2 * H * qd + H * kvd), 0.0f);
  const float sh = static_cast<float>(1.0 / std::sqrt(D(H))), sq = static_cast<float>(1.0 / std::sqrt(D(qd)));
  fill(w.data(), H * qd, kWqSeed, sh);
  fill(w.data() + H * qd, H * kvd, kWkvSeed, sh);
  fill(w.data() + H * qd + H * kvd, qd * H, kWoSeed, sq);
}

AttentionBlock::AttentionBlock(const Dims& d, int rank, int ranks) : d_(d), ranks_(ranks) {
  gamma_.resize(static_cast<size_t>(d.hidden));
  fill(gamma_.data(), d.hidden, kGammaSeed, 0.1f);
  for (float& g : gamma_) g += 1.0f;
  full_weights(d, full_);
  if (d.fsdp) {  // keep this rank's shard; full_ is gathered before each forward
    own_.assign(static_cast<size_t>(shard()), 0.0f);
    for (int64_t i = 0; i < shard(); ++i) {
      const int64_t g = rank * shard() + i;
      if (g < weights()) own_[static_cast<size_t>(i)] = full_[static_cast<size_t>(g)];
    }
    std::fill(full_.begin(), full_.end(), std::nanf(""));  // a forward without the gather would show
  }
}

void AttentionBlock::gather(Communicator& comm, Recorder& rec) {
  std::vector<float> all(static_cast<size_t>(shard() * ranks_));
  rec.time("fsdp.all_gather", 4.0 * D(shard() * ranks_), 0,
           [&] { comm.allgather(own_.data(), shard() * static_cast<int64_t>(sizeof(float)), all.data()); });
  std::copy(all.begin(), all.begin() + weights(), full_.begin());
}

void AttentionBlock::forward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, float* x) {
  if (d_.fsdp) gather(comm, rec);
  const int64_t T = d_.tokens, H = d_.hidden, qd = q_dim(), kvd = kv_dim(), hd = d_.head_dim;
  const double fT = D(T), fH = D(H), fq = D(qd), fkv = D(kvd);
  norm_.resize(static_cast<size_t>(T * H)), rstd_.resize(static_cast<size_t>(T));
  q_.resize(static_cast<size_t>(T * qd)), kv_.resize(static_cast<size_t>(T * kvd)), ctx_.resize(static_cast<size_t>(T * qd));
  rec.time("attn.norm", 8.0 * fT * fH, 0, [&] {
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x0 + t * H;
      double ss = 0;
      for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float r = 1.0f / std::sqrt(static_cast<float>(ss / fH) + kEps);
      rstd_[static_cast<size_t>(t)] = r;
      for (int64_t i = 0; i < H; ++i) norm_[static_cast<size_t>(t * H + i)] = xr[i] * r * gamma_[static_cast<size_t>(i)];
    }
  });
  rec.time("attn.q_proj", gemm_bytes(fT, fq, fH), 2.0 * fT * fq * fH, GemmShape{fT, fq, fH},
           [&] { be.gemm(norm_.data(), wq(), q_.data(), T, qd, H, false, false, false); });
  rec.time("attn.kv_proj", gemm_bytes(fT, fkv, fH), 2.0 * fT * fkv * fH, GemmShape{fT, fkv, fH},
           [&] { be.gemm(norm_.data(), wkv(), kv_.data(), T, kvd, H, false, false, false); });
  const BlockedAttention at{d_.seq, hd, d_.window, true};
  const double keys = attended_keys(d_.seq, static_cast<int>(d_.window));
  // The cost model's count: 2 x keys x heads x (qk + v dims) per query; reads Q, K, V, writes O.
  const double core = fT * 2.0 * keys * D(d_.heads) * 2.0 * D(hd);
  const double io = 4.0 * fT * (fq + fkv + fq);
  const int64_t group = d_.heads / d_.kv_heads;
  rec.time_attention("attn.core", io, core, AttentionShape{keys, D(hd), false}, [&] {
    for (int64_t b = 0; b < T / d_.seq; ++b)
      for (int64_t h = 0; h < d_.heads; ++h) {
        const int64_t g = h / group, t0 = b * d_.seq;
        at.forward(head_view(q_.data() + t0 * qd + h * hd, d_.seq, hd, qd), head_view(kv_.data() + t0 * kvd + g * hd, d_.seq, hd, kvd),
                   head_view(kv_.data() + t0 * kvd + (d_.kv_heads + g) * hd, d_.seq, hd, kvd),
                   head_view(ctx_.data() + t0 * qd + h * hd, d_.seq, hd, qd));
      }
  });
  std::copy(x0, x0 + T * H, x);  // the residual; the output projection adds to it
  rec.time("attn.out_proj", gemm_bytes(fT, fH, fq), 2.0 * fT * fH * fq, GemmShape{fT, fH, fq},
           [&] { be.gemm(ctx_.data(), wo(), x, T, H, qd, false, false, true); });
}

void AttentionBlock::backward(Backend& be, Communicator& comm, Recorder& rec, const float* x0, const float* dx, float* dx0) {
  const int64_t T = d_.tokens, H = d_.hidden, qd = q_dim(), kvd = kv_dim(), hd = d_.head_dim;
  const double fT = D(T), fH = D(H), fq = D(qd), fkv = D(kvd);
  grad_.assign(static_cast<size_t>(weights()), 0.0f);
  float* dwq = grad_.data();
  float* dwkv = grad_.data() + H * qd;
  float* dwo = grad_.data() + H * qd + H * kvd;
  std::vector<float> dctx(static_cast<size_t>(T * qd)), dq(static_cast<size_t>(T * qd)), dkv(static_cast<size_t>(T * kvd), 0.0f),
      dn(static_cast<size_t>(T * H));
  rec.time("attn.out_proj.dgrad", gemm_bytes(fT, fq, fH), 2.0 * fT * fq * fH, GemmShape{fT, fq, fH},
           [&] { be.gemm(dx, wo(), dctx.data(), T, qd, H, false, true, false); });
  rec.time("attn.out_proj.wgrad", gemm_bytes(fq, fH, fT), 2.0 * fT * fq * fH, GemmShape{fq, fH, fT},
           [&] { be.gemm(ctx_.data(), dx, dwo, qd, H, T, true, false, false); });
  const BlockedAttention at{d_.seq, hd, d_.window, true};
  const double keys = attended_keys(d_.seq, static_cast<int>(d_.window));
  const double core = fT * 2.0 * keys * D(d_.heads) * 2.0 * D(hd);
  const int64_t group = d_.heads / d_.kv_heads;
  // FlashAttention's convention, as the model and the suite count it: 2.5 x the forward's work.
  rec.time_attention("attn.core.bwd", 2.5 * 4.0 * fT * (fq + fkv + fq), 2.5 * core, AttentionShape{keys, D(hd), true}, [&] {
    std::fill(dkv.begin(), dkv.end(), 0.0f);
    for (int64_t b = 0; b < T / d_.seq; ++b)
      for (int64_t h = 0; h < d_.heads; ++h) {
        const int64_t g = h / group, t0 = b * d_.seq;
        auto q = head_view(q_.data() + t0 * qd + h * hd, d_.seq, hd, qd);
        auto k = head_view(kv_.data() + t0 * kvd + g * hd, d_.seq, hd, kvd);
        auto v = head_view(kv_.data() + t0 * kvd + (d_.kv_heads + g) * hd, d_.seq, hd, kvd);
        auto o = head_view(ctx_.data() + t0 * qd + h * hd, d_.seq, hd, qd);
        auto dout = head_view(dctx.data() + t0 * qd + h * hd, d_.seq, hd, qd);
        at.backward(q, k, v, o, dout, head_view(dq.data() + t0 * qd + h * hd, d_.seq, hd, qd),
                    head_view(dkv.data() + t0 * kvd + g * hd, d_.seq, hd, kvd),
                    head_view(dkv.data() + t0 * kvd + (d_.kv_heads + g) * hd, d_.seq, hd, kvd));
      }
  });
  rec.time("attn.kv_proj.dgrad", gemm_bytes(fT, fH, fkv), 2.0 * fT * fkv * fH, GemmShape{fT, fH, fkv},
           [&] { be.gemm(dkv.data(), wkv(), dn.data(), T, H, kvd, false, true, false); });
  rec.time("attn.kv_proj.wgrad", gemm_bytes(fH, fkv, fT), 2.0 * fT * fkv * fH, GemmShape{fH, fkv, fT},
           [&] { be.gemm(norm_.data(), dkv.data(), dwkv, H, kvd, T, true, false, false); });
  rec.time("attn.q_proj.dgrad", gemm_bytes(fT, fH, fq), 2.0 * fT * fq * fH, GemmShape{fT, fH, fq},
           [&] { be.gemm(dq.data(), wq(), dn.data(), T, H, qd, false, true, true); });
  rec.time("attn.q_proj.wgrad", gemm_bytes(fH, fq, fT), 2.0 * fT * fq * fH, GemmShape{fH, fq, fT},
           [&] { be.gemm(norm_.data(), dq.data(), dwq, H, qd, T, true, false, false); });
  // RMSNorm backward plus the residual: dx0 = dx + r g dn - r^3 x0 (sum_j g_j dn_j x0_j) / H.
  rec.time("attn.norm.bwd", 16.0 * fT * fH, 0, [&] {
    for (int64_t t = 0; t < T; ++t) {
      const float r = rstd_[static_cast<size_t>(t)];
      const float* xr = x0 + t * H;
      const float* g = dn.data() + t * H;
      double dot = 0;
      for (int64_t i = 0; i < H; ++i) dot += static_cast<double>(g[i]) * gamma_[static_cast<size_t>(i)] * xr[i];
      const float c = static_cast<float>(dot / fH) * r * r * r;
      for (int64_t i = 0; i < H; ++i)
        dx0[t * H + i] = dx[t * H + i] + r * gamma_[static_cast<size_t>(i)] * g[i] - c * xr[i];
    }
  });
  if (d_.fsdp) {
    std::vector<float> padded(static_cast<size_t>(shard() * ranks_), 0.0f);
    std::copy(grad_.begin(), grad_.end(), padded.begin());
    grad_shard_.assign(static_cast<size_t>(shard()), 0.0f);
    rec.time("fsdp.reduce_scatter", 4.0 * D(shard() * ranks_), 0,
             [&] { comm.reduce_scatter_sum(padded.data(), grad_shard_.data(), shard()); });
    shard_sum_ = grad_sum_ = 0;
    for (float v : grad_shard_) shard_sum_ += static_cast<double>(v);
    for (float v : grad_) grad_sum_ += static_cast<double>(v);
  }
}

namespace {

// The block's forward for the first sequence, in double, from the weights as written (naive
// attention: the full score matrix).
Eigen::MatrixXd naive_block(const Dims& d, const std::vector<float>& gamma, const std::vector<float>& w, const float* x0, const Eigen::MatrixXd* shift) {
  const int64_t S = d.seq, H = d.hidden, hd = d.head_dim, qd = d.heads * hd, kvd = 2 * d.kv_heads * hd;
  Eigen::MatrixXd x = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(x0, S, H).cast<double>();
  if (shift) x += *shift;
  using RM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::MatrixXd Wq = Eigen::Map<const RM>(w.data(), H, qd).cast<double>();
  const Eigen::MatrixXd Wkv = Eigen::Map<const RM>(w.data() + H * qd, H, kvd).cast<double>();
  const Eigen::MatrixXd Wo = Eigen::Map<const RM>(w.data() + H * qd + H * kvd, qd, H).cast<double>();
  Eigen::MatrixXd n(S, H);
  for (int64_t t = 0; t < S; ++t) {
    const double r = 1.0 / std::sqrt(x.row(t).squaredNorm() / D(H) + static_cast<double>(kEps));
    for (int64_t i = 0; i < H; ++i) n(t, i) = x(t, i) * r * gamma[static_cast<size_t>(i)];
  }
  const Eigen::MatrixXd q = n * Wq, kv = n * Wkv;
  Eigen::MatrixXd ctx = Eigen::MatrixXd::Zero(S, qd);
  const double scale = 1.0 / std::sqrt(D(hd));
  const int64_t group = d.heads / d.kv_heads;
  for (int64_t h = 0; h < d.heads; ++h) {
    const int64_t g = h / group;
    const Eigen::MatrixXd s = q.middleCols(h * hd, hd) * kv.middleCols(g * hd, hd).transpose() * scale;
    for (int64_t i = 0; i < S; ++i) {
      double mx = -INFINITY;
      Eigen::VectorXd p(S);
      for (int64_t j = 0; j < S; ++j) {
        const bool masked = j > i || (d.window > 0 && j < i - d.window + 1);
        p(j) = masked ? -INFINITY : s(i, j);
        mx = std::max(mx, p(j));
      }
      p = (p.array() - mx).exp();
      p /= p.sum();
      ctx.row(i).segment(h * hd, hd) = p.transpose() * kv.middleCols((d.kv_heads + g) * hd, hd);
    }
  }
  return x + ctx * Wo;
}

}  // namespace

std::string AttentionBlock::check_forward(const float* x0, const float* x) const {
  std::vector<float> w;
  full_weights(d_, w);
  const Eigen::MatrixXd ref = naive_block(d_, gamma_, w, x0, nullptr);
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
  std::vector<float> w;
  full_weights(d_, w);
  const int64_t S = d_.seq, H = d_.hidden;
  Eigen::MatrixXd u(S, H);
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < H; ++i) u(t, i) = 2 * uniform(kProbeSeed, static_cast<uint64_t>(t * H + i)) - 1;
  const double eps = 1e-3;
  const Eigen::MatrixXd up = eps * u, dn = -eps * u;
  const Eigen::MatrixXd yp = naive_block(d_, gamma_, w, x0, &up), ym = naive_block(d_, gamma_, w, x0, &dn);
  double fd = 0, an = 0, scale = 0;
  for (int64_t t = 0; t < S; ++t)
    for (int64_t i = 0; i < H; ++i) {
      const double g = dx[t * H + i];
      fd += g * (yp(t, i) - ym(t, i)) / (2 * eps);
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
  std::vector<float> w;
  full_weights(d_, w);
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
  g.push_back("attention block (RMSNorm, Q/KV projections, " + std::string(d_.window > 0 ? "windowed " : "") +
              "causal GQA core, output projection, residual): the first sequence equals a naive FP64 reference within 1e-4 of max |y| (" +
              fmt("%.2g", fwd_err_) + ")");
  g.push_back("attention block backward: the first sequence's input gradient along a random direction equals a central difference of "
              "the FP64 forward within 1e-5 of the sum of |terms| (" + fmt("%.2g", bwd_err_) + ")");
  if (d_.fsdp)
    g.push_back("FSDP: the attention weights gathered from " + std::to_string(ranks_) +
                " shards equal the full weights bit for bit; their gradient shards add up to the ranks' summed gradient");
  return g;
}

}  // namespace moeperf::exec::detail
