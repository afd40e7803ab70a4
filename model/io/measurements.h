// Reading the executor's measurements JSON (what `moeperf run --out` writes) as calibration samples.
#pragma once

#include <string>
#include <vector>

#include "model/study/calibrate.h"

namespace moeperf::io {

// Compute ops only (kind "gemm" or "memory"); errors name the file and JSON path.
std::vector<Sample> load_measurements(const std::string& path);

// A calibration profile file for `fit`, with the fit's numbers in its "fit" field.
std::string calibration_profile_json(const FitReport& f, const std::vector<std::string>& sources);

}  // namespace moeperf::io
