// Routing and load imbalance of one dropless MoE layer: how many (token, expert) rows each EP rank
// and each expert receives per micro-batch, the expected maximum over ranks (which sets the pace of
// the EP group), padded rows for a ragged grouped GEMM, and how many distinct ranks and nodes a
// token's k experts live on (which prices de-duplicated dispatch).
//
//   LoadStats l = expected_loads(s.routing, s.model.router, s.model.experts, s.model.top_k, ep, tokens);
//   double busiest = expected_tile_rows(s.routing, s.model.router, s.model.experts, s.model.top_k, ep, tokens, 128);
//   double nodes = expected_distinct_nodes(s.routing, s.model.router, s.model.experts, s.model.top_k, ep, 4);
//
// The routing process. Each of T tokens picks k distinct experts, independently of the others:
//  - uniform: every k-subset of the E experts is equally likely;
//  - zipf, dirichlet, histogram: sequential draws without replacement, each draw proportional to
//    the weights of the experts not yet picked (Plackett-Luce). For zipf and dirichlet a share is a
//    per-draw weight, not the fraction of rows: a heavy expert is picked at most once per token, so
//    its rows per token are expert_inclusion() (< 1), not k x share. A histogram is measured rows,
//    so its draw weights are solved for inclusions of k x its shares (draw_weights). Experts of
//    weight 0 are picked only once every positive-weight expert has been (then uniformly among them);
//  - balanced: exactly equal (an idealisation: Megatron's --moe-router-force-load-balancing draws
//    random logits, i.e. uniform routing): every expert receives exactly
//    T*k/E rows (a real number when E does not divide T*k) and every rank T*k/R; nothing is random.
//    A token's k picks are still those of uniform routing when counting distinct ranks and nodes.
// Group-limited routing (RouterSpec groups G > 1 and topk_groups M < G; DeepSeek-V3: 8 and 4):
// experts [g*E/G, (g+1)*E/G) form group g; DeepSeek's rule keeps the M groups with the highest
// top-2 scores, then takes the top k inside them. With all experts alike every M-subset of groups
// is equally likely to be kept, and the picks fall into the kept groups by the rule's own law
// (routing_laws.h group_count_law: a kept group nearly always gets a pick, 3.95 of 4 groups hit for
// DeepSeek-V3, where k picks uniform over the pooled experts would hit 3.63), uniformly inside each
// group. With non-uniform shares the group rule is not modelled
// and std::invalid_argument is thrown; pass RouterSpec{} (G = 1) to route by the shares alone.
// Placement: E/R consecutive experts per EP rank (rank r holds [r*E/R, (r+1)*E/R)); E % R == 0.
//
// Method. Per token, the count X_S of its picks that land in a set S of experts (a rank, a node,
// one expert) is computed exactly: hypergeometric (mixed over the chosen groups) for uniform and
// group-limited routing; for Plackett-Luce through the exponential-clock form (expert e fires at
// an Exp(share_e) time, the first k to fire are picked), P(X_S >= j) = integral over t of the
// density of S's j-th firing times P(fewer than k-j+1 others fired by t), by the trapezoid rule in
// ln t (the per-token means sum to k within 1e-10). Loads over T independent tokens are then taken
// with mean T E[X_S], variance T Var(X_S) and third cumulant T kappa3(X_S) (normal-power
// approximation: a normal corrected for skewness). Loads of the ranks (or experts) sum to T*k, so
// they are negatively correlated; for loads with covariance T (diag(A) - A A^T / sum A) the expected
// maximum equals that of independent loads of variance T A (exact when the sets are exchangeable:
// A = Var(X_S) n / (n - 1) for n sets, the sigma e_n / sqrt(1 - 1/n) rule); unequal sets take
// A_S = Var(X_S) / (1 - Var(X_S) / sum Var), and E[max] = integral of (1 - prod F_S) by Simpson's
// rule. Group-limited routing makes ranks and experts of one group positively correlated: there the
// maximum is that of a two-level model (a normal per group plus an independent load per member),
// integrated numerically. The expected maximum of n standard normals is integrated too, no tables.
// Padded rows: where a rank's rows spread over 16 tiles or more, each expert's padded rows are its
// regression on its rows (from the exact Binomial(T, expert_inclusion) law of its rows) plus
// independent noise; where fewer, the exact lattice law of each expert's tiles is convolved over
// the rank (experts independent, or independent given their group's token count when
// group-limited) and the expected maximum is summed over the lattice.
//
// Accuracy against brute-force simulation of the same process (tests/model/routing_test.cpp and a
// sweep over E = 64, 256; k = 2, 8; R = 4, 16, 64; T = 64, 512, 4096 with uniform, group-limited
// 8/4, zipf 0.5 and 1, dirichlet 0.5 routing): E[max rank rows] and E[max expert rows] within
// 0.1 % wherever an expert averages 64 rows or more, within 0.75 % from 8 rows (uniform
// T = 512, E = 64, k = 8, R = 8: 0.01 %, the excess over the mean 0.2 %); padded rows (tile 16)
// within 0.75 %; distinct ranks exact for uniform, group-limited and Plackett-Luce (1e-9 against
// enumeration). Below ~8 rows per expert the maxima drift by up to 3 % (lumpy small counts).
// Time per call, T = 196,608, E = 256, k = 8, R = 8..64, one core (-O3, a shared 2-core machine):
// uniform 0.1-0.3 ms, group-limited 8/4 0.15-1.1 ms; zipf or dirichlet 1.0-2.1 ms
// (expected_loads), 2.4-3.6 ms (expected_tile_rows), 0.5-0.9 ms (expected_distinct_nodes).
#pragma once

#include <cstdint>
#include <vector>

#include "model/specs.h"

namespace moeperf {

// Per-draw routing weight of each expert (sums to 1). uniform, balanced: 1/E. zipf: the expert of
// popularity rank i (1-based) weighs i^-s, ranks dealt to expert ids by a permutation seeded with
// r.seed: a uniform shuffle, which may put several heavy experts on one EP rank, so the busiest
// rank's rows under zipf depend on the seed (DeepSeek-V3 at EP 8, s = 1: 262,000-402,000 rows over
// seeds 1-6; seed 1 the most). dirichlet: one sample of Dirichlet(alpha, ..., alpha)
// seeded with r.seed. histogram: r.histogram normalized. Throws std::invalid_argument on a
// histogram whose size is not `experts`, a negative or non-finite parameter, or experts < 1.
std::vector<double> expert_shares(const Routing& r, int experts);

// The weights a token draws its k experts by, without replacement (Plackett-Luce), as the routing
// model and the executor route: expert_shares, except for a histogram, which is measured rows per
// expert, so its weights are solved for inclusion probabilities of k x h_e / sum(h) (a weight of
// h_e itself would flatten the skew: the heaviest experts are capped at one pick per token).
// An expert with exactly 1/k of the rows is picked by every token (a weight 1e15 x the others').
// Throws std::invalid_argument where a histogram gives an expert more than 1/k of the rows, or
// fewer than k experts any rows.
std::vector<double> draw_weights(const Routing& r, int experts, int top_k);

// P(a token's k picks include expert e), for each expert: its expected rows per token (sums to k).
// uniform, balanced, group-limited uniform: k/E.
std::vector<double> expert_inclusion(const Routing& r, const RouterSpec& router, int experts, int top_k);

// Expected loads of one micro-batch of T tokens routed within one EP group of R ranks.
struct LoadStats {
  double mean_rank_rows = 0;          // T*k/R
  double expected_max_rank_rows = 0;  // E[max over ranks of the rows a rank receives]
  double expected_max_expert_rows = 0;  // E[max over experts of the rows an expert receives]
  double imbalance = 1;               // expected_max_rank_rows / mean_rank_rows (1 when T = 0)
  double expected_distinct_ranks = 0;  // E[distinct ranks among a token's k experts]; uniform
                                       // without groups: R (1 - C(E - E/R, k) / C(E, k))
  // Tokens a rank receives once however many of its experts they picked (what a de-duplicating
  // dispatch sends it): the mean over ranks, T x expected_distinct_ranks / R, and the expected
  // maximum, from each rank's per-token indicator P(X_rank >= 1) through the same load model.
  double mean_rank_tokens = 0, expected_max_rank_tokens = 0;
};

// Throws std::invalid_argument unless 1 <= top_k <= experts, ranks >= 1, experts % ranks == 0,
// tokens >= 0, experts % groups == 0, 1 <= topk_groups <= groups, topk_groups*experts/groups >= top_k.
LoadStats expected_loads(const Routing& r, const RouterSpec& router, int experts, int top_k, int ranks,
                         int64_t tokens);

// E[max over ranks of sum over the rank's experts of ceil(m_e / tile) * tile]: the padded rows of
// the busiest rank (busiest once padded) of a ragged grouped GEMM whose per-expert row count m_e is
// padded to a tile. balanced: (E/R) * ceil(T*k/E / tile) * tile. tile = 1 gives
// expected_max_rank_rows. Throws std::invalid_argument as expected_loads does, and on tile < 1.
double expected_tile_rows(const Routing& r, const RouterSpec& router, int experts, int top_k, int ranks,
                          int64_t tokens, int tile);

// E[distinct nodes among a token's k experts], a node being `ranks_per_node` consecutive EP ranks
// (the last node may hold fewer). ranks_per_node = 1 gives expected_distinct_ranks.
double expected_distinct_nodes(const Routing& r, const RouterSpec& router, int experts, int top_k, int ranks,
                               int ranks_per_node);

}  // namespace moeperf
