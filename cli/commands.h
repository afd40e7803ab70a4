// The subcommands of `moeperf`, one file each (cli/<name>.cpp). Each add_<name>() adds its
// subcommand and options to the app and returns what runs it; main.cpp registers them all and
// runs the one given. `moeperf run` is not among them: the executor links CUDA, NCCL and MPI,
// which the planner must not load, so main.cpp hands `run` over to the moeperf-run executable
// beside it (cli/run_main.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "cli/common.h"

namespace moeperf::cli {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

Command add_predict(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_scale(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_sensitivity(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_collective(CLI::App& app);
Command add_topo(CLI::App& app);
Command add_validate(CLI::App& app);
Command add_params(CLI::App& app);
Command add_schema(CLI::App& app);
Command add_stacks(CLI::App& app);
Command add_calibrate(CLI::App& app);
Command add_compare_trace(CLI::App& app);
Command add_accuracy(CLI::App& app);

// Every subcommand registered (app.cpp), the one in argv run; the exit code.
int run_cli(int argc, char** argv);

}  // namespace moeperf::cli
