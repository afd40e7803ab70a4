// moeperf sweep: one scenario over the product of --vary axes (and --grid points), with --derive
// rules keeping each layout consistent; every point predicted on --jobs threads and streamed, in
// point order, to CSV or JSON Lines; --resume continues an interrupted file. Progress on stderr.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/ranks.h"
#include "model/error.h"
#include "model/hash.h"
#include "model/io/sweep.h"
#include "model/io/write_file.h"

namespace moeperf::cli {
namespace {

struct SweepOpts {
  std::string file, out, format, grid, tokens;
  std::vector<std::string> vary, derive, sets;
  int jobs = 0;
  bool resume = false;
};

// What the rows of one sweep have in common, beyond the --vary values each row repeats: the
// scenario file's bytes, the grid file's, every --set, --vary and --derive and the token budget,
// hashed (FNV-1a, 64 bits, as hex). Each row carries it (CSV: the last column, "sweep"; JSON Lines:
// "sweep"), so --resume refuses a file another configuration began (a file the scenario references
// is not hashed: it names it, not its contents).
std::string sweep_fingerprint(const SweepOpts& o) {
  uint64_t h = kFnv1aOffset;
  auto add = [&](const std::string& x) { h = fnv1a64("\xff", fnv1a64(x, h)); };  // 0xFF: a separator no UTF-8 text holds
  auto file = [&](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    add(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  };
  add("moeperf sweep 1");
  file(o.file);
  if (!o.grid.empty()) file(o.grid);
  for (const auto* v : {&o.sets, &o.vary, &o.derive}) {
    add(std::to_string(v->size()));
    for (const std::string& x : *v) add(x);
  }
  add(o.tokens);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// A row as written: with the sweep's fingerprint (the CSV's last column, JSON Lines' "sweep").
std::string with_fingerprint(std::string line, bool csv, const std::string& fp) {
  const size_t end = line.size() - 1;  // before the newline
  if (csv) line.insert(end, "," + fp);
  else line.insert(end - 1, ",\"sweep\":\"" + fp + "\"");  // before the closing brace
  return line;
}

// --resume: the complete lines of `path` that are this sweep's first points, in order. Returns how
// many there are and their bytes (a partial last line, from a kill mid-write, is dropped).
std::pair<size_t, size_t> resumable(const io::SweepSpec& sp, const std::string& path, bool csv, const std::string& header,
                                    const std::string& fp) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {0, 0};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 0, done = 0, lineno = 0;
  const size_t n = io::sweep_size(sp);
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // partial
    const std::string line = text.substr(pos, nl - pos + 1);
    ++lineno;
    if (csv && lineno == 1) {
      if (line != header)
        throw InputError("--resume " + path + ": line 1 is not this sweep's header (another sweep, or another moeperf version, wrote the file?); expected " +
                         header.substr(0, header.size() - 1));
    } else {
      // A row cut short (a crash mid-write, then a newline added) is named as one, not as another sweep's.
      const auto fields = [](const std::string& x) {  // separators outside quoted fields ("" inside a quote toggles twice)
        long seps = 0;
        bool quoted = false;
        for (char c : x) {
          if (c == '"') quoted = !quoted;
          else if (c == ',' && !quoted) ++seps;
        }
        return quoted ? -1L : seps;  // an open quote: cut inside a field
      };
      if (csv ? fields(line) != fields(header) : !nlohmann::json::accept(line))
        throw InputError("--resume " + path + ": line " + std::to_string(lineno) + " is cut short (" +
                         (csv ? std::to_string(fields(line) + 1) + " of the header's " + std::to_string(fields(header) + 1) + " fields"
                              : std::string("not a whole JSON object")) +
                         "): delete it and run --resume again");
      bool ok = done < n;
      if (ok && csv) {
        ok = line.rfind(io::sweep_csv_key(sp, done), 0) == 0;
      } else if (ok) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        nlohmann::json want = nlohmann::json::object();
        for (const auto& o : io::sweep_point(sp, done)) want[o.path] = o.value;
        ok = j.is_object() && j.contains("index") && j["index"] == done && j.contains("point") && j["point"] == want;
      }
      if (!ok)
        throw InputError("--resume " + path + ": line " + std::to_string(lineno) + " is not point " + std::to_string(done) +
                         " of this sweep (another sweep, or other --vary values, wrote the file?)");
      const bool same = csv ? line.size() > fp.size() + 1 && line.compare(line.size() - fp.size() - 2, fp.size() + 2, "," + fp + "\n") == 0
                            : nlohmann::json::parse(line, nullptr, false).value("sweep", std::string()) == fp;
      if (!same)
        throw InputError("--resume " + path + ": line " + std::to_string(lineno) + " was written by another configuration of this sweep "
                         "(its \"sweep\" fingerprint is not " + fp + ": the scenario file, the grid, --set, --derive or --tokens "
                         "differ); rows of two configurations are not mixed: restore them, or start afresh without --resume");
      ++done;
    }
    pos = nl + 1;
  }
  return {done, pos};
}

int cmd_sweep(const SweepOpts& o) {
  // Under moeperf-mpi the points are dealt out over the ranks (point i to rank i mod size, counted
  // from the first point not yet done); rank 0 writes every row in point order, its own and those
  // the others send, so the file is the single process's byte for byte.
  Ranks& rk = ranks();
  const bool root = rk.rank() == 0;
  io::SweepSpec sp;
  bool csv = true;
  size_t n = 0, start = 0, keep = 0;
  std::string header, fingerprint;
  std::ofstream file;
  std::ostream* out = &std::cout;
  const bool failed_elsewhere = agree([&] {
    sp.scenario = o.file;
    sp.sets = overrides(o.sets);
    for (const auto& v : o.vary) sp.axes.push_back(io::parse_vary(v));
    for (const auto& d : o.derive) sp.derive.push_back(io::parse_derive(d));
    if (!o.grid.empty()) sp.grid = io::load_sweep_grid(o.grid);
    if (!o.tokens.empty()) sp.train_tokens = parse_token_count("--tokens", o.tokens);
    if (sp.axes.empty() && sp.grid.empty()) throw InputError("sweep: nothing to vary: give --vary PATH=V1,V2,... or --grid FILE.json");
    check_output_path("--out", o.out, {o.file, o.grid}, /*streamed=*/true);
    if (o.resume && o.out.empty()) throw InputError("--resume needs --out FILE (the file an interrupted sweep wrote)");
    {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(o.file, ec)) throw InputError(o.file + ": no such file");
    }
    io::check_sweep(sp);  // what would fail every point alike: exit 2 before a row is written
    if (!o.out.empty()) io::check_not_input(o.out);  // the files the base scenario names were read now
    // .jsonl takes JSON Lines (one object per row, appended as each point finishes: a file that
    // stays valid through a crash and can be resumed); anything else CSV. A .json name is refused
    // unless --format says jsonl: the file would not be one JSON document.
    auto ends_with = [&](const std::string& x) { return o.out.size() > x.size() && o.out.substr(o.out.size() - x.size()) == x; };
    if (o.format.empty() && ends_with(".json"))
      throw InputError("--out " + o.out + ": sweep writes JSON Lines, one object per row as each point finishes (a file an interrupted "
                       "sweep leaves valid, and --resume continues), not one JSON document: name it .jsonl, or give --format jsonl");
    const std::string fmt_name = !o.format.empty() ? o.format : ends_with(".jsonl") ? "jsonl" : "csv";
    csv = fmt_name == "csv";
    n = io::sweep_size(sp);
    header = io::sweep_csv_header(sp);
    header.insert(header.size() - 1, ",sweep");
    fingerprint = sweep_fingerprint(o);
    if (!root) return;  // rank 0 alone reads and writes the output
    if (o.resume) std::tie(start, keep) = resumable(sp, o.out, csv, header, fingerprint);
    if (!o.out.empty()) {
      if (o.resume && keep > 0) {
        std::filesystem::resize_file(o.out, keep);  // drop a partial last line
        file.open(o.out, std::ios::binary | std::ios::app);
      } else {
        file.open(o.out, std::ios::binary | std::ios::trunc);
      }
      if (!file) throw std::runtime_error("cannot write " + o.out);
      out = &file;
    }
  });
  if (failed_elsewhere) return kExitBadInput;
  if (rk.size() > 1) {
    std::string s = std::to_string(start);
    rk.broadcast(s);
    start = std::stoul(s);
  }
  const std::string out_name = o.out.empty() ? std::string("the standard output") : o.out;
  if (root && csv && keep == 0) {
    errno = 0;
    *out << header << std::flush;
    if (!*out) throw std::runtime_error("cannot write " + out_name + (errno ? std::string(" (") + std::strerror(errno) + ")" : std::string()));
  }
  if (root && o.resume) std::cerr << "sweep: " << start << " of " << n << " points already in " << o.out << "\n";

  const size_t procs = static_cast<size_t>(rk.size()), me = static_cast<size_t>(rk.rank());
  auto owner = [&](size_t i) { return (i - start) % procs; };
  const int jobs = std::max(1, o.jobs > 0 ? o.jobs : static_cast<int>(std::thread::hardware_concurrency()));
  // Finished rows wait here until they are written in point order. A worker runs at most `window`
  // of this rank's points ahead of the next one to be written, so memory stays bounded however long
  // the sweep (a slot per point, allocated up front, took 711 MB for 10 million points).
  size_t window = std::max<size_t>(4096, 64 * static_cast<size_t>(jobs));
  // For tests: a small window, so that workers do wait for the writer.
  if (const char* w = std::getenv("MOEPERF_SWEEP_WINDOW"); w && std::atoll(w) > 0) window = static_cast<size_t>(std::atoll(w));
  std::map<size_t, std::pair<std::string, std::string>> done;  // this rank's k -> (status, row)
  size_t taken = 0;                                             // this rank's points written or sent
  bool stop = false;
  std::mutex mu;
  std::condition_variable cv_done, cv_room;
  std::atomic<size_t> next{0};  // this rank's k-th point is start + me + k * procs
  auto worker = [&] {
    for (size_t k = next++, i = start + me + k * procs; i < n; k = next++, i = start + me + k * procs) {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv_room.wait(lk, [&] { return stop || k < taken + window; });
        if (stop) return;
      }
      const io::SweepRow r = io::run_point(sp, i);
      std::string text = with_fingerprint(csv ? io::sweep_csv_row(sp, r) : io::sweep_jsonl_row(r), csv, fingerprint);
      {
        std::lock_guard<std::mutex> lk(mu);
        done.emplace(k, std::make_pair(r.status, std::move(text)));
      }
      cv_done.notify_all();
    }
  };
  auto stop_workers = [&] {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    next.store(n);
    cv_room.notify_all();
  };
  const size_t mine = n > start + me ? (n - start - me + procs - 1) / procs : 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(jobs, static_cast<int>(std::max<size_t>(mine, 1))); ++t) pool.emplace_back(worker);
  auto take = [&](size_t i) {
    const size_t k = (i - start - me) / procs;
    std::unique_lock<std::mutex> lk(mu);
    cv_done.wait(lk, [&] { return done.count(k) > 0; });
    auto node = done.extract(k);
    ++taken;
    lk.unlock();
    cv_room.notify_all();
    return std::move(node.mapped());
  };
  if (!root) {
    // This rank's rows to rank 0, in point order: status, a NUL, the row's text.
    for (size_t i = start + me; i < n; i += procs) {
      auto [st, text] = take(i);
      rk.send_to_root(st + std::string(1, '\0') + text);
    }
    for (auto& t : pool) t.join();
    return kExitOk;
  }
  Progress bar("sweep", "points", n, start);
  std::map<std::string, size_t> counts;
  const auto t0 = std::chrono::steady_clock::now();
  // Rows go out in point order as soon as every earlier one is done, so an interrupted file holds a
  // prefix of the sweep (what --resume continues from).
  for (size_t i = start; i < n; ++i) {
    std::string st, text;
    if (owner(i) == 0) {
      std::tie(st, text) = take(i);
    } else {
      const std::string msg = rk.receive_from(static_cast<int>(owner(i)));
      const size_t nul = msg.find('\0');
      st = msg.substr(0, nul), text = msg.substr(nul + 1);
    }
    ++counts[st];
    errno = 0;
    *out << text << std::flush;
    if (!*out) {  // a full disk: stop dealing out points, let the running ones finish, and fail
      const int err = errno;
      stop_workers();
      for (auto& t : pool) t.join();
      throw std::runtime_error("cannot write " + out_name + (err ? std::string(" (") + std::strerror(err) + ")" : std::string()) + ": " +
                               std::to_string(i - start) + " rows of this run written");
    }
    bar.update(i + 1, i + 1 == n);
  }
  for (auto& t : pool) t.join();
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char tail[240];
  const std::string where = workers_text(jobs);
  std::snprintf(tail, sizeof tail, "sweep: %zu points in %.1f s on %s (%.1f/s): %zu ok, %zu infeasible, %zu failed%s%s\n",
                n - start, el, where.c_str(), el > 0 ? static_cast<double>(n - start) / el : 0.0, counts["ok"],
                counts["infeasible"], counts["failed"], o.out.empty() ? "" : "; written to ", o.out.c_str());
  std::cerr << tail;
  return kExitOk;
}

}  // namespace

Command add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOpts>();
  auto* sub = app.add_subcommand("sweep", "Predict a scenario over the product of --vary axes (and --grid points), one row per point");
  sub->add_option("SCENARIO", o->file, "scenario file")->required();
  sub->add_option("--vary", o->vary,
                  "PATH=V1,V2,... or a range PATH=A..B*F (geometric) or PATH=A..B+S; same dotted paths as --set; repeat for a product");

  sub->add_option("--grid", o->grid, "JSON file {\"kind\": \"sweep_grid\", \"points\": [{\"parallelism.ep\": 8, ...}, ...]} crossed with --vary");
  sub->add_option("--derive", o->derive,
                  "PATH=EXPRESSION set at every point after its values, e.g. parallelism.fsdp=gpus/(ep*tp*pp*dp) "
                  "(names: gpus tp cp pp vpp ep etp fsdp dp micro_batch global_batch seq_len, or dotted paths)");

  sub->add_option("--set", o->sets, "fixed override PATH=VALUE at every point");
  sub->add_option("--jobs", o->jobs, "threads (default: every core)")->check(whole_at_least_one("a thread count"));
  sub->add_option("--out", o->out, "write rows here as they finish (CSV, or JSON Lines, one object per row, for .jsonl or --format jsonl; a .json name is refused) instead of stdout");
  sub->add_option("--format", o->format, "csv or jsonl (default: from --out's extension, else csv)")->check(CLI::IsMember({"csv", "jsonl"}));
  sub->add_option("--tokens", o->tokens, "a token budget (15T, 300B): adds each point's days to train it");
  sub->add_flag("--resume", o->resume, "continue the sweep --out holds: keep its finished points, run the rest");
  return {sub, [o] { return cmd_sweep(*o); }};
}

}  // namespace moeperf::cli
