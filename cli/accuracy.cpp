// moeperf accuracy: the shipped end-to-end cases (examples/accuracy/cases.json: published training
// results with their sources) predicted and compared: published, predicted with its band, error,
// and the mean absolute percentage error. End-to-end results are tests of the model, never fitted.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/study/predict.h"

namespace moeperf::cli {
namespace {

int cmd_accuracy(const std::string& file, const std::string& format) {
  const auto cases = io::load_accuracy_cases(file);
  nlohmann::ordered_json j;
  j["cases_file"] = file;
  double sum = 0;
  if (format == "text")
    std::printf("%-58s %-14s %10s %18s %8s\n", "case", "metric", "published", "predicted (band)", "error");
  for (const io::AccuracyCase& c : cases) {
    const Scenario s = io::load_scenario(c.scenario);
    const StepReport r = predict(s, s.calibration);
    double v = r.model_tflops_per_gpu, lo = 0, hi = 0;
    if (c.metric == "tokens_per_s_per_gpu") v = r.tokens_per_s_per_gpu;
    if (c.metric == "step_time_s") {
      v = r.step_time.value();
      lo = v * (1 - r.band), hi = v * (1 + r.band);
    } else {  // a rate: inverse of the step time's band
      lo = v / (1 + r.band), hi = r.band < 1 ? v / (1 - r.band) : INFINITY;
    }
    const double err = v / c.published - 1;
    sum += std::abs(err);
    if (format == "text") {
      char pred[64];
      std::snprintf(pred, sizeof pred, "%.0f (%.0f-%.0f)", v, lo, hi);
      std::printf("%-58s %-14s %10.0f %18s %+7.1f %%\n", s.name.substr(0, 58).c_str(), c.metric.c_str(), c.published, pred, 100 * err);
    }
    j["cases"].push_back({{"scenario", c.scenario}, {"name", s.name}, {"metric", c.metric}, {"published", c.published},
                          {"predicted", v}, {"predicted_low", lo}, {"predicted_high", hi}, {"error", err},
                          {"profile", r.profile}, {"source", c.source}});
  }
  const double mape = sum / static_cast<double>(cases.size());
  j["mape"] = mape;
  if (format == "json") std::cout << j.dump(2) << "\n";
  else std::printf("MAPE over %zu cases: %.1f %%\n", cases.size(), 100 * mape);
  return kExitOk;
}

}  // namespace

Command add_accuracy(CLI::App& app) {
  struct Opts {
    std::string file = "examples/accuracy/cases.json", format = "text";
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("accuracy", "Predict the shipped end-to-end cases and compare with the published figures (MAPE)");
  sub->add_option("CASES", o->file, "accuracy cases file (default: examples/accuracy/cases.json)");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_accuracy(o->file, o->format); }};
}

}  // namespace moeperf::cli
