// moeperf: the command-line front end. Exit codes: 0 ok, 1 the work failed, 2 bad input.
// Each subcommand is a file of its own (cli/<name>.cpp, commands.h); `moeperf run` is handed over
// to the moeperf-run executable beside this one, so the modelling commands load no CUDA, NCCL or
// MPI library.
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "cli/commands.h"

namespace {

// `moeperf run ARGS...` becomes `moeperf-run ARGS...` in the same process (exec keeps the PID and
// the environment, so mpirun's and srun's rank variables reach it).
int hand_over_to_moeperf_run(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) self = fs::absolute(argv[0], ec);
  const fs::path run = self.parent_path() / "moeperf-run";
  if (!fs::exists(run, ec)) {
    std::cerr << "moeperf run: " << run.string()
              << " not found: build it (cmake --build BUILD --target moeperf-run, or scripts/run.sh run ...); it is "
                 "configured when Eigen 3 is found (see the configure summary)\n";
    return moeperf::cli::kExitFailed;
  }
  std::vector<char*> args;
  const std::string path = run.string();
  args.push_back(const_cast<char*>(path.c_str()));
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  std::cerr << "moeperf run: cannot start " << path << ": " << std::strerror(errno) << "\n";
  return moeperf::cli::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace moeperf::cli;
  if (argc > 1 && std::string(argv[1]) == "run") return hand_over_to_moeperf_run(argc, argv);
  // Studies predict thousands of steps on worker threads, each allocating and freeing a few MB:
  // with glibc's defaults the threads' heaps are trimmed back to the kernel after each and faulted
  // in again (plan on 2,048 GPUs: 24 s of its 88 s in the kernel). Freed memory is kept instead,
  // up to 1 GiB; large blocks still come from mmap above 256 MiB.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 256 << 20);

  CLI::App app{"moeperf: predict, explain and measure dropless-MoE training speed on GPU clusters"};
  app.set_version_flag("--version", "moeperf 0.1.0");
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_topo(app),   add_predict(app),    add_compare(app),
                                         add_scale(app),  add_sweep(app), add_sensitivity(app), add_plan(app), add_collective(app), add_schema(app),
                                         add_params(app), add_stacks(app), add_calibrate(app),  add_accuracy(app), add_validate(app)};
  // Listed in --help; never parsed here (handed over above).
  app.add_subcommand("run", "Execute the scenario's MoE layer forward and backward, check it, measure every op "
                            "(moeperf-run; under mpirun for many ranks; moeperf run --help)")
      ->allow_extras();
  return parse_and_run(app, argc, argv, [&] {
    for (const Command& c : commands)
      if (*c.sub) return c.run();
    return kExitFailed;
  });
}
