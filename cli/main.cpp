// moeperf: the command-line front end. Exit codes: 0 ok, 1 the work failed, 2 bad input.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/error.h"
#include "model/io/dot.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/measurements.h"
#include "model/io/scenario_schema.h"
#include "model/io/report_io.h"
#include "model/io/trace.h"
#include "model/io/units_parse.h"
#include "model/predict.h"
#include "model/study.h"
#include "model/collective.h"
#ifdef MOEPERF_HAVE_EXECUTOR
#include "executor/run.h"
#ifdef MOEPERF_HAVE_NCCL
#include "executor/comm_nccl.h"
#endif
#endif
#include "model/topology.h"

namespace {

using namespace moeperf;
constexpr int kExitOk = 0, kExitFailed = 1, kExitBadInput = 2;

// An output file named on the command line, checked before any work: a directory, or a folder
// that does not exist, is bad input (exit 2), not a failure after the prediction ran.
void check_output_path(const char* flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw InputError(std::string(flag) + " " + path + ": is a directory; expected a file name to write");
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw InputError(std::string(flag) + " " + path + ": the folder " + parent.string() + " does not exist");
}

// Writes a file only once its whole content is known: a temporary beside it, then a rename. On
// any failure the temporary is removed: nothing half-written stays behind.
void write_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  try {
    {
      std::ofstream out(tmp, std::ios::binary);
      if (!out) throw std::runtime_error("cannot write " + path);
      out << content;
      if (!out) throw std::runtime_error("cannot write " + path);
    }
    std::filesystem::rename(tmp, path);
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

// `--set` overrides are part of what was simulated: the scenario's name says so (unless the
// overrides set the name itself).
void name_overrides(Scenario& s, const std::vector<std::string>& sets) {
  std::string shown;
  for (const std::string& x : sets) {
    if (x.rfind("name=", 0) == 0) return;
    shown += (shown.empty() ? "" : ", ") + x;
  }
  if (!shown.empty()) s.name += " [--set " + shown + "]";
}

Scenario load_named(const std::string& file, const std::vector<std::string>& sets);

std::string fmt(double v, int prec = 1) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

int cmd_topo(const std::string& file, int64_t gpus_opt, const std::string& dot, const std::string& format) {
  check_output_path("--dot", dot);
  const SystemSpec sys = io::load_system(file);
  const int64_t gpus = gpus_opt > 0 ? gpus_opt : sys.default_gpus;
  const auto t0 = std::chrono::steady_clock::now();
  const Topology t = Topology::build(sys, gpus);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const GpuSpec& g = sys.gpu();
  if (!dot.empty()) {
    std::ostringstream s;
    io::write_dot(t, s);
    write_atomically(dot, s.str());
  }
  if (format == "json") {
    nlohmann::json j;
    j["system"] = sys.name;
    j["file"] = file;
    j["gpu"] = g.name;
    j["gpus"] = t.gpus();
    j["nvlink_domains"] = t.domains();
    j["gpus_per_domain"] = t.gpus_per_domain();
    for (int k = 0; k < kVertexKinds; ++k) j["vertices"][to_string(static_cast<VertexKind>(k))] = t.count(static_cast<VertexKind>(k));
    j["links"] = t.link_count();
    j["fabric_tiers"] = t.fabric_tiers();
    j["nvlink_bytes_per_s_per_gpu_per_direction"] = t.nvlink_bandwidth_per_gpu().value();
    j["scaleout_bytes_per_s_per_gpu_per_direction"] = t.scaleout_bandwidth_per_gpu().value();
    j["nvlink_domain_bisection_bytes_per_s"] = t.nvlink_domain_bisection().value();
    j["scaleout_bisection_bytes_per_s"] = t.scaleout_bisection().value();
    j["graph_build_s"] = build_s;
    j["graph_bytes"] = t.memory_bytes();
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "system        " << sys.name << "  (" << file << ")\n";
  std::cout << "GPUs          " << t.gpus() << " x " << g.name << " in " << t.domains() << " NVLink domain"
            << (t.domains() > 1 ? "s" : "") << " of " << t.gpus_per_domain() << " (" << sys.domain.name << ", "
            << sys.domain.gpus() << " GPUs each)\n";
  std::cout << "switches      NVLink " << t.count(VertexKind::nvswitch) << " (" << sys.domain.switch_chips
            << " per domain)";
  if (t.fabric_tiers() > 0)
    std::cout << ", leaf " << t.count(VertexKind::leaf) << ", spine " << t.count(VertexKind::spine) << ", core "
              << t.count(VertexKind::core) << " (" << t.fabric_tiers() << "-tier " << sys.fabric->sw.name << ")";
  std::cout << "\n";
  std::cout << "other         CPUs " << t.count(VertexKind::cpu) << ", NICs " << t.count(VertexKind::nic) << "\n";
  std::cout << "NVLink/GPU    " << fmt(in_gigabytes_per_second(t.nvlink_bandwidth_per_gpu()), 0)
            << " GB/s per direction (" << g.nvlink_links << " links x "
            << fmt(in_gigabytes_per_second(g.nvlink_bandwidth_per_link), 0) << " GB/s)\n";
  if (t.fabric_tiers() > 0)
    std::cout << "scale-out/GPU " << fmt(in_gigabits_per_second(t.scaleout_bandwidth_per_gpu()), 0) << " Gb/s = "
              << fmt(in_gigabytes_per_second(t.scaleout_bandwidth_per_gpu()), 0) << " GB/s per direction ("
              << sys.domain.tray.nic.name << ")\n";
  else
    std::cout << "scale-out/GPU none (no fabric)\n";
  std::cout << "bisection     NVLink domain " << fmt(in_terabytes_per_second(t.nvlink_domain_bisection()), 2)
            << " TB/s per direction";
  if (t.fabric_tiers() > 0)
    std::cout << "; scale-out fabric " << fmt(in_terabytes_per_second(t.scaleout_bisection()), 2)
              << " TB/s per direction";
  std::cout << "\n";
  std::cout << "graph         " << t.vertex_count() << " vertices, " << t.link_count() << " directed links, "
            << fmt(static_cast<double>(t.memory_bytes()) / 1e6, 1) << " MB, built in " << fmt(build_s * 1e3, 1)
            << " ms\n";
  if (!dot.empty()) std::cout << "dot           written to " << dot << "\n";
  return kExitOk;
}

std::vector<io::Override> overrides(const std::vector<std::string>& sets) {
  std::vector<io::Override> out;
  for (const auto& s : sets) out.push_back(io::parse_override(s));
  return out;
}

Scenario load_named(const std::string& file, const std::vector<std::string>& sets) {
  Scenario s = io::load_scenario(file, overrides(sets));
  name_overrides(s, sets);
  return s;
}

int cmd_predict(const std::string& file, const std::vector<std::string>& sets, const std::string& format, bool serial,
                const std::string& trace, int top) {
  check_output_path("--trace", trace);
  const Scenario s = load_named(file, sets);
  PredictOptions opt;
  opt.simulate = !serial;
  const StepReport r = predict(s, s.calibration, opt);
  if (!trace.empty()) {
    std::ostringstream t;
    io::write_chrome_trace(r, t);
    write_atomically(trace, t.str());
  }
  if (format == "json") {
    std::cout << io::report_json(r) << "\n";
  } else if (format == "csv") {
    io::write_report_csv(r, std::cout);
  } else {
    io::write_report_text(r, std::cout, true, top);
  }
  return kExitOk;
}

void print_waterfall(const std::vector<WaterfallStep>& steps, const std::string& format,
                     const std::vector<std::string>& notes = {}) {
  if (format == "json") {
    nlohmann::json j;
    j["notes"] = notes;
    for (const auto& st : steps)
      j["steps"].push_back({{"name", st.name}, {"changes", st.changes}, {"step_time_s", st.report.step_time.value()},
                            {"tokens_per_s_per_gpu", st.report.tokens_per_s_per_gpu},
                            {"model_tflops_per_gpu", st.report.model_tflops_per_gpu},
                            {"comm_fraction_of_kernel_time", st.report.comm_fraction_of_kernel_time},
                            {"exposed_comm_fraction", st.report.exposed_comm_fraction},
                            {"fits_in_memory", st.report.memory.fits}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("%-26s %10s %10s %9s %8s %8s %7s  %s\n", "step", "step_s", "TFLOPS/GPU", "gain_s", "x_start", "comm%",
              "fits", "switched");
  const double t0 = steps.front().report.step_time.value();
  double prev = t0;
  for (const auto& st : steps) {
    const double t = st.report.step_time.value();
    std::printf("%-26s %10.3f %10.1f %9.3f %8.2f %8.1f %7s  %s\n", st.name.c_str(), t, st.report.model_tflops_per_gpu,
                prev - t, t0 / t, 100 * st.report.comm_fraction_of_kernel_time, st.report.memory.fits ? "yes" : "NO",
                st.changes.c_str());
    prev = t;
  }
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
}

int cmd_compare(const std::vector<std::string>& files, bool ablate, const std::vector<std::string>& sets,
                const std::string& format) {
  if (ablate) {
    if (files.size() != 1) throw InputError("compare --ablate takes one scenario");
    const Scenario s = load_named(files[0], sets);
    print_waterfall(waterfall(baseline_of(s), s, s.calibration), format);
    return kExitOk;
  }
  if (files.size() != 2) throw InputError("compare takes two scenarios (or one with --ablate)");
  const Scenario a = load_named(files[0], sets);
  const Scenario b = load_named(files[1], sets);
  print_waterfall(waterfall(a, b, b.calibration), format, comparison_notes(a, b));
  return kExitOk;
}

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

int cmd_collective(const std::string& file, const std::string& op_name, const std::string& bytes_text, int64_t gpus_opt,
                   const std::string& algo, const std::string& format) {
  const SystemSpec sys = io::load_system(file);
  const int64_t gpus = gpus_opt > 0 ? gpus_opt : sys.default_gpus;
  const Topology t = Topology::build(sys, gpus);
  const Bytes size = io::parse_bytes_arg(bytes_text);
  const Collective c = op_name == "all_reduce" ? Collective::all_reduce
                       : op_name == "all_gather" ? Collective::all_gather
                       : op_name == "reduce_scatter" ? Collective::reduce_scatter
                                                     : Collective::all_to_all;
  std::vector<int64_t> members(static_cast<size_t>(gpus));
  for (int64_t i = 0; i < gpus; ++i) members[static_cast<size_t>(i)] = i;
  const Calibration cal;
  // nccl-tests semantics: all-to-all "size" is each rank's whole send buffer, 1/n of it to each
  // rank including itself, so (n-1)/n of it leaves the GPU.
  const double n = static_cast<double>(gpus);
  const Bytes moved = c == Collective::all_to_all ? size * ((n - 1) / n) : size;
  // The fastest algorithm at this size (as NCCL's tuner picks), unless --algo names one.
  const std::vector<CollectiveCost> algos = collective_algorithms(c, members, t, cal);
  const CollectiveCost* chosen = nullptr;
  std::string offered;
  for (const CollectiveCost& a : algos) {
    offered += std::string(offered.empty() ? "" : ", ") + a.algorithm;
    if (algo == "auto" ? (!chosen || a.time(moved) < chosen->time(moved)) : algo == a.algorithm) chosen = &a;
  }
  if (!chosen)
    throw InputError("--algo " + algo + " does not apply to " + op_name + " on this group; offered: " + offered);
  const CollectiveCost& cost = *chosen;
  const Seconds time = cost.time(moved);
  const double algbw = size.value() / time.value();
  const double busbw = algbw * bus_factor(c, gpus);
  if (format == "json") {
    nlohmann::json j{{"op", op_name}, {"gpus", gpus}, {"bytes", size.value()}, {"time_s", time.value()},
                     {"algbw_bytes_per_s", algbw}, {"busbw_bytes_per_s", busbw}, {"algorithm", cost.algorithm},
                     {"latency_s", cost.latency.value()}};
    for (const CollectiveCost& a : algos) j["algorithms"][a.algorithm] = a.time(moved).value();
    for (int r = 0; r < kResourceCount; ++r)
      j["seconds_per_byte"][to_string(static_cast<Resource>(r))] = cost.s_per_byte[static_cast<size_t>(r)];
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("# %s on %lld GPUs of %s (%s), nccl-tests conventions\n", op_name.c_str(), static_cast<long long>(gpus),
              sys.name.c_str(), cost.algorithm);
  std::printf("%14s %12s %12s %12s\n", "size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  std::printf("%14.0f %12.1f %12.2f %12.2f\n", size.value(), time.value() * 1e6, algbw / 1e9, busbw / 1e9);
  std::printf("# bottleneck per byte:");
  for (int r = 0; r < kResourceCount; ++r)
    if (cost.s_per_byte[static_cast<size_t>(r)] > 0)
      std::printf(" %s %.3g s/GB", to_string(static_cast<Resource>(r)), cost.s_per_byte[static_cast<size_t>(r)] * 1e9);
  std::printf("; latency %.1f us\n", cost.latency.value() * 1e6);
  if (algos.size() > 1) {
    std::printf("# algorithms at this size:");
    for (const CollectiveCost& a : algos) std::printf(" %s %.1f us", a.algorithm, a.time(moved).value() * 1e6);
    std::printf("\n");
  }
  return kExitOk;
}

int cmd_params(const std::string& format) {
  if (format == "json") {
    nlohmann::json j;
    for (const ParamDef& d : param_defs())
      j.push_back({{"name", d.name}, {"default", d.value}, {"unit", d.unit}, {"min", d.min}, {"max", d.max},
                   {"reasoning", d.reasoning}});
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  for (const ParamDef& d : param_defs())
    std::cout << d.name << " = " << d.value << " " << d.unit << "  [" << d.min << ", " << d.max << "]\n    "
              << d.reasoning << "\n";
  return kExitOk;
}

#ifdef MOEPERF_HAVE_EXECUTOR
int cmd_run(const std::string& file, const std::vector<std::string>& sets, exec::RunOptions o, int* argc, char*** argv) {
  // Fault injection for tests: MOEPERF_FAULT=RANK:STEP[:hang].
  if (const char* f = std::getenv("MOEPERF_FAULT")) {
    std::string v = f;
    o.fault_rank = std::atoi(v.c_str());
    o.fault_step = std::atoi(v.substr(v.find(':') + 1).c_str());
    o.fault_hang = v.find(":hang") != std::string::npos;
  }
  auto comm = exec::make_communicator(argc, argv);
  Scenario s;
  try {
    check_output_path("--out", o.out);
    s = io::load_scenario(file, overrides(sets));
  } catch (const InputError& e) {
    if (comm->rank() == 0) std::cerr << "moeperf: " << e.what() << "\n";
    comm->barrier();
    return kExitBadInput;
  }
  o.scenario_file = file;
  // The CUDA backend over more than one MPI rank: dispatch, combine and the count exchange go
  // through NCCL on device buffers (made before the backend, which then uses the rank's GPU).
  std::unique_ptr<exec::DeviceExchange> dx;
#ifdef MOEPERF_HAVE_NCCL
  if (o.backend == "cuda" && comm->size() > 1 && comm->name() == "mpi") {
    try {
      dx = exec::make_nccl_exchange(o.timeout_s);
    } catch (const std::exception& e) {
      comm->abort(std::string("--backend cuda: the NCCL communicator: ") + e.what(), kExitFailed);
    }
  }
#endif
  exec::RunResult r;
  try {
    r = exec::run_scenario(s, o, *comm, dx.get());
  } catch (const InputError& e) {
    if (comm->rank() == 0) std::cerr << "moeperf: " << file << ": " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    comm->abort(e.what(), kExitFailed);  // ends every rank, never a hang
  }
  if (comm->rank() != 0) return kExitOk;
  const auto& d = r.dims;
  std::printf("moeperf run: %s\n  backend %s, communicator %s, %d rank%s (EP group), %d step%s after %d warm-up, %d layer%s\n",
              s.name.c_str(), o.backend.c_str(), r.communicator.c_str(), comm->size(), comm->size() > 1 ? "s" : "", o.steps,
              o.steps > 1 ? "s" : "", o.warmup, o.layers, o.layers > 1 ? "s" : "");
  std::printf("  per rank: %lld tokens, hidden %lld, expert FFN %lld, %lld experts top-%d%s\n", static_cast<long long>(d.tokens),
              static_cast<long long>(d.hidden), static_cast<long long>(d.ffn), static_cast<long long>(d.experts), d.top_k,
              o.scale != 1.0 ? " (scaled down: see notes)" : "");
  std::printf("  this machine: GEMM %.1f GFLOP/s (measured: %s), copy %.1f GB/s\n", r.gemm_peak_flops / 1e9, r.gemm_peak_method.c_str(),
              r.copy_bandwidth / 1e9);
  std::printf("  exchanges: %s\n", r.communicator_detail.c_str());
  std::printf("  %-24s %6s %11s %11s %12s %10s\n", "op", "calls", "median_ms", "model_ms", "GFLOP/s", "of_peak");
  for (const auto& [name, st] : r.ops) {
    std::vector<double> v = st.seconds;
    std::sort(v.begin(), v.end());
    const double med = v.empty() ? 0 : v[v.size() / 2];
    if (st.flops > 0)
      std::printf("  %-24s %6lld %11.3f %11.3f %12.1f %9.0f%%\n", name.c_str(), static_cast<long long>(st.calls), med * 1e3,
                  st.predicted_s * 1e3, st.flops / med / 1e9, 100 * st.flops / med / r.gemm_peak_flops);
    else
      std::printf("  %-24s %6lld %11.3f %11.3f\n", name.c_str(), static_cast<long long>(st.calls), med * 1e3, st.predicted_s * 1e3);
  }
  int zero = 0;
  for (double c : r.expert_rows) zero += c == 0;
  std::printf("  experts with no tokens: %d of %zu\n", zero, r.expert_rows.size());
  for (const auto& g : r.gates) std::printf("  gate ok: %s\n", g.c_str());
  if (!r.notes.empty()) std::printf("  notes: %s\n", r.notes.c_str());
  if (!o.out.empty()) {
    write_atomically(o.out, exec::measurements_json(s, o, r, *comm) + "\n");
    std::printf("  measurements written to %s\n", o.out.c_str());
  }
  return kExitOk;
}
#endif

int cmd_calibrate(const std::vector<std::string>& files, const std::string& profile, const std::string& out) {
  check_output_path("--out", out);
  Calibration start;
  if (!profile.empty()) {
    start = io::load_calibration(profile);
  }
  std::vector<Sample> samples;
  for (const auto& f : files) {
    const auto s = io::load_measurements(f);
    samples.insert(samples.end(), s.begin(), s.end());
  }
  const FitReport fit = fit_compute_params(samples, start);
  std::printf("calibrate: %zu measured compute ops (%d fitted, %d held back) from %zu file%s\n", samples.size(), fit.train,
              fit.held_back, files.size(), files.size() > 1 ? "s" : "");
  for (Param p : {Param::gemm_peak_fraction, Param::hbm_fraction, Param::kernel_launch_s})
    std::printf("  %-20s %12.6g -> %12.6g\n", std::string(param_def(p).name).c_str(), start[p], fit.fitted[p]);
  std::printf("  RMS relative error    train %.1f %% -> %.1f %%, held back %.1f %% -> %.1f %%\n",
              100 * fit.rms_rel_error_before_train, 100 * fit.rms_rel_error_after_train, 100 * fit.rms_rel_error_before_held,
              100 * fit.rms_rel_error_after_held);
  for (const auto& n : fit.notes) std::printf("  note: %s\n", n.c_str());
  write_atomically(out, io::calibration_profile_json(fit, files) + "\n");
  std::printf("  profile written to %s\n", out.c_str());
  return kExitOk;
}

int cmd_validate(const std::vector<std::string>& files) {
  int bad = 0;
  for (const std::string& f : files) {
    try {
      const io::Validated v = io::validate_file(f);
      std::cout << "ok     " << f << "  [" << v.kind << "] " << v.summary << "\n";
    } catch (const InputError& e) {
      std::cerr << "error  " << e.what() << "\n";
      ++bad;
    }
  }
  if (bad) std::cerr << bad << " of " << files.size() << " file" << (files.size() > 1 ? "s" : "") << " failed\n";
  return bad ? kExitBadInput : kExitOk;
}

}  // namespace

// Counts and positive numbers, said plainly (CLI11's PositiveNumber prints a 300-digit range).
CLI::Validator whole_at_least(long long min, const std::string& what) {
  return CLI::Validator(
      [what, min](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= min) return {};
        } catch (const std::exception&) {
        }
        return "expected " + what + " (a whole number >= " + std::to_string(min) + "), got " + v;
      },
      what + " >= " + std::to_string(min));
}
CLI::Validator whole_at_least_one(const std::string& what) { return whole_at_least(1, what); }
CLI::Validator positive_number(const std::string& what) {
  return CLI::Validator(
      [what](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const double x = std::stod(v, &used);
          if (used == v.size() && x > 0 && std::isfinite(x)) return {};
        } catch (const std::exception&) {
        }
        return "expected " + what + " (a number > 0), got " + v;
      },
      what + " > 0");
}
const CLI::Validator kGpuCount = whole_at_least_one("a GPU count");

int main(int argc, char** argv) {
  CLI::App app{"moeperf: predict, explain and measure dropless-MoE training speed on GPU clusters"};
  app.set_version_flag("--version", "moeperf 0.1.0");
  app.require_subcommand(1);

  std::string topo_file, topo_dot, topo_format = "text";
  int64_t topo_gpus = 0;
  auto* topo = app.add_subcommand("topo", "Summarize a system: GPUs, switches by tier, per-GPU and bisection bandwidth");
  topo->add_option("SYSTEM", topo_file, "system file, e.g. topologies/gb300-nvl72.json")->required();
  topo->add_option("--gpus", topo_gpus, "GPU count (default: the system file's \"gpus\")")->check(kGpuCount);
  topo->add_option("--dot", topo_dot, "also write the graph in Graphviz format to this file");
  topo->add_option("--format", topo_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string predict_file, predict_format = "text";
  std::vector<std::string> predict_sets;
  bool predict_serial = false;
  std::string predict_trace;
  auto* predict_cmd = app.add_subcommand("predict", "Predict one training step: time, tokens/s/GPU, TFLOPS/GPU, memory, per-op breakdown");
  predict_cmd->add_option("SCENARIO", predict_file, "scenario file, e.g. examples/deepseek-v3/gb300-optimized.json")->required();
  predict_cmd->add_option("--set", predict_sets, "override a scenario field: PATH=VALUE (repeatable), e.g. parallelism.ep=16");
  predict_cmd->add_option("--format", predict_format, "text, json or csv")->check(CLI::IsMember({"text", "json", "csv"}));
  predict_cmd->add_flag("--serial", predict_serial, "the sum of op times only: every op back to back on one queue, no overlap, no pipeline waits");
  predict_cmd->add_option("--trace", predict_trace, "write the simulated step as Chrome-trace JSON (Perfetto, HTA)");
  int predict_top = 0;
  predict_cmd->add_option("--top", predict_top, "text: show only the N ops with the most kernel seconds (default: all)")
      ->check(whole_at_least_one("an op count"));

  std::vector<std::string> compare_files, compare_sets;
  bool compare_ablate = false;
  std::string compare_format = "text";
  auto* compare_cmd = app.add_subcommand("compare", "Waterfall between two scenarios, or of one scenario's stack options (--ablate)");
  compare_cmd->add_option("SCENARIOS", compare_files, "A B, or S with --ablate")->required();
  compare_cmd->add_flag("--ablate", compare_ablate, "switch the stack options on one by one from everything off, in the post's order");
  compare_cmd->add_option("--set", compare_sets, "override a field of every scenario: PATH=VALUE");
  compare_cmd->add_option("--format", compare_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string scale_file, scale_grow = "fsdp", scale_format = "text";
  std::vector<int64_t> scale_gpus;
  std::vector<std::string> scale_sets;
  auto* scale_cmd = app.add_subcommand("scale", "Per-GPU throughput and efficiency over GPU counts at a fixed per-GPU batch");
  scale_cmd->add_option("SCENARIO", scale_file, "scenario file")->required();
  scale_cmd->add_option("--gpus", scale_gpus, "GPU counts, e.g. 128,256,512,1024")->delimiter(',')->required()->check(kGpuCount);
  scale_cmd->add_option("--grow", scale_grow, "mesh axis that grows: fsdp, dp or ep")->check(CLI::IsMember({"fsdp", "dp", "ep"}));
  scale_cmd->add_option("--set", scale_sets, "override a scenario field: PATH=VALUE");
  scale_cmd->add_option("--format", scale_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string coll_file, coll_op = "all_reduce", coll_bytes = "1GiB", coll_format = "text";
  int64_t coll_gpus = 0;
  auto* coll_cmd = app.add_subcommand("collective", "Time, algbw and busbw of one collective over all GPUs, as nccl-tests prints them");
  coll_cmd->add_option("SYSTEM", coll_file, "system file")->required();
  coll_cmd->add_option("--op", coll_op, "all_reduce, all_gather, reduce_scatter or all_to_all")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}));
  coll_cmd->add_option("--bytes", coll_bytes, "size per GPU, e.g. 64MiB or \"8 GiB\"");
  coll_cmd->add_option("--gpus", coll_gpus, "GPU count (default: the system's)")->check(kGpuCount);
  std::string coll_algo = "auto";
  coll_cmd->add_option("--algo", coll_algo, "auto (the fastest at this size), ring, tree, nvls, nvls_tree, direct or hierarchical")
      ->check(CLI::IsMember({"auto", "ring", "tree", "nvls", "nvls_tree", "direct", "hierarchical"}));
  coll_cmd->add_option("--format", coll_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string schema_format = "markdown";
  auto* schema_cmd = app.add_subcommand("schema", "Print the scenario file reference: every field, type, unit, default, effect");
  schema_cmd->add_option("--format", schema_format, "markdown or json")->check(CLI::IsMember({"markdown", "json"}));

  std::string params_format = "text";
  auto* params_cmd = app.add_subcommand("params", "List the cost model's named parameters: default, unit, range, reasoning");
  params_cmd->add_option("--format", params_format, "text or json")->check(CLI::IsMember({"text", "json"}));

#ifdef MOEPERF_HAVE_EXECUTOR
  std::string run_file;
  std::vector<std::string> run_sets;
  exec::RunOptions run_opt;
  int64_t dry_tokens = 0;
  auto* run_cmd = app.add_subcommand("run", "Execute the scenario's MoE layer forward and backward, check it, measure every op (under mpirun for many ranks)");
  run_cmd->add_option("SCENARIO", run_file, "scenario file, e.g. examples/executor/cpu-small.json")->required();
  run_cmd->add_option("--backend", run_opt.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  run_cmd->add_option("--layers", run_opt.layers, "MoE layers per step")->check(whole_at_least_one("a layer count"));
  run_cmd->add_option("--steps", run_opt.steps, "timed steps")->check(whole_at_least_one("a step count"));
  run_cmd->add_option("--warmup", run_opt.warmup, "untimed steps first")->check(whole_at_least(0, "a step count"));
  run_cmd->add_option("--scale", run_opt.scale, "divide hidden, FFN and tokens by this to fit the machine")->check(positive_number("a scale factor"));
  run_cmd->add_option("--timeout", run_opt.timeout_s, "seconds a step may take before the job is ended with a message")->check(positive_number("seconds"));
  run_cmd->add_option("--out", run_opt.out, "measurements JSON (written by rank 0)");
  run_cmd->add_option("--set", run_sets, "override a scenario field: PATH=VALUE");
  run_cmd->add_option("--dry-run-offsets", dry_tokens, "check the 64-bit offsets of TOKENS x top_k rows of the model's hidden size, without allocating");
#endif

  std::vector<std::string> cal_files;
  std::string cal_profile, cal_out;
  auto* cal_cmd = app.add_subcommand("calibrate", "Fit the cost model's compute parameters to measured op times (moeperf run --out)");
  cal_cmd->add_option("MEASUREMENTS", cal_files, "measurements JSON files")->required();
  cal_cmd->add_option("--profile", cal_profile, "starting calibration profile (default: every parameter at its default)");
  cal_cmd->add_option("--out", cal_out, "fitted profile to write")->required();

  std::vector<std::string> validate_files;
  auto* validate = app.add_subcommand("validate", "Check files (systems, models, scenarios, building blocks); exit 2 if any is wrong");
  validate->add_option("FILE", validate_files, "files to check")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  try {
    if (*topo) return cmd_topo(topo_file, topo_gpus, topo_dot, topo_format);
    if (*validate) return cmd_validate(validate_files);
    if (*params_cmd) return cmd_params(params_format);
    if (*schema_cmd) {
      std::cout << (schema_format == "json" ? io::scenario_reference_json() + "\n" : io::scenario_reference_markdown());
      return kExitOk;
    }
    if (*cal_cmd) return cmd_calibrate(cal_files, cal_profile, cal_out);
#ifdef MOEPERF_HAVE_EXECUTOR
    if (*run_cmd && dry_tokens > 0) {
      const Scenario s = io::load_scenario(run_file, overrides(run_sets));
      const int64_t off = exec::dry_run_last_row_offset(dry_tokens, s.model.top_k, s.model.hidden);
      const int64_t rows = dry_tokens * s.model.top_k;
      std::printf("dry run: %lld rows x %lld hidden FP32: last row at byte %lld (rows x hidden = %lld, %s 2^31)\n",
                  static_cast<long long>(rows), static_cast<long long>(s.model.hidden), static_cast<long long>(off),
                  static_cast<long long>(rows * s.model.hidden), rows * s.model.hidden >= (int64_t{1} << 31) ? "past" : "below");
      return off == (rows - 1) * s.model.hidden * 4 ? kExitOk : kExitFailed;
    }
    if (*run_cmd) return cmd_run(run_file, run_sets, run_opt, &argc, &argv);
#endif
    if (*compare_cmd) return cmd_compare(compare_files, compare_ablate, compare_sets, compare_format);
    if (*scale_cmd) return cmd_scale(scale_file, scale_gpus, scale_grow, scale_sets, scale_format);
    if (*coll_cmd) return cmd_collective(coll_file, coll_op, coll_bytes, coll_gpus, coll_algo, coll_format);
    if (*predict_cmd) return cmd_predict(predict_file, predict_sets, predict_format, predict_serial, predict_trace, predict_top);
  } catch (const InputError& e) {
    std::cerr << "moeperf: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "moeperf: failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitFailed;
}
