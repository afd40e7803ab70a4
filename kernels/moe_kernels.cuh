// Device-side pieces of the MoE kernels that are pure functions of their inputs: the selection key
// of the router and the MXFP8 element / scale codecs. __host__ __device__ and integer-only where
// rounding matters, so the same code runs (and can be checked) on the CPU.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MOEPERF_HD __host__ __device__ __forceinline__
#else
#define MOEPERF_HD inline
#endif

namespace moeperf::kernels::detail {

MOEPERF_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

MOEPERF_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Router selection order as one unsigned key: a larger key ranks first. Upper 32 bits: the score
// mapped monotonically onto uint32 (-0 folded onto +0 so they tie, NaN -> 0, below -Inf); lower
// 32 bits: ~id, so on equal scores the lower id wins. Key 0 means "no candidate" (no id maps to it).
MOEPERF_HD uint64_t rank_key(float score, int id) {
  uint32_t b = float_bits(score);
  uint32_t k;
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) {
    k = 0;  // NaN
  } else {
    if ((b & 0x7FFFFFFFu) == 0) b = 0;  // -0 == +0
    k = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  return (uint64_t{k} << 32) | uint64_t{~static_cast<uint32_t>(id)};
}
MOEPERF_HD int rank_key_id(uint64_t key) { return static_cast<int>(~static_cast<uint32_t>(key)); }

// --- MXFP8 (rule of kernels/reference/mxfp8_ref.h) ---
inline constexpr uint8_t kE8m0NaN = 0xFF;

// Smallest e with amax <= 448 * 2^e, clamped to [-127, 127], for a finite amax >= 0 given by its
// bits. amax = (1.M / 2) * 2^q with q = Ebiased - 126; 448 = 0.875 * 2^9, so e = q - 9 when
// 1.M <= 1.75 (M <= 0x600000) and q - 8 otherwise. Float subnormals and zero give e < -127: -127.
MOEPERF_HD int mxfp8_exponent(uint32_t amax_bits) {
  const uint32_t eb = amax_bits >> 23, m = amax_bits & 0x7FFFFFu;
  if (eb == 0) return -127;
  int e = static_cast<int>(eb) - 135 + (m > 0x600000u ? 1 : 0);
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return e;
}

// Round-to-nearest-even of mantissa `full` shifted right by `shift` (integer arithmetic).
MOEPERF_HD uint32_t rne_shift(uint32_t full, int shift) {
  if (shift <= 0) return full;
  if (shift > 31) return 0;  // full < 2^24: far below one half
  const uint32_t q = full >> shift, rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1u))) ? q + 1u : q;
}

// E4M3 code of x / 2^e. Non-finite x gives the signed NaN code. x / 2^e is formed in float: exact
// when it is a float normal; when it is a float subnormal (< 2^-126) it rounds to a signed E4M3
// zero either way, so the code equals the reference's exact double computation.
MOEPERF_HD uint8_t e4m3_encode_scaled(float x, int e) {
  const uint32_t xb = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((xb >> 24) & 0x80u);
  if ((xb & 0x7FFFFFFFu) >= 0x7F800000u) return static_cast<uint8_t>(sign | 0x7F);
  const float v = x * bits_float(static_cast<uint32_t>(127 - e) << 23);  // 2^-e, e in [-127, 127]
  const uint32_t a = float_bits(v) & 0x7FFFFFFFu;
  const int ef = static_cast<int>(a >> 23);
  uint32_t mag;
  if (ef < 121) {
    // Below 2^-6: the E4M3 subnormal grid m * 2^-9; m = 8 is the code of 2^-6, so carries work.
    const uint32_t full = (a & 0x7FFFFFu) | (ef ? 0x800000u : 0u);
    const int exp_used = ef ? ef : 1;
    mag = rne_shift(full, 141 - exp_used);  // value * 2^9 = full * 2^(exp_used - 150 + 9)
  } else {
    // Normal: exponent field ef - 127 + 7, 3 mantissa bits rounded from 23; a carry moves into
    // the exponent field by plain addition. |v| <= 448 never reaches the NaN code.
    const uint32_t keep = rne_shift(a & 0x7FFFFFu, 20);
    mag = (static_cast<uint32_t>(ef - 120) << 3) + keep;
  }
  return static_cast<uint8_t>(sign | mag);
}

// Value of an E4M3 code times the block scale, rounded once to float (one float multiply of two
// exact operands: the same as the reference's exact double product rounded to float).
MOEPERF_HD float e4m3_decode_scaled(uint8_t code, uint8_t scale) {
  if (scale == kE8m0NaN) return bits_float(0x7FC00000u);
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const int mag = code & 0x7F;
  if (mag == 0x7F) return bits_float(0x7FC00000u | sign);
  const int ef = mag >> 3, mant = mag & 7;
  // Subnormal m * 2^-9; normal (8 + m) * 2^(ef - 10). Both exact in float.
  const float v = ef == 0 ? static_cast<float>(mant) * 0x1p-9f
                          : static_cast<float>(8 + mant) * bits_float(static_cast<uint32_t>(ef - 10 + 127) << 23);
  const int e = static_cast<int>(scale) - 127;
  const float p2 = e >= -126 ? bits_float(static_cast<uint32_t>(e + 127) << 23) : bits_float(0x00400000u);  // 2^-127
  return bits_float(float_bits(v * p2) | sign);
}

#if defined(__CUDACC__)
// One scaled-FP8 block spread over `Lanes` lanes of 4 elements each (MXFP8: 8 lanes x 4 = 32;
// block-128 FP8: 32 lanes): the lanes agree on the block's largest finite magnitude (as bits: finite
// non-negative floats order like their bits) over the shuffle `mask`, take its shared exponent, and
// each packs its 4 E4M3 codes into a word. With no finite element every code is its signed NaN.
struct Fp8Block4 {
  uint32_t word;
  int exponent;
  bool any_finite;
};
template <int Lanes>
__device__ __forceinline__ Fp8Block4 quantize_block4(const float (&xs)[4], unsigned mask) {
  uint32_t amax = 0, any_finite = 0;
  for (float f : xs) {
    const uint32_t b = float_bits(f) & 0x7FFFFFFFu;
    if (b < 0x7F800000u) any_finite = 1, amax = max(amax, b);
  }
  for (int o = 1; o < Lanes; o <<= 1) {
    amax = max(amax, __shfl_xor_sync(mask, amax, o));
    any_finite |= __shfl_xor_sync(mask, any_finite, o);
  }
  const int e = any_finite ? mxfp8_exponent(amax) : 0;
  uint32_t word = 0;
  for (int j = 0; j < 4; ++j) word |= uint32_t{e4m3_encode_scaled(xs[j], e)} << (8 * j);
  return {word, e, any_finite != 0};
}
#endif

}  // namespace moeperf::kernels::detail
