// SpecError: bad input with its location. Every message a user sees about a file has the form
//   <file>: <JSON path>: <what was expected>, got <what was found>
// e.g. `gb200.json: /gpu/hbm_bandwidth: expected a bandwidth like "8 TB/s", got 8`.
#pragma once

#include <string>

#include "model/error.h"

namespace moeperf::io {

class SpecError : public InputError {
 public:
  // What is wrong: a value (its agreement with another, a rule of the layout), a value's own type
  // or range whatever the others are ("abc" or -8 for a count, an unknown name), the file's shape
  // (it cannot be read, is not JSON, or has an unknown or duplicate key), or a required field that
  // is missing. A sweep's points share the shape of their files and differ in values only; a
  // varied value of the wrong type is the user's typo, not an infeasible point (io::check_sweep).
  enum class Kind { value, type, shape, missing };
  SpecError(std::string file, std::string json_path, std::string detail, Kind kind = Kind::value)
      : InputError(format(file, json_path, detail)),
        file_(std::move(file)), path_(std::move(json_path)), detail_(std::move(detail)), kind_(kind) {}
  const std::string& file() const { return file_; }
  const std::string& json_path() const { return path_; }  // JSON pointer, "" for the whole file
  const std::string& detail() const { return detail_; }
  Kind kind() const { return kind_; }

 private:
  static std::string format(const std::string& f, const std::string& p, const std::string& d) {
    return f + ": " + (p.empty() ? std::string() : p + ": ") + d;
  }
  std::string file_, path_, detail_;
  Kind kind_;
};

}  // namespace moeperf::io
