// The dispatch planning of executor/a2a_plan.h on the CPU: a whole EP group's exchange simulated in
// memory (counts exchanged, rows moved by the layouts, received rows expanded), checking that every
// (token, expert) choice arrives exactly once at the expert that owns it, that plain and
// de-duplicated dispatch give the same expert-major rows, that de-duplication sends fewer rows,
// and that zero-byte pairs are zero on both sides.
#include "executor/a2a_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace moeperf::exec {
namespace {

struct Group {
  int ranks;
  int64_t tokens, experts;
  int k;
  std::vector<std::vector<int32_t>> idx;  // per rank [tokens x k]
};

// Distinct experts per token; `hot` > 0 puts every choice of every token into the first `hot`
// experts' (so most ranks receive nothing from anyone).
Group make_group(int ranks, int64_t tokens, int64_t experts, int k, int64_t hot, uint64_t seed) {
  Group g{ranks, tokens, experts, k, {}};
  std::mt19937_64 rng(seed);
  const int64_t pool = hot > 0 ? hot : experts;
  for (int r = 0; r < ranks; ++r) {
    std::vector<int32_t> v;
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<int32_t> all(static_cast<size_t>(pool));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      v.insert(v.end(), all.begin(), all.begin() + k);
    }
    g.idx.push_back(v);
  }
  return g;
}

// Row payload: (source rank, token) -> one int64. Returns, per rank, the expanded expert-major rows
// and their expert offsets; also the rows each rank sent in total.
struct Received {
  std::vector<std::vector<int64_t>> rows;
  std::vector<std::vector<int64_t>> offsets;
  int64_t sent = 0;
};

Received simulate(const Group& g, bool dedup) {
  const auto R = static_cast<size_t>(g.ranks);
  std::vector<DispatchPlan> plans;
  for (size_t r = 0; r < R; ++r) plans.push_back(plan_dispatch(g.idx[r].data(), g.tokens, g.k, g.experts, g.ranks, dedup));
  const int64_t width = plans[0].width, L = g.experts / g.ranks;
  Received out;
  for (size_t me = 0; me < R; ++me) {
    // Count exchange: block p of my receive counts = peer p's send counts for me.
    std::vector<int64_t> recv_counts;
    for (size_t p = 0; p < R; ++p)
      recv_counts.insert(recv_counts.end(), plans[p].send_counts.begin() + static_cast<int64_t>(me) * width,
                         plans[p].send_counts.begin() + static_cast<int64_t>(me + 1) * width);
    const auto recv_rows = rows_per_peer(recv_counts, g.ranks, width);
    const A2aLayout lay = a2a_layout(plans[me].send_rows, recv_rows, 8);
    // Every pair agrees on its byte count, zeros included (what makes skipping zero pairs symmetric).
    for (size_t p = 0; p < R; ++p) {
      const A2aLayout peer = a2a_layout(plans[p].send_rows, std::vector<int64_t>(R, 0), 8);
      EXPECT_EQ(lay.recv_bytes[p], peer.send_bytes[me]) << "pair " << p << " -> " << me;
    }
    // Move rows (and meta): peer-major.
    std::vector<int64_t> recv;
    std::vector<int32_t> meta;
    for (size_t p = 0; p < R; ++p) {
      const int64_t begin = std::accumulate(plans[p].send_rows.begin(), plans[p].send_rows.begin() + static_cast<int64_t>(me), int64_t{0});
      for (int64_t i = begin; i < begin + plans[p].send_rows[me]; ++i) {
        recv.push_back(static_cast<int64_t>(p) * 1000000 + plans[p].send_token[static_cast<size_t>(i)]);
        if (dedup)
          meta.insert(meta.end(), plans[p].send_meta.begin() + i * g.k, plans[p].send_meta.begin() + (i + 1) * g.k);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(recv.size()) * 8, lay.recv_off.back());
    const ExpandMap m = dedup ? expand_dedup(meta, static_cast<int64_t>(recv.size()), g.k, L) : expand_plain(recv_counts, g.ranks, L);
    std::vector<int64_t> rows;
    for (int64_t s : m.src_row) rows.push_back(recv[static_cast<size_t>(s)]);
    out.rows.push_back(rows);
    out.offsets.push_back(m.expert_offsets);
    out.sent += std::accumulate(plans[me].send_rows.begin(), plans[me].send_rows.end(), int64_t{0});
  }
  return out;
}

void check_group(const Group& g) {
  const Received plain = simulate(g, false), dedup = simulate(g, true);
  EXPECT_EQ(plain.rows, dedup.rows);
  EXPECT_EQ(plain.offsets, dedup.offsets);
  EXPECT_EQ(plain.sent, g.ranks * g.tokens * g.k);  // dropless: every slot sent once
  EXPECT_LE(dedup.sent, plain.sent);
  // Every (source rank, token, expert) choice arrives exactly once, at its expert.
  const int64_t L = g.experts / g.ranks;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> want, got;
  for (int r = 0; r < g.ranks; ++r)
    for (int64_t i = 0; i < g.tokens * g.k; ++i) want.emplace_back(r, i / g.k, g.idx[static_cast<size_t>(r)][static_cast<size_t>(i)]);
  for (int r = 0; r < g.ranks; ++r)
    for (int64_t x = 0; x < L; ++x)
      for (int64_t i = plain.offsets[static_cast<size_t>(r)][static_cast<size_t>(x)];
           i < plain.offsets[static_cast<size_t>(r)][static_cast<size_t>(x) + 1]; ++i) {
        const int64_t v = plain.rows[static_cast<size_t>(r)][static_cast<size_t>(i)];
        got.emplace_back(v / 1000000, v % 1000000, r * L + x);
      }
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
}

TEST(A2aPlan, RandomRoutingFourRanks) { check_group(make_group(4, 300, 32, 8, 0, 1)); }

TEST(A2aPlan, DedupSavesRowsWhenExpertsShareARank) {
  const Group g = make_group(2, 200, 16, 6, 0, 2);  // 6 of 16 experts over 2 ranks: most tokens hit both
  check_group(g);
  EXPECT_LT(simulate(g, true).sent, simulate(g, false).sent);
}

TEST(A2aPlan, EveryTokenOnFewExpertsLeavesPairsEmpty) {
  const Group g = make_group(4, 100, 16, 2, 2, 3);  // experts 0, 1 only: ranks 1..3 receive nothing
  check_group(g);
  for (bool dedup : {false, true}) {
    const Received r = simulate(g, dedup);
    for (size_t rank = 1; rank < 4; ++rank) EXPECT_TRUE(r.rows[rank].empty());
  }
  const DispatchPlan p = plan_dispatch(g.idx[0].data(), g.tokens, g.k, g.experts, 4, true);
  EXPECT_EQ(p.send_rows, (std::vector<int64_t>{100, 0, 0, 0}));  // both choices on rank 0: one copy each
  const A2aLayout l = a2a_layout(p.send_rows, {100, 0, 0, 0}, 16);
  EXPECT_EQ(l.send_bytes, (std::vector<int64_t>{1600, 0, 0, 0}));
  EXPECT_EQ(l.send_off, (std::vector<int64_t>{0, 1600, 1600, 1600, 1600}));
}

TEST(A2aPlan, OneRankAndNoTokens) {
  check_group(make_group(1, 50, 8, 3, 0, 4));
  check_group(make_group(3, 0, 9, 2, 0, 5));
}

TEST(A2aPlan, DedupMetaNamesLocalExpertsAscending) {
  // Token 0 -> experts 5, 4 (rank 1, locals 1 and 0) and 1 (rank 0, local 1); 4 experts per rank.
  const std::vector<int32_t> idx{5, 1, 4};
  const DispatchPlan p = plan_dispatch(idx.data(), 1, 3, 8, 2, true);
  EXPECT_EQ(p.send_rows, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(p.send_token, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(p.send_meta, (std::vector<int32_t>{1, -1, -1, 0, 1, -1}));
  const ExpandMap m = expand_dedup({0, 1, -1}, 1, 3, 4);
  EXPECT_EQ(m.src_row, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(m.expert_offsets, (std::vector<int64_t>{0, 1, 2, 2, 2}));
}

TEST(A2aPlan, RejectsBadInput) {
  const std::vector<int32_t> bad{9};
  EXPECT_THROW(plan_dispatch(bad.data(), 1, 1, 8, 2, false), std::invalid_argument);
  EXPECT_THROW(plan_dispatch(bad.data(), 1, 1, 9, 2, false), std::invalid_argument);  // 9 experts over 2 ranks
  EXPECT_THROW(expand_dedup({4}, 1, 1, 4), std::invalid_argument);
  EXPECT_THROW(a2a_layout({1}, {1, 2}, 4), std::invalid_argument);
  EXPECT_THROW(rows_per_peer({1, 2, 3}, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace moeperf::exec
