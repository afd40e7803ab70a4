#include "fuzz/harness.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <typeinfo>

#include "model/error.h"
#include "model/io/load.h"
#include "model/io/measured_trace.h"
#include "model/io/parts.h"
#include "model/io/sweep.h"
#include "model/study/predict.h"

namespace moeperf::fuzz {
namespace fs = std::filesystem;

namespace {

// The repository's data folders that seed files reference one another across.
constexpr const char* kTops[] = {"examples", "topologies", "calibration", "stacks"};

// A staging folder per process: <tmp>/<top>/ for each top holds a link to every entry of the
// repository's <top>, and a folder fuzz/ where inputs go (place_of).
class Stage {
 public:
  Stage() {
    std::string tmpl = (fs::temp_directory_path() / "moeperf-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("fuzz: cannot make a staging folder in " + tmpl);
    root_ = tmpl;
    const fs::path repo = MOEPERF_SOURCE_DIR;
    for (const char* top : kTops) {
      fs::create_directories(root_ / top / "fuzz");
      for (const auto& e : fs::directory_iterator(repo / top)) fs::create_directory_symlink(e.path(), root_ / top / e.path().filename());
    }
  }
  ~Stage() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string put(const char* where, const uint8_t* data, size_t size) const {
    const fs::path p = root_ / where;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("fuzz: cannot write " + p.string());
    return p.string();
  }

 private:
  fs::path root_;
};

const Stage& stage() {
  static const Stage s;
  return s;
}

// Where the input goes: beside the seeds of its kind, at the depth their references expect
// (topologies/gb300-nvl72.json names "domains/...", examples/deepseek-v3/*.json "../../topologies/...").
const char* place_of(const std::string& target) {
  if (target == "system") return "topologies/input.json";
  if (target == "calibration" || target == "measurements") return "calibration/fuzz/input.json";
  if (target == "stack") return "stacks/fuzz/input.json";
  return "examples/fuzz/input.json";
}

// The shipped scenario `set` inputs apply to.
std::string set_base() { return std::string(MOEPERF_SOURCE_DIR) + "/examples/deepseek-v3/gb300-optimized.json"; }

void load(const std::string& target, const std::string& file, const uint8_t* data, size_t size) {
  if (target == "scenario") {
    (void)io::load_scenario(file);
  } else if (target == "predict") {
    // The scenario loaded, then predicted when small enough for a fuzzer's pace under the
    // sanitizers (about a thousand GPUs and layer passes; the Megatron ladder's 3,904 take over
    // 10 s there): what the loader accepts must predict or fail as bad input.
    const Scenario s = io::load_scenario(file);
    const Parallelism& p = s.parallelism;
    const int64_t mbs = s.batch.global_batch / (s.batch.micro_batch * p.dense_data_parallel());
    if (s.gpus <= 1024 && mbs * (s.model.layers + s.model.mtp_layers) <= 1024) (void)predict(s, s.calibration);
  } else if (target == "model") {
    (void)io::load_model(file);
  } else if (target == "system") {
    (void)io::load_system(file);
  } else if (target == "stack") {
    // A stack file as `moeperf validate` reads it (its fields, its ablation steps).
    (void)io::validate_file(file);
  } else if (target == "calibration") {
    (void)io::load_calibration(file);
  } else if (target == "measurements") {
    // The same bytes as calibrate reads them: a measurements file, or else a profiler trace whose
    // records then load as measurements on a shipped system.
    try {
      (void)io::load_parts(file);
      return;
    } catch (const InputError&) {
    }
    const io::MeasuredTrace t = io::read_measured_trace(file, io::builtin_kernel_patterns(), {});
    (void)io::parts_from_document(
        io::trace_records_document(t, "", std::string(MOEPERF_SOURCE_DIR) + "/topologies/dgx-h100-cluster.json", nullptr), file);
  } else if (target == "accuracy") {
    (void)io::load_accuracy_cases(file);
  } else if (target == "grid") {
    (void)io::load_sweep_grid(file);
  } else if (target == "sweep") {
    // `moeperf sweep` arguments, one per line: "vary PATH=..." or "derive PATH=EXPR".
    io::SweepSpec sp;
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("vary ", 0) == 0) sp.axes.push_back(io::parse_vary(line.substr(5)));
      else if (line.rfind("derive ", 0) == 0) sp.derive.push_back(io::parse_derive(line.substr(7)));
    }
    const size_t n = io::sweep_size(sp);
    for (size_t i = 0; i < std::min<size_t>(n, 4); ++i) (void)io::sweep_point(sp, i);
  } else if (target == "set") {
    std::vector<io::Override> sets;
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) sets.push_back(io::parse_override(line));
    (void)io::load_scenario(set_base(), sets);
  } else {
    throw std::invalid_argument("fuzz: unknown target " + target);
  }
}

}  // namespace

const std::vector<std::string>& targets() {
  static const std::vector<std::string> t = {"scenario",     "predict",  "model", "system", "stack", "calibration",
                                             "measurements", "accuracy", "grid",  "set",    "sweep"};
  return t;
}

Outcome run_one(const std::string& target, const uint8_t* data, size_t size) {
  const std::string file = target == "set" || target == "sweep" ? set_base() : stage().put(place_of(target), data, size);
  Outcome o;
  try {
    load(target, file, data, size);
    o.loaded = true;
  } catch (const InputError& e) {
    o.error = e.what();
    // The message must say where: a file (the input or one it references), or the option.
    const bool named = target == "sweep" ? o.error.find("--vary") != std::string::npos || o.error.find("--derive") != std::string::npos
                                         : o.error.find(".json") != std::string::npos || o.error.find("--set") != std::string::npos;
    if (!named) throw InvariantBroken("input error that names no file or option: " + o.error);
  } catch (const std::exception& e) {
    throw InvariantBroken(std::string("escaped as ") + typeid(e).name() + ": " + e.what());
  }
  return o;
}

}  // namespace moeperf::fuzz
