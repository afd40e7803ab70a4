#include "model/io/units_parse.h"

#include "model/error.h"
#include "model/io/errors.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

namespace moeperf::io {
namespace {

struct Unit {
  std::string_view name;
  QuantityKind kind;
  double factor;  // to the base unit of the kind
};

// Byte-size prefixes: B (bytes) and b/bit (bits), decimal and binary.
constexpr std::array<std::pair<std::string_view, double>, 10> kPrefixes{{
    {"", 1.0}, {"K", kKilo}, {"M", kMega}, {"G", kGiga}, {"T", kTera}, {"P", kPeta},
    {"Ki", kKibi}, {"Mi", kMebi}, {"Gi", kGibi}, {"Ti", kTebi}}};

std::optional<Unit> find_unit(std::string_view u) {
  // time
  if (u == "s") return Unit{u, QuantityKind::time, 1.0};
  if (u == "ms") return Unit{u, QuantityKind::time, 1e-3};
  if (u == "us" || u == "\xC2\xB5s") return Unit{u, QuantityKind::time, 1e-6};
  if (u == "ns") return Unit{u, QuantityKind::time, 1e-9};
  // FLOPs and FLOP rates
  constexpr std::array<std::pair<std::string_view, double>, 6> fp{{
      {"", 1.0}, {"K", kKilo}, {"M", kMega}, {"G", kGiga}, {"T", kTera}, {"P", kPeta}}};
  for (auto [p, f] : fp) {
    const std::string flop = std::string(p) + "FLOP";
    if (u == flop) return Unit{u, QuantityKind::flops, f};
    if (u == flop + "S" || u == flop + "/s") return Unit{u, QuantityKind::flop_rate, f};
  }
  if (u == "EFLOPS" || u == "EFLOP/s") return Unit{u, QuantityKind::flop_rate, 1e18};
  // power
  if (u == "W") return Unit{u, QuantityKind::power, 1.0};
  if (u == "kW") return Unit{u, QuantityKind::power, 1e3};
  if (u == "MW") return Unit{u, QuantityKind::power, 1e6};
  // sizes and bandwidths
  auto sized = [&](std::string_view stem, bool rate) -> std::optional<Unit> {
    const QuantityKind k = rate ? QuantityKind::bandwidth : QuantityKind::bytes;
    for (auto [p, f] : kPrefixes) {
      if (stem == std::string(p) + "B") return Unit{u, k, f};
      if (stem == std::string(p) + "b" || stem == std::string(p) + "bit") return Unit{u, k, f / kBitsPerByte};
    }
    return std::nullopt;
  };
  if (u.size() > 2 && u.substr(u.size() - 2) == "/s") return sized(u.substr(0, u.size() - 2), true);
  if (u.size() > 2 && u.substr(u.size() - 2) == "ps") return sized(u.substr(0, u.size() - 2), true);  // Gbps
  return sized(u, false);
}

double parse(std::string_view s, QuantityKind want) {
  const std::string text(s);
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  double v = 0.0;
  const char* begin = s.data() + i;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr == begin)
    throw UnitError("expected " + describe(want) + ", got \"" + text + "\"");
  std::string_view rest(ptr, static_cast<size_t>(end - ptr));
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back()))) rest.remove_suffix(1);
  if (rest.empty())
    throw UnitError("expected " + describe(want) + ", got \"" + text + "\" (a number without its unit)");
  auto unit = find_unit(rest);
  if (!unit)
    throw UnitError("expected " + describe(want) + ", got \"" + text + "\" (unknown unit \"" + std::string(rest) + "\")");
  if (unit->kind != want) {
    const std::string d = describe(unit->kind);
    throw UnitError("expected " + describe(want) + ", got \"" + text + "\" (" + d.substr(0, d.find(" like")) + ")");
  }
  if (v < 0.0) throw UnitError("expected " + describe(want) + " that is not negative, got \"" + text + "\"");
  // from_chars reads "inf" and "nan", and a huge number times its unit overflows.
  if (!std::isfinite(v * unit->factor))
    throw UnitError("expected " + describe(want) + " that is a finite number, got \"" + text + "\"");
  return v * unit->factor;
}

}  // namespace

std::string describe(QuantityKind k) {
  switch (k) {
    case QuantityKind::time: return "a time like \"1.5 us\"";
    case QuantityKind::bytes: return "a byte size like \"186 GB\" or \"189471 MiB\"";
    case QuantityKind::bandwidth: return "a bandwidth like \"900 GB/s\" or \"400 Gb/s\"";
    case QuantityKind::flops: return "a FLOP count like \"250.4 GFLOP\"";
    case QuantityKind::flop_rate: return "a FLOP rate like \"2.5 PFLOPS\"";
    case QuantityKind::power: return "a power like \"14.3 kW\" or \"1000 W\"";
  }
  return "a quantity";
}

Bytes parse_bytes_arg(std::string_view s) {
  try {
    return parse_bytes(s);
  } catch (const UnitError& e) {
    throw SpecError("--bytes " + std::string(s), "", e.what());
  }
}

Seconds parse_seconds(std::string_view s) { return Seconds(parse(s, QuantityKind::time)); }
Bytes parse_bytes(std::string_view s) { return Bytes(parse(s, QuantityKind::bytes)); }
BytesPerSecond parse_bandwidth(std::string_view s) { return BytesPerSecond(parse(s, QuantityKind::bandwidth)); }
Flops parse_flops(std::string_view s) { return Flops(parse(s, QuantityKind::flops)); }
FlopsPerSecond parse_flop_rate(std::string_view s) { return FlopsPerSecond(parse(s, QuantityKind::flop_rate)); }
Watts parse_power(std::string_view s) { return Watts(parse(s, QuantityKind::power)); }

double parse_token_count(const char* flag, const std::string& text) {
  // std::from_chars: the C locale's decimal point whatever the process's (the GUI's Qt sets it from
  // the environment, where "2.5" may not parse with std::stod).
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  size_t used = ec == std::errc() ? static_cast<size_t>(end - text.data()) : 0;
  double unit = 1;
  const std::string rest = text.substr(used);
  if (rest == "K") unit = 1e3;
  else if (rest == "M") unit = 1e6;
  else if (rest == "B" || rest == "G") unit = 1e9;
  else if (rest == "T") unit = 1e12;
  else if (!rest.empty()) used = 0;
  if (used == 0 || !(v > 0) || !std::isfinite(v * unit))
    throw InputError(std::string(flag) + " " + text + ": expected a token count like 15T, 300B, 2.5e12 or 500M");
  return v * unit;
}

}  // namespace moeperf::io
