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

// The rows both sides are summed into: the trace's op classes and the model's categories.
struct Row {
  const char* name;
  std::vector<std::string> trace_classes;
};
const std::vector<Row>& rows() {
  static const std::vector<Row> r{
      {"GEMMs", {"gemm", "grouped_gemm"}},
      {"attention", {"attention.fwd", "attention.bwd"}},
      {"memory-bound kernels", {"memory", "memory.copy"}},
      {"all-gather", {"collective.all_gather"}},
      {"reduce-scatter", {"collective.reduce_scatter"}},
      {"all-reduce", {"collective.all_reduce"}},
      {"all-to-all", {"collective.all_to_all"}},
      {"send/recv", {"collective.send_recv"}},
      {"EP dispatch/combine kernels", {"ep.dispatch", "ep.combine"}},
      {"host copies", {"host.h2d", "host.d2h"}},
  };
  return r;
}

// The row of one of the model's ops.
int model_row(const OpSummary& o, Collective c) {
  switch (o.category) {
    case Category::gemm: return 0;
    case Category::attention: return 1;
    case Category::memory:
    case Category::optimizer: return 2;
    case Category::sync: return -1;
    default: break;
  }
  if (o.ep_kernel) return 8;
  switch (c) {
    case Collective::all_gather: return 3;
    case Collective::reduce_scatter: return 4;
    case Collective::all_reduce: return 5;
    case Collective::all_to_all: return 6;
    case Collective::send_recv: return 7;
    case Collective::d2h:
    case Collective::h2d: return 9;
    case Collective::none: return 2;
  }
  return -1;
}

int cmd_compare_trace(const std::string& scenario, const std::vector<std::string>& sets, const TraceFlags& flags,
                      const std::string& format) {
  const Scenario s = load_named(scenario, sets);
  const io::MeasuredTrace t = read_trace(flags);
  const StepReport r = predict(s, s.calibration);
  std::map<std::string, Collective> coll;
  for (const Op& op : r.graph->classes[static_cast<size_t>(r.busiest_class)].ops) coll.emplace(op.name, op.collective);
  const size_t n = rows().size();
  std::vector<double> predicted(n, 0), measured(n, 0);
  for (const OpSummary& o : r.ops) {
    auto it = coll.find(o.name);
    const int row = model_row(o, it == coll.end() ? Collective::none : it->second);
    if (row >= 0) predicted[static_cast<size_t>(row)] += o.seconds.value();
  }
  for (size_t i = 0; i < n; ++i)
    for (const std::string& c : rows()[i].trace_classes)
      if (auto it = t.classes.find(c); it != t.classes.end()) measured[i] += it->second.seconds;
  double unmapped = 0;
  for (const auto& u : t.unmapped) unmapped += u.seconds;
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
    for (size_t i = 0; i < n; ++i)
      if (predicted[i] > 0 || measured[i] > 0)
        j["classes"].push_back({{"class", rows()[i].name}, {"predicted_s", predicted[i]}, {"measured_s", measured[i]},
                                {"error", measured[i] > 0 ? nlohmann::json(err(predicted[i], measured[i])) : nlohmann::json(nullptr)}});
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
  for (size_t i = 0; i < n; ++i) {
    if (predicted[i] == 0 && measured[i] == 0) continue;
    std::printf("  %-30s %13.3f %13.3f %9s\n", rows()[i].name, predicted[i] * 1e3, measured[i] * 1e3,
                measured[i] > 0 ? (fmt(100 * err(predicted[i], measured[i]), 1) + " %").c_str() : "-");
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
