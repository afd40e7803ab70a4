// moeperf-run: what `moeperf run` hands over to (cli/main.cpp). Executes the scenario's MoE layer
// forward and backward on a backend (CPU, or CUDA with cuBLAS), over MPI (and NCCL for the CUDA
// backend's exchanges) or loopback, checks it against gates and measures every op. The only
// executable that links the executor, CUDA, NCCL and MPI.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <iostream>

#include "cli/common.h"
#include "executor/host_memory.h"
#include "executor/run.h"
#include "executor/suite.h"
#include "model/error.h"
#ifdef MOEPERF_HAVE_NCCL
#include "executor/comm_nccl.h"
#endif

namespace moeperf::cli {
namespace {

int cmd_run(const std::string& file, const std::vector<std::string>& sets, exec::RunOptions o, int* argc, char*** argv) {
  // Fault injection for tests: MOEPERF_FAULT=RANK:STEP[:hang|:kill|:counts] (default: exit).
  if (const char* f = std::getenv("MOEPERF_FAULT")) {
    std::string v = f;
    o.fault_rank = std::atoi(v.c_str());
    o.fault_step = std::atoi(v.substr(v.find(':') + 1).c_str());
    using F = exec::RunOptions::Fault;
    o.fault = v.find(":hang") != std::string::npos     ? F::hang
              : v.find(":kill") != std::string::npos   ? F::kill
              : v.find(":counts") != std::string::npos ? F::counts
                                                       : F::exit;
  }
  auto comm = exec::make_communicator(argc, argv);
  Scenario s;
  try {
    check_output_path("--out", o.out, {file, o.machine_file});
    s = io::load_scenario(file, overrides(sets));
    if (!o.machine_file.empty()) {
      o.machine = io::load_system(o.machine_file);
      std::ifstream in(o.machine_file);
      o.machine_json.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
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
      // Four fifths of --timeout: the exchange's deadline starts with the exchange, the step's
      // watchdog (executor/run_parts.h) with the step, so an equal one never fired first; a hang
      // inside NCCL is then aborted (ncclCommAbort) and named by op and rank, not only timed out.
      dx = exec::make_nccl_exchange(0.8 * o.timeout_s);
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
  } catch (const std::bad_alloc& e) {
    // The executor holds the scenario's real tensors (one micro-batch of a layer, weights and
    // gradients): a full-size model rarely fits a host or one GPU. A device allocation says which
    // (kernels::CudaOutOfMemory: the runtime's words); the host's says only std::bad_alloc.
    const std::string where = std::string(e.what()) == std::bad_alloc().what() ? "" : " (" + std::string(e.what()) + ")";
    comm->abort("out of memory holding " + s.model.name + "'s tensors at --scale " + fmt(o.scale, 3) +
                    " (hidden " + std::to_string(s.model.hidden) + ", " + std::to_string(s.batch.micro_batch * s.batch.seq_len) +
                    " tokens)" + where + "; shrink them with a larger --scale (e.g. --scale 16), fewer --layers, or --moe-only",
                kExitFailed);
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
  std::printf("  ops timed by: %s\n", r.timing_method.c_str());
  std::printf("  exchanges: %s\n", r.communicator_detail.c_str());
  std::printf("  %-24s %6s %11s %11s %12s %10s\n", "op", "calls", "median_ms", "model_ms", "GFLOP/s", "of_peak");
  for (const auto& [name, st] : r.ops) {
    const double med = st.median_s;
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

// --suite calibrate: the op classes the cost model prices, measured (executor/suite.h).
int cmd_suite(const exec::SuiteOptions& so, int* argc, char*** argv) {
  auto comm = exec::make_communicator(argc, argv);
  try {
    check_output_path("--out", so.out);
    check_output_path("--write-system", so.write_system, {so.out});
  } catch (const InputError& e) {
    if (comm->rank() == 0) std::cerr << "moeperf: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::unique_ptr<exec::Backend> be;
  try {
    be = exec::make_backend(so.backend, comm->local_rank());
  } catch (const std::exception& e) {
    comm->abort(std::string("--backend ") + so.backend + ": " + e.what(), kExitFailed);
  }
  exec::SuiteResult r;
  try {
    r = exec::run_suite(so, *comm, *be);
  } catch (const std::exception& e) {
    comm->abort(e.what(), kExitFailed);
  }
  if (comm->rank() != 0) return kExitOk;
  std::printf("moeperf run --suite calibrate: %d records on the %s backend, %d rank%s (%s)\n  %s\n", r.records, so.backend.c_str(),
              comm->size(), comm->size() > 1 ? "s" : "", comm->name().c_str(), r.summary.c_str());
  if (!so.out.empty()) std::printf("  measurements written to %s (moeperf calibrate %s --out PROFILE.json)\n", so.out.c_str(), so.out.c_str());
  if (!so.write_system.empty()) std::printf("  this machine as a system: %s\n", so.write_system.c_str());
  return kExitOk;
}

}  // namespace
}  // namespace moeperf::cli

int main(int argc, char** argv) {
  using namespace moeperf;
  using namespace moeperf::cli;
  exec::keep_freed_host_memory();  // before MPI_Init: its buffers too (executor/host_memory.h)
  CLI::App app{"moeperf run: execute the scenario's MoE layer forward and backward, check it, measure every op "
               "(under mpirun for many ranks)",
               "moeperf run"};
  std::string file;
  std::vector<std::string> sets;
  exec::RunOptions opt;
  int64_t dry_tokens = 0;
  std::string suite;
  exec::SuiteOptions so;
  app.add_option("SCENARIO", file, "scenario file, e.g. examples/executor/cpu-small.json (not with --suite)");
  app.add_option("--suite", suite, "calibrate: measure the op classes the cost model prices (GEMMs, grouped GEMMs, attention, "
                                   "memory-bound kernels, collectives) as measurement records instead of running a scenario")
      ->check(CLI::IsMember({"calibrate"}));
  app.add_option("--budget", so.budget_s, "--suite: seconds the whole suite may take")->check(positive_number("seconds"));
  app.add_option("--write-system", so.write_system, "--suite: write this machine (ranks, measured GEMM rate, memory and exchange bandwidth) as a system file");
  app.add_option("--backend", opt.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--layers", opt.layers, "MoE layers per step")->check(whole_at_least_one("a layer count"));
  app.add_option("--steps", opt.steps, "timed steps")->check(whole_at_least_one("a step count"));
  app.add_option("--warmup", opt.warmup, "untimed steps first")->check(whole_at_least(0, "a step count"));
  app.add_flag("--moe-only", opt.moe_only, "run the MoE block alone (by default the layer's attention block runs before it)");
  app.add_option("--scale", opt.scale, "divide hidden, FFN and tokens by this (>= 1) to fit the machine")
      ->check(number_at_least(1.0, "a scale factor"));
  app.add_option("--timeout", opt.timeout_s, "seconds a step may take before the job is ended with a message")->check(positive_number("seconds"));
  app.add_option("--machine", opt.machine_file,
                 "this machine as a system file (moeperf run --suite calibrate --write-system): price the run's exchanges on it "
                 "and embed it, so calibrate reads them as collective records");
  app.add_option("--out", opt.out, "measurements JSON (written by rank 0)");
  app.add_option("--set", sets, "override a scenario field: PATH=VALUE");
  app.add_option("--dry-run-offsets", dry_tokens, "check the 64-bit offsets of TOKENS x top_k rows of the model's hidden size, without allocating")
      ->check(whole_in(1, int64_t{1} << 36, "a token count"));
  return parse_and_run(app, argc, argv, [&] {
    if (!suite.empty()) {
      if (!file.empty()) throw InputError("--suite measures this machine and runs no scenario: drop " + file);
      so.backend = opt.backend;
      so.out = opt.out;
      return cmd_suite(so, &argc, &argv);
    }
    if (file.empty()) throw InputError("SCENARIO is required (or --suite calibrate)");
    if (dry_tokens > 0) {
      const Scenario s = io::load_scenario(file, overrides(sets));
      const int64_t off = exec::dry_run_last_row_offset(dry_tokens, s.model.top_k, s.model.hidden);
      const int64_t rows = dry_tokens * s.model.top_k;
      std::printf("dry run: %lld rows x %lld hidden FP32: last row at byte %lld (rows x hidden = %lld, %s 2^31)\n",
                  static_cast<long long>(rows), static_cast<long long>(s.model.hidden), static_cast<long long>(off),
                  static_cast<long long>(rows * s.model.hidden), rows * s.model.hidden >= (int64_t{1} << 31) ? "past" : "below");
      return off == (rows - 1) * s.model.hidden * 4 ? kExitOk : kExitFailed;
    }
    return cmd_run(file, sets, opt, &argc, &argv);
  });
}
