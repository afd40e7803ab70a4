// The one exception type the model layer throws for input it cannot work with (an impossible
// layout, a cluster larger than its fabric can hold). model/io adds the file and JSON path; the
// CLI turns it into exit code 2. Library code never exits.
#pragma once

#include <stdexcept>
#include <string>

namespace moeperf {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace moeperf
