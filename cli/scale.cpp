// moeperf scale: per-GPU throughput and scaling efficiency over GPU counts at a fixed per-GPU or
// global batch, and what each point lost against the first, per mechanism (the waterfall of scale).
#include "cli/commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include "model/study/study.h"

namespace moeperf::cli {
namespace {

int cmd_scale(const std::string& file, const std::vector<int64_t>& gpus, const std::string& grow,
              const std::string& batch, const std::vector<std::string>& sets, const std::string& format) {
  const Scenario s = load_named(file, sets);
  const GrowAxis axis = grow == "dp" ? GrowAxis::dp : grow == "ep" ? GrowAxis::ep : GrowAxis::fsdp;
  const ScaleBatch b = batch == "global" ? ScaleBatch::global : ScaleBatch::per_gpu;
  const auto points = scale(s, gpus, axis, s.calibration, b, [&](const Scenario& x) { io::check_scenario(x, file); });
  if (format == "json") {
    nlohmann::json j;
    j["batch"] = batch;
    j["points"] = nlohmann::json::array();
    for (const auto& p : points) {
      nlohmann::json terms, lost;
      for (const auto& [k, v] : p.terms) terms[k] = v;
      for (const auto& [k, v] : p.lost) lost[k] = v;
      j["points"].push_back({{"gpus", p.gpus}, {"tokens_per_s_per_gpu", p.report.tokens_per_s_per_gpu},
                             {"step_time_s", p.report.step_time.value()}, {"efficiency", p.efficiency},
                             {"model_tflops_per_gpu", p.report.model_tflops_per_gpu},
                             {"global_batch", p.report.scenario->batch.global_batch},
                             {"micro_batches", p.report.scenario->micro_batches()},
                             {"fits_in_memory", p.report.memory.fits},
                             {"peak_memory_bytes_per_gpu", p.report.memory.hbm_total.value()},
                             {"ideal_step_time_s", p.ideal_step_s}, {"terms_s", terms}, {"lost_s", lost}});
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%8s %10s %14s %12s %11s %6s  %s\n", "gpus", "step_s", "tokens/s/GPU", "TFLOPS/GPU", "efficiency", "fits",
              "lost against the first point, share of this step");
  for (const auto& p : points) {
    // The terms that moved, largest first (positive: this point spends more on it than ideal).
    std::vector<std::pair<std::string, double>> moved;
    const double step = p.report.step_time.value();
    for (const auto& [k, v] : p.lost)
      if (std::abs(v) >= 0.001 * step) moved.emplace_back(k, v);
    std::sort(moved.begin(), moved.end(), [](const auto& x, const auto& y) { return std::abs(x.second) > std::abs(y.second); });
    std::string why;
    for (const auto& [k, v] : moved) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %+.1f%%", why.empty() ? "" : ", ", k.c_str(), 100 * v / step);
      why += buf;
    }
    if (&p == &points.front()) why = "(the reference)";
    std::printf("%8lld %10.3f %14.0f %12.1f %10.1f%% %6s  %s\n", static_cast<long long>(p.gpus), step,
                p.report.tokens_per_s_per_gpu, p.report.model_tflops_per_gpu, 100 * p.efficiency,
                p.report.memory.fits ? "yes" : "NO", why.c_str());
  }
  std::printf("batch: %s; efficiency = tokens/s/GPU over the first point's; a term's loss is its time minus the first "
              "point's scaled to this point's tokens per GPU\n",
              b == ScaleBatch::global ? "fixed global batch (strong scaling)" : "fixed per-GPU batch (weak scaling)");
  return kExitOk;
}

}  // namespace

Command add_scale(CLI::App& app) {
  struct Opts {
    std::string file, grow = "fsdp", batch = "per-gpu", format = "text";
    std::vector<int64_t> gpus;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("scale", "Per-GPU throughput and efficiency over GPU counts, and what each point lost to which mechanism");
  sub->add_option("SCENARIO", o->file, "scenario file")->required();
  sub->add_option("--gpus", o->gpus, "GPU counts, e.g. 128,256,512,1024")->delimiter(',')->required()->check(gpu_count());
  sub->add_option("--grow", o->grow, "mesh axis that grows: fsdp, dp or ep")->check(CLI::IsMember({"fsdp", "dp", "ep"}));
  sub->add_option("--batch", o->batch, "per-gpu (weak scaling, the global batch grows) or global (strong scaling, fixed)")
      ->check(CLI::IsMember({"per-gpu", "global"}));
  sub->add_option("--set", o->sets, "override a scenario field: PATH=VALUE");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_scale(o->file, o->gpus, o->grow, o->batch, o->sets, o->format); }};
}

}  // namespace moeperf::cli
