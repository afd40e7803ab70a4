#include "model/io/write_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>

#include "model/error.h"

namespace moeperf::io {

namespace fs = std::filesystem;

std::string output_target(const std::string& path) {
  std::error_code ec;
  fs::path target = path;
  for (int hop = 0; fs::is_symlink(target, ec); ++hop) {
    if (hop == 40) throw InputError(path + ": a loop of symbolic links (40 followed); expected a file name to write");
    const fs::path to = fs::read_symlink(target, ec);
    if (ec) break;
    target = to.is_absolute() ? to : target.parent_path() / to;
  }
  return target.string();
}

namespace {
// The process's umask, read from /proc/self/status (Linux 4.7+) without changing it: umask(2) can
// only read it by setting it, and a file another thread created between the two calls would get
// the permissive mask. The set-and-restore pair is the fallback.
mode_t current_umask() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned int m = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "Umask: %o", &m) == 1;
    std::fclose(f);
    if (found) return static_cast<mode_t>(m);
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}
}  // namespace

namespace {

std::mutex inputs_mutex;
std::set<std::string>& inputs() {
  static std::set<std::string> read;  // weakly canonical paths
  return read;
}

}  // namespace

void note_input_file(const std::string& path) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return;
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  inputs().insert(c.string());
}

void check_not_input(const std::string& path) {
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(fs::absolute(output_target(path), ec), ec);
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  if (!ec && inputs().count(target.string()))
    throw InputError(path + " is " + target.string() + ", a file this command read its input from: writing it would "
                     "destroy what is being read (nothing was written); give another path");
}

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::string, std::string>> temps;  // temporary, target
  std::error_code ec;
  for (const auto& f : files) check_not_input(f.first);
  auto drop = [&] {
    for (const auto& t : temps) fs::remove(t.first, ec);
  };
  auto fail = [&](const std::string& path, int err) {
    drop();
    throw std::runtime_error("cannot write " + path + (err ? std::string(": ") + std::strerror(err) : std::string()));
  };
  const mode_t mask = current_umask();
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& [path, content] = files[i];
    const std::string target = output_target(path);
    std::string tmp = target + ".XXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) fail(path, errno);
    temps.emplace_back(tmp, target);
    const char* p = content.data();
    size_t left = content.size();
    // Fault injection for tests: killed halfway through the write, before the rename.
    if (const char* f = std::getenv("MOEPERF_FAULT_WRITE"); i == 0 && f && std::string(f) == "kill") {
      if (::write(fd, p, left / 2) < 0) {}
      std::raise(SIGKILL);
    }
    int err = 0;
    while (left > 0 && !err) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) err = n < 0 ? errno : EIO;
      else p += n, left -= static_cast<size_t>(n);
    }
    struct stat st{};
    const mode_t mode = ::stat(target.c_str(), &st) == 0 ? (st.st_mode & 07777) : (0666 & ~mask);
    if (!err && ::fchmod(fd, mode) != 0) err = errno;
    if (::close(fd) != 0 && !err) err = errno;
    if (err) fail(path, err);
  }
  for (size_t i = 0; i < temps.size(); ++i) {
    fs::rename(temps[i].first, temps[i].second, ec);
    if (ec) {
      // The files renamed before this one are in place; the rest are not: say which.
      const std::string msg = ec.message();
      for (size_t k = i; k < temps.size(); ++k) fs::remove(temps[k].first, ec);
      std::string done;
      for (size_t k = 0; k < i; ++k) done += (done.empty() ? "" : ", ") + files[k].first;
      throw std::runtime_error("cannot write " + files[i].first + ": " + msg + (done.empty() ? "" : " (already written: " + done + ")"));
    }
  }
}

}  // namespace moeperf::io
