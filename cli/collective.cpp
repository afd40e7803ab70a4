// moeperf collective: one collective over all GPUs of a system: time, algbw and busbw as nccl-tests prints them.
#include "cli/commands.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include "model/error.h"
#include "model/hardware/topology.h"
#include "model/io/load.h"
#include "model/io/parts.h"
#include "model/io/units_parse.h"
#include "model/pricing/collective.h"

namespace moeperf::cli {
namespace {

int cmd_collective(const std::string& file, const std::string& op_name, const std::string& bytes_text, int64_t gpus_opt,
                   const std::string& algo, const std::string& format, const std::string& calibration) {
  const SystemSpec sys = io::load_system(file);
  // As predict prices: the shipped profile of the system's GPU generation, under a profile file
  // the user names (e.g. what `moeperf calibrate` fitted to the calibration suite on this machine).
  // A shipped profile's name (hopper, blackwell, blackwell-ultra) prices with that profile alone,
  // unless a file of that name is there (as a scenario's "calibration" reads it).
  std::error_code ec;
  const bool a_file = !calibration.empty() && std::filesystem::is_regular_file(calibration, ec);
  const std::optional<Calibration> named = calibration.empty() || a_file ? std::nullopt : io::builtin_profile_named(calibration);
  if (!calibration.empty() && !a_file && !named)
    throw InputError("--calibration " + calibration + ": no such file, nor a shipped profile's name (" + io::builtin_profile_names() + ")");
  Calibration cal = named                ? *named
                    : calibration.empty() ? io::builtin_profile(sys.domain.tray.gpu)
                                          : io::load_calibration(calibration, io::builtin_profile(sys.domain.tray.gpu));
  if (!calibration.empty() && !named) cal.profile = calibration;
  const std::string profile = cal.profile.empty() ? "defaults (no shipped profile for this GPU)" : cal.profile;
  const int64_t gpus = gpus_opt > 0 ? gpus_opt : sys.default_gpus;
  const Topology t = Topology::build(sys, gpus);
  const Bytes size = io::parse_bytes_arg(bytes_text);
  const Collective c = op_name == "all_reduce" ? Collective::all_reduce
                       : op_name == "all_gather" ? Collective::all_gather
                       : op_name == "reduce_scatter" ? Collective::reduce_scatter
                                                     : Collective::all_to_all;
  std::vector<int64_t> members(static_cast<size_t>(gpus));
  for (int64_t i = 0; i < gpus; ++i) members[static_cast<size_t>(i)] = i;
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
  const CollectiveCost cost = chosen->at(moved);
  const Seconds time = cost.time(moved);
  const double algbw = size.value() / time.value();
  const double busbw = algbw * bus_factor(c, gpus);
  if (format == "json") {
    nlohmann::json j{{"op", op_name}, {"gpus", gpus}, {"bytes", size.value()}, {"time_s", time.value()},
                     {"algbw_bytes_per_s", algbw}, {"busbw_bytes_per_s", busbw}, {"algorithm", cost.algorithm},
                     {"latency_s", cost.latency.value()}, {"profile", profile}};
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
  std::printf("; latency %.1f us\n# profile: %s\n", cost.latency.value() * 1e6, profile.c_str());
  if (algos.size() > 1) {
    std::printf("# algorithms at this size:");
    for (const CollectiveCost& a : algos) std::printf(" %s %.1f us", a.algorithm, a.time(moved).value() * 1e6);
    std::printf("\n");
  }
  return kExitOk;
}

}  // namespace

Command add_collective(CLI::App& app) {
  struct Opts {
    std::string file, op = "all_reduce", bytes = "1GiB", format = "text", algo = "auto", calibration;
    int64_t gpus = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("collective", "Time, algbw and busbw of one collective over all GPUs, as nccl-tests prints them");
  sub->add_option("SYSTEM", o->file, "system file")->required();
  sub->add_option("--op", o->op, "all_reduce, all_gather, reduce_scatter or all_to_all")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}));
  sub->add_option("--bytes", o->bytes,
                  "nccl-tests size per GPU, e.g. 64MiB or \"8 GiB\": the whole buffer (all-reduce), the gathered output "
                  "(all-gather), the input before the reduction (reduce-scatter), the send buffer (all-to-all)");
  sub->add_option("--gpus", o->gpus, "GPU count (default: the system's)")->check(gpu_count());
  sub->add_option("--algo", o->algo, "auto (the fastest at this size), ring, tree, nvls, nvls_tree, direct or hierarchical")
      ->check(CLI::IsMember({"auto", "ring", "tree", "nvls", "nvls_tree", "direct", "hierarchical"}));
  sub->add_option("--calibration", o->calibration,
                  "calibration profile to price with: a file, or a shipped profile's name (hopper, blackwell, blackwell-ultra); default: the shipped profile of the system's GPU generation, or the defaults");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_collective(o->file, o->op, o->bytes, o->gpus, o->algo, o->format, o->calibration); }};
}

}  // namespace moeperf::cli
