// Profiles of real training steps (model/io/measured_trace.h): `moeperf compare-trace` sets a
// trace's per-class kernel time beside the prediction of the same scenario; the summary printer
// is shared with `moeperf calibrate --trace`.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/trace.h"
#include "model/study/predict.h"

namespace moeperf::cli {

io::MeasuredTrace read_trace(const TraceFlags& f) {
  const io::KernelPatterns patterns = f.patterns.empty() ? io::builtin_kernel_patterns() : io::load_kernel_patterns(f.patterns);
  io::TraceOptions o;
  o.device = f.device;
  if (!f.step_marker.empty()) o.step_marker = f.step_marker;
  return io::read_measured_trace(f.file, patterns, o);
}

void add_trace_flags(CLI::App* sub, TraceFlags& f) {
  sub->add_option("--patterns", f.patterns, "kernel-name patterns file (default: the built-in calibration/kernels/patterns.json)");
  sub->add_option("--device", f.device, "the GPU whose kernels count (default: the first with kernels)")->check(CLI::NonNegativeNumber);
  sub->add_option("--step-marker", f.step_marker, "regular expression of the annotation/NVTX ranges that are steps (default ^ProfilerStep#[0-9]+$)");
}

void print_trace_summary(const io::MeasuredTrace& t, int unmapped_shown) {
  std::printf("trace %s (%s): %s, device %d; %lld kernels, %.3f ms of kernel time\n", t.file.c_str(), t.format.c_str(),
              t.gpu_name.empty() ? "GPU not named" : t.gpu_name.c_str(), t.device, static_cast<long long>(t.kernels), t.kernel_seconds * 1e3);
  std::printf("  step %.3f ms: %s\n", t.step_s * 1e3, t.step_source.c_str());
  std::printf("  %-26s %9s %14s\n", "op class", "kernels", "ms per step");
  for (const auto& [cls, c] : t.classes) std::printf("  %-26s %9lld %14.3f\n", cls.c_str(), static_cast<long long>(c.kernels), c.seconds * 1e3);
  double unmapped = 0;
  int64_t unmapped_n = 0;
  for (const auto& u : t.unmapped) unmapped += u.seconds, unmapped_n += u.count;
  if (t.unmapped.empty()) {
    std::printf("  every kernel mapped to an op class\n");
  } else {
    std::printf("  unmapped: %lld kernels of %zu names, %.3f ms per step (no pattern matches; --patterns adds some)\n",
                static_cast<long long>(unmapped_n), t.unmapped.size(), unmapped * 1e3);
    int shown = 0;
    for (const auto& u : t.unmapped) {
      if (shown++ == unmapped_shown) {
        std::printf("    ... %zu more\n", t.unmapped.size() - static_cast<size_t>(unmapped_shown));
        break;
      }
      std::printf("    %10.3f ms %6lldx  %s\n", u.seconds * 1e3, static_cast<long long>(u.count), u.name.c_str());
    }
  }
  std::printf("  %zu measurement record%s from kernels with a shape; %lld mapped kernel%s without one (timed only)\n", t.records.size(),
              t.records.size() == 1 ? "" : "s", static_cast<long long>(t.shapeless), t.shapeless == 1 ? "" : "s");
  for (const auto& n : t.notes) std::printf("  note: %s\n", n.c_str());
}

namespace {

int cmd_compare_trace(const std::string& scenario, const std::vector<std::string>& sets, const TraceFlags& flags,
                      const std::string& format) {
  const Scenario s = load_named(scenario, sets);
  const io::MeasuredTrace t = read_trace(flags);
  const StepReport r = predict(s, s.calibration);
  const io::TraceComparison cmp = io::compare_with_trace(r, t);
  const double unmapped = cmp.unmapped_s;
  auto err = [](double p, double m) { return m > 0 ? p / m - 1 : 0.0; };
  const std::string gpu = s.system.gpu().name;
  if (format == "json") {
    nlohmann::json j;
    j["scenario"] = s.name;
    j["trace"] = {{"file", t.file}, {"format", t.format}, {"gpu", t.gpu_name}, {"device", t.device}, {"steps", t.steps},
                  {"step_source", t.step_source}, {"unmapped_s_per_step", unmapped}, {"notes", t.notes}};
    j["predicted_gpu"] = gpu;
    j["profile"] = r.profile;
    j["step"] = {{"predicted_s", r.step_time.value()}, {"measured_s", t.step_s}, {"error", err(r.step_time.value(), t.step_s)}};
    for (const io::TraceRow& x : cmp.rows)
      if (x.predicted_s > 0 || x.measured_s > 0)
        j["classes"].push_back({{"class", x.name}, {"predicted_s", x.predicted_s}, {"measured_s", x.measured_s},
                                {"error", x.measured_s > 0 ? nlohmann::json(err(x.predicted_s, x.measured_s)) : nlohmann::json(nullptr)}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  print_trace_summary(t, 10);
  std::printf("\npredicted: %s on %d GPUs of %s (profile %s); measured: %s\n", s.name.c_str(), static_cast<int>(s.gpus), gpu.c_str(),
              r.profile.c_str(), t.gpu_name.empty() ? "GPU not named" : t.gpu_name.c_str());
  if (!t.gpu_name.empty() && t.gpu_name.find(gpu) == std::string::npos && gpu.find(t.gpu_name) == std::string::npos)
    std::printf("  note: the trace's GPU and the scenario's differ by name: check that they are the same part\n");
  std::printf("  per step, kernel time of the predicted busiest rank class vs the traced device\n");
  std::printf("  %-30s %13s %13s %9s\n", "class", "predicted ms", "measured ms", "error");
  for (const io::TraceRow& x : cmp.rows) {
    if (x.predicted_s == 0 && x.measured_s == 0) continue;
    std::printf("  %-30s %13.3f %13.3f %9s\n", x.name.c_str(), x.predicted_s * 1e3, x.measured_s * 1e3,
                x.measured_s > 0 ? (fmt(100 * err(x.predicted_s, x.measured_s), 1) + " %").c_str() : "-");
  }
  if (unmapped > 0) std::printf("  %-30s %13s %13.3f\n", "unmapped kernels", "-", unmapped * 1e3);
  std::printf("  %-30s %13.3f %13.3f %9s\n", "step", r.step_time.value() * 1e3, t.step_s * 1e3,
              (fmt(100 * err(r.step_time.value(), t.step_s), 1) + " %").c_str());
  return kExitOk;
}

}  // namespace

Command add_compare_trace(CLI::App& app) {
  struct Opts {
    std::string scenario, format = "text";
    std::vector<std::string> sets;
    TraceFlags trace;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("compare-trace",
                                 "Predicted vs measured per op class and for the step: a scenario beside a profile of its real training step "
                                 "(PyTorch profiler JSON or Nsight Systems SQLite export)");
  sub->add_option("SCENARIO", o->scenario, "scenario file of the traced job")->required();
  sub->add_option("TRACE", o->trace.file, "Kineto Chrome-trace JSON, or nsys export --type sqlite file")->required();
  sub->add_option("--set", o->sets, "override a scenario field: PATH=VALUE (repeatable)");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  add_trace_flags(sub, o->trace);
  return {sub, [o] { return cmd_compare_trace(o->scenario, o->sets, o->trace, o->format); }};
}

}  // namespace moeperf::cli
