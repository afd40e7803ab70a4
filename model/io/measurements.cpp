#include "model/io/measurements.h"

#include <nlohmann/json.hpp>

#include "model/io/detail/json_node.h"

namespace moeperf::io {

std::vector<Sample> load_measurements(const std::string& path) {
  const detail::json doc = detail::read_json_file(path);
  const detail::Node root(doc, path, "");
  root.expect_object();
  if (!root.has("kind") || root.at("kind").as_string() != "measurements")
    root.fail("expected a measurements file (\"kind\": \"measurements\", written by moeperf run --out)");
  const detail::Node machine = root.at("machine");
  const double peak = machine.at("gemm_peak_flops_measured").as_positive_number();
  const double bw = machine.at("copy_bandwidth_measured").as_positive_number();
  std::vector<Sample> out;
  const detail::Node ops = root.at("ops");
  ops.expect_object();
  for (auto& [name, v] : ops.raw().items()) {
    const detail::Node op(v, path, "/ops/" + name);
    const std::string kind = op.at("kind").as_string();
    if (kind == "communication") continue;
    Sample s;
    s.name = name;
    s.flops = op.at("flops_per_call").as_number();
    s.bytes = op.at("bytes_per_call").as_number();
    s.seconds = op.at("median_s").as_positive_number();
    s.peak_flops = peak;
    s.bandwidth = bw;
    out.push_back(s);
  }
  return out;
}

std::string calibration_profile_json(const FitReport& f, const std::vector<std::string>& sources) {
  nlohmann::json j;
  j["kind"] = "calibration";
  j["name"] = "fitted by moeperf calibrate";
  j["description"] = "gemm_peak_fraction, hbm_fraction and kernel_launch_s fitted by least squares to measured op times; "
                     "other parameters from the starting profile.";
  for (const ParamDef& d : param_defs()) j["params"][std::string(d.name)] = f.fitted[d.id];
  j["fit"] = {{"measurements", sources},
              {"train_ops", f.train},
              {"held_back_ops", f.held_back},
              {"rms_relative_error_before", {{"train", f.rms_rel_error_before_train}, {"held_back", f.rms_rel_error_before_held}}},
              {"rms_relative_error_after", {{"train", f.rms_rel_error_after_train}, {"held_back", f.rms_rel_error_after_held}}},
              {"notes", f.notes}};
  return j.dump(2);
}

}  // namespace moeperf::io
