// Internal to model/workload: from per-token count laws to loads over T tokens and their expected
// maximum over ranks (normal approximations with skew, integrated numerically), and the expected
// padded rows of a grouped GEMM (each expert rounded up to the tile), exactly on a lattice where
// that is cheap (expected_max.cpp).
#pragma once

#include "model/workload/routing_laws.h"

namespace moeperf::routing_detail {

double normal_cdf(double z);
// CDF of a standardized variable of skewness g by the normal-power (first-order Cornish-Fisher)
// approximation x = z + g/6 (z^2 - 1), inverted on its increasing branch; skewness is capped at
// +-1, beyond which this approximation is no longer monotone over the range that matters.
double skewed_cdf(double x, double g);
// A load: mean, standard deviation, skewness.
struct Normal {
  double mean = 0, sd = 0, skew = 0;
  bool operator==(const Normal&) const = default;
};

// E[max of independent loads] = L + int_L^hi (1 - prod F) dx, with L at or below where the max can
// fall and hi above every upper end (10 sd each way, 20 at skewness 1, where the normal-power
// tail reaches 8.4 sd);
// a load with sd 0 is a step, so the integral starts at the largest of those. Steps of 1/10 of the
// smallest sd of the loads that matter keep Simpson's error below 1e-9 sd. Equal loads are
// counted once and raised to their multiplicity.
double independent_max(const std::vector<Normal>& v);
// E[max over G groups of (a U_g + b max over the group's n members of W)], U standard normal, W
// standardized of skewness `skew`, all independent: the two-level model of loads positively
// correlated within a group. The law of one group is F(x) = int phi(u) F_W((x - a u) / b)^n du, by
// the trapezoid rule in u (spectrally accurate for a Gaussian weight at steps up to 0.5 and b / 4a);
// E[max] = lo + int_lo^hi (1 - F^G) by Simpson's rule at steps under sigma / 16. The x step is a
// whole number of (a du), so F_W^n is needed only on one lattice of arguments.
double two_level_max(double a, double b, double skew, int n, int G);
// Loads that sum to a constant, replaced by independent surrogates with the same expected maximum.
// A set holding a share c = V / sum V of the variance: for covariance diag(A) - A A^T / sum A (exact
// for exchangeable sets, where c = 1/n) the load is Y - c sum Y with Y independent of variance
// A = V / (1 - c), and max(Y - c sum Y) = max Y - c sum Y has the mean of max Y. The third cumulant
// of Y - c sum Y is (1 - c)(1 - 2c) that of Y for exchangeable sets (as Poisson counts conditioned
// on their sum give a binomial), so Y's is the load's divided by that. The factor vanishes at
// c = 1/2 (two loads: the maximum m + |L - m| hardly feels skewness), so from c = 0.45 none is kept.
Normal free_load(double mean, double var, double third, double var_share);
// How the loads of one partition (ranks or experts) are modelled: two-level when uniform
// group-limited routing correlates members of a group, else independent surrogates.
struct LoadModel {
  bool two_level = false;
  int n = 0, G = 0;  // two_level: G groups of n exchangeable sets
  double mean = 0, a = 0, b = 0, third = 0;  // two_level: third cumulant of a member's surrogate
  std::vector<Normal> sets;                  // independent: per set
};

// Per-token laws of the sets of one partition of the experts in equal blocks of `block` experts,
// turned into the loads of T tokens. Two-level: c_in (within a group) from the group's variance,
// c_out (across) from the fixed total; adding a common normal of variance -c_out shifts every load
// alike (not the maximum) and leaves groups independent: a^2 = c_in - c_out, b^2 = var - c_in.
LoadModel load_model(const Process& p, int block, const std::vector<Pmf>& pmfs, double tokens);
double expected_max(const LoadModel& m);
// ---------------------------------------------------------------- padding to a tile
// For m ~ Binomial(T, p) and c = ceil(m / tile) * tile: E[c], and c's regression on m
// (slope beta, residual variance). When sd(m) >= 2 tiles, m mod tile is uniform to within
// exp(-2 pi^2 sd^2 / tile^2) < 1e-34, so the padding is independent of m with mean (tile - 1)/2 and
// variance (tile^2 - 1)/12 (integer rows); otherwise the pmf is summed outward from the mode by the
// ratio recurrence and normalized by its own sum.
struct PaddedRows {
  double mean = 0, slope = 0, residual_var = 0, rows_var = 0;
};

PaddedRows padded_rows(int64_t T, double p, int tile);
// Law of ceil(m / tile) for m ~ Binomial(T, p): mass[i] = P(ceil(m / tile) = first + i), summed
// outward from the mode as in padded_rows and normalized by its own sum.
struct TileLaw {
  int64_t first = 0;
  std::vector<double> mass;
};

TileLaw tile_law(int64_t T, double p, int tile);
// The law of the sum of two independent lattice variables, its tails below 1e-18 dropped.
TileLaw convolve(const TileLaw& a, const TileLaw& b);
TileLaw power(TileLaw a, int n);
// Independent blocks; block b's maximum has P(max <= d) = sum_i weight_i F_i(d)^members (a mixture
// over a common factor of `members` iid variables). E[max] = lo + sum_{d >= lo} (1 - P(max <= d)),
// lo the smallest value the maximum can take.
struct LatticeBlock {
  std::vector<double> weight;
  std::vector<TileLaw> law;
  int members = 1;
};

double lattice_max(const std::vector<LatticeBlock>& blocks);
// The padded rows of the busiest rank when a rank's padded rows spread over many tiles: padded rows
// of a rank = sum_e E[c_e] + beta (L - E L) + independent residual, with beta the variance-weighted
// slope of its experts (padded_rows); L's standard deviation and third cumulant scale by beta.
double padded_normal_max(const LoadModel& rows, const std::vector<Pmf>& per_expert, int64_t tokens, int ranks, int tile);
// The padded rows of the busiest rank when a rank's padded rows are lumpy (spread over few tiles):
// the exact lattice law of each expert's tiles, summed over the rank, and the expected maximum
// summed over the lattice. Experts are independent (their negative correlation through the fixed
// total is what the free_load variance inflation stands for). Under group-limited routing they are
// independent given n_g, the tokens that chose their group: rows ~ Binomial(n_g, k / (M E/G)), with
// n_g normal of mean T M/G and the free variance T (M/G)(1 - M/G) G/(G - 1), on every integer when
// its sd is under 16, else at steps of sd/2 (trapezoid rule in the standard normal) out to 8 sd.
double padded_lattice_max(const Process& p, const std::vector<Pmf>& per_expert, int64_t tokens, int ranks, int tile);

}  // namespace moeperf::routing_detail
