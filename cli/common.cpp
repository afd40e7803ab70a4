#include "cli/common.h"

#include <algorithm>
#include <atomic>
#include <cmath>
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
#include <sys/stat.h>
#include <unistd.h>

#include "model/error.h"

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

void check_output_path(const char* flag, const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string what = std::string(flag) + " " + path + ": ";
  if (fs::is_directory(path, ec)) throw InputError(what + "is a directory; expected a file name to write");
  // An existing path that is not a regular file (a device, a pipe, a socket) is not replaced: the
  // file is written beside its target and renamed over it, which would swap /dev/... for a file.
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st))
    throw InputError(what + "not a regular file (a device or a pipe); expected a file name to write (without the flag the output goes to the terminal)");
  const fs::path target = fs::weakly_canonical(fs::absolute(path), ec);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) throw InputError(what + "the folder " + parent.string() + " does not exist");
  const std::string folder = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  if (::access(folder.c_str(), W_OK) != 0)
    throw InputError(what + "the folder " + folder + " is not writable (" + std::strerror(errno) + ")");
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    const bool same = fs::exists(in, ec) && fs::exists(path, ec) ? fs::equivalent(in, path, ec)
                                                               : fs::weakly_canonical(fs::absolute(in), ec) == target;
    if (same) throw InputError(what + "is " + in + ", an input of this command: writing it would destroy what is being read");
  }
}

void write_atomically(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A link is followed (a chain of them too, a dangling one to where it points): its target is
  // written, the link stays.
  fs::path target = path;
  for (int hop = 0; hop < 40 && fs::is_symlink(target, ec); ++hop) {
    const fs::path to = fs::read_symlink(target, ec);
    if (ec) break;
    target = to.is_absolute() ? to : target.parent_path() / to;
  }
  // A temporary of its own beside the target (mkstemp), never a user's "X.tmp".
  std::string tmp = target.string() + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  ::close(fd);
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
      // Fault injection for tests: killed halfway through the write, before the rename.
      if (const char* f = std::getenv("MOEPERF_FAULT_WRITE"); f && std::string(f) == "kill") {
        out << content.substr(0, content.size() / 2) << std::flush;
        std::raise(SIGKILL);
      }
      out << content;
      out.flush();
      if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
    // mkstemp makes the file private (0600); the output gets what the user's umask gives a new file.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    fs::permissions(tmp, static_cast<fs::perms>(0666 & ~mask), ec);
    fs::rename(tmp, target);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

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
  return CLI::Validator(
      [what, min](std::string& v) -> std::string {
        try {
          size_t used = 0;
          const long long n = std::stoll(v, &used);
          if (used == v.size() && n >= min) return {};
        } catch (const std::exception&) {
        }
        return "expected " + what + " (a whole number >= " + std::to_string(min) + "), got " + v;
      },
      what + " >= " + std::to_string(min));
}

CLI::Validator whole_at_least_one(const std::string& what) { return whole_at_least(1, what); }

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

CLI::Validator gpu_count() { return whole_at_least_one("a GPU count"); }

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
    // not a success with nothing written.
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
      std::cerr << "moeperf: failed: cannot write the standard output (" << std::strerror(errno) << ")\n";
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
