#include "cli/ranks.h"

#include <cstdlib>
#include <exception>

namespace moeperf::cli {
namespace {
Ranks single;
Ranks* current = &single;
}  // namespace

Ranks& ranks() { return *current; }
void set_ranks(Ranks* r) { current = r ? r : &single; }

int launcher_ranks() {
  // Open MPI, MPICH/Hydra and PMI, PMIx, a Slurm job step (srun).
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* s = std::getenv(v)) {
      char* end = nullptr;
      const long n = std::strtol(s, &end, 10);
      if (end != s && n > 0 && n < (1L << 24)) return static_cast<int>(n);
    }
  return 0;
}

}  // namespace moeperf::cli
