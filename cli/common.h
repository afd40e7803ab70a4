// What every moeperf subcommand shares: exit codes, loading a scenario with its --set overrides,
// checked and atomic output files, and plain validators for counts. Each subcommand lives in a file
// of its own (cli/<name>.cpp) and registers itself through add_<name>() (commands.h).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "model/io/load.h"
#include "model/io/units_parse.h"
#include "model/specs.h"

namespace moeperf::cli {

constexpr int kExitOk = 0, kExitFailed = 1, kExitBadInput = 2;

// An output file named on the command line, checked before any work: a directory, a folder that
// does not exist or cannot be written, an existing path that is not a regular file (a device), or
// one of the command's `inputs` is bad input (InputError), not a failure after the work ran.
// `streamed`: the command opens the file and writes it in place (sweep's rows), so a device or a
// pipe is fine and an existing file needs no writable folder.
void check_output_path(const char* flag, const std::string& path, const std::vector<std::string>& inputs = {},
                       bool streamed = false);
// Writes a file only once its whole content is known (io::write_files_atomically: a temporary of its
// own beside it, then a rename; a symbolic link's target is written and the link kept); on any
// failure the temporary is removed.
void write_atomically(const std::string& path, const std::string& content);
std::vector<io::Override> overrides(const std::vector<std::string>& sets);
// The scenario with its --set overrides applied, its name saying which (unless they set the name).
Scenario load_named(const std::string& file, const std::vector<std::string>& sets);
std::string fmt(double v, int prec = 1);
using io::parse_token_count;  // model/io/units_parse.h

// Counts and positive numbers, said plainly (CLI11's PositiveNumber prints a 300-digit range).
CLI::Validator whole_at_least(long long min, const std::string& what);
CLI::Validator whole_at_least_one(const std::string& what);
CLI::Validator whole_in(long long min, long long max, const std::string& what);
CLI::Validator number_at_least(double min, const std::string& what);
CLI::Validator positive_number(const std::string& what);
CLI::Validator gpu_count();

// Progress of long work on stderr: a bar redrawn in place on a terminal ("sweep [####....] 40/100
// points, 3.2/s, ETA 19 s"); otherwise a plain line at every tenth, or each half minute.
class Progress {
 public:
  Progress(std::string what, std::string unit, size_t total, size_t done = 0);
  void update(size_t done, bool last = false);

 private:
  std::string what_, unit_;
  size_t total_, first_;
  bool tty_;
  size_t tenth_ = 0;
  std::chrono::steady_clock::time_point t0_, shown_{};
};
// "42 s", "3 min 05 s", "1.6 h".
std::string duration_text(double s);

// Threads for independent jobs: `jobs` (<= 0: every core) threads take the next job until none is
// left. Returns the thread count used. A job that throws stops the hand-out; once the threads are
// done, the exception of the lowest-numbered failed job is rethrown.
int run_on_threads(int jobs, std::vector<std::function<void()>>& work);
// A study's runner (sensitivity, compare --ablate): its independent predictions on `jobs` threads,
// with a Progress line on stderr ("what: 12/60 predictions, 3.1/s, ETA 15 s").
std::function<void(std::vector<std::function<void()>>&)> threads_with_progress(const std::string& what, int jobs);

// Parses the command line, then runs `work`: a usage error exits 2 (help and --version 0), an
// InputError is bad input (exit 2), any other exception a failure (exit 1); each with one message.
int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& work);

}  // namespace moeperf::cli
