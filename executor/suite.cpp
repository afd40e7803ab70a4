// `moeperf run --suite calibrate` (executor/suite.h): the op classes the cost model prices,
// measured on this machine, as measurement records.
#include "executor/suite.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "executor/attention_ref.h"
#include "executor/run.h"
#include "executor/run_parts.h"
#include "model/io/write_file.h"
#include "model/workload/flops.h"

namespace moeperf::exec {

using namespace detail;
using json = nlohmann::json;

namespace {

double D(int64_t v) { return static_cast<double>(v); }
// "gemm 24 shapes (3 skipped: budget)": a class's line of the summary.
std::string section(const std::string& what, size_t done, const char* unit, size_t skipped) {
  return what + " " + std::to_string(done) + " " + unit + (skipped ? " (" + std::to_string(skipped) + " skipped: budget)" : "");
}
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

using detail::median;

// Median of timed runs (Backend::time_work: CUDA events behind an L2 flush on a GPU, the host's
// clock on the CPU) after one warm-up (none if `warm` is false): at least 3 (1 without the
// warm-up), more while under `min_total` (up to 25).
template <class F>
double time_median(Backend& be, F&& f, double min_total = 0.05, bool warm = true) {
  if (warm) {
    f();
    be.synchronize();
  }
  const size_t least = warm ? 3 : 1;
  std::vector<double> t;
  double total = 0;
  while (t.size() < least || (total < min_total && t.size() < 25)) {
    const double s = be.time_work(f);
    t.push_back(s), total += s;
  }
  return median(t);
}

std::string ns(double s) {
  char b[64];
  std::snprintf(b, sizeof b, "%.0f ns", s * 1e9);
  return b;
}
std::string rate(double v, const char* unit) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4f %s", v, unit);  // fixed point: the unit parser takes no exponents
  return b;
}

// Progress on stderr (rank 0): one line per class, rewritten in place on a terminal.
struct Progress {
  bool on = false, tty = false;
  Clock::time_point t0 = Clock::now();
  double budget = 0;
  void show(const std::string& cls, size_t done, size_t total) const {
    if (!on) return;
    std::fprintf(stderr, "%ssuite: %-16s %zu/%zu, %.0f s of %.0f s%s", tty ? "\r" : "", cls.c_str(), done, total, seconds_since(t0),
                 budget, tty ? "   " : "\n");
    std::fflush(stderr);
  }
  void end() const {
    if (on && tty) std::fprintf(stderr, "\n");
  }
};

struct Ctx {
  Backend& be;
  Communicator& comm;
  Progress progress;
  Clock::time_point start = Clock::now();
  double budget = 0;
  json records = json::array();
  std::string source;
  std::vector<std::string> summary;
  double peak = 0;  // measured large-GEMM rate, for cost estimates
  double copy_bw = 0;
  // The references measured in the rounds beside the cases they price (0: not measured): a plain
  // copy's rate (the device's memory bandwidth), a pairwise exchange's rate and a small one's time
  // (the ranks' link).
  double round_copy_bw = 0, round_p2p_bw = 0, round_p2p_latency = 0;
  // A section may run until start + (its end share) x budget.
  bool time_left(double end_share, double next_cost) const { return seconds_since(start) + next_cost <= end_share * budget; }
  // Whether a section takes its next case: while its share of the budget lasts, and always when the
  // class (an op the model prices) has no case yet. Earlier sections can overrun their shares (the
  // peak measured between them is not budgeted, a loaded machine runs slower than estimated); a
  // class cut to nothing would leave the fit no record of it, so the suite overruns by its
  // cheapest case instead (the sections' cases run smallest first).
  bool take(bool class_has_case, double end_share, double next_cost) const { return !class_has_case || time_left(end_share, next_cost); }
  void add(json r) {
    r["source"] = source;
    r["confidence"] = "high";
    records.push_back(std::move(r));
  }
};

// Buffers in the backend's memory, filled deterministically.
struct Buf {
  Backend& be;
  float* p = nullptr;
  Buf(Backend& b, int64_t n, uint64_t seed) : be(b) {
    p = static_cast<float*>(be.alloc(static_cast<size_t>(n) * sizeof(float)));
    std::vector<float> h(static_cast<size_t>(n));
    detail::fill(h.data(), n, seed, 0.5f);
    be.upload(p, h.data(), h.size() * sizeof(float));
  }
  ~Buf() { be.release(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

struct GemmCase {
  int64_t m, n, k;
  const char* why;
  bool trans_a = false, trans_b = false;  // wgrad runs X^T dY (trans_a), dgrad dY W^T (trans_b)
};

void gemms(Ctx& c, double end_share) {
  std::vector<GemmCase> cases;
  for (int64_t s : {64, 128, 256, 384, 512, 768, 1024, 1536, 2048}) cases.push_back({s, s, s, "square"});
  for (int64_t m : {16, 64, 256, 1024}) {
    cases.push_back({m, 4096, 1024, "skinny"});
    cases.push_back({m, 1024, 4096, "skinny"});
  }
  // Expert and projection shapes of the shipped models at 256 tokens: DeepSeek-V3 (hidden 7168,
  // expert FFN 2048: FC1 gate+up N 4096), Qwen3-235B-A22B (4096, 1536), GPT-OSS-120B (2880, 2880),
  // Mixtral 8x7B (4096, 14336: its FC2).
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{4096, 7168}, {7168, 2048}, {3072, 4096}, {4096, 1536}, {5760, 2880},
                                                              {2880, 2880}, {4096, 14336}})
    cases.push_back({256, n, k, "model"});
  // A training step's three GEMMs per weight (forward, dgrad with the weight transposed, wgrad
  // with the activations transposed) at small K too (narrow layers, an expert's short FFN).
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1024, 256, 128}, {1024, 256, 256}, {1024, 1024, 256}, {4096, 1024, 256}, {256, 1024, 2048}}) {
    cases.push_back({m, n, k, "forward"});
    cases.push_back({m, n, k, "dgrad layout (B transposed)", false, true});
    cases.push_back({m, n, k, "wgrad layout (A transposed)", true, false});
  }
  std::sort(cases.begin(), cases.end(), [](const GemmCase& a, const GemmCase& b) { return a.m * a.n * a.k < b.m * b.n * b.k; });
  // Every case runs in each round in turn (at least 10 ms of runs, their median), its figure the
  // median over the rounds, as the memory and collective cases: measured one after another, a slow
  // spell of this VM landed on a few shapes (a 2048^3 GEMM 20 % faster than the 1024^3 peak run
  // beside it) and moved the class's held-back error by several points between suites. The
  // operands are three buffers of the largest case's sizes, shared.
  constexpr int kMinRounds = 3, kMaxRounds = 9;
  size_t skipped = 0;
  double round_cost = 0;
  std::vector<GemmCase> run;
  for (const GemmCase& g : cases) {
    const double cost = 2.0 * D(g.m) * D(g.n) * D(g.k) / c.peak + 0.01;
    if (!c.take(!run.empty(), end_share, (round_cost + cost) * (kMinRounds + 1))) {
      ++skipped;
      continue;
    }
    round_cost += cost;
    run.push_back(g);
  }
  int64_t most_a = 1, most_b = 1, most_out = 1;
  for (const GemmCase& g : run) most_a = std::max(most_a, g.m * g.k), most_b = std::max(most_b, g.k * g.n), most_out = std::max(most_out, g.m * g.n);
  Buf a(c.be, most_a, 1), b(c.be, most_b, 2), out(c.be, most_out, 3);
  auto gemm = [&](const GemmCase& g) { c.be.gemm(a.p, b.p, out.p, g.m, g.n, g.k, g.trans_a, g.trans_b, false); };
  for (const GemmCase& g : run) gemm(g);  // warm
  c.be.synchronize();
  std::vector<std::vector<double>> t(run.size());  // per case, one figure per round
  double last_round = round_cost;
  for (int r = 0; r < kMaxRounds && !run.empty(); ++r) {
    if (r >= kMinRounds && !c.time_left(end_share, 1.25 * last_round)) break;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < run.size(); ++i) t[i].push_back(time_median(c.be, [&] { gemm(run[i]); }, 0.01, false));
    last_round = seconds_since(t0);
    c.progress.show("gemm rounds", static_cast<size_t>(r + 1), static_cast<size_t>(std::max(kMinRounds, r + 1)));
  }
  for (size_t i = 0; i < run.size(); ++i) {
    const GemmCase& g = run[i];
    const std::string layout = g.trans_a ? "-tn" : g.trans_b ? "-nt" : "";
    c.add({{"id", "suite/gemm-" + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) + layout},
           {"op", "gemm"}, {"gpu", "this-machine"}, {"shape", {{"m", g.m}, {"n", g.n}, {"k", g.k}}}, {"dtype", "fp32"},
           {"measured", ns(median(t[i]))},
           {"library", c.be.name() + " backend GEMM (" + g.why + "; median of " + std::to_string(t[i].size()) +
                           " rounds over every case in turn; timed by " + c.be.timing_method() + ")"}});
  }
  c.summary.push_back(section("gemm", run.size(), "shapes", skipped));
}

void grouped(Ctx& c, double end_share) {
  struct G {
    int64_t experts, rows, k, n;
    const char* dist;
  };
  // In the order the budget keeps them: the same rows over 8 and over 32 experts side by side (the
  // same FLOPs, four times the groups: what sets the per-group overhead apart from the rate), even
  // rows before skewed, the 1,024 rows before the 4,096. Ordered by experts first, a 20 s suite kept
  // only 8-expert cases (3-5 of 12), and the per-group overhead came out anywhere in [0, 1 ms].
  std::vector<G> cases;
  for (int64_t rows : {1024, 4096})
    for (const char* d : {"uniform", "zipf", "zeros"})
      for (int64_t e : {8, 32}) cases.push_back({e, rows, 1024, 512, d});
  size_t done = 0, skipped = 0;
  for (const G& g : cases) {
    const double flops = 2.0 * D(g.rows) * D(g.k) * D(g.n);
    if (!c.take(done > 0, end_share, 5 * flops / c.peak)) {
      ++skipped;
      continue;
    }
    // Rows per expert: even; Zipf (s = 1.2) over the experts; or half the experts idle.
    std::vector<double> w(static_cast<size_t>(g.experts));
    for (int64_t x = 0; x < g.experts; ++x)
      w[static_cast<size_t>(x)] = std::string(g.dist) == "zipf" ? 1.0 / std::pow(D(x) + 1.0, 1.2) : std::string(g.dist) == "zeros" ? (x % 2 == 0 ? 1.0 : 0.0) : 1.0;
    double sum = 0;
    for (double v : w) sum += v;
    std::vector<int64_t> off(static_cast<size_t>(g.experts) + 1, 0);
    int64_t given = 0;
    for (int64_t x = 0; x < g.experts; ++x) {
      const int64_t r = x + 1 == g.experts ? g.rows - given : static_cast<int64_t>(std::floor(D(g.rows) * w[static_cast<size_t>(x)] / sum));
      given += r;
      off[static_cast<size_t>(x) + 1] = given;
    }
    Buf a(c.be, g.rows * g.k, 4), wts(c.be, g.experts * g.k * g.n, 5), out(c.be, g.rows * g.n, 6);
    const double s = time_median(c.be, [&] { c.be.grouped_gemm(a.p, wts.p, off, g.k, g.n, out.p); });
    const double mean_rows = static_cast<double>(g.rows) / static_cast<double>(g.experts);
    c.add({{"id", "suite/grouped_gemm-" + std::to_string(g.experts) + "x" + std::to_string(g.rows) + "-" + g.dist},
           {"op", "grouped_gemm"}, {"gpu", "this-machine"},
           {"shape", {{"m", mean_rows}, {"n", g.n}, {"k", g.k}, {"groups", g.experts}}}, {"dtype", "fp32"}, {"measured", ns(s)},
           {"library", c.be.name() + " backend grouped GEMM, rows per expert " + g.dist + " (timed by " + c.be.timing_method() + ")"},
           {"derivation", std::to_string(g.rows) + " rows over " + std::to_string(g.experts) + " experts (" + g.dist + "): m is the mean per expert"}});
    c.progress.show("grouped_gemm", ++done, cases.size());
  }
  c.summary.push_back(section("grouped_gemm", done, "cases", skipped));
}

void attention(Ctx& c, double end_share) {
  if (!c.be.host_memory()) {
    c.summary.push_back("attention: not measured on the " + c.be.name() + " backend yet (cuDNN's fused attention: issue 20's GPU run)");
    return;
  }
  struct A {
    int64_t seq, hd, window;
    bool causal;
  };
  std::vector<A> cases;
  // Head dims 64 and 128 (most models) at every length, 32 (small models: the executor's tiny MoE)
  // at the short ones.
  for (int64_t s : {256, 512}) {
    cases.push_back({s, 32, 0, false});
    cases.push_back({s, 32, 0, true});
  }
  for (int64_t s : {256, 512, 1024, 2048})
    for (int64_t hd : {64, 128}) {
      cases.push_back({s, hd, 0, false});
      cases.push_back({s, hd, 0, true});
      if (s > 512) cases.push_back({s, hd, 256, true});
    }
  const int64_t heads = 2;
  size_t done = 0, skipped = 0;
  for (const A& a : cases) {
    const double keys = a.causal || a.window > 0 ? attended_keys(a.seq, static_cast<int>(a.window)) : static_cast<double>(a.seq);
    const double fwd_flops = 2.0 * D(heads) * D(a.seq) * keys * 2.0 * D(a.hd);
    if (!c.take(done > 0, end_share, 15 * 3.5 * fwd_flops / c.peak)) {
      ++skipped;
      continue;
    }
    const BlockedAttention at{a.seq, a.hd, a.window, a.causal};
    std::vector<Mat> q, k, v, o, dout, dq, dk, dv;
    for (int64_t h = 0; h < heads; ++h) {
      for (auto* m : {&q, &k, &v, &dout}) {
        m->emplace_back(a.seq, a.hd);
        detail::fill(m->back().data(), a.seq * a.hd, 20 + static_cast<uint64_t>(m->size()) + static_cast<uint64_t>(h) * 7, 1.0f);
      }
      for (auto* m : {&o, &dq, &dk, &dv}) m->emplace_back(a.seq, a.hd);
    }
    const double f = time_median(c.be, [&] {
      for (int64_t h = 0; h < heads; ++h) at.forward(q[h], k[h], v[h], o[h]);
    });
    const double b = time_median(c.be, [&] {
      for (int64_t h = 0; h < heads; ++h) {
        dk[h].setZero(), dv[h].setZero();
        at.backward(q[h], k[h], v[h], o[h], dout[h], dq[h], dk[h], dv[h]);
      }
    });
    json shape = {{"batch", 1}, {"heads", heads}, {"seq", a.seq}, {"head_dim", a.hd}, {"causal", a.causal}};
    if (a.window > 0) shape["window"] = a.window;
    const std::string id = "suite/attention-" + std::to_string(a.seq) + "-d" + std::to_string(a.hd) + (a.causal ? "-causal" : "") +
                           (a.window ? "-w" + std::to_string(a.window) : "");
    for (int dir = 0; dir < 2; ++dir)
      c.add({{"id", id + (dir ? ".bwd" : ".fwd")}, {"op", dir ? "attention.bwd" : "attention.fwd"}, {"gpu", "this-machine"},
             {"shape", shape}, {"measured", ns(dir ? b : f)},
             {"library", "moeperf blocked reference attention (Eigen, 64-query blocks, masked key blocks skipped; timed by " +
                             c.be.timing_method() + ")"}});
    c.progress.show("attention", ++done, cases.size());
  }
  c.summary.push_back(section("attention", done, "cases x fwd/bwd", skipped));
}

// Row copies (the permute/unpermute of a MoE layer): read + write, rows of 256 B, 1 KiB and 4 KiB,
// in order and shuffled, 64 to 512 MiB (past the caches); each record gives its rows, which the
// model prices beside the bytes (memory_row_s). Shuffled rows are checked, not fitted: on
// a CPU the prefetcher loses the stream and the copy runs at about half the in-order rate, which
// the model's one streaming HBM fraction does not price (a GPU's permute of rows of 256 B or more
// streams either way). No write-only kernel: its DRAM traffic
// depends on whether stores read the line first (write-allocate) or stream, which one HBM
// fraction cannot tell apart (GPUs do not read before a write).
void memory(Ctx& c, double end_share) {
  struct M {
    int64_t mib = 0, hidden = 0;
    bool shuffled = false;
    int64_t rows = 0;
    double moved = 0;
    int64_t* d_idx = nullptr;
    std::vector<double> t;
  };
  // Every case runs once per round, in turn, and each case's figure is its median over the rounds:
  // a slow spell of a shared machine then lands on every case alike instead of on the few that ran
  // during it (one case after another, the sizes' rates differed by 2x from one run to the next).
  constexpr int kMinRounds = 5, kMaxRounds = 11;
  constexpr double kMinCaseSeconds = 0.1;
  const std::vector<int64_t> widths{64, 256, 1024};  // floats: rows of 256 B, 1 KiB, 4 KiB
  std::vector<M> cases;
  std::vector<int64_t> sizes;
  size_t skipped = 0;
  double round_cost = 0;
  for (int64_t mib : {64, 128, 256, 512}) {
    const int64_t n = mib << 18;
    double cost = 0;
    std::vector<M> add;
    for (int64_t hidden : widths)
      for (bool sh : {false, true}) {
        M m;
        m.mib = mib, m.hidden = hidden, m.shuffled = sh;
        m.rows = n / hidden;
        m.moved = 8.0 * D(n) + 8.0 * D(m.rows);  // rows read and written, the index read
        cost += m.moved / c.copy_bw * (sh ? 3.0 : 1.0);  // shuffled rows run at a third to half the rate
        add.push_back(m);
      }
    if (!c.take(!cases.empty(), end_share, (round_cost + cost) * (kMinRounds + 1))) {
      skipped += add.size();
      continue;
    }
    round_cost += cost;
    sizes.push_back(mib);
    cases.insert(cases.end(), add.begin(), add.end());
  }
  // One pair of buffers per size, shared by its widths and orders; one index per case.
  std::map<int64_t, std::pair<std::unique_ptr<Buf>, std::unique_ptr<Buf>>> bufs;
  for (int64_t mib : sizes) bufs[mib] = {std::make_unique<Buf>(c.be, mib << 18, 8), std::make_unique<Buf>(c.be, mib << 18, 9)};
  for (M& m : cases) {
    std::vector<int64_t> idx(static_cast<size_t>(m.rows));
    for (int64_t i = 0; i < m.rows; ++i) idx[static_cast<size_t>(i)] = i;
    if (m.shuffled)
      for (int64_t i = m.rows - 1; i > 0; --i)
        std::swap(idx[static_cast<size_t>(i)], idx[static_cast<size_t>(mix(static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1))]);
    m.d_idx = static_cast<int64_t*>(c.be.alloc(idx.size() * sizeof(int64_t)));
    c.be.upload(m.d_idx, idx.data(), idx.size() * sizeof(int64_t));
  }
  auto run = [&](M& m) {
    auto& [a, out] = bufs.at(m.mib);
    c.be.gather_rows(a->p, m.d_idx, m.rows, m.hidden, out->p);
  };
  // The reference: a plain copy of the largest buffer, once per round beside the cases, so the
  // device's memory rate the records are priced against is measured under the same conditions.
  // (A plain copy, not a one-row gather: the CUDA backend runs a gather with a block per row, one
  // block for one row, a few per cent of the device's memory rate.)
  std::vector<double> ref;
  auto copy_ref = [&](bool record) {  // the whole buffer in one copy
    if (sizes.empty()) return;
    const auto& pair = bufs.at(sizes.back());  // not a structured binding: a lambda captures it below (clang before 16 refuses)
    float* from = pair.first->p;
    float* to = pair.second->p;
    const double s = c.be.time_work([&] { c.be.copy(to, from, static_cast<size_t>(sizes.back() << 18) * sizeof(float)); });
    if (record) ref.push_back(s);
  };
  copy_ref(false);
  for (M& m : cases) run(m);  // warm: first touch of the output and the index
  c.be.synchronize();
  for (int r = 0; r < kMaxRounds && !cases.empty(); ++r) {
    double least = std::numeric_limits<double>::infinity();
    for (const M& m : cases) {
      double total = 0;
      for (double x : m.t) total += x;
      least = std::min(least, total);
    }
    if (r >= kMinRounds && least >= kMinCaseSeconds) break;
    if (r >= kMinRounds && !c.time_left(end_share, round_cost)) break;
    copy_ref(true);
    for (M& m : cases) m.t.push_back(c.be.time_work([&] { run(m); }));
    c.progress.show("memory rounds", static_cast<size_t>(r + 1), static_cast<size_t>(std::max(kMinRounds, r + 1)));
  }
  if (!ref.empty()) c.round_copy_bw = 8.0 * static_cast<double>(sizes.back() << 18) / median(ref);
  for (M& m : cases) {
    c.be.release(m.d_idx);
    json r = {{"id", "suite/memory-rows" + std::to_string(m.hidden * 4) + "B-" + (m.shuffled ? "shuffled-" : "") + std::to_string(m.mib) + "MiB"},
              {"op", "memory.copy"}, {"gpu", "this-machine"}, {"shape", {{"bytes", rate(m.moved, "B")}, {"rows", m.rows}}},
              {"measured", ns(median(m.t))},
              {"library", c.be.name() + " backend row gather (permute), rows of " + std::to_string(m.hidden * 4) + " B" + (m.shuffled ? ", shuffled" : "") +
                              ", median of " + std::to_string(m.t.size()) + " rounds over every case in turn, timed by " +
                              c.be.timing_method()}};
    if (m.shuffled && c.be.host_memory())
      r["use"] = "check", r["why"] = "rows in random order: a CPU's prefetcher loses the stream; the model prices streaming HBM access";
    c.add(std::move(r));
  }
  c.summary.push_back(section("memory", cases.size(), "cases", skipped));
}

// Rank 0 decides, every rank follows (a sum of 0/1 flags).
bool agree(Communicator& comm, bool rank0_says) {
  double v = comm.rank() == 0 && rank0_says ? 1.0 : 0.0;
  comm.allreduce_sum(&v, 1);
  return v > 0.5;
}

// The collectives (the executor's rings and all-to-all, executor/comm.h) against their closed
// forms, once before they are timed: rank r's element i is r + 1 + i mod 7, so a sum over n ranks
// is n (n + 1) / 2 + n (i mod 7), exact in floating point; a gathered block p holds rank p's bytes;
// an all-to-all's block from r to p is a pattern of both.
void check_collective(Communicator& comm, const std::string& op, std::vector<char>& send, std::vector<char>& recv, int64_t per,
                      int64_t bytes, const std::vector<int64_t>& sb, const std::vector<int64_t>& rb, const std::function<void()>& run) {
  const int n = comm.size(), me = comm.rank();
  auto value = [](int rank, int64_t i) { return static_cast<double>(rank + 1 + i % 7); };
  auto summed = [n](int64_t i) { return n * (n + 1) / 2.0 + n * static_cast<double>(i % 7); };
  int64_t bad = -1;
  if (op == "all_gather") {
    for (int64_t i = 0; i < per; ++i) send[static_cast<size_t>(i)] = static_cast<char>(value(me, i));
    run();
    for (int64_t i = 0; i < per * n && bad < 0; ++i)
      if (recv[static_cast<size_t>(i)] != static_cast<char>(value(static_cast<int>(i / per), i % per))) bad = i;
  } else if (op == "reduce_scatter") {
    auto* f = reinterpret_cast<float*>(send.data());
    const int64_t count = per / 4;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < count; ++i) f[b * count + i] = static_cast<float>(value(me, i));
    run();
    const auto* g = reinterpret_cast<const float*>(recv.data());
    for (int64_t i = 0; i < count && bad < 0; ++i)
      if (g[i] != static_cast<float>(summed(i))) bad = i;
  } else if (op == "all_reduce") {
    auto* d = reinterpret_cast<double*>(send.data());
    for (int64_t i = 0; i < bytes / 8; ++i) d[i] = value(me, i);
    run();
    for (int64_t i = 0; i < bytes / 8 && bad < 0; ++i)
      if (d[i] != summed(i)) bad = i;
  } else {  // all-to-all: byte i of the block from rank r to rank p is 7r + 3p + i (mod 256)
    auto byte = [](int64_t r, int64_t p, int64_t i) { return static_cast<char>((7 * r + 3 * p + i) & 0xff); };
    for (int64_t p = 0, o = 0; p < n; o += sb[static_cast<size_t>(p)], ++p)
      for (int64_t i = 0; i < sb[static_cast<size_t>(p)]; ++i) send[static_cast<size_t>(o + i)] = byte(me, p, i);
    run();
    for (int64_t p = 0, o = 0; p < n && bad < 0; o += rb[static_cast<size_t>(p)], ++p)
      for (int64_t i = 0; i < rb[static_cast<size_t>(p)] && bad < 0; ++i)
        if (recv[static_cast<size_t>(o + i)] != byte(p, me, i)) bad = o + i;
  }
  double worst = bad >= 0 ? 1.0 : 0.0;
  comm.allreduce_sum(&worst, 1);
  if (worst > 0)
    throw std::runtime_error("the " + op + " of " + std::to_string(bytes) + " B over " + std::to_string(n) +
                             " ranks gave a wrong result" + (bad >= 0 ? " at element " + std::to_string(bad) + " on rank " + std::to_string(me) : std::string()));
}

void collectives(Ctx& c, double end_share) {
  Communicator& comm = c.comm;
  const int n = comm.size();
  if (n < 2) {
    c.summary.push_back("collectives: one rank (run under mpirun -np 2 or more to measure them)");
    return;
  }
  const char* kOps[] = {"all_to_all", "all_to_all_ragged", "all_gather", "reduce_scatter", "all_reduce"};
  std::vector<int64_t> sizes;  // bytes per rank
  for (int64_t kib : {64, 256, 1024, 4096, 16384, 65536}) sizes.push_back(kib << 10);
  // Every case is checked once, then timed once per round in turn (the slowest rank's time), its
  // figure the median over the rounds: a slow spell of a shared machine lands on every case alike
  // instead of on the few measured during it. The buffers are the largest case's, shared. At least
  // kRounds rounds, then more while the budget allows, up to kMaxRounds: with more ranks than cores
  // the ranks' scheduling moves a mid-size case by 2x from one round to the next, and a median
  // over 7 still moved a class's error by several points between suites.
  constexpr int kRounds = 7, kMaxRounds = 25;
  struct Case {
    std::string op;
    int64_t bytes = 0, per = 0;
    double shape_bytes = 0;
    std::string derivation;
    std::vector<int64_t> sb, rb;
    std::vector<double> t;
  };
  std::vector<Case> cases;
  size_t skipped = 0;
  double round_cost = 0;  // rank 0's estimate at the measured copy rate, with latency and slack
  for (int64_t bytes : sizes)
    for (const char* op : kOps) {
      const double cost = 2.0 * 2.0 * static_cast<double>(bytes) / c.copy_bw + 0.001;
      const bool has = std::any_of(cases.begin(), cases.end(), [&](const Case& k) { return k.op == op; });
      if (!agree(comm, c.take(has, end_share, (round_cost + cost) * (kRounds + 3)))) {
        ++skipped;
        continue;
      }
      round_cost += cost;
      Case k;
      k.op = op;
      k.bytes = bytes;
      k.per = (bytes / n) & ~int64_t{7};
      // The record's size as the model counts it: the whole buffer for the gathers and reductions,
      // the bytes leaving each rank for an all-to-all (its own share stays put).
      k.shape_bytes = static_cast<double>(k.per) * (k.op == "all_to_all" ? n - 1 : n);
      k.sb.assign(static_cast<size_t>(n), 0), k.rb.assign(static_cast<size_t>(n), 0);
      if (k.op == "all_to_all") {
        std::fill(k.sb.begin(), k.sb.end(), k.per), std::fill(k.rb.begin(), k.rb.end(), k.per);
      } else if (k.op == "all_to_all_ragged") {
        // Each rank keeps the even share of its `bytes` (1 / n, the block it copies to itself) and
        // sends the rest unevenly: peer (r + d) % n, d >= 1, a share 1 / d of it; the busiest
        // receiver sets the pace and is the record's size. The own block stays at the even share: a
        // CPU rank's core copies it as it copies a peer's, a cost the model does not price apart
        // (the even case's own block is in the fitted link rate); with shares 1 / (1 + d) from d = 0
        // it was 48 % of the buffer and these cases ran 22-34 % slower than priced at 16-64 MiB.
        std::vector<std::vector<int64_t>> m(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n)));
        double wsum = 0;
        for (int d = 1; d < n; ++d) wsum += 1.0 / d;
        const double own = static_cast<double>(bytes) / n, rest = static_cast<double>(bytes) - own;
        for (int r = 0; r < n; ++r)
          for (int d = 0; d < n; ++d)
            m[static_cast<size_t>(r)][static_cast<size_t>((r + d) % n)] = static_cast<int64_t>(d == 0 ? own : rest / wsum / d) & ~int64_t{7};
        int64_t most = 0;  // the busiest rank's bytes from the others
        for (int p = 0; p < n; ++p) {
          int64_t in = 0;
          for (int r = 0; r < n; ++r) in += r == p ? 0 : m[static_cast<size_t>(r)][static_cast<size_t>(p)];
          most = std::max(most, in);
        }
        for (int p = 0; p < n; ++p)
          k.sb[static_cast<size_t>(p)] = m[static_cast<size_t>(comm.rank())][static_cast<size_t>(p)],
          k.rb[static_cast<size_t>(p)] = m[static_cast<size_t>(p)][static_cast<size_t>(comm.rank())];
        k.shape_bytes = static_cast<double>(most);
        k.derivation = "ragged: each rank keeps 1/n of its " + std::to_string(bytes) + " B and sends the rest to peer (r + d) mod n in shares 1 / d (d >= 1); the busiest rank receives " +
                       std::to_string(most) + " B from the others, the size of the even all-to-all this is priced as";
      } else if (k.op == "reduce_scatter") {
        k.shape_bytes = 4.0 * static_cast<double>(k.per / 4) * n;
      } else if (k.op == "all_reduce") {
        k.shape_bytes = 8.0 * static_cast<double>(bytes / 8);
      }
      cases.push_back(std::move(k));
    }
  // The ranks' link, measured in the same rounds: rank r exchanges with r ^ 1 alone, 32 MiB (its
  // rate) and 8 B (one step's time); the system file's link and the fit's starting step latency.
  const int partner = (comm.rank() ^ 1) < n ? comm.rank() ^ 1 : comm.rank();
  for (int64_t b : {int64_t{32} << 20, int64_t{8}}) {
    Case k;
    k.op = "pair";
    k.bytes = b;
    k.sb.assign(static_cast<size_t>(n), 0), k.rb.assign(static_cast<size_t>(n), 0);
    if (partner != comm.rank()) k.sb[static_cast<size_t>(partner)] = k.rb[static_cast<size_t>(partner)] = b;
    cases.push_back(std::move(k));
  }
  int64_t largest = 0;
  for (const Case& k : cases) largest = std::max(largest, k.bytes);
  std::vector<char> send(static_cast<size_t>(largest) + 64), recv(2 * static_cast<size_t>(largest) + 64);
  auto runner = [&](const Case& k) -> std::function<void()> {
    if (k.op == "all_gather") return [&] { comm.allgather(send.data(), k.per, recv.data()); };
    if (k.op == "reduce_scatter")
      return [&] {
        comm.reduce_scatter_sum(reinterpret_cast<const float*>(send.data()), reinterpret_cast<float*>(recv.data()), k.per / 4);
      };
    if (k.op == "all_reduce") return [&] { comm.allreduce_sum(reinterpret_cast<double*>(send.data()), k.bytes / 8); };
    return [&] { comm.alltoallv(send.data(), k.sb, recv.data(), k.rb); };
  };
  std::vector<double> all(static_cast<size_t>(n));
  size_t done = 0;
  size_t total = cases.size() * (kRounds + 1);
  double last_round_s = 0;
  for (const Case& k : cases) {  // checked against its closed form, and warm
    const auto run = runner(k);
    check_collective(comm, k.op, send, recv, k.per, k.bytes, k.sb, k.rb, run);
    run();
    if (comm.rank() == 0) c.progress.show("collectives", ++done, total);
  }
  for (int r = 0; r < kMaxRounds; ++r) {
    const auto round_start = Clock::now();
    if (r >= kRounds) {
      // One more round if rank 0 sees time for it (the last round's time, with a quarter's slack).
      if (!agree(comm, c.time_left(end_share, 1.25 * last_round_s))) break;
      total += cases.size();
    }
    for (Case& k : cases) {
      const auto run = runner(k);
      comm.barrier();
      const auto t0 = Clock::now();
      run();
      double s = seconds_since(t0);
      comm.allgather(&s, sizeof s, all.data());
      k.t.push_back(*std::max_element(all.begin(), all.end()));
      if (comm.rank() == 0) c.progress.show("collectives", ++done, total);
    }
    last_round_s = seconds_since(round_start);
  }
  size_t recorded = 0;
  for (const Case& k : cases) {
    if (k.op == "pair") {
      if (k.bytes > 8) c.round_p2p_bw = static_cast<double>(k.bytes) / median(k.t);
      else c.round_p2p_latency = median(k.t);
      continue;
    }
    ++recorded;
    const std::string rec_op = k.op == "all_to_all_ragged" ? "all_to_all" : k.op;
    json r = {{"id", "suite/" + k.op + "-" + std::to_string(n) + "ranks-" + std::to_string(k.bytes >> 10) + "KiB"},
              {"op", "collective." + rec_op}, {"system", "this-machine"}, {"gpus", n},
              {"shape", {{"bytes", rate(k.shape_bytes, "B")}}}, {"measured", ns(median(k.t))},
              {"library", comm.name() + " " + k.op + " (the slowest rank's time, median of " + std::to_string(k.t.size()) +
                              " rounds over every case in turn)"}};
    if (!k.derivation.empty()) r["derivation"] = k.derivation;
    if (const std::string a = comm.algorithm(rec_op); !a.empty()) r["algorithm"] = a;
    if (comm.rank() == 0) c.add(r);
  }
  if (comm.rank() == 0)
    c.summary.push_back(section("collectives", recorded, ("cases on " + std::to_string(n) + " ranks").c_str(), skipped));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 16e9;
}

}  // namespace

SuiteResult run_suite(const SuiteOptions& o, Communicator& comm, Backend& be) {
  Ctx c{be, comm, {}, Clock::now(), o.budget_s, json::array(), "", {}, 0, 0};
  c.progress.on = o.progress && comm.rank() == 0;
  c.progress.tty = isatty(2);
  c.progress.budget = o.budget_s;
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  c.source = std::string("moeperf run --suite calibrate, ") + date + ", " + MOEPERF_GIT_REVISION;
  // On the CPU backend compute runs on every rank at once, rank 0's figures recorded: a training
  // step's ranks run their ops at once, and so does the executor's layer (executor/run.cpp), and
  // the ranks share the host's caches, memory and clock headroom: timed on rank 0 while the others
  // slept, the suite's GEMMs came out at 0.89 of the peak where the layer's ran at 0.77, and the
  // fit priced the layer's GEMMs 15-45 % slow or fast by turns. The sections' choices (rounds,
  // cases skipped for the budget) are each rank's own: no rank waits on another before the
  // barrier below. On a device backend rank 0 measures alone: its device is its own, and ranks
  // launched without one each (every rank on device 0) would time each other's kernels.
  if (comm.rank() == 0 || be.host_memory()) {
    // The peak is measured at the start (the sections' cost estimates) and after each compute
    // section, the median kept: the records' figures are medians over rounds, and on a shared VM
    // a slow spell at the start (seen: 29 of 40 GFLOP/s) set every record's fraction against a
    // peak too low, while the better of a first and a last measurement set it too high (the fit's
    // held-back layer then came out 14-18 % slow, the layer's run pricing against its own median).
    std::vector<double> peaks{be.measure_gemm_peak()};
    c.peak = peaks.back();
    c.copy_bw = be.measure_copy_bandwidth();
    gemms(c, 0.26);
    peaks.push_back(be.measure_gemm_peak());
    grouped(c, 0.34);
    peaks.push_back(be.measure_gemm_peak());
    attention(c, 0.46);
    peaks.push_back(be.measure_gemm_peak());
    memory(c, 0.62);
    peaks.push_back(be.measure_gemm_peak());
    c.peak = median(peaks);
    // The records are priced against the plain copy measured in the memory rounds beside them
    // (a median, as theirs are) when there was one.
    c.copy_bw = c.round_copy_bw > 0 ? c.round_copy_bw : std::max(c.copy_bw, be.measure_copy_bandwidth());
  }
  comm.idle_barrier();  // a rank done early sleeps: a spinning wait would share a core with one still measuring
  // Rank 0's ceilings, as its records are priced against them.
  double shared[2] = {comm.rank() == 0 ? c.peak : 0.0, comm.rank() == 0 ? c.copy_bw : 0.0};
  comm.allreduce_sum(shared, 2);
  c.peak = shared[0], c.copy_bw = shared[1];
  // The shared-memory transport between ranks: a pairwise exchange's rate and a small one's time,
  // measured in the collectives' rounds.
  double p2p_bw = c.copy_bw / 2, p2p_latency = 1e-6;
  const int n = comm.size();
  collectives(c, 1.0);
  if (c.round_p2p_bw > 0) p2p_bw = c.round_p2p_bw, p2p_latency = c.round_p2p_latency;
  c.progress.end();
  SuiteResult res;
  if (comm.rank() != 0) return res;
  // This machine as a system: each rank a "GPU" of one core at the measured GEMM rate and copy
  // bandwidth, the ranks joined by the MPI shared-memory transport as one switched domain. On a
  // device backend the GPU is the device rank 0 measured on (SMs, compute capability and memory as
  // the runtime reports them: the GEMM form's waves are over its SMs); the link stays the host
  // transport the suite's collectives ran over (they do not go through NCCL yet).
  const std::string cpu = cpu_model();
  json gpu = {
      {"kind", "gpu"}, {"name", "CPU core (" + cpu + ") under moeperf's " + be.name() + " backend"},
      {"source", c.source},
      {"note", "measured, not a datasheet: the FP32 GEMM rate of one rank stands as the rate the model prices FP32 at (its BF16 "
               "figure) and for FP8; compute capability 1.0 is a placeholder the loader requires; memory is the host's share per rank"},
      {"compute_capability", "1.0"}, {"sms", 1},
      {"dense_flops", {{"bf16", rate(c.peak / 1e9, "GFLOP/s")}, {"fp8", rate(c.peak / 1e9, "GFLOP/s")}}},
      {"hbm_capacity", rate(host_memory_bytes() / n / 1073741824.0, "GiB")}, {"hbm_usable", rate(host_memory_bytes() / n / 1073741824.0, "GiB")},
      {"hbm_bandwidth", rate(c.copy_bw / 1e9, "GB/s")},
      {"nvlink", {{"generation", 1}, {"links", 1}, {"bandwidth_per_link", rate(p2p_bw / 1e9, "GB/s")}}}};
  if (!be.host_memory() && !be.device_json().empty()) {
    const json dev = json::parse(be.device_json());
    const double gib = dev.at("memory_bytes").get<double>() / 1073741824.0;
    gpu["name"] = dev.at("name").get<std::string>() + " under moeperf's " + be.name() + " backend";
    gpu["note"] = "measured, not a datasheet: the FP32 cuBLAS SGEMM rate (no TF32) stands as the rate the model prices FP32 at "
                  "(its BF16 figure) and for FP8; SMs, compute capability and memory as the CUDA runtime reports them; the link "
                  "between ranks is the host MPI transport the suite's collectives ran over, not the GPUs' interconnect";
    gpu["compute_capability"] = dev.at("cc");
    gpu["sms"] = dev.at("sms");
    gpu["hbm_capacity"] = rate(gib, "GiB");
    gpu["hbm_usable"] = rate(gib, "GiB");
  }
  json domain = {{"kind", "nvlink_domain"}, {"name", std::to_string(n) + " ranks on one host (MPI shared memory)"}, {"source", c.source},
                 {"tray", {{"kind", "compute_tray"}, {"name", "this machine"}, {"source", c.source}, {"gpu", gpu}, {"gpus", n}}},
                 {"trays", 1}, {"switch_chips", 0}};
  if (n >= 2) {
    domain["switch_chips"] = 1;
    domain["gpu_links_per_chip"] = 1;
    domain["switch"] = {{"kind", "switch"}, {"name", "host memory (MPI shared-memory transport)"}, {"source", c.source},
                        {"ports", std::max(2, n)}, {"port_bandwidth", rate(p2p_bw / 1e9, "GB/s")}, {"latency", "0 s"}};
    // No wire: a step's latency is the library's (MPI's point-to-point call, the ranks' scheduling),
    // the cost model's nvlink_step_s, which the fit starts from the measured exchange (below).
    domain["nvlink_latency"] = "0 s";
    domain["transport"] = "host_memory";  // the ranks' cores copy and reduce: host_reduce_fraction prices the reductions
  }
  const json system = {{"kind", "system"}, {"name", "this machine: " + std::to_string(n) + " rank" + (n > 1 ? "s" : "") + " of " + cpu},
                       {"source", c.source},
                       {"description", std::string("Written by moeperf run --suite calibrate: each MPI rank a device (") +
                                           (be.host_memory() ? "one core" : "its GPU") + "); the pairwise host-transport "
                                       "exchange rate " + rate(p2p_bw / 1e9, "GB/s") + " and the 8-byte exchange time " +
                                       rate(p2p_latency * 1e6, "us") + " are the link"},
                       {"nvlink_domain", domain}, {"gpus", n}, {"placement", {{"gpus_per_domain", n}}}};
  json doc = {{"kind", "measurements"},
              {"name", "moeperf calibration suite on " + cpu},
              {"source", c.source},
              {"description", "Measured by the suite: " + [&] {
                 std::string s;
                 for (const auto& x : c.summary) s += (s.empty() ? "" : "; ") + x;
                 return s;
               }()},
              {"gpus", {{"this-machine", gpu}}},
              {"systems", {{"this-machine", system}}},
              {"records", c.records}};
  // What the measuring library says of its own structure, and what the suite measured of its
  // steps: the fit starts from it.
  json params = json::object();
  std::vector<std::string> why;
  if (const auto [tm, tn] = be.gemm_tile(); tm > 0 && tn > 0) {
    params["gemm_tile_m"] = tm, params["gemm_tile_n"] = tn;
    why.push_back("GEMM tile: the backend's GEMM kernel as built (CPU: Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                  std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION) +
                  " gebp_traits<float, float>::mr x nr, the register block of its GEBP micro-kernel)");
  }
  if (n >= 2 && comm.name() == "mpi") {
    // An exchange slower than the parameter allows means ranks that wait for their cores (more
    // ranks, or other work, than cores): the file keeps the bound, so that it loads, and says so.
    const ParamDef& step = param_def(Param::nvlink_step_s);
    const double kept = std::min(p2p_latency, step.max);
    params["nvlink_step_s"] = kept, params["collective_launch_s"] = 0.0;
    std::string w = "collective steps: the communicator's calls run on the host, no kernel to launch (collective_launch_s 0); a step "
                    "starts at the measured 8-byte pairwise exchange, " + rate(p2p_latency * 1e6, "us") + " (nvlink_step_s)";
    if (kept < p2p_latency) {
      w += ", kept at the parameter's bound of " + rate(step.max * 1e6, "us") +
           ": an exchange that slow means the ranks waited for their cores (an oversubscribed or busy machine)";
      if (comm.rank() == 0)
        std::fprintf(stderr, "suite: warning: the 8-byte exchange took %.0f us, above nvlink_step_s's bound of %.0f us: the ranks "
                             "waited for their cores (is the machine busy, or are there more ranks than cores?); the file keeps the bound\n",
                     p2p_latency * 1e6, step.max * 1e6);
    }
    why.push_back(w);
  }
  if (!params.empty()) {
    std::string source;
    for (const auto& w : why) source += (source.empty() ? "" : "; ") + w;
    doc["calibration"] = {{"kind", "calibration"}, {"name", be.name() + " backend's structure and steps"}, {"source", source}, {"params", params}};
  }
  // Both files written whole first, then renamed into place (io::write_files_atomically: temporaries
  // of their own, never a user's X.tmp; a link's target written): a full disk or an unwritable
  // folder ends the command with neither file replaced.
  std::vector<std::pair<std::string, std::string>> files;  // target, content
  if (!o.out.empty()) files.emplace_back(o.out, doc.dump(2) + "\n");
  if (!o.write_system.empty()) files.emplace_back(o.write_system, system.dump(2) + "\n");
  io::write_files_atomically(files);
  res.records = static_cast<int>(c.records.size());
  for (const auto& x : c.summary) res.summary += (res.summary.empty() ? "" : "; ") + x;
  return res;
}

}  // namespace moeperf::exec
