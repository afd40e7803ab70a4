#include "gui/models/scenario_loader.h"

#include <utility>

#include "model/error.h"
#include "model/io/errors.h"
#include "model/io/load.h"

namespace moeperf::gui {

LoadResult load_and_predict(const std::string& path, const std::vector<std::string>& sets) {
  LoadResult out;
  try {
    std::vector<io::Override> ov;
    for (const auto& s : sets) ov.push_back(io::parse_override(s, io::kEditOrigin));
    const Scenario s = io::load_scenario(path, ov);
    out.report = std::make_shared<const StepReport>(predict(s, s.calibration));
  } catch (const io::SpecError& e) {
    out.error = e.what();
    out.error_path = e.json_path();
  } catch (const InputError& e) {
    out.error = e.what();
  } catch (const std::exception& e) {
    // A failure that is not the input's (the CLI's exit 1, "failed: ..."): said, never thrown out
    // of a worker thread, where it would end the app and the user's edits with it.
    out.error = std::string("failed: ") + e.what();
  }
  return out;
}

LoadResult with_host_cost(LoadResult r) {
  if (r.report && r.report->scenario) {
    auto x = std::make_shared<StepReport>(*r.report);
    add_host_cost(*x, x->scenario->calibration);
    r.report = std::move(x);
  }
  return r;
}

LoadResult with_studies(LoadResult r) {
  if (r.report) r.studies = std::make_shared<const Studies>(build_studies(*r.report));
  return r;
}

}  // namespace moeperf::gui
