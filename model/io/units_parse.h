// Parsing quantities written with their unit: "900 GB/s", "400 Gb/s", "186 GB", "189471 MiB",
// "2.5 PFLOPS", "1.5 us". Decimal prefixes are powers of 10 (GB = 1e9 B), binary ones powers of 2
// (GiB = 2^30 B); an upper-case B is a byte and a lower-case b a bit.
//
//   BytesPerSecond nic = parse_bandwidth("400 Gb/s");   // 50e9 B/s
//   Bytes hbm = parse_bytes("189471 MiB");
//
// A string that is not a quantity of the wanted kind throws UnitError whose message says what was
// expected and, when the string is a quantity of another kind, which kind it is.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "model/units.h"

namespace moeperf::io {

class UnitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class QuantityKind { time, bytes, bandwidth, flops, flop_rate, power };

Seconds parse_seconds(std::string_view s);
Bytes parse_bytes(std::string_view s);
BytesPerSecond parse_bandwidth(std::string_view s);
Flops parse_flops(std::string_view s);
FlopsPerSecond parse_flop_rate(std::string_view s);
Watts parse_power(std::string_view s);  // "1000 W", "14.3 kW", "132 kW"

// A byte size given on the command line ("64MiB", "8 GiB"); errors name the argument.
Bytes parse_bytes_arg(std::string_view s);

// A token count as typed: "15T", "300B" (or "300G"), "2.5e12", "500M", "8K"; InputError naming the
// flag (or field) it came from.
double parse_token_count(const char* flag, const std::string& text);

// "a bandwidth like \"900 GB/s\"": used in messages.
std::string describe(QuantityKind k);

}  // namespace moeperf::io
