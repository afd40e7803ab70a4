// moeperf calibrate: the compute parameters fitted to measured op times (moeperf run --out).
#include "cli/commands.h"

#include <cstdio>
#include "model/io/measurements.h"
#include "model/study/calibrate.h"

namespace moeperf::cli {
namespace {

int cmd_calibrate(const std::vector<std::string>& files, const std::string& profile, const std::string& out) {
  check_output_path("--out", out);
  Calibration start;
  if (!profile.empty()) {
    start = io::load_calibration(profile);
  }
  std::vector<Sample> samples;
  for (const auto& f : files) {
    const auto s = io::load_measurements(f);
    samples.insert(samples.end(), s.begin(), s.end());
  }
  const FitReport fit = fit_compute_params(samples, start);
  std::printf("calibrate: %zu measured compute ops (%d fitted, %d held back) from %zu file%s\n", samples.size(), fit.train,
              fit.held_back, files.size(), files.size() > 1 ? "s" : "");
  for (Param p : {Param::gemm_peak_fraction, Param::hbm_fraction, Param::kernel_launch_s})
    std::printf("  %-20s %12.6g -> %12.6g\n", std::string(param_def(p).name).c_str(), start[p], fit.fitted[p]);
  std::printf("  RMS relative error    train %.1f %% -> %.1f %%, held back %.1f %% -> %.1f %%\n",
              100 * fit.rms_rel_error_before_train, 100 * fit.rms_rel_error_after_train, 100 * fit.rms_rel_error_before_held,
              100 * fit.rms_rel_error_after_held);
  for (const auto& n : fit.notes) std::printf("  note: %s\n", n.c_str());
  write_atomically(out, io::calibration_profile_json(fit, files) + "\n");
  std::printf("  profile written to %s\n", out.c_str());
  return kExitOk;
}

}  // namespace

Command add_calibrate(CLI::App& app) {
  struct Opts {
    std::vector<std::string> files;
    std::string profile, out;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("calibrate", "Fit the cost model's compute parameters to measured op times (moeperf run --out)");
  sub->add_option("MEASUREMENTS", o->files, "measurements JSON files")->required();
  sub->add_option("--profile", o->profile, "starting calibration profile (default: every parameter at its default)");
  sub->add_option("--out", o->out, "fitted profile to write")->required();
  return {sub, [o] { return cmd_calibrate(o->files, o->profile, o->out); }};
}

}  // namespace moeperf::cli
