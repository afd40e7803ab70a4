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
  sub->add_option("--device", f.device, "the GPU whose kernels count (default: the one with the most kernel time)")->check(CLI::NonNegativeNumber);
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
  if (t.host) {
    const io::HostIssue& h = *t.host;
    std::string tids;
    for (int64_t id : h.tids) tids += (tids.empty() ? "" : ", ") + std::to_string(id);
    std::printf("  host: thread%s %s issued %.0f kernel launches and %.0f graph launches per step%s; %.0f host waits (%.3f ms)\n",
                h.tids.size() > 1 ? "s" : "", tids.c_str(), h.launches, h.graph_launches,
                h.steps ? "" : " (no step marked: the whole trace)", h.waits, h.wait_s * 1e3);
    if (h.gaps > 0)
      std::printf("    %.1f us from one launch to the next with no wait between (median; mean %.1f, over %lld gaps); a launch call %.1f us\n",
                  h.median_gap_s * 1e6, h.mean_gap_s * 1e6, static_cast<long long>(h.gaps), h.median_call_s * 1e6);
    if (h.median_call_s > kQueueFullCall)
      std::printf("    launch calls this long mean the launch queue was full, the host far ahead of its GPU: the gaps are the GPU's pace, not the host's cost\n");
  }
  for (const auto& n : t.notes) std::printf("  note: %s\n", n.c_str());
}

HostComparison compare_host(const StepReport& r, const StackOptions& st, const io::MeasuredTrace& t) {
  HostComparison c;
  if (!r.sim || r.busiest_class < 0 || static_cast<size_t>(r.busiest_class) >= r.sim->classes.size()) return c;
  const SimClass& sc = r.sim->classes[static_cast<size_t>(r.busiest_class)];
  c.predicted_s = sc.host_busy.value();
  c.framework_ops = sc.host_ops;
  c.graph_launches = static_cast<double>(sc.graph_launches);
  if (!t.host || t.host->gaps == 0) return c;
  c.traced_s = (t.host->launches + t.host->graph_launches) * t.host->mean_gap_s;
  // Launch calls this long: the queue was full and the gaps are the GPU's pace; no host cost follows.
  c.gpu_paced = t.host->median_call_s > kQueueFullCall;
  if (c.gpu_paced) return c;
  // The host_op_s at which the framework ops would take what the trace's launches took, the
  // graph launches and libraries' loops kept as priced.
  const double rest = c.predicted_s - st.host_op_s * c.framework_ops;
  if (c.framework_ops > 0 && c.traced_s > rest) c.matching_host_op_s = (c.traced_s - rest) / c.framework_ops;
  return c;
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
    if (t.host) {
      const io::HostIssue& h = *t.host;
      j["trace"]["host"] = {{"tids", h.tids}, {"steps", h.steps}, {"launches_per_step", h.launches},
                            {"graph_launches_per_step", h.graph_launches}, {"waits_per_step", h.waits},
                            {"wait_s_per_step", h.wait_s}, {"gaps", h.gaps}, {"median_gap_s", h.median_gap_s},
                            {"mean_gap_s", h.mean_gap_s}, {"median_launch_call_s", h.median_call_s}};
    }
    const HostComparison hc = compare_host(r, s.stack, t);
    j["host"] = {{"predicted_busy_s", hc.predicted_s}, {"framework_ops", hc.framework_ops}, {"graph_launches", hc.graph_launches},
                 {"stack_host_op_s", s.stack.host_op_s}};
    if (hc.traced_s > 0) j["host"]["traced_s"] = hc.traced_s, j["host"]["gpu_paced"] = hc.gpu_paced;
    if (hc.matching_host_op_s > 0) j["host"]["matching_host_op_s"] = hc.matching_host_op_s;
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
  const HostComparison hc = compare_host(r, s.stack, t);
  std::printf("  host, per step: predicted %.3f ms issuing (%.0f framework ops at stack.host_op_s %s us, %.0f graph launches)",
              hc.predicted_s * 1e3, hc.framework_ops, fmt(s.stack.host_op_s * 1e6, 1).c_str(), hc.graph_launches);
  if (hc.traced_s > 0) {
    std::printf("; traced %.3f ms (its launches x their mean gap)\n", hc.traced_s * 1e3);
    if (hc.gpu_paced)
      std::printf("    no host_op_s follows: the launch calls were long (the queue full), so the gaps are the GPU's pace\n");
    else if (hc.matching_host_op_s > 0)
      std::printf("    the traced host time at this prediction's ops: --set stack.host_op_s=%.3g (the rank traced against the busiest class)\n",
                  hc.matching_host_op_s);
  } else {
    std::printf("; the trace has no launch calls to measure the host by\n");
  }
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
