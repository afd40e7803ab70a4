#include "cli/common.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iomanip>
#include <sstream>
#include <unistd.h>

#include "model/error.h"
#include "model/io/write_file.h"
#include "model/limits.h"

namespace moeperf::cli {

namespace {
void name_overrides(Scenario& s, const std::vector<std::string>& sets) {
  std::string shown;
  for (const std::string& x : sets) {
    if (x.rfind("name=", 0) == 0) return;
    shown += (shown.empty() ? "" : ", ") + x;
  }
  if (!shown.empty()) s.name += " [--set " + shown + "]";
}
}  // namespace

void check_output_path(const char* flag, const std::string& path, const std::vector<std::string>& inputs, bool streamed) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string what = std::string(flag) + " " + path + ": ";
  std::string target;
  try {
    target = io::output_target(path);  // a link's target: the file written
  } catch (const InputError& e) {
    throw InputError(std::string(flag) + " " + e.what());
  }
  if (fs::is_directory(target, ec)) throw InputError(what + "is a directory; expected a file name to write");
  const fs::file_status st = fs::status(target, ec);
  const bool exists = !ec && fs::exists(st);
  // A streamed output (sweep's rows) is opened and written in place: a device or a pipe takes it,
  // and an existing file needs no writable folder. Any other is written beside its target and
  // renamed over it, which would swap /dev/... for a file: an existing non-regular file is refused.
  if (!streamed && exists && !fs::is_regular_file(st))
    throw InputError(what + "not a regular file (a device or a pipe); expected a file name to write (without the flag the output goes to the terminal)");
  const fs::path abs = fs::absolute(target, ec);
  const fs::path folder = abs.parent_path();
  if (!fs::is_directory(folder, ec)) throw InputError(what + "the folder " + folder.string() + " does not exist");
  if (streamed && exists) {
    if (::access(target.c_str(), W_OK) != 0) throw InputError(what + "cannot be written (" + std::strerror(errno) + ")");
  } else if (::access(folder.c_str(), W_OK) != 0) {
    throw InputError(what + "the folder " + folder.string() + " is not writable (" + std::strerror(errno) + ")");
  }
  const fs::path canon = fs::weakly_canonical(abs, ec);
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    const bool same = fs::exists(in, ec) && exists ? fs::equivalent(in, target, ec) : fs::weakly_canonical(fs::absolute(in), ec) == canon;
    if (same) throw InputError(what + "is " + in + ", an input of this command: writing it would destroy what is being read");
  }
}

void write_atomically(const std::string& path, const std::string& content) { io::write_files_atomically({{path, content}}); }

std::vector<io::Override> overrides(const std::vector<std::string>& sets) {
  std::vector<io::Override> out;
  for (const auto& s : sets) out.push_back(io::parse_override(s));
  return out;
}

Scenario load_named(const std::string& file, const std::vector<std::string>& sets) {
  Scenario s = io::load_scenario(file, overrides(sets));
  name_overrides(s, sets);
  return s;
}

std::string duration_text(double s) {
  char b[48];
  if (s < 90) std::snprintf(b, sizeof b, "%.0f s", s);
  else if (s < 5400) std::snprintf(b, sizeof b, "%.0f min %02.0f s", std::floor(s / 60), std::fmod(s, 60));
  else std::snprintf(b, sizeof b, "%.1f h", s / 3600);
  return b;
}

Progress::Progress(std::string what, std::string unit, size_t total, size_t done)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), first_(done), tty_(isatty(STDERR_FILENO) != 0),
      t0_(std::chrono::steady_clock::now()), shown_(t0_) {}

void Progress::update(size_t done, bool last) {
  const auto now = std::chrono::steady_clock::now();
  const double el = std::chrono::duration<double>(now - t0_).count();
  const double rate = el > 0 ? static_cast<double>(done - first_) / el : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  char line[200];
  if (tty_) {
    if (!last && std::chrono::duration<double>(now - shown_).count() < 0.1) return;
    const int w = 30, fill = total_ ? static_cast<int>(w * done / total_) : w;
    std::snprintf(line, sizeof line, "\r%s [%s%s] %zu/%zu %s, %.1f/s, ETA %s   ", what_.c_str(),
                  std::string(static_cast<size_t>(fill), '#').c_str(), std::string(static_cast<size_t>(w - fill), '.').c_str(), done,
                  total_, unit_.c_str(), rate, duration_text(eta).c_str());
    std::cerr << line << (last ? "\n" : "") << std::flush;
  } else {
    const size_t tenth = total_ ? 10 * done / total_ : 10;
    if (!last && tenth == tenth_ && std::chrono::duration<double>(now - shown_).count() < 30) return;
    tenth_ = tenth;
    std::snprintf(line, sizeof line, "%s: %zu/%zu %s, %.1f/s, ETA %s\n", what_.c_str(), done, total_, unit_.c_str(), rate,
                  duration_text(eta).c_str());
    std::cerr << line << std::flush;
  }
  shown_ = now;
}

std::function<void(std::vector<std::function<void()>>&)> threads_with_progress(const std::string& what, int jobs) {
  return [what, jobs](std::vector<std::function<void()>>& work) {
    Progress bar(what, "predictions", work.size());
    std::mutex m;
    size_t done = 0;
    std::vector<std::function<void()>> wrapped;
    wrapped.reserve(work.size());
    for (auto& w : work)
      wrapped.push_back([&, job = &w] {
        (*job)();
        std::lock_guard<std::mutex> l(m);
        ++done;
        bar.update(done, done == work.size());
      });
    run_on_threads(jobs, wrapped);
  };
}

int run_on_threads(int jobs, std::vector<std::function<void()>>& work) {
  const int n = std::max(1, jobs > 0 ? jobs : static_cast<int>(std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  // A job that throws stops the hand-out of jobs; the exception of the lowest-numbered failed job
  // is rethrown here once every thread has stopped (a worker's exception would otherwise end the
  // process without its message).
  std::mutex mu;
  std::exception_ptr error;
  size_t error_job = work.size();
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < work.size(); i = next++) {
        try {
          work[i]();
        } catch (...) {
          const std::lock_guard<std::mutex> lock(mu);
          if (i < error_job) error = std::current_exception(), error_job = i;
          next = work.size();
        }
      }
    });
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return n;
}

std::string fmt(double v, int prec) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

CLI::Validator whole_at_least(long long min, const std::string& what) {
  return whole_in(min, std::numeric_limits<long long>::max(), what);
}

CLI::Validator whole_at_least_one(const std::string& what) { return whole_at_least(1, what); }

// A whole number in [min, max]; without an upper bound (max = the largest long long) said as ">= min".
CLI::Validator whole_in(long long min, long long max, const std::string& what) {
  const bool open = max == std::numeric_limits<long long>::max();
  const std::string range = open ? ">= " + std::to_string(min) : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return CLI::Validator(
      [what, min, max, range](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= min && n <= max) return {};
        } catch (const std::exception&) {
        }
        return "expected " + what + " (a whole number " + range + "), got " + v;
      },
      what + " " + range);
}

CLI::Validator number_at_least(double min, const std::string& what) {
  return CLI::Validator(
      [what, min](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const double x = std::stod(v, &used);
          if (used == v.size() && x >= min && std::isfinite(x)) return {};
        } catch (const std::exception&) {
        }
        return "expected " + what + " (a number >= " + fmt(min, 0) + "), got " + v;
      },
      what + " >= " + fmt(min, 0));
}

CLI::Validator positive_number(const std::string& what) {
  return CLI::Validator(
      [what](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const double x = std::stod(v, &used);
          if (used == v.size() && x > 0 && std::isfinite(x)) return {};
        } catch (const std::exception&) {
        }
        return "expected " + what + " (a number > 0), got " + v;
      },
      what + " > 0");
}

CLI::Validator gpu_count() { return whole_in(1, limits::kGpus, "a GPU count"); }

int parse_and_run(CLI::App& app, int argc, char** argv, const std::function<int()>& work) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  try {
    const int code = work();
    // Output that never reached its file (a full disk, a closed pipe's reader gone) is a failure,
    // not a success with nothing written. The reason is named only when this flush found it (an
    // earlier failed write's errno is gone by now).
    errno = 0;
    std::cout.flush();
    const bool flushed = std::fflush(stdout) == 0;
    const int err = errno;
    if (!flushed || std::ferror(stdout) || !std::cout) {
      std::cerr << "moeperf: failed: cannot write the standard output" << (err ? std::string(" (") + std::strerror(err) + ")" : std::string())
                << "\n";
      return kExitFailed;
    }
    return code;
  } catch (const InputError& e) {
    std::cerr << "moeperf: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "moeperf: failed: " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace moeperf::cli
