// Strong unit types for the cost model: time, bytes, bandwidth, FLOPs, FLOP rate.
//
// Every quantity is stored as a double in its SI base unit (seconds, bytes, bytes per second,
// FLOPs, FLOPs per second). Factory names say which multiple they mean: `gigabytes(1)` is 10^9
// bytes, `gibibytes(1)` is 2^30 bytes, `gigabits_per_second(400)` is 400e9 / 8 bytes per second.
// Mixing kinds does not compile unless the physics says so:
//
//   Seconds t = gibibytes(64) / gigabytes_per_second(900);   // Bytes / BytesPerSecond -> Seconds
//   Seconds g = teraflops(3.85) / petaflops_per_second(2.5); // Flops / FlopsPerSecond -> Seconds
//   Bytes   b = gigabits_per_second(800) * seconds(1);       // 100e9 bytes
//
// Strings never appear here: parsing "900 GB/s" lives in model/io (units_parse.h).
#pragma once

#include <compare>

namespace moeperf {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double base_value) : v_(base_value) {}
  // The value in the SI base unit of this quantity (s, B, B/s, FLOP, FLOP/s).
  constexpr double value() const { return v_; }

  constexpr Quantity operator+(Quantity o) const { return Quantity(v_ + o.v_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v_ - o.v_); }
  constexpr Quantity operator-() const { return Quantity(-v_); }
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity operator*(double k) const { return Quantity(v_ * k); }
  constexpr Quantity operator/(double k) const { return Quantity(v_ / k); }
  constexpr Quantity& operator*=(double k) { v_ *= k; return *this; }
  // Ratio of two quantities of one kind is a plain number.
  constexpr double operator/(Quantity o) const { return v_ / o.v_; }
  constexpr auto operator<=>(const Quantity&) const = default;

 private:
  double v_ = 0.0;
};

template <class Tag>
constexpr Quantity<Tag> operator*(double k, Quantity<Tag> q) { return q * k; }

struct SecondsTag {};
struct BytesTag {};
struct BytesPerSecondTag {};
struct FlopsTag {};
struct FlopsPerSecondTag {};
struct WattsTag {};
struct JoulesTag {};

using Seconds = Quantity<SecondsTag>;
using Bytes = Quantity<BytesTag>;
using BytesPerSecond = Quantity<BytesPerSecondTag>;
using Flops = Quantity<FlopsTag>;
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;
using Watts = Quantity<WattsTag>;
using Joules = Quantity<JoulesTag>;

// Cross-kind arithmetic: only the physically meaningful combinations.
constexpr Seconds operator/(Bytes b, BytesPerSecond r) { return Seconds(b.value() / r.value()); }
constexpr Seconds operator/(Flops f, FlopsPerSecond r) { return Seconds(f.value() / r.value()); }
constexpr BytesPerSecond operator/(Bytes b, Seconds t) { return BytesPerSecond(b.value() / t.value()); }
constexpr FlopsPerSecond operator/(Flops f, Seconds t) { return FlopsPerSecond(f.value() / t.value()); }
constexpr Bytes operator*(BytesPerSecond r, Seconds t) { return Bytes(r.value() * t.value()); }
constexpr Bytes operator*(Seconds t, BytesPerSecond r) { return r * t; }
constexpr Flops operator*(FlopsPerSecond r, Seconds t) { return Flops(r.value() * t.value()); }
constexpr Flops operator*(Seconds t, FlopsPerSecond r) { return r * t; }
constexpr Joules operator*(Watts p, Seconds t) { return Joules(p.value() * t.value()); }

// ---- factories: decimal (SI) and binary (IEC) multiples are separate names ----
inline constexpr double kKilo = 1e3, kMega = 1e6, kGiga = 1e9, kTera = 1e12, kPeta = 1e15;
inline constexpr double kKibi = 1024.0, kMebi = kKibi * 1024.0, kGibi = kMebi * 1024.0,
                        kTebi = kGibi * 1024.0;
inline constexpr double kBitsPerByte = 8.0;

constexpr Seconds seconds(double x) { return Seconds(x); }
constexpr Seconds milliseconds(double x) { return Seconds(x * 1e-3); }
constexpr Seconds microseconds(double x) { return Seconds(x * 1e-6); }
constexpr Seconds nanoseconds(double x) { return Seconds(x * 1e-9); }

constexpr Bytes bytes(double x) { return Bytes(x); }
constexpr Bytes kilobytes(double x) { return Bytes(x * kKilo); }
constexpr Bytes megabytes(double x) { return Bytes(x * kMega); }
constexpr Bytes gigabytes(double x) { return Bytes(x * kGiga); }
constexpr Bytes terabytes(double x) { return Bytes(x * kTera); }
constexpr Bytes kibibytes(double x) { return Bytes(x * kKibi); }
constexpr Bytes mebibytes(double x) { return Bytes(x * kMebi); }
constexpr Bytes gibibytes(double x) { return Bytes(x * kGibi); }
constexpr Bytes tebibytes(double x) { return Bytes(x * kTebi); }

constexpr BytesPerSecond bytes_per_second(double x) { return BytesPerSecond(x); }
constexpr BytesPerSecond gigabytes_per_second(double x) { return BytesPerSecond(x * kGiga); }
constexpr BytesPerSecond terabytes_per_second(double x) { return BytesPerSecond(x * kTera); }
constexpr BytesPerSecond gigabits_per_second(double x) { return BytesPerSecond(x * kGiga / kBitsPerByte); }

constexpr Flops flops(double x) { return Flops(x); }
constexpr Flops gigaflops(double x) { return Flops(x * kGiga); }
constexpr Flops teraflops(double x) { return Flops(x * kTera); }
constexpr FlopsPerSecond flops_per_second(double x) { return FlopsPerSecond(x); }
constexpr FlopsPerSecond teraflops_per_second(double x) { return FlopsPerSecond(x * kTera); }
constexpr FlopsPerSecond petaflops_per_second(double x) { return FlopsPerSecond(x * kPeta); }

// Readers in common display units (for reports; the value stays in base units).
constexpr double in_gigabytes(Bytes b) { return b.value() / kGiga; }
constexpr double in_gibibytes(Bytes b) { return b.value() / kGibi; }
constexpr double in_gigabytes_per_second(BytesPerSecond r) { return r.value() / kGiga; }
constexpr double in_gigabits_per_second(BytesPerSecond r) { return r.value() * kBitsPerByte / kGiga; }
constexpr double in_terabytes_per_second(BytesPerSecond r) { return r.value() / kTera; }
constexpr double in_teraflops_per_second(FlopsPerSecond r) { return r.value() / kTera; }
constexpr double in_microseconds(Seconds t) { return t.value() * 1e6; }
constexpr double in_milliseconds(Seconds t) { return t.value() * 1e3; }

}  // namespace moeperf
