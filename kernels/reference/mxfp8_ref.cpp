#include "kernels/reference/mxfp8_ref.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace moeperf::ref {
namespace {

constexpr double kE4m3Max = 448.0;        // 1.75 * 2^8: S.1111.110
constexpr int kE8m0Min = -127, kE8m0Max = 127;
constexpr uint8_t kE4m3NaN = 0x7F;        // S.1111.111
constexpr uint8_t kE8m0NaN = 0xFF;
constexpr double kE4m3MinNormal = 0x1p-6;  // exponent field 1, bias 7
constexpr double kE4m3SubnormalStep = 0x1p-9;

void require_blocks(const char* fn, int64_t n) {
  if (n < 0 || n % kMxfp8Block != 0)
    throw std::invalid_argument(std::string("moeperf::ref::") + fn +
                                ": n must be a non-negative multiple of 32, got " + std::to_string(n));
}

uint8_t nan_code(bool negative) { return static_cast<uint8_t>((negative ? 0x80 : 0x00) | kE4m3NaN); }

}  // namespace

int mxfp8_block_exponent(float amax) {
  if (!(amax >= 0.0f) || std::isinf(amax))
    throw std::invalid_argument("moeperf::ref::mxfp8_block_exponent: amax must be finite and >= 0");
  if (amax == 0.0f) return kE8m0Min;
  const double a = amax;
  // Start near log2(a / 448) (448 is about 2^8.8), then settle on the smallest e with
  // a <= 448 * 2^e; every 448 * 2^e here is exact in double, so the comparison is exact.
  int q = 0;
  (void)std::frexp(a, &q);
  int e = q - 9;
  while (a > std::ldexp(kE4m3Max, e)) ++e;
  while (a <= std::ldexp(kE4m3Max, e - 1)) --e;
  if (e < kE8m0Min) e = kE8m0Min;
  if (e > kE8m0Max) e = kE8m0Max;
  return e;
}

uint8_t e4m3_from_double(double v) {
  const bool neg = std::signbit(v);
  if (!std::isfinite(v)) return nan_code(neg);
  const double a = std::fabs(v);
  if (a > kE4m3Max)
    throw std::invalid_argument("moeperf::ref::e4m3_from_double: |v| > 448 (" + std::to_string(v) + ")");
  // Grid spacing at a: 2^-9 in the subnormal range, 2^(floor(log2 a) - 3) above it.
  double step = kE4m3SubnormalStep;
  if (a >= kE4m3MinNormal) {
    int q = 0;
    (void)std::frexp(a, &q);  // a = f * 2^q, f in [0.5, 1): floor(log2 a) = q - 1
    step = std::ldexp(1.0, q - 4);
  }
  // Round to nearest, ties to even, by hand so the FP environment's rounding mode cannot matter.
  const double y = a / step;  // exact: division by a power of two
  double units = std::floor(y);
  const double frac = y - units;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(units, 2.0) == 1.0)) units += 1.0;
  const double r = units * step;  // may have carried into the next binade; re-encode from r

  uint8_t mag = 0;
  if (r == 0.0) {
    mag = 0;
  } else if (r < kE4m3MinNormal) {
    mag = static_cast<uint8_t>(r / kE4m3SubnormalStep);  // m = 1..7
  } else {
    int q = 0;
    const double f = std::frexp(r, &q);                  // r = 2f * 2^(q-1), 2f in [1, 2)
    const int exp_field = q - 1 + 7;                     // 1..15
    const int mant = static_cast<int>((2.0 * f - 1.0) * 8.0);  // exact: 3 mantissa bits
    mag = static_cast<uint8_t>((exp_field << 3) | mant);
  }
  return static_cast<uint8_t>((neg ? 0x80 : 0x00) | mag);
}

double e4m3_to_double(uint8_t code) {
  const bool neg = (code & 0x80) != 0;
  const int mag = code & 0x7F;
  if (mag == kE4m3NaN) return std::copysign(std::numeric_limits<double>::quiet_NaN(), neg ? -1.0 : 1.0);
  const int exp_field = mag >> 3, mant = mag & 7;
  const double v = exp_field == 0 ? mant * kE4m3SubnormalStep : std::ldexp(8.0 + mant, exp_field - 10);
  return neg ? -v : v;
}

void mxfp8_quantize(const float* x, int64_t n, uint8_t* e4m3, uint8_t* scale_e8m0) {
  require_blocks("mxfp8_quantize", n);
  for (int64_t b = 0; b < n / kMxfp8Block; ++b) {
    const float* xb = x + b * kMxfp8Block;
    uint8_t* qb = e4m3 + b * kMxfp8Block;
    float amax = 0.0f;
    bool any_finite = false;
    for (int64_t i = 0; i < kMxfp8Block; ++i) {
      if (!std::isfinite(xb[i])) continue;
      any_finite = true;
      amax = std::fmax(amax, std::fabs(xb[i]));
    }
    if (!any_finite) {
      scale_e8m0[b] = kE8m0NaN;
      for (int64_t i = 0; i < kMxfp8Block; ++i) qb[i] = nan_code(std::signbit(xb[i]));
      continue;
    }
    const int e = mxfp8_block_exponent(amax);
    scale_e8m0[b] = static_cast<uint8_t>(e - kE8m0Min);
    for (int64_t i = 0; i < kMxfp8Block; ++i)
      qb[i] = e4m3_from_double(std::ldexp(static_cast<double>(xb[i]), -e));  // NaN/Inf -> NaN code
  }
}

void mxfp8_dequantize(const uint8_t* e4m3, const uint8_t* scale, int64_t n, float* x) {
  require_blocks("mxfp8_dequantize", n);
  for (int64_t b = 0; b < n / kMxfp8Block; ++b) {
    const uint8_t* qb = e4m3 + b * kMxfp8Block;
    float* xb = x + b * kMxfp8Block;
    if (scale[b] == kE8m0NaN) {
      for (int64_t i = 0; i < kMxfp8Block; ++i) xb[i] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const int e = scale[b] + kE8m0Min;
    for (int64_t i = 0; i < kMxfp8Block; ++i)
      xb[i] = static_cast<float>(std::ldexp(e4m3_to_double(qb[i]), e));
  }
}

void fp8_block128_quantize(const float* x, int64_t n, uint8_t* e4m3, float* scale) {
  if (n < 0 || n % kFp8Block128 != 0)
    throw std::invalid_argument("moeperf::ref::fp8_block128_quantize: n must be a non-negative multiple of 128, got " +
                                std::to_string(n));
  for (int64_t b = 0; b < n / kFp8Block128; ++b) {
    const float* xb = x + b * kFp8Block128;
    uint8_t* qb = e4m3 + b * kFp8Block128;
    float amax = 0.0f;
    bool any_finite = false;
    for (int64_t i = 0; i < kFp8Block128; ++i) {
      if (!std::isfinite(xb[i])) continue;
      any_finite = true;
      amax = std::fmax(amax, std::fabs(xb[i]));
    }
    if (!any_finite) {
      scale[b] = std::numeric_limits<float>::quiet_NaN();
      for (int64_t i = 0; i < kFp8Block128; ++i) qb[i] = nan_code(std::signbit(xb[i]));
      continue;
    }
    const int e = mxfp8_block_exponent(amax);
    scale[b] = static_cast<float>(std::ldexp(1.0, e));
    for (int64_t i = 0; i < kFp8Block128; ++i) qb[i] = e4m3_from_double(std::ldexp(static_cast<double>(xb[i]), -e));
  }
}

void fp8_block128_dequantize(const uint8_t* e4m3, const float* scale, int64_t n, float* x) {
  if (n < 0 || n % kFp8Block128 != 0)
    throw std::invalid_argument("moeperf::ref::fp8_block128_dequantize: n must be a non-negative multiple of 128, got " +
                                std::to_string(n));
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(e4m3_to_double(e4m3[i]) * static_cast<double>(scale[i / kFp8Block128]));
}

Mxfp8Row mxfp8_quantize_row(const float* x, int64_t n) {
  require_blocks("mxfp8_quantize_row", n);
  Mxfp8Row row;
  row.e4m3.resize(static_cast<size_t>(n));
  row.scale_e8m0.resize(static_cast<size_t>(n / kMxfp8Block));
  mxfp8_quantize(x, n, row.e4m3.data(), row.scale_e8m0.data());
  return row;
}

}  // namespace moeperf::ref
