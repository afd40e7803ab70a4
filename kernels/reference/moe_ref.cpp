#include "kernels/reference/moe_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace moeperf::ref {
namespace {

void require(bool ok, const char* fn, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string("moeperf::ref::") + fn + ": " + what);
}

void require_shape(const char* fn, int64_t tokens, int64_t hidden, int top_k) {
  require(tokens >= 0, fn, "tokens must be >= 0, got " + std::to_string(tokens));
  require(hidden >= 0, fn, "hidden must be >= 0, got " + std::to_string(hidden));
  require(top_k >= 1, fn, "top_k must be >= 1, got " + std::to_string(top_k));
}

// Strict "ranks before" order for selection: higher score first, NaN below every number, then
// lower id. A total order on distinct ids, so std::sort gives one answer on every platform.
bool ranks_before(float sa, int64_t ia, float sb, int64_t ib) {
  const bool na = std::isnan(sa), nb = std::isnan(sb);
  if (na != nb) return nb;
  if (!na && sa != sb) return sa > sb;
  return ia < ib;
}

}  // namespace

void router_topk(const float* logits, const float* bias, const RouterParams& p, int32_t* topk_idx,
                 float* topk_w) {
  const char* fn = "router_topk";
  require(p.tokens >= 0, fn, "tokens must be >= 0");
  require(p.experts >= 1, fn, "experts must be >= 1");
  require(p.experts <= INT32_MAX, fn, "experts must fit the int32 expert ids");
  require(p.top_k >= 1, fn, "top_k must be >= 1");
  require(p.groups >= 1 && p.experts % p.groups == 0, fn,
          "groups must divide experts (" + std::to_string(p.experts) + " experts, " +
              std::to_string(p.groups) + " groups)");
  require(p.topk_groups >= 1 && p.topk_groups <= p.groups, fn, "need 1 <= topk_groups <= groups");
  const int64_t group_size = p.experts / p.groups;
  require(p.top_k <= p.topk_groups * group_size, fn,
          "top_k exceeds the experts in the kept groups (topk_groups * experts / groups)");

  const int64_t E = p.experts, k = p.top_k, G = p.groups;
  std::vector<float> score(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
  std::vector<int64_t> order(static_cast<size_t>(E)), group_order(static_cast<size_t>(G));
  std::vector<float> group_score(static_cast<size_t>(G));
  std::vector<char> group_kept(static_cast<size_t>(G));

  for (int64_t t = 0; t < p.tokens; ++t) {
    const float* l = logits + t * E;
    if (p.score == Score::softmax) {
      float mx = -INFINITY;
      for (int64_t e = 0; e < E; ++e) mx = std::max(mx, l[e]);
      double sum = 0.0;
      for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(l[e]) - mx);
      for (int64_t e = 0; e < E; ++e)
        score[e] = static_cast<float>(std::exp(static_cast<double>(l[e]) - mx) / sum);
    } else {
      for (int64_t e = 0; e < E; ++e)
        score[e] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(l[e]))));
    }
    for (int64_t e = 0; e < E; ++e) biased[e] = bias ? score[e] + bias[e] : score[e];

    // Candidates: every expert, or only those of the topk_groups best groups.
    int64_t candidates = 0;
    if (G == 1) {
      for (int64_t e = 0; e < E; ++e) order[candidates++] = e;
    } else {
      for (int64_t g = 0; g < G; ++g) {
        // Top-2 biased scores of the group, ranked with the same order as the experts.
        int64_t b1 = -1, b2 = -1;
        for (int64_t e = g * group_size; e < (g + 1) * group_size; ++e) {
          if (b1 < 0 || ranks_before(biased[e], e, biased[b1], b1)) {
            b2 = b1;
            b1 = e;
          } else if (b2 < 0 || ranks_before(biased[e], e, biased[b2], b2)) {
            b2 = e;
          }
        }
        group_score[g] = b2 < 0 ? biased[b1] : biased[b1] + biased[b2];
        group_order[g] = g;
      }
      std::sort(group_order.begin(), group_order.end(), [&](int64_t a, int64_t b) {
        return ranks_before(group_score[a], a, group_score[b], b);
      });
      std::fill(group_kept.begin(), group_kept.end(), 0);
      for (int64_t i = 0; i < p.topk_groups; ++i) group_kept[group_order[i]] = 1;
      for (int64_t e = 0; e < E; ++e)
        if (group_kept[e / group_size]) order[candidates++] = e;
    }
    std::partial_sort(order.begin(), order.begin() + k, order.begin() + candidates,
                      [&](int64_t a, int64_t b) { return ranks_before(biased[a], a, biased[b], b); });

    int32_t* idx = topk_idx + t * k;
    float* w = topk_w + t * k;
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      idx[j] = static_cast<int32_t>(order[j]);
      w[j] = score[order[j]];
      sum += w[j];
    }
    if (p.normalize && sum > 0.0)
      for (int64_t j = 0; j < k; ++j) w[j] = static_cast<float>(w[j] / sum);
  }
}

void expert_counts(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                   int64_t* counts, int64_t* offsets) {
  const char* fn = "expert_counts";
  require_shape(fn, tokens, 0, top_k);
  require(experts >= 1, fn, "experts must be >= 1");
  std::fill(counts, counts + experts, int64_t{0});
  const int64_t slots = tokens * top_k;
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = topk_idx[s];
    require(e >= 0 && e < experts, fn,
            "slot " + std::to_string(s) + " names expert " + std::to_string(e) + ", outside [0, " +
                std::to_string(experts) + ")");
    ++counts[e];
  }
  offsets[0] = 0;
  for (int64_t e = 0; e < experts; ++e) offsets[e + 1] = offsets[e] + counts[e];
}

void permute_map(const int32_t* topk_idx, int64_t tokens, int top_k, int64_t experts,
                 const int64_t* offsets, int64_t* row_of_slot, int64_t* slot_of_row) {
  const char* fn = "permute_map";
  require_shape(fn, tokens, 0, top_k);
  require(experts >= 1, fn, "experts must be >= 1");
  const int64_t slots = tokens * top_k;
  require(offsets[0] == 0 && offsets[experts] == slots, fn,
          "offsets must run from 0 to tokens * top_k (dropless)");
  std::vector<int64_t> cursor(offsets, offsets + experts);
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = topk_idx[s];
    require(e >= 0 && e < experts, fn, "expert id outside [0, experts)");
    const int64_t r = cursor[e]++;
    require(r < offsets[e + 1], fn, "offsets do not match topk_idx");
    row_of_slot[s] = r;
    slot_of_row[r] = s;
  }
}

void permute(const float* x, int64_t tokens, int64_t hidden, int top_k, const int64_t* slot_of_row,
             float* out) {
  require_shape("permute", tokens, hidden, top_k);
  const int64_t rows = tokens * top_k;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = slot_of_row[r] / top_k;
    if (hidden > 0) std::memcpy(out + r * hidden, x + t * hidden, static_cast<size_t>(hidden) * sizeof(float));
  }
}

void unpermute(const float* rows, int64_t tokens, int64_t hidden, int top_k,
               const int64_t* row_of_slot, const float* topk_w, float* out) {
  require_shape("unpermute", tokens, hidden, top_k);
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out + t * hidden;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t s = t * top_k + j;
      const float w = topk_w[s];
      const float* src = rows + row_of_slot[s] * hidden;
      if (j == 0) {
        for (int64_t h = 0; h < hidden; ++h) o[h] = w * src[h];
      } else {
        for (int64_t h = 0; h < hidden; ++h) o[h] += w * src[h];
      }
    }
  }
}

void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int top_k,
                   const int64_t* row_of_slot, const float* topk_w, float* drows, float* dw) {
  require_shape("unpermute_bwd", tokens, hidden, top_k);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* g = dout + t * hidden;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t s = t * top_k + j;
      const int64_t r = row_of_slot[s];
      const float w = topk_w[s];
      const float* src = rows + r * hidden;
      float* d = drows + r * hidden;
      double dot = 0.0;
      for (int64_t h = 0; h < hidden; ++h) {
        d[h] = w * g[h];
        dot += static_cast<double>(g[h]) * static_cast<double>(src[h]);
      }
      dw[s] = static_cast<float>(dot);
    }
  }
}

void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int top_k,
                 const int64_t* row_of_slot, float* dx) {
  require_shape("permute_bwd", tokens, hidden, top_k);
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = dx + t * hidden;
    for (int64_t j = 0; j < top_k; ++j) {
      const float* src = drows + row_of_slot[t * top_k + j] * hidden;
      if (j == 0) {
        for (int64_t h = 0; h < hidden; ++h) o[h] = src[h];
      } else {
        for (int64_t h = 0; h < hidden; ++h) o[h] += src[h];
      }
    }
  }
}

void swiglu_fwd(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  require(rows >= 0 && inter >= 0, "swiglu_fwd", "rows and inter must be >= 0");
  for (int64_t r = 0; r < rows; ++r) {
    const float* gu = gate_up + r * 2 * inter;
    float* o = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gu[i], u = gu[inter + i];
      o[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
}

void swiglu_bwd(const float* gate_up, const float* dout, int64_t rows, int64_t inter,
                float* dgate_up) {
  require(rows >= 0 && inter >= 0, "swiglu_bwd", "rows and inter must be >= 0");
  for (int64_t r = 0; r < rows; ++r) {
    const float* gu = gate_up + r * 2 * inter;
    const float* d = dout + r * inter;
    float* dgu = dgate_up + r * 2 * inter;
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gu[i], u = gu[inter + i], dy = d[i];
      const double s = 1.0 / (1.0 + std::exp(-g));
      // d silu / dg = s + g * s * (1 - s)
      dgu[i] = static_cast<float>(dy * u * s * (1.0 + g * (1.0 - s)));
      dgu[inter + i] = static_cast<float>(dy * g * s);
    }
  }
}

namespace {
void require_offsets(const char* fn, const int64_t* offsets, int64_t experts, int64_t k, int64_t n) {
  require(experts >= 0 && k >= 0 && n >= 0, fn, "experts, k and n must be >= 0");
  require(experts == 0 || offsets[0] >= 0, fn, "offsets[0] must be >= 0");
  for (int64_t e = 0; e < experts; ++e)
    require(offsets[e + 1] >= offsets[e], fn,
            "offsets must be non-decreasing (expert " + std::to_string(e) + ")");
}
}  // namespace

void grouped_gemm(const float* a, const float* w, const int64_t* offsets, int64_t experts,
                  int64_t k, int64_t n, float* c) {
  require_offsets("grouped_gemm", offsets, experts, k, n);
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t e = 0; e < experts; ++e) {
    if (offsets[e + 1] == offsets[e]) continue;
    const float* we = w + e * k * n;
    for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
      // Loop order r, kk, j keeps each c[r, j] accumulating over kk = 0..K-1 in order.
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* ar = a + r * k;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double av = ar[kk];
        const float* wr = we + kk * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<double>(wr[j]);
      }
      float* cr = c + r * n;
      for (int64_t j = 0; j < n; ++j) cr[j] = static_cast<float>(acc[j]);
    }
  }
}

void grouped_gemm_wgrad(const float* a, const float* dc, const int64_t* offsets, int64_t experts,
                        int64_t k, int64_t n, float* dw) {
  require_offsets("grouped_gemm_wgrad", offsets, experts, k, n);
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t e = 0; e < experts; ++e) {
    float* dwe = dw + e * k * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t r = offsets[e]; r < offsets[e + 1]; ++r) {
        const double av = a[r * k + kk];
        const float* dr = dc + r * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<double>(dr[j]);
      }
      float* o = dwe + kk * n;
      for (int64_t j = 0; j < n; ++j) o[j] = static_cast<float>(acc[j]);
    }
  }
}

}  // namespace moeperf::ref
