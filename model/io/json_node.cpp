#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/io/detail/json_node.h"
#include "model/io/units_parse.h"
#include "model/io/write_file.h"

namespace moeperf::io::detail {

namespace {

// Builds the document as nlohmann's DOM parser does, but knows the JSON path of every value, so a
// duplicate key or a number out of double range is reported at its path, not as a raw exception.
class PathTrackingBuilder : public nlohmann::json_sax<json> {
 public:
  explicit PathTrackingBuilder(const std::string& file) : file_(file) {}
  json result;

  bool null() override { return put(json(nullptr)); }
  bool boolean(bool v) override { return put(json(v)); }
  bool number_integer(number_integer_t v) override { return put(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(json(v)); }
  bool string(string_t& v) override { return put(json(std::move(v))); }
  bool binary(binary_t& v) override { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Level& top = stack_.back();
    if (top.value->contains(k))
      throw SpecError(file_, path_of(top) + "/" + k,
                      "duplicate key \"" + k + "\" in one object (which of the values is meant is unclear)",
                      SpecError::Kind::shape);
    top.key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& ex) override {
    if (ex.id == 406)  // number overflow: a valid JSON number outside double range
      throw SpecError(file_, next_path(), "the number " + token + " is out of range (expected a finite number)");
    // nlohmann says "[json.exception.parse_error.101] parse error at line L, column C: ..."
    std::string what = ex.what();
    const auto p = what.find("parse error");
    what = p == std::string::npos ? ": " + what : what.substr(p + std::string("parse error").size());
    throw SpecError(file_, "", "malformed JSON" + what, SpecError::Kind::shape);
  }

 private:
  struct Level {
    json* value;
    std::string path;  // of this container
    std::string key;   // the key being read, in an object
  };
  static std::string path_of(const Level& l) { return l.path; }
  std::string next_path() const {
    if (stack_.empty()) return "";
    const Level& top = stack_.back();
    return top.path + "/" + (top.value->is_object() ? top.key : std::to_string(top.value->size()));
  }
  json* insert(json v) {
    if (stack_.empty()) {
      result = std::move(v);
      return &result;
    }
    Level& top = stack_.back();
    if (top.value->is_object()) return &((*top.value)[top.key] = std::move(v));
    top.value->push_back(std::move(v));
    return &top.value->back();
  }
  bool put(json v) {
    insert(std::move(v));
    return true;
  }
  bool open(json v) {
    const std::string path = next_path();
    // Deeper documents are no moeperf file, and code that walks a value recursively (printing it,
    // comparing it) must not run out of stack on one.
    if (stack_.size() >= kMaxJsonDepth)
      throw SpecError(file_, path, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (the limit for moeperf's files)");
    stack_.push_back({insert(std::move(v)), path, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  const std::string& file_;
  std::vector<Level> stack_;
};

}  // namespace

json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw SpecError(path, "", "is a directory; expected a JSON file");
  // A device or a pipe never ends (/dev/zero) or blocks for a writer: only regular files are read,
  // and one over the limit is refused before it is read.
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw SpecError(path, "", "is not a regular file (a device, pipe or socket); expected a JSON file");
  auto refuse_size = [&](size_t size) {
    if (size > kMaxJsonBytes)
      throw SpecError(path, "", "is " + std::to_string(size >> 20) + " MiB; moeperf reads files of at most " +
                                    std::to_string(kMaxJsonBytes >> 20) + " MiB");
  };
  if (const auto size = std::filesystem::file_size(path, ec); !ec) refuse_size(static_cast<size_t>(size));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError(path, "", std::string("cannot open file: ") + std::strerror(errno), SpecError::Kind::shape);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw SpecError(path, "", std::string("cannot read file: ") + std::strerror(errno));
  const std::string text = ss.str();
  refuse_size(text.size());  // (a file that grew since, or whose size the filesystem did not give)
  PathTrackingBuilder b(path);
  json::sax_parse(text, &b);
  note_input_file(path);
  return std::move(b.result);
}

size_t first_invalid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;  // bounds of the second byte (no overlongs, surrogates, > U+10FFFF)
    if (c < 0x80) n = 0;
    else if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c == 0xE0) n = 2, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 2;
    else if (c == 0xED) n = 2, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) n = 2;
    else if (c == 0xF0) n = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 3;
    else if (c == 0xF4) n = 3, hi = 0x8F;
    else return i;
    if (i + n >= s.size()) return i;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::string::npos;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& got, const std::vector<std::string>& names) {
  size_t best = std::max<size_t>(3, got.size() / 3);
  for (const auto& n : names) best = std::min(best, edit_distance(got, n));
  std::vector<std::string> close;
  for (const auto& n : names)
    if (edit_distance(got, n) == best && best < std::max<size_t>(3, got.size() / 3)) close.push_back(n);
  return close.empty() ? std::string() : " (did you mean " + join_choices(close) + "?)";
}

std::string join_choices(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += "\"" + names[i] + "\"";
  }
  return out;
}

std::string Node::type_name() const {
  switch (j_->type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "a value";
  }
}

std::string Node::shown() const {
  if (j_->is_object() || j_->is_array()) return type_name();
  std::string s = j_->dump(-1, ' ', true, json::error_handler_t::replace);  // ASCII: cut anywhere
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

void Node::expect_object() const {
  if (!j_->is_object()) fail_type("expected an object, got " + shown());
}

void Node::allow_only(std::initializer_list<const char*> keys) const {
  allow_only(std::vector<std::string>(keys.begin(), keys.end()));
}

void Node::allow_only(const std::vector<std::string>& all) const {
  expect_object();
  for (auto& [k, v] : j_->items()) {
    if (std::find(all.begin(), all.end(), k) != all.end()) continue;
    const std::string hint = did_you_mean(k, all);
    throw SpecError(file_, path_ + "/" + k,
                    "unknown key \"" + k + "\"" + (hint.empty() ? "; expected one of " + join_choices(all) : hint),
                    SpecError::Kind::shape);
  }
}

bool Node::has(const char* key) const { return j_->is_object() && j_->contains(key); }

Node Node::at(const char* key) const {
  expect_object();
  auto it = j_->find(key);
  if (it == j_->end())
    throw SpecError(file_, path_, std::string("missing required field \"") + key + "\"", SpecError::Kind::missing);
  return Node(*it, file_, path_ + "/" + key);
}

std::optional<Node> Node::get(const char* key) const {
  expect_object();
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) return std::nullopt;
  return Node(*it, file_, path_ + "/" + key);
}

size_t Node::size() const {
  if (!j_->is_array()) fail_type("expected an array, got " + shown());
  return j_->size();
}

Node Node::operator[](size_t i) const { return Node((*j_)[i], file_, path_ + "/" + std::to_string(i)); }

std::string Node::as_string() const {
  if (!j_->is_string()) fail_type("expected a string, got " + shown());
  return j_->get<std::string>();
}

bool Node::as_bool() const {
  if (!j_->is_boolean()) fail_type("expected true or false, got " + shown());
  return j_->get<bool>();
}

double Node::as_number() const {
  if (!j_->is_number()) fail_type("expected a number, got " + shown());
  return j_->get<double>();
}

double Node::as_positive_number() const {
  const double v = as_number();
  if (!(v > 0.0) || !std::isfinite(v)) fail_type("expected a positive number, got " + shown());
  return v;
}

double Node::as_fraction() const {
  const double v = as_number();
  if (!(v > 0.0 && v <= 1.0)) fail_type("expected a fraction in (0, 1], got " + shown());
  return v;
}

int64_t Node::as_int() const {
  if (j_->is_number_integer()) return j_->get<int64_t>();
  if (j_->is_number_float()) {
    const double d = j_->get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  fail_type("expected an integer, got " + shown());
}

int64_t Node::as_positive_int(int64_t max) const {
  if (!j_->is_number()) fail_type("expected a positive integer, got " + shown());
  const int64_t v = as_int();
  if (v < 1) fail_type("expected a positive integer, got " + shown());
  if (v > max) fail_type("expected an integer up to " + std::to_string(max) + " (" + limit_reason(max) + "), got " + shown());
  return v;
}

int64_t Node::as_nonneg_int(int64_t max) const {
  if (!j_->is_number()) fail_type("expected a non-negative integer, got " + shown());
  const int64_t v = as_int();
  if (v < 0) fail_type("expected a non-negative integer, got " + shown());
  if (v > max) fail_type("expected an integer up to " + std::to_string(max) + " (" + limit_reason(max) + "), got " + shown());
  return v;
}

std::string Node::limit_reason(int64_t max) {
  return max == kMaxCount ? "moeperf's counts are 32-bit" : "moeperf's limit for this field";
}

template <class F>
auto Node::quantity(F parse, QuantityKind kind) const -> decltype(parse(std::string_view{})) {
  if (j_->is_object()) {
    allow_only({"value", "source", "note"});
    return at("value").quantity(parse, kind);
  }
  if (!j_->is_string()) fail_type("expected " + describe(kind) + ", got " + shown());
  try {
    return parse(j_->get<std::string>());
  } catch (const UnitError& e) {
    fail_type(e.what());
  }
}

Seconds Node::as_time() const { return quantity(parse_seconds, QuantityKind::time); }
Bytes Node::as_bytes() const { return quantity(parse_bytes, QuantityKind::bytes); }
// A zero (or negative) bandwidth or FLOP rate makes every transfer or op over it cost nothing or
// forever: never a real piece of hardware, always a typo.
// (A quantity given as {"value": ..., "source": ...} is reported at its value.)
BytesPerSecond Node::as_bandwidth() const {
  const BytesPerSecond b = quantity(parse_bandwidth, QuantityKind::bandwidth);
  const Node v = j_->is_object() ? at("value") : *this;
  if (!(b.value() > 0)) v.fail_type("expected a positive bandwidth, got " + v.shown());
  // Below 1 B/s a step takes longer than the universe is old: a typo, and moeperf's limit.
  if (b.value() < 1.0) v.fail_type("expected a bandwidth of at least 1 B/s (moeperf's limit), got " + v.shown());
  return b;
}
Watts Node::as_power() const {
  const Watts w = quantity(parse_power, QuantityKind::power);
  const Node v = j_->is_object() ? at("value") : *this;
  if (!(w.value() > 0)) v.fail_type("expected a positive power, got " + v.shown());
  return w;
}
FlopsPerSecond Node::as_flop_rate() const {
  const FlopsPerSecond f = quantity(parse_flop_rate, QuantityKind::flop_rate);
  const Node v = j_->is_object() ? at("value") : *this;
  if (!(f.value() > 0)) v.fail_type("expected a positive FLOP rate, got " + v.shown());
  if (f.value() < 1.0) v.fail_type("expected a FLOP rate of at least 1 FLOP/s (moeperf's limit), got " + v.shown());
  return f;
}

int64_t Node::positive_int_or(const char* key, int64_t dflt, int64_t max) const {
  auto n = get(key);
  return n ? n->as_positive_int(max) : dflt;
}
bool Node::bool_or(const char* key, bool dflt) const {
  auto n = get(key);
  return n ? n->as_bool() : dflt;
}
std::string Node::string_or(const char* key, std::string dflt) const {
  auto n = get(key);
  return n ? n->as_string() : dflt;
}

}  // namespace moeperf::io::detail
