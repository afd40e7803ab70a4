// Loading a scenario and predicting it, as the CLI's `predict` does, with the validation message
// kept instead of thrown: the GUI shows it and keeps the scenario it had.
//
//   LoadResult r = load_and_predict("examples/deepseek-v3/gb300-optimized.json", {"gpus=256"});
//   if (!r.report) show(r.error);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/predict.h"

namespace moeperf::gui {

struct LoadResult {
  std::shared_ptr<const StepReport> report;  // null when the input was rejected
  std::string error;                          // InputError::what() (file: JSON path: expected ...)
};

LoadResult load_and_predict(const std::string& path, const std::vector<std::string>& sets = {});

}  // namespace moeperf::gui
