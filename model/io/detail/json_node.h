// Internal to model/io: a read-only view of one JSON value that knows its file and JSON path, so
// every error it raises names both. Loaders declare the keys they accept; anything else is an
// unknown key with a "did you mean" hint.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/io/errors.h"
#include "model/io/units_parse.h"
#include "model/units.h"

namespace moeperf::io::detail {

using json = nlohmann::json;

// Reads and parses a JSON file; errors name the file (and line/column for malformed JSON). Bounded:
// at most kMaxJsonBytes of text and kMaxJsonDepth levels of nesting.
inline constexpr size_t kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonBytes = size_t{256} << 20;
json read_json_file(const std::string& path);

// Index of the first byte that does not belong to a well-formed UTF-8 sequence, or npos.
size_t first_invalid_utf8(const std::string& s);

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(const std::string& a, const std::string& b);

class Node {
 public:
  Node(const json& j, std::string file, std::string path) : j_(&j), file_(std::move(file)), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& detail) const { throw SpecError(file_, path_, detail); }
  // The value's own type or range is wrong, whatever the rest of the file says.
  [[noreturn]] void fail_type(const std::string& detail) const { throw SpecError(file_, path_, detail, SpecError::Kind::type); }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const json& raw() const { return *j_; }
  bool is_null() const { return j_->is_null(); }
  bool is_string() const { return j_->is_string(); }
  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }

  // Objects.
  void expect_object() const;
  void allow_only(std::initializer_list<const char*> keys) const;
  void allow_only(const std::vector<std::string>& keys) const;
  bool has(const char* key) const;
  Node at(const char* key) const;                   // required field
  std::optional<Node> get(const char* key) const;   // optional field (absent or null: nullopt)

  // Arrays.
  size_t size() const;
  Node operator[](size_t i) const;

  // Scalars: each says what it expected when the value does not fit.
  std::string as_string() const;
  bool as_bool() const;
  double as_number() const;
  double as_positive_number() const;
  double as_fraction() const;       // in (0, 1]
  // Counts (layers, GPUs, experts...) end up in int arithmetic: at most kMaxCount unless a field
  // gives its own limit (model/limits.h), so a huge value is an error naming the limit, never a
  // silently truncated or overflowing number.
  static constexpr int64_t kMaxCount = 2147483647;
  int64_t as_int() const;
  int64_t as_positive_int(int64_t max = kMaxCount) const;  // in [1, max]
  int64_t as_nonneg_int(int64_t max = kMaxCount) const;    // in [0, max]
  template <class E>
  E as_enum(std::initializer_list<std::pair<const char*, E>> names) const;

  // Quantities: "8 TB/s" or {"value": "8 TB/s", "source": "..."}.
  Seconds as_time() const;
  Bytes as_bytes() const;
  BytesPerSecond as_bandwidth() const;
  FlopsPerSecond as_flop_rate() const;
  Watts as_power() const;  // positive

  // Convenience for optional fields with a default.
  int64_t positive_int_or(const char* key, int64_t dflt, int64_t max = kMaxCount) const;
  bool bool_or(const char* key, bool dflt) const;
  std::string string_or(const char* key, std::string dflt) const;

 private:
  std::string type_name() const;
  static std::string limit_reason(int64_t max);
  std::string shown() const;  // the value as JSON text, shortened
  template <class F>
  auto quantity(F parse, QuantityKind kind) const -> decltype(parse(std::string_view{}));
  const json* j_;
  std::string file_;
  std::string path_;
};

std::string join_choices(const std::vector<std::string>& names);
// " (did you mean \"x\"?)" for the closest names (ties listed together), or "" when none is close.
std::string did_you_mean(const std::string& got, const std::vector<std::string>& names);

template <class E>
E Node::as_enum(std::initializer_list<std::pair<const char*, E>> names) const {
  std::vector<std::string> all;
  for (auto& [n, e] : names) all.emplace_back(n);
  if (!j_->is_string()) fail_type("expected one of " + join_choices(all) + ", got " + shown());
  const std::string s = j_->get<std::string>();
  for (auto& [n, e] : names)
    if (s == n) return e;
  fail_type("expected one of " + join_choices(all) + ", got \"" + s + "\"" + did_you_mean(s, all));
}

}  // namespace moeperf::io::detail
