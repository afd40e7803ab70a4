// Helpers of the executor's tests: a shell command's exit code, output and time, and mpirun with
// the options this machine needs (root in a container, more ranks than cores).
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "executor/comm.h"

namespace moeperf::testing {

struct Result {
  int code = -1;
  std::string out;
  double seconds = 0;
};

inline Result sh(const std::string& cmd) {
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

inline std::string mpirun(int np) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 120 mpirun -np " +
         std::to_string(np) + " --oversubscribe --mca btl self,vader ";
}

inline bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0 && moeperf::exec::built_with_mpi(); }

}  // namespace moeperf::testing
