// Every file we ship under topologies/ and examples/ loads and passes its checks, and every
// hardware figure carries its unit in the value and a source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/io/load.h"
#include "temp_dir.h"

namespace moeperf::io {
namespace {

std::vector<std::string> json_files(const std::string& rel) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::recursive_directory_iterator(moeperf::testing::source(rel)))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DataFiles, EveryShippedFileValidates) {
  size_t n = 0;
  for (const char* dir : {"topologies", "examples"}) {
    for (const std::string& f : json_files(dir)) {
      EXPECT_NO_THROW(validate_file(f)) << f;
      ++n;
    }
  }
  EXPECT_GE(n, 30u);
}

// Walks a JSON value; every {"value": ...} object must have a "source".
void expect_sourced(const nlohmann::json& j, const std::string& file, const std::string& path) {
  if (j.is_object()) {
    if (j.contains("value")) {
      EXPECT_TRUE(j.contains("source")) << file << ": " << path << " has no source";
    }
    for (auto& [k, v] : j.items()) expect_sourced(v, file, path + "/" + k);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) expect_sourced(j[i], file, path + "/" + std::to_string(i));
  }
}

TEST(DataFiles, EveryHardwareFigureHasAUnitAndASource) {
  for (const std::string& f : json_files("topologies")) {
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(f));
    EXPECT_TRUE(j.contains("source")) << f;
    expect_sourced(j, f, "");
    // A bare number where a quantity is expected would fail validation; strings carry units.
  }
}

}  // namespace
}  // namespace moeperf::io
