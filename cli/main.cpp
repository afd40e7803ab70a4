// moeperf: the command-line front end. Exit codes: 0 ok, 1 the work failed, 2 bad input.
// Each subcommand is a file of its own (cli/<name>.cpp, commands.h); `moeperf run` is handed over
// to the moeperf-run executable beside this one, so the modelling commands load no CUDA, NCCL or
// MPI library.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "cli/ranks.h"

namespace {

// Replaces this process with the executable `name` beside it, given argv[first..] (exec keeps the
// PID and the environment, so mpirun's and srun's rank variables reach it). Returns only on failure.
int hand_over(const char* name, int first, int argc, char** argv, const std::string& missing) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) self = fs::absolute(argv[0], ec);
  const fs::path target = self.parent_path() / name;
  const std::string what = std::string("moeperf ") + argv[1];
  if (!fs::exists(target, ec)) {
    std::cerr << what << ": " << target.string() << " not found: " << missing << "\n";
    return moeperf::cli::kExitFailed;
  }
  std::vector<char*> args;
  const std::string path = target.string();
  args.push_back(const_cast<char*>(path.c_str()));
  for (int i = first; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  std::cerr << what << ": cannot start " << path << ": " << std::strerror(errno) << "\n";
  return moeperf::cli::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace moeperf::cli;
  // `moeperf run ARGS...` becomes `moeperf-run ARGS...`.
  if (argc > 1 && std::string(argv[1]) == "run")
    return hand_over("moeperf-run", 2, argc, argv,
                     "build it (cmake --build BUILD --target moeperf-run, or scripts/run.sh run ...); it is configured "
                     "when Eigen 3 is found (see the configure summary)");
  // sweep and plan under mpirun/srun with several ranks: the same command in moeperf-mpi, which
  // splits the work over the ranks (rank 0 writes); here every rank would do all of it.
  if (argc > 1 && (std::string(argv[1]) == "sweep" || std::string(argv[1]) == "plan") && launcher_ranks() > 1)
    return hand_over("moeperf-mpi", 1, argc, argv,
                     "it is built when MPI is found (libopenmpi-dev; see the configure summary); without it run one "
                     "process with --jobs");
  return run_cli(argc, argv);
}
