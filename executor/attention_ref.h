// Attention on the host: the blocked reference the CPU backend runs (suite and `moeperf run`) and a
// naive one that checks it. One head of one sequence at a time; Q, K, V, O are seq x head_dim
// row-major views (a head's columns inside a token-major buffer: the row stride is the buffer's).
//
// Blocked: 64-query blocks, and only the key blocks the mask lets through, so causal and windowed
// work shrinks as the cost model counts it. Backward recomputes each block's probabilities (as a
// flash-attention backward does) and accumulates dK and dV, so heads that share a K/V head (GQA)
// add into the same gradient: the caller zeroes dK and dV once.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace moeperf::exec {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using CView = Eigen::Ref<const RowMat, 0, Eigen::OuterStride<>>;
using View = Eigen::Ref<RowMat, 0, Eigen::OuterStride<>>;

// A head's seq x head_dim block inside a token-major buffer of `ld` floats per token.
inline Eigen::Map<const RowMat, 0, Eigen::OuterStride<>> head_view(const float* base, int64_t seq, int64_t hd, int64_t ld) {
  return {base, seq, hd, Eigen::OuterStride<>(ld)};
}
inline Eigen::Map<RowMat, 0, Eigen::OuterStride<>> head_view(float* base, int64_t seq, int64_t hd, int64_t ld) {
  return {base, seq, hd, Eigen::OuterStride<>(ld)};
}

// hd is the Q/K head dim (it sets the 1/sqrt(hd) scale); V and O may have another (MLA's v_head_dim).
struct BlockedAttention {
  int64_t seq = 0, hd = 0, window = 0;  // window 0: none
  bool causal = false;
  int64_t chunk = 0;  // chunked local attention (Llama 4): a query sees only its own chunk's keys; 0: none
  static constexpr int64_t kBlock = 64;

  bool masked(int64_t qi, int64_t kj) const {
    return (causal && kj > qi) || (window > 0 && kj < qi - window + 1) || (chunk > 0 && kj / chunk != qi / chunk);
  }
  std::pair<int64_t, int64_t> keys(int64_t q0, int64_t rows) const {
    int64_t k0 = 0, k1 = causal ? q0 + rows : seq;
    if (window > 0) k0 = std::max<int64_t>(0, q0 - window + 1);
    if (chunk > 0) {  // from the first row's chunk to the last row's chunk end (masked() trims each row)
      k0 = std::max(k0, q0 / chunk * chunk);
      if (!causal) k1 = std::min(seq, ((q0 + rows - 1) / chunk + 1) * chunk);
    }
    return {k0, k1};
  }
  // P = softmax(mask(Q_b K^T / sqrt(d))) for the block.
  void probs(const CView& q, const CView& k, int64_t q0, int64_t rows, int64_t k0, int64_t k1, RowMat& p) const {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    p.noalias() = (q.middleRows(q0, rows) * k.middleRows(k0, k1 - k0).transpose()) * scale;
    for (int64_t i = 0; i < rows; ++i) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < k1 - k0; ++j) {
        if (masked(q0 + i, k0 + j)) p(i, j) = -std::numeric_limits<float>::infinity();
        mx = std::max(mx, p(i, j));
      }
      float sum = 0;
      for (int64_t j = 0; j < k1 - k0; ++j) sum += (p(i, j) = std::exp(p(i, j) - mx));
      p.row(i) /= sum;
    }
  }
  void forward(const CView& q, const CView& k, const CView& v, View o) const {
    RowMat p;
    for (int64_t q0 = 0; q0 < seq; q0 += kBlock) {
      const int64_t rows = std::min(kBlock, seq - q0);
      auto [k0, k1] = keys(q0, rows);
      probs(q, k, q0, rows, k0, k1, p);
      o.middleRows(q0, rows).noalias() = p * v.middleRows(k0, k1 - k0);
    }
  }
  // dQ is written; dK and dV are added to.
  void backward(const CView& q, const CView& k, const CView& v, const CView& o, const CView& dout, View dq, View dk, View dv) const {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    RowMat p, dp;
    for (int64_t q0 = 0; q0 < seq; q0 += kBlock) {
      const int64_t rows = std::min(kBlock, seq - q0);
      auto [k0, k1] = keys(q0, rows);
      probs(q, k, q0, rows, k0, k1, p);
      const int64_t L = k1 - k0;
      dv.middleRows(k0, L).noalias() += p.transpose() * dout.middleRows(q0, rows);
      dp.noalias() = dout.middleRows(q0, rows) * v.middleRows(k0, L).transpose();
      const Eigen::VectorXf d = (dout.middleRows(q0, rows).array() * o.middleRows(q0, rows).array()).rowwise().sum();
      dp = (p.array() * (dp.array().colwise() - d.array())).matrix();
      dq.middleRows(q0, rows).noalias() = (dp * k.middleRows(k0, L)) * scale;
      dk.middleRows(k0, L).noalias() += (dp.transpose() * q.middleRows(q0, rows)) * scale;
    }
  }
};

// The textbook form, in double: the full score matrix, masked, softmax per row. For checks only.
inline void naive_attention(const BlockedAttention& a, const CView& q, const CView& k, const CView& v, RowMat& o) {
  o.setZero(a.seq, v.cols());
  const double scale = 1.0 / std::sqrt(static_cast<double>(a.hd));
  for (int64_t i = 0; i < a.seq; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    Eigen::VectorXd s(a.seq);
    for (int64_t j = 0; j < a.seq; ++j) {
      s(j) = a.masked(i, j) ? -std::numeric_limits<double>::infinity() : q.row(i).cast<double>().dot(k.row(j).cast<double>()) * scale;
      mx = std::max(mx, s(j));
    }
    double sum = 0;
    for (int64_t j = 0; j < a.seq; ++j) sum += (s(j) = std::exp(s(j) - mx));
    for (int64_t j = 0; j < a.seq; ++j) o.row(i) += (v.row(j).cast<double>() * (s(j) / sum)).cast<float>();
  }
}

}  // namespace moeperf::exec
