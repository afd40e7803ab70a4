// Measurement records of parts (published microbenchmarks and executor output), calibration
// profiles (reading and writing) and the profiles built into the binary.
#include "model/io/parts.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "model/io/detail/parsers.h"
#include "model/limits.h"
#include "model/pricing/collective.h"
#include "model/workload/flops.h"

namespace moeperf::io {


using namespace detail;

namespace {

struct OpKind {
  const char* name;
  PartClass cls;
  Collective coll;
};
constexpr OpKind kOps[] = {
    {"gemm", PartClass::gemm, Collective::none},
    {"grouped_gemm", PartClass::gemm, Collective::none},
    {"attention.fwd", PartClass::attention, Collective::none},
    {"attention.bwd", PartClass::attention, Collective::none},
    {"memory.copy", PartClass::memory, Collective::none},
    {"host.h2d", PartClass::host_copy, Collective::none},
    {"host.d2h", PartClass::host_copy, Collective::none},
    {"collective.all_reduce", PartClass::collective, Collective::all_reduce},
    {"collective.all_gather", PartClass::collective, Collective::all_gather},
    {"collective.reduce_scatter", PartClass::collective, Collective::reduce_scatter},
    {"collective.all_to_all", PartClass::collective, Collective::all_to_all},
    {"collective.send_recv", PartClass::collective, Collective::send_recv},
    {"ep.dispatch", PartClass::ep, Collective::none},
    {"ep.combine", PartClass::ep, Collective::none},
    {"ep.one_shot_a2a", PartClass::ep, Collective::none},
};

double confidence_weight(const Node& n) {
  const std::string c = n.as_string();
  if (c == "high") return 1.0;
  if (c == "medium") return 0.6;
  if (c == "low") return 0.3;
  n.fail("expected \"high\", \"medium\" or \"low\", got \"" + c + "\"");
}

double positive(const Node& shape, const char* key) { return shape.at(key).as_positive_number(); }

// "1426 TFLOP/s", "479 GB/s" or "69 us", whichever kinds the op's metric may be.
void parse_measured(const Node& m, PartRecord& r, bool rate_is_flops) {
  if (!m.is_string()) m.fail("expected a measured value with its unit, like \"1426 TFLOP/s\", \"479 GB/s\" or \"69 us\"");
  const std::string s = m.as_string();
  try {
    r.value = parse_seconds(s).value();
    r.metric = PartMetric::seconds;
  } catch (const UnitError&) {
    try {
      if (rate_is_flops) {
        r.value = parse_flop_rate(s).value();
        r.metric = PartMetric::flop_rate;
      } else {
        r.value = parse_bandwidth(s).value();
        r.metric = PartMetric::byte_rate;
      }
    } catch (const UnitError& e) {
      m.fail(std::string("expected ") + (rate_is_flops ? "a FLOP rate like \"1426 TFLOP/s\"" : "a bandwidth like \"479 GB/s\"") +
             " or a time like \"69 us\", got \"" + s + "\" (" + e.what() + ")");
    }
  }
  if (!std::isfinite(r.value) || r.value <= 0) m.fail("expected a positive measured value, got \"" + s + "\"");
}

template <class T>
std::shared_ptr<const T> lookup(const std::map<std::string, std::shared_ptr<const T>>& m, const Node& key, const char* what,
                                const char* table) {
  const std::string k = key.as_string();
  auto it = m.find(k);
  if (it == m.end()) {
    std::vector<std::string> names;
    for (auto& [n, v] : m) names.push_back(n);
    key.fail(std::string("unknown ") + what + " \"" + k + "\": expected a name from the file's \"" + table + "\" (" +
             (names.empty() ? std::string("empty") : join_choices(names)) + ")");
  }
  return it->second;
}

PartRecord parse_record(const Node& x, const std::map<std::string, std::shared_ptr<const GpuSpec>>& gpus,
                        const std::map<std::string, std::shared_ptr<const SystemSpec>>& systems) {
  x.expect_object();
  x.allow_only({"id", "op", "gpu", "system", "gpus", "gpus_per_domain", "shape", "dtype", "algorithm", "measured", "metric",
                "library", "source", "quote", "confidence", "use", "why", "notes", "derivation", "kernel"});
  PartRecord r;
  r.file = x.file();
  r.id = x.at("id").as_string();
  const Node op = x.at("op");
  const std::string o = op.as_string();
  const OpKind* kind = nullptr;
  for (const OpKind& k : kOps)
    if (o == k.name) kind = &k;
  if (!kind) {
    std::vector<std::string> names;
    for (const OpKind& k : kOps) names.emplace_back(k.name);
    op.fail("unknown op \"" + o + "\": expected one of " + join_choices(names) + did_you_mean(o, names));
  }
  r.op = o;
  r.cls = kind->cls;
  r.collective = kind->coll;
  r.source = x.at("source").as_string();
  r.confidence = x.at("confidence").as_string();
  r.weight = confidence_weight(x.at("confidence"));
  r.library = x.string_or("library", "");
  r.why = x.string_or("why", "");
  if (auto u = x.get("use")) {
    const std::string v = u->as_string();
    if (v != "fit" && v != "check") u->fail("expected \"fit\" or \"check\", got \"" + v + "\"");
    r.check_only = v == "check";
    if (r.check_only && r.why.empty()) x.fail("a record used only to \"check\" needs a \"why\"");
  }
  const bool needs_system = r.cls == PartClass::collective || r.cls == PartClass::ep || r.cls == PartClass::host_copy;
  // A compute record may name a system instead of a GPU: the system's GPU (records from a trace).
  if (needs_system || (!x.has("gpu") && x.has("system"))) {
    r.system = lookup(systems, x.at("system"), "system", "systems");
    r.gpu = r.system->gpu();
    r.gpu_key = x.at("system").as_string();
  } else {
    const auto g = lookup(gpus, x.at("gpu"), "GPU", "gpus");
    r.gpu = *g;
    r.gpu_key = x.at("gpu").as_string();
  }
  r.generation = gpu_generation(r.gpu);
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const Node sh = x.has("shape") ? x.at("shape") : Node(kEmpty, x.file(), x.path() + "/shape");
  sh.expect_object();
  switch (r.cls) {
    case PartClass::gemm: {
      sh.allow_only({"m", "n", "k", "batch", "groups"});
      r.gemm = GemmShape{positive(sh, "m"), positive(sh, "n"), positive(sh, "k"), 1};
      if (auto b = sh.get("batch")) r.gemm.groups = b->as_positive_number();
      if (auto g = sh.get("groups")) r.gemm.groups = g->as_positive_number();
      if (o == "grouped_gemm" && !sh.has("groups")) sh.fail("expected \"groups\" (experts) for a grouped GEMM");
      if (o == "gemm" && sh.has("groups")) sh.at("groups").fail("expected \"batch\" for a batched GEMM (\"groups\" is for grouped_gemm)");
      r.gemm.ragged = o == "grouped_gemm" && r.gemm.groups > 1;  // as the workload's grouped ops (Op::ragged)
      // How the grouped kernel finds its groups: per-group pointers and descriptors (CUTLASS
      // grouped, torch._grouped_mm, cuBLAS grouped-batched; the default) or one operand with the
      // rows sorted by group (DeepGEMM's contiguous and masked layouts).
      if (auto kn = x.get("kernel")) {
        if (o != "grouped_gemm") kn->fail("expected \"kernel\" only on a grouped_gemm record");
        r.gemm.kernel = parse_grouped_kernel(*kn);
      } else {
        r.gemm.kernel = r.gemm.ragged ? GroupedKernel::ptr_array : GroupedKernel::contiguous;
      }
      r.dtype = parse_dtype(x.at("dtype"));
      // HBM traffic: A and B read once, C written in BF16.
      r.bytes = r.gemm.groups * ((r.gemm.m * r.gemm.k + r.gemm.k * r.gemm.n) * bytes_per_element(r.dtype) +
                                 r.gemm.m * r.gemm.n * bytes_per_element(Dtype::bf16));
      parse_measured(x.at("measured"), r, true);
      break;
    }
    case PartClass::attention: {
      sh.allow_only({"batch", "heads", "seq", "head_dim", "head_dim_qk", "head_dim_v", "causal", "window"});
      const double b = sh.has("batch") ? positive(sh, "batch") : 1, h = sh.has("heads") ? positive(sh, "heads") : 16;
      const double seq = positive(sh, "seq");
      double dqk = 0, dv = 0;
      if (sh.has("head_dim")) dqk = dv = positive(sh, "head_dim");
      else dqk = positive(sh, "head_dim_qk"), dv = positive(sh, "head_dim_v");
      const bool causal = sh.bool_or("causal", false);
      const int64_t window = sh.has("window") ? sh.at("window").as_nonneg_int() : 0;
      const double keys = causal || window > 0 ? attended_keys(static_cast<int64_t>(seq), static_cast<int>(window)) : seq;
      const bool bwd = o == "attention.bwd";
      // FlashAttention's FLOP convention, in which published rates are quoted: 2 x (QK^T + PV) per
      // query and key; the backward 2.5 x. Priced at what the backward executes, as the workload
      // prices it: attention_bwd_work (2.6 x for MLA's 192 / 128, 2.5 x at equal head dims).
      const double fwd = 2.0 * b * h * seq * keys * (dqk + dv);
      r.flops = bwd ? kAttentionBwdWork * fwd : fwd;
      r.exec_flops = bwd ? attention_bwd_work(dqk, dv) * fwd : fwd;
      r.bytes = (bwd ? kAttentionBwdWork : 1.0) * b * seq * h * (2 * dqk + 2 * dv) * 2.0;
      r.attention = AttentionShape{keys, (dqk + dv) / 2.0, bwd, masked_edges(causal, window, static_cast<int64_t>(seq)),
                                   attention_bwd_work(dqk, dv)};
      if (x.has("dtype")) {
        const Dtype d = parse_dtype(x.at("dtype"));
        if (d != Dtype::bf16 && d != Dtype::fp16) x.at("dtype").fail("expected bf16 or fp16 attention (the model prices attention in BF16)");
      }
      parse_measured(x.at("measured"), r, true);
      break;
    }
    case PartClass::memory:
    case PartClass::host_copy:
      if (r.cls == PartClass::memory) sh.allow_only({"bytes", "rows"});
      else sh.allow_only({"bytes"});
      r.bytes = sh.has("bytes") ? sh.at("bytes").as_bytes().value() : 1073741824.0;
      if (sh.has("rows")) r.rows = sh.at("rows").as_positive_number();
      if (r.cls == PartClass::host_copy) r.topology = std::make_shared<const Topology>(Topology::build(*r.system, 1));
      parse_measured(x.at("measured"), r, false);
      break;
    case PartClass::collective: {
      sh.allow_only({"bytes"});
      r.bytes = sh.at("bytes").as_bytes().value();
      r.gpus = x.at("gpus").as_positive_int();
      if (r.gpus < 2) x.at("gpus").fail("expected at least 2 GPUs for a collective");
      SystemSpec sys = *r.system;
      if (auto g = x.get("gpus_per_domain")) {
        const int64_t per = g->as_positive_int();
        if (per > sys.domain.gpus()) g->fail("expected at most the domain's " + std::to_string(sys.domain.gpus()) + " GPUs");
        // The measured partition as the domain: one tray cut to `per` GPUs, or `per / tray` trays.
        if (per < sys.domain.tray.gpus) {
          sys.domain.tray.gpus = static_cast<int>(per);
          sys.domain.tray.nics = std::min(sys.domain.tray.nics, static_cast<int>(per));
          sys.domain.trays = 1;
        } else if (per % sys.domain.tray.gpus == 0) {
          sys.domain.trays = static_cast<int>(per / sys.domain.tray.gpus);
        } else {
          g->fail("expected a multiple of the tray's " + std::to_string(sys.domain.tray.gpus) + " GPUs, or fewer");
        }
        sys.gpus_per_domain_when_spanning = 0;
      }
      if (r.gpus > sys.domain.gpus() && !sys.fabric) x.at("gpus").fail("expected at most the system's " + std::to_string(sys.domain.gpus()) + " GPUs: it has no fabric");
      r.system = std::make_shared<const SystemSpec>(sys);
      r.topology = std::make_shared<const Topology>(Topology::build(sys, r.gpus));
      if (auto a = x.get("algorithm")) {
        r.algorithm = a->as_string();
        static const std::set<std::string> kAlgos{"ring", "tree", "nvls", "nvls_tree", "direct", "hierarchical", "p2p"};
        if (!kAlgos.count(r.algorithm))
          a->fail("expected one of \"ring\", \"tree\", \"nvls\", \"nvls_tree\", \"direct\", \"hierarchical\", got \"" + r.algorithm + "\"");
      }
      parse_measured(x.at("measured"), r, false);
      if (r.metric == PartMetric::byte_rate) {
        const Node m = x.at("metric");
        const std::string v = m.as_string();
        if (v == "busbw") r.metric = PartMetric::bus_bandwidth;
        else if (v == "algbw") r.metric = PartMetric::algorithm_bandwidth;
        else m.fail("expected \"busbw\" or \"algbw\" (nccl-tests' bus or algorithm bandwidth), got \"" + v + "\"");
      }
      break;
    }
    case PartClass::ep: {
      if (o == "ep.one_shot_a2a") {
        // XLA's one-shot kernel: blocks per peer x threads x bytes per copy in flight per peer.
        sh.allow_only({"ep", "threads", "copy_bytes", "blocks_per_peer"});
        r.ep = positive(sh, "ep");
        r.in_flight = positive(sh, "threads") * positive(sh, "copy_bytes") * positive(sh, "blocks_per_peer");
        parse_measured(x.at("measured"), r, false);
        if (r.metric == PartMetric::seconds) x.at("measured").fail("expected an algorithm bandwidth like \"18 GB/s\"");
        r.metric = PartMetric::algorithm_bandwidth;
        break;
      }
      sh.allow_only({"ep", "sms", "link", "tokens", "hidden", "top_k", "kernel", "api", "dtype"});
      r.ep = positive(sh, "ep");
      // The rows' bytes as the benchmark counts them: hidden x the dtype's bytes (scales included).
      // DeepEP's and HybridEP's tests run DeepSeek-V3's hidden size, 7168, unless the record says.
      {
        Dtype dt = Dtype::bf16;
        if (auto d = sh.get("dtype")) {
          const std::string v = d->as_string();
          if (v == "bf16") dt = Dtype::bf16;
          else if (v == "fp8_block") dt = Dtype::fp8_block;
          else d->fail("expected \"bf16\" or \"fp8_block\" (FP8 rows with a FP32 scale per 128), got \"" + v + "\"");
        }
        r.dtype = dt;
        r.row_bytes = (sh.get("hidden") ? positive(sh, "hidden") : 7168.0) * bytes_per_element(dt);
      }
      if (auto k = sh.get("kernel")) {
        const std::string v = k->as_string();
        if (v != "hybridep" && v != "deepep") k->fail("expected \"hybridep\" or \"deepep\", got \"" + v + "\"");
        r.deepep = v == "deepep";
      }
      if (auto a = sh.get("api")) {
        const std::string v = a->as_string();
        if (v != "kernel" && v != "torch") a->fail("expected \"kernel\" (the kernel alone) or \"torch\" (through its PyTorch API), got \"" + v + "\"");
        r.torch_api = v == "torch";
        if (r.torch_api && r.deepep)
          a->fail("expected no \"api\" on a DeepEP record: DeepEP's published rates are its PyTorch API's (the copies are in them)");
      }
      r.sms = positive(sh, "sms");
      const Node l = sh.at("link");
      const std::string v = l.as_string();
      if (v != "nvlink" && v != "rdma") l.fail("expected \"nvlink\" or \"rdma\", got \"" + v + "\"");
      r.rdma = v == "rdma";
      parse_measured(x.at("measured"), r, false);
      if (r.metric == PartMetric::seconds) x.at("measured").fail("expected an algorithm bandwidth like \"640 GB/s\"");
      r.metric = PartMetric::algorithm_bandwidth;
      break;
    }
    case PartClass::kCount: break;
  }
  return r;
}

// The executor's measurements (moeperf run --out): compute ops as records on the measured machine.
std::vector<PartRecord> parse_executor(Refs& refs, const Node& root, const std::string& path) {
  const Node machine = root.at("machine");
  GpuSpec g;
  g.name = machine.has("gpu") && machine.at("gpu").has("name") ? machine.at("gpu").at("name").as_string()
                                                                : "executor machine (" + machine.at("cpu").as_string() + ")";
  if (machine.has("gpu") && machine.at("gpu").has("sms")) g.sms = static_cast<int>(machine.at("gpu").at("sms").as_positive_int());
  else g.sms = 1;  // the CPU backend runs each rank's GEMMs on one thread (EIGEN_DONT_PARALLELIZE): one core per rank
  g.dense_bf16 = g.dense_fp8 = FlopsPerSecond(machine.at("gemm_peak_flops_measured").as_positive_number());
  g.hbm_bandwidth = BytesPerSecond(machine.at("copy_bandwidth_measured").as_positive_number());
  const std::string stem = std::filesystem::path(path).stem().string();
  // Run with --machine: the exchanges were priced on this system, embedded in the file.
  std::shared_ptr<const SystemSpec> machine_system;
  if (auto sys = root.get("system"))
    machine_system = std::make_shared<const SystemSpec>(refs.follow(*sys, "system", [&](const Node& n) { return parse_system(refs, n); }));
  std::vector<PartRecord> out;
  const Node ops = root.at("ops");
  ops.expect_object();
  for (auto& [name, v] : ops.raw().items()) {
    const Node op(v, path, "/ops/" + name);
    const std::string kind = op.at("kind").as_string();
    if (kind == "wait") continue;  // a rank waiting for the others before an exchange: skew, not a part
    // What every record of a run shares: its id, the op's median time per call, the run as source.
    PartRecord r;
    r.file = path;
    r.id = stem + "/" + name;
    r.metric = PartMetric::seconds;
    r.weight = 1;
    r.confidence = "high";
    r.source = "moeperf run, " + root.string_or("date", "undated") + ", " + root.string_or("git_revision", "unknown revision");
    if (kind == "communication") {
      auto c = op.get("collective");
      if (!c || !machine_system) continue;  // priced at the copy bandwidth: not a record of a part the model prices
      r.op = "collective." + c->as_string();
      r.cls = PartClass::collective;
      const auto k = std::find_if(std::begin(kOps), std::end(kOps), [&](const OpKind& x) { return r.op == x.name; });
      if (k == std::end(kOps) || k->cls != PartClass::collective)
        c->fail("expected \"all_to_all\", \"all_gather\", \"reduce_scatter\", \"all_reduce\" or \"send_recv\"");
      r.collective = k->coll;
      r.gpus = op.at("group").as_positive_int(limits::kGpus);
      if (r.gpus < 2) op.at("group").fail("expected at least 2 ranks for a collective");
      if (r.gpus > machine_system->domain.gpus() && !machine_system->fabric)
        op.at("group").fail("expected at most the embedded system's " + std::to_string(machine_system->domain.gpus()) + " GPUs: it has no fabric");
      r.bytes = op.at("bytes_per_call").as_positive_number();
      if (auto a = op.get("algorithm")) {  // the communicator's own (the executor's rings)
        r.algorithm = a->as_string();
        if (r.algorithm != "ring" && r.algorithm != "direct") a->fail("expected \"ring\" or \"direct\", got \"" + r.algorithm + "\"");
      }
      r.system = machine_system;
      try {
        r.topology = std::make_shared<const Topology>(Topology::build(*machine_system, r.gpus));
      } catch (const std::exception& e) {
        op.at("group").fail(std::string("the embedded system does not hold this group: ") + e.what());
      }
      r.gpu = machine_system->domain.tray.gpu;
      r.gpu_key = r.generation = g.name;
      r.value = op.at("median_s").as_positive_number();
      out.push_back(r);
      continue;
    }
    if (kind != "gemm" && kind != "memory" && kind != "attention")
      op.at("kind").fail("expected \"gemm\", \"attention\", \"memory\", \"communication\" or \"wait\", got \"" + kind + "\"");
    r.op = kind == "gemm" ? "gemm" : kind == "attention" ? "attention.fwd" : "memory.copy";
    r.cls = kind == "gemm" ? PartClass::gemm : kind == "attention" ? PartClass::attention : PartClass::memory;
    r.gpu = g;
    r.gpu_key = g.name;
    r.generation = g.name;
    r.dtype = Dtype::fp32;
    r.flops = op.at("flops_per_call").as_number();
    r.bytes = op.at("bytes_per_call").as_number();
    if (auto rows = op.get("rows_per_call")) {  // a row gather: its rows beside its bytes
      if (r.cls != PartClass::memory) rows->fail("expected rows only on a memory op (a row gather)");
      r.rows = rows->as_positive_number();
    }
    if (r.cls == PartClass::gemm) {
      if (r.flops <= 0) op.at("flops_per_call").fail("expected a positive FLOP count for a GEMM");
      if (auto sh = op.get("shape")) {  // per group, as the executor ran it
        sh->allow_only({"m", "n", "k", "groups", "ragged", "ptr_array", "kernel"});
        r.gemm = GemmShape{sh->at("m").as_positive_number(), sh->at("n").as_positive_number(),
                           sh->at("k").as_positive_number(), sh->at("groups").as_positive_number(),
                           sh->bool_or("ragged", false)};
        // The kind the run priced it as (its scenario's stack.grouped_kernel); files before "kernel"
        // say "ptr_array" true or false; older ones: the default.
        if (auto kn = sh->get("kernel"))
          r.gemm.kernel = parse_grouped_kernel(*kn);
        else
          r.gemm.kernel = sh->bool_or("ptr_array", true) ? GroupedKernel::ptr_array : GroupedKernel::contiguous;
      } else {  // an older file: a cube of the same work
        const double side = std::cbrt(r.flops / 2.0);
        r.gemm = GemmShape{side, side, side, 1, false};
      }
    } else if (r.cls == PartClass::attention) {
      if (r.flops <= 0) op.at("flops_per_call").fail("expected a positive FLOP count for an attention core");
      const Node a = op.at("attention");
      a.allow_only({"keys", "head_dim", "backward", "masked_edges", "bwd_work"});
      r.attention = AttentionShape{a.at("keys").as_positive_number(), a.at("head_dim").as_positive_number(), a.bool_or("backward", false)};
      if (auto e = a.get("masked_edges")) {  // 0 full, 1 causal, 2 causal with a window; older files: 0
        r.attention.masked_edges = static_cast<int>(e->as_nonneg_int());
        if (r.attention.masked_edges > 2) e->fail("expected 0 (full), 1 (causal) or 2 (causal with a sliding window)");
      }
      if (auto w = a.get("bwd_work")) {  // the backward's matmul work per score over the forward's (2.6 for MLA); older files: 2.5
        r.attention.bwd_work = w->as_positive_number();
        if (r.attention.bwd_work < 2.0 || r.attention.bwd_work > 3.0)
          w->fail("expected the backward's work over the forward's, (3 qk + 2 vd) / (qk + vd): between 2 and 3");
      }
      if (r.attention.backward) r.op = "attention.bwd";
    } else if (r.bytes <= 0) {
      op.at("bytes_per_call").fail("expected a positive byte count for a memory-bound op");
    }
    r.value = op.at("median_s").as_positive_number();
    out.push_back(r);
  }
  return out;
}

}  // namespace

namespace {

std::vector<PartRecord> parts_of(Refs& refs, const Node& root, const std::string& path) {
  root.expect_object();
  if (!root.has("kind") || root.at("kind").as_string() != "measurements")
    root.fail("expected a measurements file (\"kind\": \"measurements\": records of parts, or moeperf run --out)");
  if (root.has("ops") && !root.has("records")) return parse_executor(refs, root, path);
  root.allow_only({"kind", "name", "description", "source", "gpus", "systems", "records", "calibration"});
  if (auto c = root.get("calibration")) (void)parse_calibration(*c, Calibration{});  // checked here, used by parts_calibration
  std::map<std::string, std::shared_ptr<const GpuSpec>> gpus;
  std::map<std::string, std::shared_ptr<const SystemSpec>> systems;
  if (auto g = root.get("gpus")) {
    g->expect_object();
    for (auto& [k, v] : g->raw().items())
      gpus[k] = std::make_shared<const GpuSpec>(refs.follow(Node(v, path, g->path() + "/" + k), "gpu", parse_gpu));
  }
  if (auto s = root.get("systems")) {
    s->expect_object();
    for (auto& [k, v] : s->raw().items())
      systems[k] = std::make_shared<const SystemSpec>(
          refs.follow(Node(v, path, s->path() + "/" + k), "system", [&](const Node& n) { return parse_system(refs, n); }));
  }
  const Node recs = root.at("records");
  if (!recs.is_array()) recs.fail("expected an array of measurement records");
  std::vector<PartRecord> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < recs.size(); ++i) {
    PartRecord r = parse_record(recs[i], gpus, systems);
    if (!ids.insert(r.id).second) recs[i].at("id").fail("duplicate record id \"" + r.id + "\"");
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<PartRecord> load_parts(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  refs.push(path);
  return parts_of(refs, root, path);
}

std::optional<Calibration> parts_calibration(const std::string& path, const Calibration& base) {
  Refs refs;
  const Node root = refs.open(path);
  root.expect_object();
  auto c = root.get("calibration");
  if (!c) return std::nullopt;
  return parse_calibration(*c, base);
}

std::vector<PartRecord> parts_from_document(const nlohmann::json& doc, const std::string& shown_path) {
  Refs refs;
  return parts_of(refs, Node(doc, shown_path, ""), shown_path);
}

}  // namespace moeperf::io
