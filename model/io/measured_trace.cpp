// Profiles of real training steps (PyTorch Kineto JSON; Nsight Systems SQLite in
// measured_trace_nsys.cpp) as per-class kernel totals and measurement records.
#include "model/io/measured_trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "model/io/detail/json_node.h"
#include "model/io/detail/measured_trace_parts.h"

namespace moeperf::io {

using namespace detail;

namespace {

constexpr std::pair<const char*, const char*> kBuiltinPatterns[] = {
#include "builtin_kernel_patterns.inc"
};

KernelPatterns parse_patterns(const Node& root, const std::string& file) {
  root.expect_object();
  root.allow_only({"kind", "description", "source", "patterns"});
  if (root.at("kind").as_string() != "kernel-patterns") root.at("kind").fail("expected \"kernel-patterns\"");
  root.at("source").as_string();
  KernelPatterns p;
  p.file = file;
  const Node list = root.at("patterns");
  if (!list.is_array() || list.size() == 0) list.fail("expected a non-empty array of {\"class\", \"match\"} patterns");
  const auto& classes = trace_classes();
  for (size_t i = 0; i < list.size(); ++i) {
    const Node x = list[i];
    x.expect_object();
    x.allow_only({"class", "match", "library", "why"});
    KernelPattern k;
    k.cls = x.at("class").as_string();
    if (std::find(classes.begin(), classes.end(), k.cls) == classes.end())
      x.at("class").fail("unknown op class \"" + k.cls + "\": expected one of " + join_choices(classes) + did_you_mean(k.cls, classes));
    k.match = x.at("match").as_string();
    k.library = x.string_or("library", "");
    try {
      k.re = std::regex(k.match, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      x.at("match").fail(std::string("not a regular expression (ECMAScript): ") + e.what());
    }
    p.patterns.push_back(std::move(k));
  }
  return p;
}

}  // namespace

const std::vector<std::string>& trace_classes() {
  static const std::vector<std::string> k{"gemm", "grouped_gemm", "attention.fwd", "attention.bwd", "memory", "memory.copy",
                                          "host.h2d", "host.d2h", "collective.all_reduce", "collective.all_gather",
                                          "collective.reduce_scatter", "collective.all_to_all", "collective.send_recv",
                                          "ep.dispatch", "ep.combine"};
  return k;
}

const KernelPattern* KernelPatterns::match(const std::string& kernel) const {
  // The name's head only: libstdc++'s regex recurses per character under ".*", and a templated
  // name says what it is long before 4 KiB.
  const std::string head = kernel.size() > kClassifiedChars ? kernel.substr(0, kClassifiedChars) : kernel;
  for (const KernelPattern& p : patterns)
    if (std::regex_search(head, p.re)) return &p;
  return nullptr;
}

std::string KernelPatterns::classify(const std::string& kernel) const {
  const KernelPattern* p = match(kernel);
  return p ? p->cls : "";
}

const KernelPatterns& builtin_kernel_patterns() {
  static const KernelPatterns p = [] {
    for (auto& [name, text] : kBuiltinPatterns)
      if (std::string(name) == "patterns") {
        const json j = json::parse(text);
        return parse_patterns(Node(j, "built-in calibration/kernels/patterns.json", ""), "built-in");
      }
    throw std::logic_error("calibration/kernels/patterns.json was not built in");
  }();
  return p;
}

KernelPatterns load_kernel_patterns(const std::string& path) {
  const json j = read_json_file(path);
  return parse_patterns(Node(j, path, ""), path);
}

namespace detail {

std::string memcpy_class(const std::string& kind) {
  if (kind == "HtoD" || kind == "HtoA") return "host.h2d";
  if (kind == "DtoH" || kind == "AtoH") return "host.d2h";
  if (kind == "DtoD" || kind == "AtoA" || kind == "AtoD" || kind == "DtoA") return "memory.copy";
  if (kind == "PtoP") return "collective.send_recv";
  return "";
}

std::string memcpy_kind_name(int64_t kind) {
  // CUpti_ActivityMemcpyKind (cupti_activity.h): 0 unknown, 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA,
  // 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH, 10 PtoP.
  static const char* const k[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  if (kind >= 0 && kind <= 10) return k[kind];
  return "kind " + std::to_string(kind);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void finish_trace(MeasuredTrace& t, std::vector<TraceKernelEvent>& kernels, std::vector<TraceRange>& steps,
                  const KernelPatterns& patterns, const TraceOptions& opt, const std::string& where_kernels) {
  std::set<int> devs;
  for (const auto& k : kernels) devs.insert(k.device);
  if (kernels.empty() || devs.empty())
    throw SpecError(t.file, where_kernels,
                    "no GPU kernels in the trace: profile with CUDA activities on (PyTorch: activities=[ProfilerActivity.CUDA]; "
                    "nsys: --trace=cuda)");
  t.devices.assign(devs.begin(), devs.end());
  if (opt.device >= 0) {
    if (!devs.count(opt.device)) {
      std::string have;
      for (int d : devs) have += (have.empty() ? "" : ", ") + std::to_string(d);
      throw SpecError(t.file, where_kernels, "--device " + std::to_string(opt.device) + ": no kernel ran on it (devices with kernels: " + have + ")");
    }
    t.device = opt.device;
  } else {
    // The device that ran the most kernel time: a stray kernel on another GPU (a check, a copy)
    // does not pick the device whose step is read. Ties: the lowest id.
    std::map<int, double> busy;
    for (const auto& k : kernels) busy[k.device] += k.dur;
    t.device = *devs.begin();
    for (const auto& [d, s] : busy)
      if (s > busy[t.device]) t.device = d;
  }
  if (devs.size() > 1)
    t.notes.push_back("kernels of " + std::to_string(devs.size()) + " devices in the trace: device " + std::to_string(t.device) +
                      " counted (" + (opt.device >= 0 ? "--device" : "the most kernel time; --device picks another") + ")");
  // Steps: the marked ranges, GPU-side ones when the trace has them.
  std::regex marker;
  try {
    marker = std::regex(opt.step_marker, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InputError("--step-marker \"" + opt.step_marker + "\": not a regular expression: " + e.what());
  }
  // One range per step. Kineto writes a step's GPU-side range once per stream its kernels ran on
  // (and per device), each over that stream's kernels: the counted device's. CPU-side ranges: those
  // of the process that launched the counted device's kernels, where the trace says which (an nsys
  // export of several ranks holds every rank's). Then ranges of one name that overlap are one step
  // (the streams' ranges of a step; a step marked by several processes when the trace does not say
  // which; a marker matching a range and one inside it), while a name repeated step after step, a
  // record_function("train_step"), stays one range per step, and ranges that only touch (within a
  // nanosecond: microseconds scaled apart) are two.
  std::set<int64_t> procs;
  for (const auto& k : kernels)
    if (k.device == t.device && k.process >= 0) procs.insert(k.process);
  std::vector<TraceRange> gpu_steps, cpu_steps;
  for (const auto& s : steps) {
    if (!std::regex_search(s.name, marker)) continue;
    if (s.gpu && s.device >= 0 && s.device != t.device) continue;
    if (!s.gpu && s.process >= 0 && !procs.empty() && !procs.count(s.process)) continue;
    (s.gpu ? gpu_steps : cpu_steps).push_back(s);
  }
  auto by_start = [](const TraceRange& a, const TraceRange& b) { return a.start != b.start ? a.start < b.start : a.end < b.end; };
  auto merge_by_name = [&](std::vector<TraceRange>& all) {
    std::map<std::string, std::vector<TraceRange>> named;
    for (const auto& s : all) named[s.name].push_back(s);
    all.clear();
    for (auto& [n, v] : named) {
      std::sort(v.begin(), v.end(), by_start);
      for (const auto& s : v) {
        if (all.size() > 0 && all.back().name == n && s.start < all.back().end - 1e-9) all.back().end = std::max(all.back().end, s.end);
        else all.push_back(s);
      }
    }
    std::sort(all.begin(), all.end(), by_start);
  };
  merge_by_name(gpu_steps);
  merge_by_name(cpu_steps);
  std::vector<TraceRange>& chosen = gpu_steps.empty() ? cpu_steps : gpu_steps;
  // A kernel counts when it starts inside one of the steps (not in a step left out between two
  // chosen ones, nor between steps): the steps' starts, sorted, searched.
  // GPU-side ranges of one device may overlap (a step's last kernels beside the next one's first):
  // reach[i], the latest end of ranges 0..i, ends the search back from the latest start <= ts.
  std::vector<double> starts, reach;
  for (const auto& s : chosen) starts.push_back(s.start), reach.push_back(std::max(reach.empty() ? s.end : reach.back(), s.end));
  auto in_a_step = [&](double ts) {
    if (chosen.empty()) return true;
    for (auto i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), ts) - starts.begin()); i-- > 0;) {
      if (reach[i] < ts) return false;
      if (ts <= chosen[i].end) return true;
    }
    return false;
  };
  if (!chosen.empty()) {
    std::vector<double> d;
    for (const auto& s : chosen) d.push_back(s.end - s.start);
    t.steps = static_cast<int>(chosen.size());
    t.step_s = median_of(d);
    t.step_source = "median of " + std::to_string(chosen.size()) + " " + (gpu_steps.empty() ? "CPU-side" : "GPU-side") +
                    " step range" + (chosen.size() > 1 ? "s" : "") + " matching \"" + opt.step_marker + "\"";
  }
  double first = INFINITY, last = -INFINITY;
  std::map<std::string, UnmappedKernel> unmapped;
  std::map<std::string, std::string> seen;  // name -> class: thousands of launches of a few hundred kernels
  for (auto& k : kernels) {
    if (k.device != t.device || !in_a_step(k.start)) continue;
    k.counted = true;
    first = std::min(first, k.start), last = std::max(last, k.start + k.dur);
    t.kernels += 1;
    t.kernel_seconds += k.dur;
    if (k.cls.empty()) {
      auto it = seen.find(k.name);
      if (it == seen.end()) it = seen.emplace(k.name, patterns.classify(k.name)).first;
      k.cls = it->second;
    }
    if (k.cls.empty()) {
      auto& u = unmapped[k.name];
      u.name = k.name, u.count += 1, u.seconds += k.dur;
      continue;
    }
    auto& c = t.classes[k.cls];
    c.kernels += 1, c.seconds += k.dur;
  }
  if (t.kernels == 0) throw SpecError(t.file, where_kernels, "no kernel of device " + std::to_string(t.device) + " falls in the marked steps");
  if (chosen.empty()) {
    t.step_s = last - first;
    t.step_source = "span of the kernels (first start to last end): no range matches the step marker \"" + opt.step_marker + "\"";
  }
  const double per = std::max(1, t.steps);
  for (auto& [c, v] : t.classes) v.seconds /= per;
  for (auto& [n, u] : unmapped) t.unmapped.push_back(u);
  std::sort(t.unmapped.begin(), t.unmapped.end(), [](const UnmappedKernel& a, const UnmappedKernel& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  for (auto& u : t.unmapped) u.seconds /= per;
}

}  // namespace detail

MeasuredTrace read_measured_trace(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError(path, "", "cannot open the trace file");
  char head[16] = {0};
  in.read(head, sizeof head);
  if (in.gcount() == 16 && std::memcmp(head, "SQLite format 3", 16) == 0) return read_nsys_sqlite(path, patterns, opt);
  return read_kineto(path, patterns, opt);
}

json trace_records_document(const MeasuredTrace& t, const std::string& gpu_file, const std::string& system_file,
                            std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  auto absolute = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  json doc = {{"kind", "measurements"},
              {"name", "trace " + fs::path(t.file).filename().string()},
              {"source", t.file + " (" + t.format + ", " + (t.gpu_name.empty() ? std::string("GPU not named") : t.gpu_name) + ")"}};
  if (!gpu_file.empty()) doc["gpus"] = {{"trace-gpu", absolute(gpu_file)}};
  if (!system_file.empty()) doc["systems"] = {{"trace-system", absolute(system_file)}};
  json recs = json::array();
  int skipped_system = 0, skipped_gpu = 0;
  for (const json& r : t.records) {
    const std::string op = r.at("op");
    const bool needs_system = op.rfind("collective.", 0) == 0 || op.rfind("host.", 0) == 0 || op.rfind("ep.", 0) == 0;
    json x = r;
    if (needs_system) {
      if (system_file.empty()) {
        ++skipped_system;
        continue;
      }
      x["system"] = "trace-system";
    } else if (!gpu_file.empty()) {
      x["gpu"] = "trace-gpu";
    } else if (!system_file.empty()) {
      x["system"] = "trace-system";  // the system's GPU
    } else {
      ++skipped_gpu;
      continue;
    }
    recs.push_back(std::move(x));
  }
  doc["records"] = std::move(recs);
  if (notes && skipped_system)
    notes->push_back(std::to_string(skipped_system) + " collective/host-copy record" + (skipped_system > 1 ? "s" : "") +
                     " left out: they are priced on a system; name its file with --system");
  if (notes && skipped_gpu)
    notes->push_back(std::to_string(skipped_gpu) + " compute record" + (skipped_gpu > 1 ? "s" : "") +
                     " left out: name the GPU's file with --gpu (or the system's with --system)");
  return doc;
}

namespace {

// The row of one of the model's ops (the rows of compare_with_trace, in order).
int model_row(const OpSummary& o, Collective c) {
  switch (o.category) {
    case Category::gemm: return 0;
    case Category::attention: return 1;
    case Category::memory:
    case Category::optimizer: return 2;
    case Category::sync: return -1;
    default: break;
  }
  if (o.ep_kernel) return 8;
  switch (c) {
    case Collective::all_gather: return 3;
    case Collective::reduce_scatter: return 4;
    case Collective::all_reduce: return 5;
    case Collective::all_to_all: return 6;
    case Collective::send_recv: return 7;
    case Collective::d2h:
    case Collective::h2d: return 9;
    case Collective::none: return 2;
  }
  return -1;
}

}  // namespace

TraceComparison compare_with_trace(const StepReport& r, const MeasuredTrace& t) {
  TraceComparison c;
  c.rows = {{"GEMMs", {"gemm", "grouped_gemm"}},
            {"attention", {"attention.fwd", "attention.bwd"}},
            {"memory-bound kernels", {"memory", "memory.copy"}},
            {"all-gather", {"collective.all_gather"}},
            {"reduce-scatter", {"collective.reduce_scatter"}},
            {"all-reduce", {"collective.all_reduce"}},
            {"all-to-all", {"collective.all_to_all"}},
            {"send/recv", {"collective.send_recv"}},
            {"EP dispatch/combine kernels", {"ep.dispatch", "ep.combine"}},
            {"host copies", {"host.h2d", "host.d2h"}}};
  std::map<std::string, Collective> coll;
  if (r.graph && r.busiest_class >= 0 && static_cast<size_t>(r.busiest_class) < r.graph->classes.size())
    for (const Op& op : r.graph->classes[static_cast<size_t>(r.busiest_class)].ops) coll.emplace(op.name, op.collective);
  for (const OpSummary& o : r.ops) {
    auto it = coll.find(o.name);
    const int row = model_row(o, it == coll.end() ? Collective::none : it->second);
    c.row_of_op[o.name] = row;
    if (row >= 0) c.rows[static_cast<size_t>(row)].predicted_s += o.seconds.value();
  }
  for (TraceRow& row : c.rows)
    for (const std::string& cls : row.trace_classes)
      if (auto it = t.classes.find(cls); it != t.classes.end()) row.measured_s += it->second.seconds;
  for (const auto& u : t.unmapped) c.unmapped_s += u.seconds;
  return c;
}

std::map<std::string, double> trace_seconds_per_op(const StepReport& r, const MeasuredTrace& t) {
  const TraceComparison c = compare_with_trace(r, t);
  std::map<std::string, double> out;
  for (const OpSummary& o : r.ops) {
    const int row = c.row_of_op.count(o.name) ? c.row_of_op.at(o.name) : -1;
    if (row < 0) continue;
    const TraceRow& x = c.rows[static_cast<size_t>(row)];
    if (x.measured_s <= 0 || x.predicted_s <= 0 || o.count <= 0) continue;
    // Per call, as the executor's medians are.
    out[o.name] = o.seconds.value() / x.predicted_s * x.measured_s / static_cast<double>(o.count);
  }
  return out;
}

}  // namespace moeperf::io
