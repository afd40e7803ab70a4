// Internal to the executor (run.cpp): the pieces run_scenario() is made of: deterministic data from
// a seed, the per-op time recorder, the step watchdog, one MoE layer's weights and buffers, the
// row map that regroups received rows expert-major, and the host/device mirror of a host vector.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>
#include <unistd.h>

#include "executor/backend.h"
#include "executor/comm.h"
#include "kernels/reference/moe_ref.h"
#include "model/pricing/cost.h"
#include "model/error.h"
#include "model/workload/routing.h"
#include "model/workload/step.h"
#include "model/hardware/topology.h"

namespace moeperf::exec::detail {

using Clock = std::chrono::steady_clock;
using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapM = Eigen::Map<Mat>;
using CMapM = Eigen::Map<const Mat>;

// SplitMix64: deterministic weights and data from (seed, stream) on every rank.
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline double uniform(uint64_t seed, uint64_t i) { return static_cast<double>(mix(seed ^ mix(i)) >> 11) * 0x1.0p-53; }
inline void fill(float* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>((2 * uniform(seed, static_cast<uint64_t>(i)) - 1) * scale);
}
enum : uint64_t { kRouterSeed = 11, kBiasSeed = 12, kW1Seed = 13, kW2Seed = 14, kS1Seed = 15, kS2Seed = 16, kXSeed = 17, kDySeed = 18, kGumbelSeed = 19 };

// The median (the mean of the middle two for an even count; 0 for none).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
// An op's median call (the lower of the middle two for an even count, so that it is a call that
// ran): its time is the op's median_s, its work the op's bytes, FLOPs, rows and shape. A median of
// the times beside the last call's work would pair two steps' routing.
inline void pick_median_call(OpStats& o) {
  if (o.seconds.empty()) return;
  std::vector<size_t> idx(o.seconds.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return o.seconds[a] < o.seconds[b]; });
  const size_t m = idx[(idx.size() - 1) / 2];
  o.median_s = o.seconds[m];
  if (m < o.work.size()) {
    const OpStats::Work& w = o.work[m];
    o.bytes = w.bytes, o.flops = w.flops, o.rows = w.rows, o.shape = w.shape;
  }
}
inline std::string fmt(const char* f, double a, double b = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

// The collective an op of the run is, as the model prices it (none: a kernel, or a wait). The
// MoE exchanges (dispatch, combine, the count exchange) are all-to-alls.
inline Collective exchange_collective(const std::string& name) {
  if (name.rfind("wait.", 0) == 0) return Collective::none;
  if (name.find("reduce_scatter") != std::string::npos) return Collective::reduce_scatter;
  if (name.find("all_gather") != std::string::npos) return Collective::all_gather;
  for (const char* w : {"dispatch", "combine", "exchange"})
    if (name.find(w) != std::string::npos) return Collective::all_to_all;
  return Collective::none;
}
inline bool is_comm_op(const std::string& name) { return exchange_collective(name) != Collective::none; }
// Work of the host communicator, timed by the host's clock: a collective, or the barrier before
// one ("wait.<exchange>", which is no collective of its own).
inline bool is_host_work(const std::string& name) { return name.rfind("wait.", 0) == 0 || is_comm_op(name); }

// Times ops by name; only records when `record` is on (after warm-up).
struct Recorder {
  std::map<std::string, OpStats>* ops;
  Backend* backend = nullptr;  // times each op (Backend::time_work: the op's work alone, completed)
  bool record = false;
  template <class F>
  void time(const std::string& name, double bytes, double flops, F&& f) {
    time(name, bytes, flops, GemmShape{}, std::forward<F>(f));
  }
  // A GEMM, with its shape for the cost model (per group for grouped GEMMs, mean rows per expert).
  template <class F>
  void time(const std::string& name, double bytes, double flops, const GemmShape& shape, F&& f) {
    // Work queued before the op (a fill, a copy the caller did not wait for) finishes first, so the
    // time covers the op alone: a compute op's work on the device (Backend::time_work); a
    // communicator's op (a barrier, a reduction over the host communicator) is the host's work,
    // timed by the host's clock between synchronizes (the base class's time_work).
    if (backend) {
      store(name, bytes, flops, shape, is_host_work(name) ? backend->Backend::time_work(f) : backend->time_work(f));
      return;
    }
    const auto t0 = Clock::now();
    f();
    store(name, bytes, flops, shape, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // An exchange: `f` runs it and returns its own device time (0: not measured), which is recorded
  // in place of the host clock's, so setup and host polling around the library call stay out.
  template <class F>
  void time_exchange(const std::string& name, double bytes, F&& f) {
    if (backend) backend->synchronize();
    const auto t0 = Clock::now();
    const double device_s = f();
    if (backend) backend->synchronize();
    store(name, bytes, 0, GemmShape{}, device_s > 0 ? device_s : std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // One call's figures, when recording.
  void store(const std::string& name, double bytes, double flops, const GemmShape& shape, double seconds) {
    if (!record) return;
    OpStats& o = (*ops)[name];
    ++o.calls;
    o.seconds.push_back(seconds);
    o.work.push_back(OpStats::Work{bytes, flops, 0, shape});
  }
  // The time a rank waits for the others before an exchange (a barrier), recorded apart as
  // "wait.<exchange>" so the exchange's own time is its transfer, as the model prices it; the
  // wait is the ranks' skew, which the model's simulator has as idle time, not as an op.
  void wait(const std::string& exchange, Communicator& comm) {
    if (comm.size() > 1) time("wait." + exchange, 0, 0, [&] { comm.barrier(); });
  }
  // A row gather or scatter (permute, regroup, un-permute): `rows` rows per call, which the cost
  // model prices beside the bytes (memory_row_s).
  template <class F>
  void time_rows(const std::string& name, double bytes, double rows, F&& f) {
    time(name, bytes, 0, GemmShape{}, std::forward<F>(f));
    if (record) (*ops)[name].work.back().rows = rows;
  }
  // An attention core, with its shape for the cost model.
  template <class F>
  void time_attention(const std::string& name, double bytes, double flops, const AttentionShape& a, F&& f) {
    time(name, bytes, flops, GemmShape{}, std::forward<F>(f));
    if (!record) return;
    OpStats& o = (*ops)[name];
    o.attention = true;
    o.attention_shape = a;
  }
};

// Watchdog: if a step is not done by its deadline, say so and end the process (mpirun then ends
// the job); never a silent hang.
class Watchdog {
 public:
  Watchdog(double timeout_s, int rank) : timeout_(timeout_s), rank_(rank), th_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    th_.join();
  }
  void arm(int step) {
    std::lock_guard<std::mutex> l(m_);
    step_ = step;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
    armed_ = true;
  }
  void disarm() {
    std::lock_guard<std::mutex> l(m_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(m_);
    while (!stop_) {
      cv_.wait_for(l, std::chrono::milliseconds(100));
      if (armed_ && Clock::now() > deadline_) {
        std::fprintf(stderr,
                     "moeperf run: rank %d: step %d did not finish within %.0f s (--timeout): a peer failed or hangs; "
                     "ending the job\n",
                     rank_, step_, timeout_);
        std::fflush(stderr);
        std::_Exit(124);
      }
    }
  }
  double timeout_;
  int rank_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false, armed_ = false;
  int step_ = 0;
  Clock::time_point deadline_;
  std::thread th_;
};

struct Layer {
  Dims d;
  int rank = 0, ranks = 1;
  int64_t el = 0;  // local experts
  ref::RouterParams rp;
  std::vector<float> router, bias, w1, w2, s1, s2, log_share;  // w1/w2: local experts only

  void init(const Scenario& s, const Dims& dims, int r, int n) {
    d = dims, rank = r, ranks = n, el = d.experts / n;
    const int64_t h = d.hidden, f = d.ffn, e = d.experts;
    const float sh = static_cast<float>(1.0 / std::sqrt(static_cast<double>(h)));
    const float sf = static_cast<float>(1.0 / std::sqrt(static_cast<double>(f)));
    router.resize(static_cast<size_t>(h * e));
    fill(router.data(), h * e, kRouterSeed, sh);
    bias.resize(static_cast<size_t>(e));
    if (s.model.router.bias) fill(bias.data(), e, kBiasSeed, 0.01f);
    w1.resize(static_cast<size_t>(el * h * 2 * f));
    w2.resize(static_cast<size_t>(el * f * h));
    for (int64_t x = 0; x < el; ++x) expert_weights(rank * el + x, w1.data() + x * h * 2 * f, w2.data() + x * f * h);
    if (d.shared_ffn > 0) {
      s1.resize(static_cast<size_t>(h * 2 * d.shared_ffn));
      s2.resize(static_cast<size_t>(d.shared_ffn * h));
      fill(s1.data(), h * 2 * d.shared_ffn, kS1Seed, sh);
      fill(s2.data(), d.shared_ffn * h, kS2Seed, static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.shared_ffn))));
    }
    (void)sf;
    rp.tokens = d.tokens, rp.experts = e, rp.top_k = d.top_k;
    if (s.routing.group_limited) rp.groups = s.model.router.groups, rp.topk_groups = s.model.router.topk_groups;
    rp.score = s.model.router.score == RouterScore::sigmoid ? ref::Score::sigmoid : ref::Score::softmax;
    // Skew: Gumbel-top-k on log(share) + noise draws k experts without replacement with
    // probabilities proportional to the shares (Plackett-Luce), as the routing model assumes.
    const std::vector<double> shares = draw_weights(s.routing, static_cast<int>(e), static_cast<int>(d.top_k));
    log_share.resize(static_cast<size_t>(e));
    for (int64_t x = 0; x < e; ++x)
      log_share[static_cast<size_t>(x)] = shares[static_cast<size_t>(x)] > 0 ? static_cast<float>(std::log(shares[static_cast<size_t>(x)])) : -1e30f;
    if (s.routing.distribution != RoutingDistribution::uniform && s.routing.distribution != RoutingDistribution::balanced) rp.groups = rp.topk_groups = 1;
  }

  void expert_weights(int64_t expert, float* w1e, float* w2e) const {
    const int64_t h = d.hidden, f = d.ffn;
    fill(w1e, h * 2 * f, kW1Seed * 1000003 + static_cast<uint64_t>(expert), static_cast<float>(1.0 / std::sqrt(static_cast<double>(h))));
    fill(w2e, f * h, kW2Seed * 1000003 + static_cast<uint64_t>(expert), static_cast<float>(1.0 / std::sqrt(static_cast<double>(f))));
  }

  // Synthetic router logits for this step: x W_r plus the routing skew (Gumbel trick).
  void skew(std::vector<float>& logits, int step) const {
    const int64_t e = d.experts;
    const uint64_t seed = kGumbelSeed ^ mix(static_cast<uint64_t>(step) * 1315423911u + static_cast<uint64_t>(rank));
    for (int64_t t = 0; t < d.tokens; ++t)
      for (int64_t x = 0; x < e; ++x) {
        const double u = std::max(1e-300, uniform(seed, static_cast<uint64_t>(t * e + x)));
        // The token's own scores enter at a tenth so the draw follows the requested shares.
        logits[static_cast<size_t>(t * e + x)] = static_cast<float>(-std::log(-std::log(u))) + log_share[static_cast<size_t>(x)] +
                                                 0.1f * logits[static_cast<size_t>(t * e + x)];
      }
  }
};

// Rows received for local experts arrive peer-major ([peer][local expert]); the grouped GEMM wants
// expert-major ([local expert][peer]). perm[i] = the peer-major row that goes to expert-major row i.
inline std::vector<int64_t> regroup_map(const std::vector<int64_t>& counts_from /*[peer][el]*/, int ranks, int64_t el,
                                 std::vector<int64_t>& expert_offsets) {
  std::vector<int64_t> peer_base(static_cast<size_t>(ranks) * static_cast<size_t>(el) + 1, 0);
  for (size_t i = 0; i + 1 < peer_base.size(); ++i) peer_base[i + 1] = peer_base[i] + counts_from[i];
  expert_offsets.assign(static_cast<size_t>(el) + 1, 0);
  std::vector<int64_t> perm;
  perm.reserve(static_cast<size_t>(peer_base.back()));
  for (int64_t x = 0; x < el; ++x) {
    for (int p = 0; p < ranks; ++p) {
      const size_t i = static_cast<size_t>(p) * static_cast<size_t>(el) + static_cast<size_t>(x);
      for (int64_t r = 0; r < counts_from[i]; ++r) perm.push_back(peer_base[i] + r);
    }
    expert_offsets[static_cast<size_t>(x) + 1] = static_cast<int64_t>(perm.size());
  }
  return perm;
}

// A buffer the backend's ops work on, mirroring a host vector: the vector itself on a host-memory
// backend (up/down are no-ops), else backend memory with explicit copies. The vector must keep its
// size while mirrored.
template <class T>
class Mirror {
 public:
  Mirror(Backend& be, std::vector<T>& h) : be_(&be), h_(&h), own_(!be.host_memory()) {
    p_ = own_ ? static_cast<T*>(be.alloc(bytes())) : h.data();
  }
  ~Mirror() {
    if (own_) be_->release(p_);
  }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  T* d() const { return p_; }
  std::vector<T>& h() const { return *h_; }
  void up() {
    if (own_) be_->upload(p_, h_->data(), bytes());
  }
  void down() {
    if (own_) be_->download(h_->data(), p_, bytes());
  }

 private:
  size_t bytes() const { return h_->size() * sizeof(T); }
  Backend* be_;
  std::vector<T>* h_;
  bool own_;
  T* p_ = nullptr;
};

[[noreturn]] inline void gate_failed(Communicator&, const std::string& what) { throw GateError("correctness gate failed: " + what); }


}  // namespace moeperf::exec::detail
