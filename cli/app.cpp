// The moeperf command line: every subcommand registered, the one given run. main.cpp (moeperf)
// and mpi_main.cpp (moeperf-mpi) both call it.
#include <malloc.h>

#include "cli/commands.h"

namespace moeperf::cli {

int run_cli(int argc, char** argv) {
  // Studies predict thousands of steps on worker threads, each allocating and freeing a few MB:
  // with glibc's defaults the threads' heaps are trimmed back to the kernel after each and faulted
  // in again (plan on 2,048 GPUs: 24 s of its 88 s in the kernel). Freed memory is kept instead,
  // up to 1 GiB; large blocks still come from mmap above 256 MiB.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  // The trim threshold is the main heap's: a worker thread's arena lives in 64 MiB heaps that glibc
  // unmaps whole when their top is free (heap_trim), unless that would leave less than M_TOP_PAD
  // free at the top. Padding by one such heap keeps them mapped (plan on 128 GPUs, one thread:
  // 179,000 minor page faults for a 200 MB peak before, 52,000 after).
  mallopt(M_TOP_PAD, 64 << 20);

  CLI::App app{"moeperf: predict, explain and measure dropless-MoE training speed on GPU clusters"};
  app.set_version_flag("--version", "moeperf 0.1.0");
  app.require_subcommand(1);
  const std::vector<Command> commands = {add_topo(app),   add_predict(app),    add_compare(app),
                                         add_scale(app),  add_sweep(app), add_sensitivity(app), add_plan(app), add_collective(app), add_schema(app),
                                         add_params(app), add_stacks(app), add_calibrate(app),  add_compare_trace(app), add_accuracy(app), add_validate(app)};
  // Listed in --help; never parsed here (main.cpp hands it over to moeperf-run).
  app.add_subcommand("run", "Execute the scenario's MoE layer forward and backward, check it, measure every op "
                            "(moeperf-run; under mpirun for many ranks; moeperf run --help)")
      ->allow_extras();
  return parse_and_run(app, argc, argv, [&] {
    for (const Command& c : commands)
      if (*c.sub) return c.run();
    return kExitFailed;
  });
}

}  // namespace moeperf::cli
