#include "executor/a2a_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace moeperf::exec {

DispatchPlan plan_dispatch(const int32_t* idx, int64_t tokens, int top_k, int64_t experts, int ranks, bool dedup) {
  if (ranks < 1 || experts < 1 || experts % ranks != 0 || top_k < 1 || tokens < 0)
    throw std::invalid_argument("plan_dispatch: need ranks >= 1, top_k >= 1, tokens >= 0 and experts a positive multiple of ranks");
  DispatchPlan p;
  p.ranks = ranks, p.local_experts = experts / ranks, p.top_k = top_k, p.dedup = dedup;
  p.width = dedup ? 1 : p.local_experts;
  const auto R = static_cast<size_t>(ranks);
  const int64_t L = p.local_experts;
  for (int64_t i = 0; i < tokens * top_k; ++i)
    if (idx[i] < 0 || idx[i] >= experts)
      throw std::invalid_argument("plan_dispatch: expert id " + std::to_string(idx[i]) + " at slot " + std::to_string(i) +
                                  " outside [0, " + std::to_string(experts) + ")");
  p.send_counts.assign(R * static_cast<size_t>(p.width), 0);
  p.send_rows.assign(R, 0);
  if (!dedup) {
    // Counting sort by global expert (rank-major, then local expert), stable in (token, slot).
    std::vector<int64_t> off(static_cast<size_t>(experts) + 1, 0);
    for (int64_t i = 0; i < tokens * top_k; ++i) ++off[static_cast<size_t>(idx[i]) + 1];
    for (size_t e = 0; e < static_cast<size_t>(experts); ++e) {
      p.send_counts[e] = off[e + 1];  // [rank][local] = global expert order
      off[e + 1] += off[e];
    }
    p.send_token.assign(static_cast<size_t>(tokens * top_k), 0);
    std::vector<int64_t> cur(off.begin(), off.end() - 1);
    for (int64_t i = 0; i < tokens * top_k; ++i) p.send_token[static_cast<size_t>(cur[static_cast<size_t>(idx[i])]++)] = i / top_k;
    for (size_t r = 0; r < R; ++r)
      for (int64_t x = 0; x < L; ++x) p.send_rows[r] += p.send_counts[r * static_cast<size_t>(L) + static_cast<size_t>(x)];
    return p;
  }
  // De-duplicated: per rank, the tokens that have at least one expert there, in token order.
  std::vector<std::vector<int64_t>> tok(R);
  std::vector<std::vector<int32_t>> meta(R);
  std::vector<int32_t> locals;
  for (int64_t t = 0; t < tokens; ++t)
    for (size_t r = 0; r < R; ++r) {
      locals.clear();
      for (int j = 0; j < top_k; ++j) {
        const int32_t e = idx[t * top_k + j];
        if (static_cast<size_t>(e / L) == r) locals.push_back(static_cast<int32_t>(e % L));
      }
      if (locals.empty()) continue;
      std::sort(locals.begin(), locals.end());
      locals.erase(std::unique(locals.begin(), locals.end()), locals.end());
      tok[r].push_back(t);
      for (int j = 0; j < top_k; ++j) meta[r].push_back(j < static_cast<int>(locals.size()) ? locals[static_cast<size_t>(j)] : -1);
    }
  for (size_t r = 0; r < R; ++r) {
    p.send_rows[r] = p.send_counts[r] = static_cast<int64_t>(tok[r].size());
    p.send_token.insert(p.send_token.end(), tok[r].begin(), tok[r].end());
    p.send_meta.insert(p.send_meta.end(), meta[r].begin(), meta[r].end());
  }
  return p;
}

A2aLayout a2a_layout(const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows, int64_t row_bytes) {
  if (send_rows.size() != recv_rows.size()) throw std::invalid_argument("a2a_layout: send and receive peer counts differ");
  if (row_bytes < 0) throw std::invalid_argument("a2a_layout: row_bytes < 0");
  A2aLayout l;
  const size_t n = send_rows.size();
  l.send_bytes.resize(n), l.recv_bytes.resize(n), l.send_off.assign(n + 1, 0), l.recv_off.assign(n + 1, 0);
  for (size_t p = 0; p < n; ++p) {
    if (send_rows[p] < 0 || recv_rows[p] < 0) throw std::invalid_argument("a2a_layout: negative row count");
    l.send_bytes[p] = send_rows[p] * row_bytes, l.recv_bytes[p] = recv_rows[p] * row_bytes;
    l.send_off[p + 1] = l.send_off[p] + l.send_bytes[p], l.recv_off[p + 1] = l.recv_off[p] + l.recv_bytes[p];
  }
  return l;
}

std::vector<int64_t> rows_per_peer(const std::vector<int64_t>& counts, int ranks, int64_t width) {
  if (static_cast<int64_t>(counts.size()) != ranks * width) throw std::invalid_argument("rows_per_peer: counts size is not ranks x width");
  std::vector<int64_t> rows(static_cast<size_t>(ranks), 0);
  for (size_t i = 0; i < counts.size(); ++i) rows[i / static_cast<size_t>(width)] += counts[i];
  return rows;
}

ExpandMap expand_plain(const std::vector<int64_t>& recv_counts, int ranks, int64_t local_experts) {
  if (static_cast<int64_t>(recv_counts.size()) != ranks * local_experts)
    throw std::invalid_argument("expand_plain: counts size is not ranks x local experts");
  const auto L = static_cast<size_t>(local_experts);
  std::vector<int64_t> base(recv_counts.size() + 1, 0);  // start of (peer, expert) block, peer-major
  for (size_t i = 0; i < recv_counts.size(); ++i) base[i + 1] = base[i] + recv_counts[i];
  ExpandMap m;
  m.expert_offsets.assign(L + 1, 0);
  m.src_row.reserve(static_cast<size_t>(base.back()));
  for (size_t x = 0; x < L; ++x) {
    for (size_t p = 0; p < static_cast<size_t>(ranks); ++p)
      for (int64_t r = 0; r < recv_counts[p * L + x]; ++r) m.src_row.push_back(base[p * L + x] + r);
    m.expert_offsets[x + 1] = static_cast<int64_t>(m.src_row.size());
  }
  return m;
}

ExpandMap expand_dedup(const std::vector<int32_t>& meta, int64_t recv_rows, int top_k, int64_t local_experts) {
  if (static_cast<int64_t>(meta.size()) != recv_rows * top_k) throw std::invalid_argument("expand_dedup: meta size is not rows x top_k");
  const auto L = static_cast<size_t>(local_experts);
  std::vector<std::vector<int64_t>> per(L);
  for (int64_t r = 0; r < recv_rows; ++r)
    for (int j = 0; j < top_k; ++j) {
      const int32_t x = meta[static_cast<size_t>(r * top_k + j)];
      if (x < 0) continue;
      if (static_cast<size_t>(x) >= L)
        throw std::invalid_argument("expand_dedup: local expert " + std::to_string(x) + " in row " + std::to_string(r) + " outside [0, " +
                                    std::to_string(L) + ")");
      per[static_cast<size_t>(x)].push_back(r);
    }
  ExpandMap m;
  m.expert_offsets.assign(L + 1, 0);
  for (size_t x = 0; x < L; ++x) {
    m.src_row.insert(m.src_row.end(), per[x].begin(), per[x].end());
    m.expert_offsets[x + 1] = static_cast<int64_t>(m.src_row.size());
  }
  return m;
}

}  // namespace moeperf::exec
