// Loading a scenario and predicting it, as the CLI's `predict` does, with the validation message
// kept instead of thrown: the GUI shows it and keeps the scenario it had.
//
//   LoadResult r = load_and_predict("examples/deepseek-v3/gb300-optimized.json", {"gpus=256"});
//   if (!r.report) show(r.error);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gui/models/study_data.h"
#include "model/study/predict.h"

namespace moeperf::gui {

struct LoadResult {
  std::shared_ptr<const StepReport> report;  // null when the input was rejected
  std::string error;                          // InputError::what() (file: JSON path: expected ...)
  std::string error_path;                     // SpecError::json_path() ("/parallelism/ep"), "" otherwise
  std::shared_ptr<const Studies> studies;     // waterfall and scaling, once with_studies() ran
};

LoadResult load_and_predict(const std::string& path, const std::vector<std::string>& sets = {});
// The same result with what the host costs the step (add_host_cost: a second simulation, where the
// host spent anything), for the summary's host lines.
LoadResult with_host_cost(LoadResult r);
// The same result with build_studies() of its report (the waterfall and scaling views' data).
LoadResult with_studies(LoadResult r);

}  // namespace moeperf::gui
