// A PyTorch profiler (Kineto) Chrome-trace JSON as kernel classes and measurement records. The
// fields relied on are listed in measured_trace.h and docs/traces.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <regex>
#include <set>

#include "model/io/detail/json_node.h"
#include "model/io/detail/measured_trace_parts.h"

namespace moeperf::io::detail {

namespace {

struct CpuOp {
  std::string name;
  double start = 0, end = 0;
  const json* args = nullptr;
  size_t event = 0;  // its index in the trace's events (for an error's JSON path)
};

struct KernelLink {
  const json* args = nullptr;    // the kernel's own args
  size_t event = 0;              // its index in the trace's events (for an error's JSON path)
  int64_t correlation = -1, external_id = -1;
  std::vector<int> chain;        // CPU ops around its launch, outermost first (indices into ops)
};

std::string type_dtype(const std::string& t) {
  if (t.find("BFloat16") != std::string::npos) return "bf16";
  if (t.find("Half") != std::string::npos) return "fp16";
  if (t.find("Float8_e8m0") != std::string::npos) return "mxfp8";  // MX block scales
  if (t.find("Float8") != std::string::npos) return "fp8";
  if (t == "float" || t.find("c10::Float") != std::string::npos || t == "Float") return "fp32";
  return "";
}
double dtype_bytes(const std::string& d) {
  return d == "fp32" ? 4 : d == "bf16" || d == "fp16" ? 2 : d == "fp8" || d == "fp8_block" || d == "mxfp8" ? 1 : 0;
}

// args["Input Dims"][i] as integers (empty when absent or not a list of numbers; a dimension
// below 0 or past 2^31, which no tensor a kernel ran on has, is no shape either).
std::vector<double> dims(const json& args, size_t i) {
  std::vector<double> out;
  auto it = args.find("Input Dims");
  if (it == args.end() || !it->is_array() || i >= it->size() || !(*it)[i].is_array()) return out;
  for (const json& d : (*it)[i]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 31)) return {};
    out.push_back(static_cast<double>(d.get<int64_t>()));
  }
  return out;
}
std::string input_type(const json& args, size_t i) {
  auto it = args.find("Input type");
  if (it == args.end() || !it->is_array() || i >= it->size() || !(*it)[i].is_string()) return "";
  return (*it)[i].get<std::string>();
}
// args["Concrete Inputs"][i]: the scalar arguments as text ("True", "0.0", ""), PyTorch >= 2.1.
std::optional<std::string> concrete(const json& args, size_t i) {
  auto it = args.find("Concrete Inputs");
  if (it == args.end() || !it->is_array() || i >= it->size() || !(*it)[i].is_string()) return std::nullopt;
  return (*it)[i].get<std::string>();
}
double prod(const std::vector<double>& v, size_t from, size_t to) {
  double p = 1;
  for (size_t i = from; i < to && i < v.size(); ++i) p *= v[i];
  return p;
}
// A whole number as a JSON integer (shapes read as doubles).
json whole(double v) { return v == std::floor(v) && std::abs(v) < 9e15 ? json(static_cast<int64_t>(v)) : json(v); }
std::string num(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.0f", v);
  return b;
}

// A GEMM's shape from the op that launched it.
std::optional<json> gemm_shape(const CpuOp& op, std::string* dtype, bool* grouped) {
  const json& a = *op.args;
  const std::string& n = op.name;
  std::vector<double> x, w;
  size_t xi = 0;
  double m = 0, k = 0, nn = 0, batch = 1;
  *grouped = false;
  if (n == "aten::mm" || n == "aten::_scaled_mm" || n == "aten::addmm") {
    xi = n == "aten::addmm" ? 1 : 0;
    x = dims(a, xi), w = dims(a, xi + 1);
    if (x.size() != 2 || w.size() != 2 || x[1] != w[0]) return std::nullopt;
    m = x[0], k = x[1], nn = w[1];
  } else if (n == "aten::bmm" || n == "aten::baddbmm") {
    xi = n == "aten::baddbmm" ? 1 : 0;
    x = dims(a, xi), w = dims(a, xi + 1);
    if (x.size() != 3 || w.size() != 3 || x[2] != w[1] || x[0] != w[0]) return std::nullopt;
    batch = x[0], m = x[1], k = x[2], nn = w[2];
  } else if (n == "aten::linear") {
    x = dims(a, 0), w = dims(a, 1);
    if (x.size() < 2 || w.size() != 2 || x.back() != w[1]) return std::nullopt;
    m = prod(x, 0, x.size() - 1), k = x.back(), nn = w[0];
  } else if (n == "aten::_grouped_mm" || n == "aten::_scaled_grouped_mm") {
    x = dims(a, 0), w = dims(a, 1);
    if (x.size() != 2 || w.size() != 3 || x[1] != w[1] || w[0] == 0) return std::nullopt;
    batch = w[0], m = x[0] / w[0], k = x[1], nn = w[2];
    *grouped = true;
  } else {
    return std::nullopt;
  }
  if (m <= 0 || k <= 0 || nn <= 0) return std::nullopt;
  *dtype = type_dtype(input_type(a, xi));
  if (n == "aten::_scaled_mm" || n == "aten::_scaled_grouped_mm") {
    // scale_a tells the recipe: E8M0 scales are MX blocks of 32; FP32 scales with more than one per
    // row of A are blocks along K (1 x 128, DeepSeek-V3's and TE's Float8BlockScaling); one per
    // tensor or per row is per-tensor or row-wise FP8.
    const std::string scale = input_type(a, xi + 2);
    const std::vector<double> sd = dims(a, xi + 2);
    const double per_row = sd.empty() || m <= 0 ? 0 : prod(sd, 0, sd.size()) / (batch * m);
    if (scale.find("Float8_e8m0") != std::string::npos) *dtype = "mxfp8";
    else if (*dtype != "mxfp8") *dtype = per_row > 1 ? "fp8_block" : "fp8";
  }
  if (dtype->empty()) return std::nullopt;
  json s = {{"m", whole(m)}, {"n", whole(nn)}, {"k", whole(k)}};
  if (*grouped) s["groups"] = whole(batch);
  else if (batch > 1) s["batch"] = whole(batch);
  return s;
}

// Attention ops: which input is Q, its layout, and where is_causal sits among the inputs.
struct AttnOp {
  const char* name;
  size_t q;          // index of Q in the inputs
  bool bhsd;         // [batch, heads, seq, dim] (else [batch, seq, heads, dim])
  size_t causal;     // index of is_causal (or custom_mask_type for the efficient kernels)
  bool mask_type;    // causal is an int mask type (1, 2: causal), else a bool
  bool backward;
  size_t window = 0;  // index of window_size_left (window_size_right follows it); 0: the op takes none
};
// aten::_flash_attention_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
// is_causal, return_debug_mask, *, scale, window_size_left, window_size_right, ...) and its backward
// (grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
// is_causal, philox_seed, philox_offset, *, scale, window_size_left, window_size_right): a sliding
// window (GPT-OSS, Mistral) is recorded there.
constexpr AttnOp kAttnOps[] = {
    {"aten::_scaled_dot_product_flash_attention", 0, true, 4, false, false},
    {"aten::_scaled_dot_product_flash_attention_backward", 1, true, 11, false, true},
    {"aten::_flash_attention_forward", 0, false, 8, false, false, 11},
    {"aten::_flash_attention_backward", 1, false, 11, false, true, 15},
    {"aten::_scaled_dot_product_cudnn_attention", 0, true, 6, false, false},
    {"aten::_scaled_dot_product_cudnn_attention_backward", 1, true, 14, false, true},
    {"aten::_efficient_attention_forward", 0, false, 9, true, false},
    {"aten::_efficient_attention_backward", 1, false, 14, true, true},
    // (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, *, scale) and (grad_out,
    // query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p,
    // grad_input_mask, is_causal, *, scale): is_causal at 6 and 11, as cuDNN's forward has it.
    {"aten::_scaled_dot_product_efficient_attention", 0, true, 6, false, false},
    {"aten::_scaled_dot_product_efficient_attention_backward", 1, true, 11, false, true},
};

std::optional<json> attention_shape(const CpuOp& op, bool* backward, std::string* dtype) {
  for (const AttnOp& d : kAttnOps) {
    if (op.name != d.name) continue;
    const json& a = *op.args;
    const std::vector<double> q = dims(a, d.q), k = dims(a, d.q + 1), v = dims(a, d.q + 2);
    if (q.size() != 4 || k.size() != 4 || v.size() != 4) return std::nullopt;
    const double b = q[0], h = d.bhsd ? q[1] : q[2], s = d.bhsd ? q[2] : q[1], dq = q[3], dv = v[3];
    const double sk = d.bhsd ? k[2] : k[1];
    if (s != sk || s <= 0 || h <= 0 || dq <= 0 || dv <= 0) return std::nullopt;  // cross or varlen attention: no record
    const auto c = concrete(a, d.causal);
    if (!c) return std::nullopt;  // the mask is not recorded: the FLOPs are unknown by 2x
    bool causal = false;
    if (d.mask_type) causal = *c == "1" || *c == "2";
    else if (*c == "True" || *c == "true" || *c == "1") causal = true;
    else if (*c != "False" && *c != "false" && *c != "0") return std::nullopt;
    // FlashAttention's window (left, right): keys j with i - left <= j <= i + right; None or -1 is
    // unbounded. A causal window (right 0) attends left + 1 keys, the query's own included (the
    // record's "window"); a window open on both sides is no form the model prices: no record.
    int64_t window = 0;
    if (d.window) {
      auto bound = [&](size_t i) -> int64_t {
        const auto text = concrete(a, i);
        if (!text || text->empty() || *text == "None") return -1;
        try {
          return std::stoll(*text);
        } catch (const std::exception&) {
          return -2;
        }
      };
      const int64_t left = bound(d.window), right = bound(d.window + 1);
      if (left < -1 || right < -1) return std::nullopt;
      if (right > 0 && !causal) return std::nullopt;  // keys after the query: no form the model prices
      if (right == 0) causal = true;                   // (-1, 0) is causal attention
      if (left >= 0) {
        if (!causal) return std::nullopt;
        window = left + 1;
      }
    }
    *backward = d.backward;
    *dtype = type_dtype(input_type(a, d.q));
    json sh = {{"batch", whole(b)}, {"heads", whole(h)}, {"seq", whole(s)}, {"causal", causal}};
    if (window > 0 && static_cast<double>(window) < s) sh["window"] = window;
    if (dq == dv) sh["head_dim"] = whole(dq);
    else sh["head_dim_qk"] = whole(dq), sh["head_dim_v"] = whole(dv);
    return sh;
  }
  return std::nullopt;
}

// A collective's fields, from the kernel's args or the record_param_comms op around it. A size
// that is there but is no whole number (negative, a fraction, not a number) and a group below one
// rank are refused with their JSON path (args_path: the args object's): skipped, the collective's
// time would count without a record and nobody would know why.
struct CommInfo {
  std::string collective;   // all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  double in_elems = -1, out_elems = -1;
  int64_t group = 0;
  std::string dtype;
};
std::optional<CommInfo> comm_info(const json& a, const std::string& file, const std::string& args_path) {
  auto name = a.find("Collective name");
  if (name == a.end() || !name->is_string()) return std::nullopt;
  std::string c = name->get<std::string>();
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  CommInfo i;
  auto has = [&](const char* s) { return c.find(s) != std::string::npos; };
  if (has("all_to_all") || has("alltoall")) i.collective = "all_to_all";
  else if (has("allgather") || has("all_gather")) i.collective = "all_gather";
  else if (has("reduce_scatter") || has("reducescatter")) i.collective = "reduce_scatter";
  else if (has("allreduce") || has("all_reduce")) i.collective = "all_reduce";
  else if (has("send") || has("recv")) i.collective = "send_recv";
  else return std::nullopt;
  auto number = [&](const char* key, double lowest) {
    auto it = a.find(key);
    if (it == a.end() || it->is_null()) return -1.0;  // not written: no record, counted as shapeless
    const double v = it->is_number() ? it->get<double>() : -1.0;
    if (!it->is_number() || !std::isfinite(v) || v < lowest || v != std::floor(v) || v > 9.007199254740992e15) {
      char lo[32];
      std::snprintf(lo, sizeof lo, "%g", lowest);
      Node(*it, file, args_path + "/" + key).fail(std::string("expected a whole number >= ") + lo + " (" + c + "), got " + it->dump());
    }
    return v;
  };
  i.in_elems = number("In msg nelems", 0), i.out_elems = number("Out msg nelems", 0);
  i.group = static_cast<int64_t>(number("Group size", 1));
  if (auto d = a.find("dtype"); d != a.end() && d->is_string()) {
    const std::string t = d->get<std::string>();
    i.dtype = type_dtype(t.find("::") == std::string::npos ? "c10::" + t : t);
    if (t == "Float") i.dtype = "fp32";
  }
  return i;
}

// NCCL's algorithm from its kernel name (..._RING_LL, _TREE_, _NVLS_, _NVLS_TREE_, _COLLNET_).
std::string nccl_algorithm(const std::string& kernel) {
  if (kernel.find("_NVLS_TREE") != std::string::npos || kernel.find("_NVLSTREE") != std::string::npos) return "nvls_tree";
  if (kernel.find("_NVLS") != std::string::npos) return "nvls";
  if (kernel.find("_TREE") != std::string::npos) return "tree";
  if (kernel.find("_RING") != std::string::npos) return "ring";
  return "";
}

const std::set<std::string> kElementwise{"aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::sub", "aten::sub_",
                                         "aten::div", "aten::div_", "aten::copy_", "aten::silu", "aten::gelu",
                                         "aten::neg", "aten::exp", "aten::sigmoid", "aten::relu", "aten::fill_", "aten::zero_"};

// HBM bytes of an elementwise op: inputs read, an output the size of the largest input written.
std::optional<double> elementwise_bytes(const CpuOp& op) {
  const json& a = *op.args;
  auto it = a.find("Input Dims");
  if (it == a.end() || !it->is_array() || it->empty()) return std::nullopt;
  double bytes = 0, largest = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto d = dims(a, i);
    if (d.empty()) continue;  // a scalar or None
    const std::string t = input_type(a, i);
    const double b = dtype_bytes(type_dtype(t));
    if (b == 0) return std::nullopt;
    const double size = prod(d, 0, d.size()) * b;
    bytes += size, largest = std::max(largest, size);
  }
  if (op.name == "aten::copy_" || op.name == "aten::fill_" || op.name == "aten::zero_") return bytes > 0 ? std::optional(bytes) : std::nullopt;
  return largest > 0 ? std::optional(bytes + largest) : std::nullopt;
}

double number_at(const Node& e, const char* key) {
  const Node v = e.at(key);
  if (!v.raw().is_number()) v.fail("expected a number of microseconds (Chrome trace format), got " + v.raw().dump());
  const double x = v.raw().get<double>();
  if (!std::isfinite(x)) v.fail("expected a finite number");
  return x;
}
int64_t int_arg(const json& args, const char* key, int64_t dflt) {
  auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<int64_t>() : dflt;
}

// The runtime calls the host measurement reads: kernel and graph launches, and the calls that
// block the host until the GPU has caught up.
enum class RuntimeKind { other, launch, graph, wait };
RuntimeKind runtime_kind(const std::string& n) {
  static const std::set<std::string> launch = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx", "cuLaunchKernel",
                                               "cuLaunchKernelEx", "cudaLaunchCooperativeKernel", "cuLaunchCooperativeKernel"};
  static const std::set<std::string> graph = {"cudaGraphLaunch", "cuGraphLaunch"};
  static const std::set<std::string> wait = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                                             "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cudaMemcpy",
                                             "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cudaMemcpy2D",
                                             "cudaFree", "cuMemFree", "cuMemFree_v2"};
  if (launch.count(n)) return RuntimeKind::launch;
  if (graph.count(n)) return RuntimeKind::graph;
  if (wait.count(n)) return RuntimeKind::wait;
  return RuntimeKind::other;
}
struct RuntimeCall {
  int64_t tid;
  double ts, dur;
  RuntimeKind kind;
  int window = -1;  // the step range it falls in (host_issue)
};

// The issuing threads and, per step range (CPU-side ones; else the whole trace, per GPU-side step
// when only those are marked, else as one step), their launches, waits and the gaps between
// consecutive launches of one thread with no wait in between. PyTorch issues a step from two
// threads that take turns: the Python thread (forward, optimizer) and autograd's device thread
// (backward); every thread with at least kIssuingShare of the busiest one's launches counts, and
// their issue times add up.
constexpr double kIssuingShare = 0.05;
std::optional<HostIssue> host_issue(std::vector<RuntimeCall> calls, const std::vector<TraceRange>& ranges, const TraceOptions& opt) {
  const std::regex marker(opt.step_marker, std::regex::ECMAScript);  // checked by finish_trace
  std::vector<TraceRange> windows;
  std::set<std::string> gpu_steps;
  for (const TraceRange& r : ranges)
    if (std::regex_search(r.name, marker)) {
      if (r.gpu) gpu_steps.insert(r.name);
      else windows.push_back(r);
    }
  const bool marked = !windows.empty();
  if (!marked && !calls.empty()) {
    double lo = calls.front().ts, hi = lo;
    for (const RuntimeCall& c : calls) lo = std::min(lo, c.ts), hi = std::max(hi, c.ts + c.dur);
    windows.push_back(TraceRange{"", lo, hi, false});
  }
  std::sort(windows.begin(), windows.end(), [](const TraceRange& a, const TraceRange& b) { return a.start < b.start; });
  // Each call's step range, found once; calls outside every range are dropped.
  for (RuntimeCall& c : calls)
    for (size_t w = 0; w < windows.size() && c.window < 0; ++w)
      if (c.ts >= windows[w].start && c.ts <= windows[w].end) c.window = static_cast<int>(w);
  // Per thread, in time order; a call inside another call of its thread (a driver launch CUPTI
  // records under the runtime's) is the same launch, not another.
  std::sort(calls.begin(), calls.end(), [](const RuntimeCall& a, const RuntimeCall& b) {
    return a.tid != b.tid ? a.tid < b.tid : a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;  // the outer call first
  });
  std::vector<RuntimeCall> outer;
  for (const RuntimeCall& c : calls) {
    if (!outer.empty() && outer.back().tid == c.tid && c.ts < outer.back().ts + outer.back().dur) continue;
    outer.push_back(c);
  }
  std::erase_if(outer, [](const RuntimeCall& c) { return c.window < 0; });
  std::map<int64_t, int64_t> per_tid;
  for (const RuntimeCall& c : outer)
    if (c.kind != RuntimeKind::wait) ++per_tid[c.tid];
  if (per_tid.empty()) return std::nullopt;
  int64_t most = 0;
  for (const auto& [tid, n] : per_tid) most = std::max(most, n);
  HostIssue h;
  for (const auto& [tid, n] : per_tid)
    if (static_cast<double>(n) >= kIssuingShare * static_cast<double>(most)) h.tids.push_back(tid);
  // The issuing threads' calls in time order: a gap is a thread's time from one launch to its next
  // when no wait and no other thread's launch lies between (the threads take turns: the Python
  // thread's gap across the backward is autograd's time, not its own).
  std::erase_if(outer, [&](const RuntimeCall& c) { return !std::binary_search(h.tids.begin(), h.tids.end(), c.tid); });
  std::stable_sort(outer.begin(), outer.end(), [](const RuntimeCall& a, const RuntimeCall& b) { return a.ts < b.ts; });
  std::vector<double> gaps, durs;
  double prev = -1;
  int64_t prev_tid = -1;
  int prev_window = -1;
  bool waited = false;
  for (const RuntimeCall& c : outer) {
    const int w = c.window;
    if (c.kind == RuntimeKind::wait) {
      h.waits += 1, h.wait_s += c.dur;
      waited = true;
      continue;
    }
    (c.kind == RuntimeKind::graph ? h.graph_launches : h.launches) += 1;
    durs.push_back(c.dur);
    if (prev >= 0 && c.tid == prev_tid && w == prev_window && !waited) gaps.push_back(c.ts - prev);
    prev = c.ts, prev_tid = c.tid, prev_window = w, waited = false;
  }
  // Steps marked only on the GPU side (host calls run ahead of them): the whole trace over their number.
  h.steps = static_cast<int>(marked ? windows.size() : gpu_steps.size());
  const double n = std::max(1, h.steps);
  h.launches /= n, h.graph_launches /= n, h.waits /= n, h.wait_s /= n;
  h.gaps = static_cast<int64_t>(gaps.size());
  if (!gaps.empty()) {
    h.mean_gap_s = std::accumulate(gaps.begin(), gaps.end(), 0.0) / static_cast<double>(gaps.size());
    h.median_gap_s = median_of(gaps);
  }
  h.median_call_s = median_of(durs);
  return h;
}

// One record group: a shape, its class, and the measured time of each instance.
struct Group {
  json record;
  std::vector<double> seconds;
  std::string library;
};

}  // namespace

MeasuredTrace read_kineto(const std::string& path, const KernelPatterns& patterns, const TraceOptions& opt) {
  const json doc = read_json_file(path);
  MeasuredTrace t;
  t.file = path;
  t.format = "kineto";
  const Node root(doc, path, "");
  const json* events_json = nullptr;
  const json* props_json = nullptr;  // deviceProperties: the counted device's entry names the GPU
  std::string events_path = "/traceEvents";
  if (doc.is_array()) {
    events_json = &doc, events_path = "";
  } else {
    root.expect_object();
    if (auto u = root.get("displayTimeUnit")) {
      const std::string unit = u->is_string() ? u->as_string() : u->raw().dump();
      if (unit != "ms" && unit != "ns")
        u->fail("unknown time unit \"" + unit + "\": Chrome's trace format allows \"ms\" or \"ns\" (a display unit; ts and dur are microseconds)");
    }
    const Node ev = root.at("traceEvents");
    if (!ev.is_array()) ev.fail("expected an array of trace events");
    events_json = &doc.at("traceEvents");
    if (auto props = root.get("deviceProperties"); props && props->is_array()) props_json = &props->raw();
  }
  const json& events = *events_json;
  std::vector<TraceKernelEvent> kernels;
  std::vector<KernelLink> links;
  std::vector<TraceRange> steps;
  std::map<int64_t, std::vector<CpuOp>> ops_by_tid;
  std::map<int64_t, std::pair<int64_t, double>> launch_of;  // correlation -> (tid, ts)
  std::map<int64_t, std::pair<int64_t, double>> ext_op;     // External id -> (tid, ts) of its cpu_op
  std::vector<RuntimeCall> calls;                            // launches and host waits
  std::optional<double> ts_base;  // microseconds
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object()) continue;
    auto ph = e.find("ph");
    auto cat = e.find("cat");
    if (ph == e.end() || cat == e.end() || !ph->is_string() || !cat->is_string() || *ph != "X") continue;
    const std::string c = cat->get<std::string>();
    const bool kernel = c == "kernel" || c == "Kernel", memcpy = c == "gpu_memcpy" || c == "Memcpy", memset = c == "gpu_memset" || c == "Memset";
    const bool cpu = c == "cpu_op" || c == "user_annotation" || c == "gpu_user_annotation" || c == "cuda_runtime" || c == "cuda_driver";
    if (!kernel && !memcpy && !memset && !cpu) continue;
    const Node en(e, path, events_path + "/" + std::to_string(i));
    // Epoch microseconds (about 1.7e15) hold a quarter of a microsecond as parsed; scaled to seconds
    // as they are they would hold a quarter more (about 2.4e-7 s at 1.7e9 s). Times are kept from the
    // first event's ts, which leaves the gaps between launches at the parse's resolution.
    const double ts_us = number_at(en, "ts");
    if (!ts_base) ts_base = ts_us;
    const double ts = (ts_us - *ts_base) * 1e-6, dur = number_at(en, "dur") * 1e-6;
    if (!(dur >= 0) || dur > 1e6) en.at("dur").fail("expected a duration in [0, 1e12] microseconds, got " + en.at("dur").raw().dump());
    static const json kNoArgs = json::object();
    const json& args = e.contains("args") && e.at("args").is_object() ? e.at("args") : kNoArgs;
    const std::string name = e.contains("name") && e.at("name").is_string() ? e.at("name").get<std::string>() : "";
    const int64_t tid = e.contains("tid") && e.at("tid").is_number_integer() ? e.at("tid").get<int64_t>() : 0;
    // A GPU-side event's device: args.device, else its pid (Kineto's GPU rows); checked, as a
    // 64-bit value cast to int would be another device.
    auto device_of = [&]() {
      const bool in_args = args.contains("device") && args.at("device").is_number_integer();
      const int64_t d = int_arg(args, "device", e.contains("pid") && e.at("pid").is_number_integer() ? e.at("pid").get<int64_t>() : 0);
      if (d < 0 || d > std::numeric_limits<int>::max())
        (in_args ? en.at("args").at("device") : en.at("pid")).fail("expected a device id from 0, got " + std::to_string(d));
      return static_cast<int>(d);
    };
    if (kernel || memcpy || memset) {
      TraceKernelEvent k;
      k.name = name, k.start = ts, k.dur = dur;
      k.device = device_of();
      k.copy = memcpy;
      if (memcpy) {
        // "Memcpy DtoD (Device -> Device)": the kind is the second word.
        const size_t a = name.find(' '), b = a == std::string::npos ? a : name.find_first_of(" (", a + 1);
        k.cls = memcpy_class(a == std::string::npos ? std::string() : name.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1));
      } else if (memset) {
        k.cls = "memory";
      }
      kernels.push_back(k);
      KernelLink l;
      l.args = &args;
      l.event = i;
      const int64_t corr = int_arg(args, "correlation", -1);
      l.correlation = corr;
      l.external_id = int_arg(args, "External id", -1);
      links.push_back(l);
    } else if (c == "cuda_runtime" || c == "cuda_driver") {
      if (const int64_t corr = int_arg(args, "correlation", -1); corr >= 0) launch_of[corr] = {tid, ts};
      if (const RuntimeKind rk = runtime_kind(name); rk != RuntimeKind::other) calls.push_back(RuntimeCall{tid, ts, dur, rk});
    } else if (c == "cpu_op") {
      ops_by_tid[tid].push_back(CpuOp{name, ts, ts + dur, &args, i});
      if (const int64_t x = int_arg(args, "External id", -1); x >= 0) ext_op.emplace(x, std::make_pair(tid, ts));
    } else {
      const bool gpu = c == "gpu_user_annotation";
      steps.push_back(TraceRange{name, ts, ts + dur, gpu, gpu ? device_of() : -1});
    }
  }
  // The CPU ops around each launch: per thread, ops sorted outermost first, launches swept in time.
  std::vector<CpuOp> ops;
  std::map<int64_t, std::pair<size_t, size_t>> range;  // tid -> [begin, end) in ops
  for (auto& [tid, v] : ops_by_tid) {
    std::sort(v.begin(), v.end(), [](const CpuOp& a, const CpuOp& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    range[tid] = {ops.size(), ops.size() + v.size()};
    ops.insert(ops.end(), v.begin(), v.end());
  }
  struct Query {
    int64_t tid;
    double ts;
    size_t kernel;
  };
  std::vector<Query> queries;
  int unlinked = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    const int64_t corr = links[i].correlation, ext = links[i].external_id;
    if (auto it = launch_of.find(corr); corr >= 0 && it != launch_of.end()) queries.push_back({it->second.first, it->second.second, i});
    else if (auto x = ext_op.find(ext); ext >= 0 && x != ext_op.end()) queries.push_back({x->second.first, x->second.second, i});
    else ++unlinked;
  }
  std::sort(queries.begin(), queries.end(), [](const Query& a, const Query& b) { return a.tid != b.tid ? a.tid < b.tid : a.ts < b.ts; });
  for (size_t q = 0; q < queries.size();) {
    const int64_t tid = queries[q].tid;
    auto rg = range.count(tid) ? range[tid] : std::pair<size_t, size_t>{0, 0};
    std::vector<int> stack;
    size_t next = rg.first;
    for (; q < queries.size() && queries[q].tid == tid; ++q) {
      const double at = queries[q].ts;
      while (next < rg.second && ops[next].start <= at) {
        while (!stack.empty() && ops[stack.back()].end < ops[next].start) stack.pop_back();
        stack.push_back(static_cast<int>(next++));
      }
      while (!stack.empty() && ops[stack.back()].end < at) stack.pop_back();
      links[queries[q].kernel].chain = stack;
    }
  }
  auto args_path = [&](size_t event) { return events_path + "/" + std::to_string(event) + "/args"; };
  // Classes by name (once per name), collectives refined by the kernel's own fields or
  // record_param_comms' around it (an all-to-all runs SendRecv kernels).
  std::map<std::string, const KernelPattern*> seen;  // name -> its pattern (null: none), once per name
  auto pattern_of = [&](const std::string& name) {
    auto it = seen.find(name);
    if (it == seen.end()) it = seen.emplace(name, patterns.match(name)).first;
    return it->second;
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!kernels[i].cls.empty()) continue;
    const KernelPattern* p = pattern_of(kernels[i].name);
    const std::string cls = p ? p->cls : "";
    kernels[i].cls = cls;
    if (cls.rfind("collective.", 0) != 0) continue;
    std::optional<CommInfo> ci = comm_info(*links[i].args, path, args_path(links[i].event));
    for (auto it = links[i].chain.rbegin(); !ci && it != links[i].chain.rend(); ++it)
      ci = comm_info(*ops[*it].args, path, args_path(ops[*it].event));
    kernels[i].cls = ci ? "collective." + ci->collective : cls;
  }
  finish_trace(t, kernels, steps, patterns, opt, events_path);
  // The GPU: the counted device's deviceProperties entry (its "id"), else the first.
  if (props_json && !props_json->empty()) {
    const json* pick = &(*props_json)[0];
    for (const json& p : *props_json)
      if (p.is_object() && p.contains("id") && p.at("id").is_number_integer() && p.at("id").get<int64_t>() == t.device) pick = &p;
    if (pick->is_object()) {
      if (auto n = pick->find("name"); n != pick->end() && n->is_string()) t.gpu_name = n->get<std::string>();
      if (auto s = pick->find("numSms"); s != pick->end() && s->is_number_integer()) t.gpu_sms = s->get<int>();
    }
  }
  t.host = host_issue(calls, steps, opt);
  if (unlinked) t.notes.push_back(std::to_string(unlinked) + " kernel" + (unlinked > 1 ? "s" : "") + " not linked to a CPU op (no launch or External id): timed, no shape");

  // Records: kernels of one op instance summed per class; instances of one shape grouped.
  std::map<std::string, Group> groups;
  std::map<std::pair<int, std::string>, double> instance;  // (op index, class) -> seconds; -1 - kernel: the kernel alone
  std::map<std::pair<int, std::string>, std::pair<json, std::string>> instance_record;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const TraceKernelEvent& k = kernels[i];
    if (!k.counted || k.cls.empty()) continue;
    const auto& chain = links[i].chain;
    std::optional<json> rec;
    int owner = -1;
    const KernelPattern* pat = pattern_of(k.name);
    std::string library = pat ? pat->library : "";
    if (library.empty()) library = k.cls.rfind("host.", 0) == 0 || k.cls == "memory.copy" ? "CUDA memcpy" : "";
    if (k.cls == "gemm" || k.cls == "grouped_gemm") {
      for (auto it = chain.rbegin(); !rec && it != chain.rend(); ++it) {
        std::string dt;
        bool grouped = false;
        if (auto sh = gemm_shape(ops[*it], &dt, &grouped)) {
          rec = json{{"op", grouped ? "grouped_gemm" : "gemm"}, {"shape", *sh}, {"dtype", dt}};
          owner = *it;
        }
      }
    } else if (k.cls == "attention.fwd" || k.cls == "attention.bwd") {
      for (auto it = chain.rbegin(); !rec && it != chain.rend(); ++it) {
        bool bwd = false;
        std::string dt;
        if (auto sh = attention_shape(ops[*it], &bwd, &dt); sh && (bwd == (k.cls == "attention.bwd"))) {
          rec = json{{"op", k.cls}, {"shape", *sh}};
          if (!dt.empty()) rec->emplace("dtype", dt);
          owner = *it;
        }
      }
    } else if (k.cls.rfind("collective.", 0) == 0 && !k.copy) {  // a peer copy: no record (its bytes are not the collective's)
      std::optional<CommInfo> ci = comm_info(*links[i].args, path, args_path(links[i].event));
      int at = -1;
      for (auto it = chain.rbegin(); !ci && it != chain.rend(); ++it)
        if ((ci = comm_info(*ops[*it].args, path, args_path(ops[*it].event)))) at = *it;
      if (ci && ci->group >= 2 && !ci->dtype.empty() && ci->collective != "send_recv") {
        const double elems = ci->collective == "all_gather" ? ci->out_elems : ci->in_elems;
        if (elems > 0) {
          json r = {{"op", k.cls}, {"gpus", ci->group}, {"shape", {{"bytes", num(elems * dtype_bytes(ci->dtype)) + " B"}}}};
          if (const std::string a = nccl_algorithm(k.name); !a.empty()) r["algorithm"] = a;
          rec = r;
          owner = at;
        }
      }
    } else if (memcpy_class_has_record(k.cls)) {
      const json& a = *links[i].args;
      if (auto b = a.find("bytes"); b != a.end() && b->is_number() && b->get<double>() > 0) {
        const double bytes = b->get<double>() * (k.cls == "memory.copy" ? 2 : 1);  // a device copy reads and writes
        rec = json{{"op", k.cls}, {"shape", {{"bytes", num(bytes) + " B"}}}};
      }
    } else if (k.cls == "memory") {
      for (auto it = chain.rbegin(); !rec && it != chain.rend(); ++it)
        if (kElementwise.count(ops[*it].name))
          if (auto b = elementwise_bytes(ops[*it])) {
            rec = json{{"op", "memory.copy"}, {"shape", {{"bytes", num(*b) + " B"}}}};
            owner = *it;
            library = "PyTorch " + ops[*it].name;
          }
    }
    if (!rec) {
      ++t.shapeless;
      continue;
    }
    const std::string key = rec->dump();
    const auto inst = std::make_pair(owner >= 0 ? owner : -1 - static_cast<int>(i), key);
    instance[inst] += k.dur;
    instance_record[inst] = {*rec, library};
  }
  for (auto& [inst, secs] : instance) {
    auto& [rec, library] = instance_record[inst];
    Group& g = groups[inst.second];
    g.record = rec, g.library = library;
    g.seconds.push_back(secs);
  }
  const std::string stem = std::filesystem::path(path).filename().string();
  std::set<std::string> ids;
  for (auto& [key, g] : groups) {
    json r = g.record;
    std::string id = stem + "/" + r.at("op").get<std::string>();
    for (auto& [f, v] : r.at("shape").items()) id += "-" + f + (v.is_string() ? v.get<std::string>() : v.dump());
    if (r.contains("dtype")) id += "-" + r.at("dtype").get<std::string>();
    if (r.contains("algorithm")) id += "-" + r.at("algorithm").get<std::string>();
    id.erase(std::remove(id.begin(), id.end(), ' '), id.end());
    while (!ids.insert(id).second) id += "'";
    const double med = median_of(g.seconds);
    r["id"] = id;
    r["measured"] = num(med * 1e9) + " ns";
    r["library"] = g.library;
    r["source"] = "trace " + path + " (" + t.format + (t.gpu_name.empty() ? "" : ", " + t.gpu_name) + ")";
    r["quote"] = "median of " + std::to_string(g.seconds.size()) + " instance" + (g.seconds.size() > 1 ? "s" : "") +
                 " (an instance: the kernels one op launched)";
    const bool comm = r.at("op").get<std::string>().rfind("collective.", 0) == 0;
    r["confidence"] = comm ? "medium" : "high";
    if (comm) r["notes"] = "a collective's kernel time in a training trace includes waiting for the slowest rank to arrive";
    t.records.push_back(std::move(r));
  }
  return t;
}

}  // namespace moeperf::io::detail
