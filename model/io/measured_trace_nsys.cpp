// An Nsight Systems SQLite export (nsys export --type sqlite) as kernel classes: the tables and
// columns relied on are listed in measured_trace.h and docs/traces.md. Built with SQLite when
// CMake finds it (libsqlite3-dev); otherwise reading one says so.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "model/io/detail/json_node.h"
#include "model/io/detail/measured_trace_parts.h"

#ifdef MOEPERF_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace moeperf::io {

bool built_with_sqlite() {
#ifdef MOEPERF_HAVE_SQLITE
  return true;
#else
  return false;
#endif
}

namespace detail {

#ifdef MOEPERF_HAVE_SQLITE
namespace {

class Db {
 public:
  explicit Db(const std::string& path) : path_(path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw SpecError(path, "", "cannot open as SQLite: " + why);
    }
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  bool has_table(const std::string& t) {
    bool found = false;
    query("SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = '" + t + "'", "sqlite_master",
          [&](sqlite3_stmt*) { found = true; });
    return found;
  }
  bool has_column(const std::string& t, const std::string& c) {
    bool found = false;
    query("PRAGMA table_info(" + t + ")", t, [&](sqlite3_stmt* s) {
      const unsigned char* n = sqlite3_column_text(s, 1);
      if (n && c == reinterpret_cast<const char*>(n)) found = true;
    });
    return found;
  }
  template <class F>
  void query(const std::string& sql, const std::string& table, F row) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      const std::string why = sqlite3_errmsg(db_);
      sqlite3_finalize(st);
      throw SpecError(path_, table, "cannot read: " + why + " (is it an nsys export --type sqlite file?)");
    }
    int rc;
    row_ = 0;
    try {
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        ++row_;
        row(st);
      }
    } catch (...) {
      sqlite3_finalize(st);
      throw;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw SpecError(path_, table, std::string("cannot read: ") + sqlite3_errmsg(db_));
  }
  // A column of the row query() is at, checked: NULL, text or a real where nsys writes an integer
  // (a time, a device, a byte count), or text that is not UTF-8, is a malformed export, named by
  // table, column and row; never read as 0 or passed on to the JSON written.
  int64_t integer(sqlite3_stmt* s, int col, const std::string& table, const char* column) const {
    if (const int type = sqlite3_column_type(s, col); type != SQLITE_INTEGER)
      throw SpecError(path_, table + "." + column, "row " + std::to_string(row_) + ": expected an integer, got " +
                                                      (type == SQLITE_NULL ? "NULL" : type == SQLITE_TEXT ? "text" : type == SQLITE_FLOAT ? "a real number" : "a blob"));
    return sqlite3_column_int64(s, col);
  }
  std::string text(sqlite3_stmt* s, int col, const std::string& table, const char* column) const {
    const unsigned char* t = sqlite3_column_text(s, col);
    std::string v = t ? reinterpret_cast<const char*>(t) : "";
    if (const size_t bad = first_invalid_utf8(v); bad != std::string::npos)
      throw SpecError(path_, table + "." + column, "row " + std::to_string(row_) + ": not UTF-8 text (byte " + std::to_string(bad + 1) + ")");
    return v;
  }
  // A [start, end] pair of nanoseconds, end not before start.
  std::pair<double, double> span(sqlite3_stmt* s, int start_col, int end_col, const std::string& table) const {
    const int64_t a = integer(s, start_col, table, "start"), b = integer(s, end_col, table, "end");
    if (b < a)
      throw SpecError(path_, table + ".end", "row " + std::to_string(row_) + ": ends (" + std::to_string(b) + " ns) before it starts (" +
                                                std::to_string(a) + " ns)");
    return {static_cast<double>(a) * 1e-9, static_cast<double>(b) * 1e-9};
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  size_t row_ = 0;
};

}  // namespace
#endif

MeasuredTrace read_nsys_sqlite(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt) {
#ifndef MOEPERF_HAVE_SQLITE
  (void)patterns, (void)opt;
  throw SpecError(path, "", "an SQLite file (Nsight Systems export): this moeperf was built without SQLite (install libsqlite3-dev and rebuild)");
#else
  Db db(path);
  MeasuredTrace t;
  t.file = path;
  t.format = "nsys-sqlite";
  const std::string K = "CUPTI_ACTIVITY_KIND_KERNEL";
  if (!db.has_table(K))
    throw SpecError(path, K, "no GPU kernels in the export (no " + K + " table): trace with nsys profile --trace=cuda, then nsys export --type sqlite");
  if (!db.has_table("StringIds")) throw SpecError(path, "StringIds", "the export has no StringIds table: kernel names cannot be read");
  const char* name_col = db.has_column(K, "demangledName") ? "demangledName" : db.has_column(K, "shortName") ? "shortName" : nullptr;
  if (!name_col) throw SpecError(path, K, "expected a demangledName or shortName column");
  // A device id as the trace's int, checked (a 64-bit column value is not truncated to another id).
  auto device_of = [&](int64_t d, const std::string& table) {
    if (d < 0 || d > std::numeric_limits<int>::max())
      throw SpecError(path, table + ".deviceId", "expected a device id from 0, got " + std::to_string(d));
    return static_cast<int>(d);
  };
  // The process of a kernel (globalPid) and of an NVTX range (globalTid), where the export has
  // them: nsys's serialized global ids carry the process id in bits 24-47 (its SQLite schema's
  // "globalTid / 0x1000000 % 0x1000000 AS PID"). An export of several ranks holds every rank's
  // step ranges; those of the counted device's process are its steps (finish_trace).
  auto pid_of = [](int64_t global) { return (global >> 24) & 0xFFFFFF; };
  const bool kernel_pid = db.has_column(K, "globalPid");
  std::vector<TraceKernelEvent> kernels;
  db.query(std::string("SELECT k.start, k.end, k.deviceId, s.value") + (kernel_pid ? ", k.globalPid" : "") + " FROM " + K +
               " k LEFT JOIN StringIds s ON s.id = k." + name_col + " ORDER BY k.start",
           K, [&](sqlite3_stmt* s) {
             TraceKernelEvent k;
             const auto [a, b] = db.span(s, 0, 1, K);
             k.start = a, k.dur = b - a;
             k.device = device_of(db.integer(s, 2, K, "deviceId"), K);
             // A name id StringIds lacks is a malformed export, not a kernel without a name.
             if (sqlite3_column_type(s, 3) == SQLITE_NULL)
               throw SpecError(path, K + "." + name_col, "a name id that StringIds does not hold");
             k.name = db.text(s, 3, K, name_col);
             if (kernel_pid) k.process = pid_of(db.integer(s, 4, K, "globalPid"));
             kernels.push_back(std::move(k));
           });
  std::vector<double> copy_bytes(kernels.size(), 0);
  if (db.has_table("CUPTI_ACTIVITY_KIND_MEMCPY")) {
    // copyKind: CUpti_ActivityMemcpyKind (memcpy_kind_name, memcpy_class).
    const std::string M = "CUPTI_ACTIVITY_KIND_MEMCPY";
    db.query("SELECT start, end, deviceId, bytes, copyKind FROM " + M, M, [&](sqlite3_stmt* s) {
      TraceKernelEvent k;
      const auto [a, b] = db.span(s, 0, 1, M);
      k.start = a, k.dur = b - a;
      k.device = device_of(db.integer(s, 2, M, "deviceId"), M);
      const int64_t kind = db.integer(s, 4, M, "copyKind");
      const int64_t bytes = db.integer(s, 3, M, "bytes");
      if (bytes < 0) throw SpecError(path, M + ".bytes", "a negative byte count (" + std::to_string(bytes) + ")");
      const std::string kind_name = memcpy_kind_name(kind);
      k.cls = memcpy_class(kind_name);
      k.name = "Memcpy " + kind_name;
      k.copy = true;
      kernels.push_back(std::move(k));
      copy_bytes.push_back(static_cast<double>(bytes));
    });
  }
  std::vector<TraceRange> steps;
  if (db.has_table("NVTX_EVENTS")) {
    const bool text_id = db.has_column("NVTX_EVENTS", "textId"), range_pid = db.has_column("NVTX_EVENTS", "globalTid");
    db.query(std::string("SELECT n.start, n.end, ") + (text_id ? "COALESCE(n.text, s.value)" : "n.text") + (range_pid ? ", n.globalTid" : "") +
                 " FROM NVTX_EVENTS n " + (text_id ? "LEFT JOIN StringIds s ON s.id = n.textId " : "") + "WHERE n.end IS NOT NULL",
             "NVTX_EVENTS", [&](sqlite3_stmt* s) {
               const auto [a, b] = db.span(s, 0, 1, "NVTX_EVENTS");
               // The text is only matched against the step marker, never written: any bytes do
               // (a library's Latin-1 range name is no reason to refuse the export).
               const unsigned char* txt = sqlite3_column_text(s, 2);
               TraceRange r{txt ? reinterpret_cast<const char*>(txt) : "", a, b, false};
               if (range_pid && sqlite3_column_type(s, 3) != SQLITE_NULL) r.process = pid_of(db.integer(s, 3, "NVTX_EVENTS", "globalTid"));
               steps.push_back(std::move(r));
             });
  }
  if (db.has_table("TARGET_INFO_GPU") && db.has_column("TARGET_INFO_GPU", "name"))
    db.query("SELECT name FROM TARGET_INFO_GPU LIMIT 1", "TARGET_INFO_GPU", [&](sqlite3_stmt* s) { t.gpu_name = db.text(s, 0, "TARGET_INFO_GPU", "name"); });
  finish_trace(t, kernels, steps, patterns, opt, K);
  t.notes.push_back("Nsight Systems records no shapes: its kernels are timed per class; only its host copies become records");
  std::map<std::pair<std::string, double>, std::vector<double>> copies;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (kernels[i].counted && copy_bytes[i] > 0 && memcpy_class_has_record(kernels[i].cls)) copies[{kernels[i].cls, copy_bytes[i]}].push_back(kernels[i].dur);
  const std::string stem = std::filesystem::path(path).filename().string();
  for (auto& [key, secs] : copies) {
    const double bytes = key.second * (key.first == "memory.copy" ? 2 : 1);
    char b[64];
    std::snprintf(b, sizeof b, "%.0f B", bytes);
    char m[64];
    std::snprintf(m, sizeof m, "%.0f ns", median_of(secs) * 1e9);
    t.records.push_back({{"id", stem + "/" + key.first + "-" + std::string(b).substr(0, std::string(b).size() - 2) + "B"},
                         {"op", key.first}, {"shape", {{"bytes", b}}}, {"measured", m}, {"library", "CUDA memcpy"},
                         {"source", "trace " + path + " (nsys-sqlite" + (t.gpu_name.empty() ? "" : ", " + t.gpu_name) + ")"},
                         {"quote", "median of " + std::to_string(secs.size()) + " copies"}, {"confidence", "high"}});
  }
  for (size_t i = 0; i < kernels.size(); ++i)
    if (kernels[i].counted && !kernels[i].cls.empty() && copy_bytes[i] == 0) ++t.shapeless;
  return t;
#endif
}

}  // namespace detail
}  // namespace moeperf::io
