#include "cli/ranks.h"

#include <cstdlib>
#include <stdexcept>

namespace moeperf::cli {
namespace {
Ranks single;
Ranks* current = &single;
}  // namespace

std::string Ranks::receive_from(int rank) {
  throw std::logic_error("receive_from(" + std::to_string(rank) + "): a single process has no other rank");
}

Ranks& ranks() { return *current; }

std::string workers_text(int threads) {
  const std::string t = std::to_string(threads) + " thread" + (threads > 1 ? "s" : "");
  return ranks().size() > 1 ? std::to_string(ranks().size()) + " processes x " + t : t;
}
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
