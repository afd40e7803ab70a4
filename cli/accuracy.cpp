// moeperf accuracy: the shipped end-to-end cases (examples/accuracy/cases.json: published training
// results with their sources) predicted and compared: published, predicted with its band, error,
// and the mean absolute percentage error. End-to-end results are tests of the model, never fitted.
// `--out` writes each case's stack and measured-over-predicted step ratio ("kind": "end_to_end"):
// the shipped calibration/accuracy/end-to-end.json widens every prediction's band by the cases of
// its stack as configured (name and overrides; else of the stack's name). Predictions here carry the
// band of the parts alone (their own errors would be circular).
// The cases are predicted on --jobs threads (progress on stderr) and printed in the file's order.
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "model/io/parts.h"
#include "model/study/predict.h"

namespace moeperf::cli {
namespace {

double round4(double v) { return io::round_sig(v, 4); }

int cmd_accuracy(const std::string& file, const std::string& format, const std::string& out, int jobs) {
  check_output_path("--out", out, {file});
  const auto cases = io::load_accuracy_cases(file);
  // Every scenario loaded first (a bad one stops the run before any prediction, as before), then
  // the predictions on threads: each is independent and deterministic, so the order of the output
  // and every figure are those of one thread.
  std::vector<Scenario> scenarios;
  for (const io::AccuracyCase& c : cases) {
    Scenario s = io::load_scenario(c.scenario);
    s.calibration.end_to_end.clear();  // the parts' band alone: these cases are what the end-to-end term is made of
    s.calibration.end_to_end_source.clear();
    scenarios.push_back(std::move(s));
  }
  std::vector<std::optional<StepReport>> reports(cases.size());
  {
    Progress bar("accuracy", "cases", cases.size());
    std::mutex mu;
    size_t done = 0;
    std::vector<std::function<void()>> work;
    for (size_t i = 0; i < cases.size(); ++i)
      work.emplace_back([&, i] {
        StepReport r = predict(scenarios[i], scenarios[i].calibration);
        const std::lock_guard<std::mutex> lock(mu);
        reports[i] = std::move(r);
        const size_t d = ++done;
        bar.update(d, d == cases.size());
      });
    run_on_threads(jobs, work);
  }
  nlohmann::ordered_json j, e2e;
  j["cases_file"] = file;
  e2e["kind"] = "end_to_end";
  e2e["description"] =
      "Written by moeperf accuracy --out: each published end-to-end case's software stack and its measured step over "
      "the predicted one (step_ratio > 1: the run was slower than predicted). Tests of the model, never fitted: "
      "predict widens a step's band, in quadrature with the parts' band, by the ratios of the cases of its stack as configured "
      "(name and stack_overrides; else of every case of its stack's name).";
  e2e["cases_file"] = file;
  double sum = 0;
  if (format == "text")
    std::printf("%-58s %-14s %10s %18s %8s\n", "case", "metric", "published", "predicted (band)", "error");
  for (size_t i = 0; i < cases.size(); ++i) {
    const io::AccuracyCase& c = cases[i];
    const Scenario& s = scenarios[i];
    const StepReport& r = *reports[i];
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
    // measured step / predicted step: for a rate, predicted rate / published rate
    const double ratio = c.metric == "step_time_s" ? c.published / v : v / c.published;
    e2e["cases"].push_back({{"name", s.name}, {"scenario", c.scenario}, {"stack", s.stack.name}, {"stack_overrides", s.stack.overrides},
                            {"metric", c.metric},
                            {"published", c.published}, {"predicted", round4(v)}, {"step_ratio", round4(ratio)},
                            {"source", c.source}});
  }
  const double mape = sum / static_cast<double>(cases.size());
  j["mape"] = mape;
  e2e["mape"] = round4(mape);
  if (!out.empty()) write_atomically(out, e2e.dump(2) + "\n");
  if (format == "json") std::cout << j.dump(2) << "\n";
  else std::printf("MAPE over %zu cases: %.1f %%\n", cases.size(), 100 * mape);
  return kExitOk;
}

}  // namespace

Command add_accuracy(CLI::App& app) {
  struct Opts {
    std::string file = "examples/accuracy/cases.json", format = "text", out;
    int jobs = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("accuracy", "Predict the shipped end-to-end cases and compare with the published figures (MAPE)");
  sub->add_option("CASES", o->file, "accuracy cases file (default: examples/accuracy/cases.json)");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--out", o->out,
                  "write each case's stack and measured/predicted step ratio (\"kind\": \"end_to_end\"): the band's end-to-end "
                  "term; the shipped one is calibration/accuracy/end-to-end.json");
  sub->add_option("--jobs", o->jobs, "threads (default: every core)")->check(whole_at_least_one("a thread count"));
  return {sub, [o] { return cmd_accuracy(o->file, o->format, o->out, o->jobs); }};
}

}  // namespace moeperf::cli
