// moeperf scale: per-GPU throughput and scaling efficiency over GPU counts at a fixed per-GPU batch.
#include "cli/commands.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include "model/study/study.h"

namespace moeperf::cli {
namespace {

int cmd_scale(const std::string& file, const std::vector<int64_t>& gpus, const std::string& grow,
              const std::vector<std::string>& sets, const std::string& format) {
  const Scenario s = load_named(file, sets);
  const GrowAxis axis = grow == "dp" ? GrowAxis::dp : grow == "ep" ? GrowAxis::ep : GrowAxis::fsdp;
  const auto points = scale(s, gpus, axis, s.calibration);
  if (format == "json") {
    nlohmann::json j;
    j["points"] = nlohmann::json::array();
    for (const auto& p : points)
      j["points"].push_back({{"gpus", p.gpus}, {"tokens_per_s_per_gpu", p.report.tokens_per_s_per_gpu},
                             {"step_time_s", p.report.step_time.value()}, {"efficiency", p.efficiency},
                             {"model_tflops_per_gpu", p.report.model_tflops_per_gpu},
                             {"fits_in_memory", p.report.memory.fits},
                             {"peak_memory_bytes_per_gpu", p.report.memory.hbm_total.value()}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("%8s %10s %14s %12s %11s %6s\n", "gpus", "step_s", "tokens/s/GPU", "TFLOPS/GPU", "efficiency", "fits");
  for (const auto& p : points)
    std::printf("%8lld %10.3f %14.0f %12.1f %10.1f%% %6s\n", static_cast<long long>(p.gpus), p.report.step_time.value(),
                p.report.tokens_per_s_per_gpu, p.report.model_tflops_per_gpu, 100 * p.efficiency,
                p.report.memory.fits ? "yes" : "NO");
  return kExitOk;
}

}  // namespace

Command add_scale(CLI::App& app) {
  struct Opts {
    std::string file, grow = "fsdp", format = "text";
    std::vector<int64_t> gpus;
    std::vector<std::string> sets;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("scale", "Per-GPU throughput and efficiency over GPU counts at a fixed per-GPU batch");
  sub->add_option("SCENARIO", o->file, "scenario file")->required();
  sub->add_option("--gpus", o->gpus, "GPU counts, e.g. 128,256,512,1024")->delimiter(',')->required()->check(gpu_count());
  sub->add_option("--grow", o->grow, "mesh axis that grows: fsdp, dp or ep")->check(CLI::IsMember({"fsdp", "dp", "ep"}));
  sub->add_option("--set", o->sets, "override a scenario field: PATH=VALUE");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_scale(o->file, o->gpus, o->grow, o->sets, o->format); }};
}

}  // namespace moeperf::cli
