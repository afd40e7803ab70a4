// CPU reference for MXFP8 (OCP Microscaling, E4M3 elements): blocks of 32 consecutive floats share
// one power-of-two scale stored as E8M0. The rounding rule below is THE rule of this project; every
// GPU quantizer is tested against it bit for bit.
//
//   std::vector<uint8_t> q(n), s(n / kMxfp8Block);
//   mxfp8_quantize(x, n, q.data(), s.data());     // n a multiple of 32
//   mxfp8_dequantize(q.data(), s.data(), n, y);   // y within half an E4M3 ulp of x (normal range)
//
// Rule:
// - Block scale 2^e, e = ceil(log2(amax / 448)) computed exactly (the smallest integer e with
//   amax <= 448 * 2^e), clamped to E8M0's range [-127, 127]; amax = max |x| over the block's
//   finite elements (NaN and +-Inf ignored). Rounding the exponent up means nothing saturates:
//   amax / 2^e <= 448. amax = 0 gives e = -127. E8M0 byte = e + 127.
// - Elements: x / 2^e (exact: a power-of-two scaling) converted to E4M3 (OCP FP8: 1 sign bit,
//   4 exponent bits with bias 7, 3 mantissa bits, max 448, no infinities, NaN = S.1111.111) with
//   round-to-nearest, ties-to-even; subnormals (m * 2^-9, m = 1..7) supported; values below 2^-10
//   round to a zero that keeps the sign (0x00 / 0x80).
// - A NaN element becomes the E4M3 NaN with its sign (0x7F / 0xFF); +-Inf is treated as NaN
//   (+Inf -> 0x7F, -Inf -> 0xFF). Neither poisons the block's scale.
// - All-NaN block (every element NaN or +-Inf): the scale byte is 0xFF (the E8M0 NaN) and every
//   element its signed NaN code, so the block dequantizes to NaN either way (as the OCP MX spec
//   says of a NaN scale). This is the only case that writes 0xFF.
// - Dequantize: NaN scale or NaN code -> NaN; otherwise element * 2^e, exact in double and rounded
//   to float (exact too, except 256 * 2^120 = 2^128: elements with |x| >= 248 * 2^120, the top 1/32
//   below FLT_MAX, round up to it and dequantize to +-Inf).
#pragma once

#include <cstdint>
#include <vector>

namespace moeperf::ref {

inline constexpr int64_t kMxfp8Block = 32;  // elements per E8M0 scale (OCP MX)

struct Mxfp8Row {
  std::vector<uint8_t> e4m3;        // one code per element
  std::vector<uint8_t> scale_e8m0;  // one scale per kMxfp8Block elements
};

// x [n] -> e4m3 [n], scale_e8m0 [n / 32]. n must be a non-negative multiple of 32
// (std::invalid_argument otherwise).
void mxfp8_quantize(const float* x, int64_t n, uint8_t* e4m3, uint8_t* scale_e8m0);
// e4m3 [n], scale [n / 32] -> x [n].
void mxfp8_dequantize(const uint8_t* e4m3, const uint8_t* scale, int64_t n, float* x);

// Convenience owner of one quantized row.
Mxfp8Row mxfp8_quantize_row(const float* x, int64_t n);

// FP8 with 128-element blocks and FP32 power-of-two scales (the Hopper layout of cuBLASLt's
// CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, DeepSeek-V3's 1x128 tiles): the same rule as MXFP8
// with 128 elements per block (block exponent from the block's finite amax, elements x / 2^e
// rounded to E4M3, NaN/Inf to the signed NaN code), the scale stored as the float 2^e (2^-127 a
// float subnormal, still exact); an all-NaN block gets the scale NaN. n a non-negative multiple
// of 128 (std::invalid_argument otherwise). x [n] -> e4m3 [n], scale [n / 128].
inline constexpr int64_t kFp8Block128 = 128;
void fp8_block128_quantize(const float* x, int64_t n, uint8_t* e4m3, float* scale);
// e4m3 [n], scale [n / 128] -> x [n] (element * scale, exact in double, rounded to float).
void fp8_block128_dequantize(const uint8_t* e4m3, const float* scale, int64_t n, float* x);

// The pieces of the rule, exposed for GPU tests that check one step at a time.
// The block exponent e for a block whose finite |max| is amax (amax >= 0, finite).
int mxfp8_block_exponent(float amax);
// Round-to-nearest-even E4M3 code of v; NaN/Inf give the signed NaN code; |v| > 448 (never
// produced by the rule) throws std::invalid_argument.
uint8_t e4m3_from_double(double v);
// The value of an E4M3 code (NaN for S.1111.111).
double e4m3_to_double(uint8_t code);

}  // namespace moeperf::ref
