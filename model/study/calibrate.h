// Fitting the cost model's parameters to measured op times (least squares, Eigen inside).
//
// Each measured op is one sample: GEMMs (FLOPs > 0) as t = FLOPs / (peak x gemm_peak_fraction) +
// kernel_launch_s, memory-bound ops as t = bytes / (bandwidth x hbm_fraction) + kernel_launch_s,
// with the peak and bandwidth of the machine that was measured. The model is linear in
// (1/gemm_peak_fraction, 1/hbm_fraction, kernel_launch_s): ordinary least squares on the
// training samples; every fourth sample is held back, and the error before (current profile) and
// after (fitted) is reported on both sets.
//
//   std::vector<Sample> s = ...;                      // from measurements JSON (model/io)
//   FitReport f = fit_compute_params(s, Calibration{});
#pragma once

#include <string>
#include <vector>

#include "model/params.h"

namespace moeperf {

struct Sample {
  std::string name;
  double flops = 0, bytes = 0;     // per call
  double seconds = 0;              // measured (median)
  double peak_flops = 0, bandwidth = 0;  // of the measured machine
};

struct FitReport {
  Calibration fitted;
  int train = 0, held_back = 0;
  double rms_rel_error_before_train = 0, rms_rel_error_after_train = 0;
  double rms_rel_error_before_held = 0, rms_rel_error_after_held = 0;
  std::vector<std::string> notes;
};

// Throws InputError when there are too few samples of a kind to fit its parameter.
FitReport fit_compute_params(const std::vector<Sample>& samples, const Calibration& start);

double predicted_seconds(const Sample& s, const Calibration& c);

}  // namespace moeperf
