#include "model/sim/sim.h"

#include <array>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace moeperf {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int queue_of(Stream s, bool multistream) {
  if (s == Stream::compute) return 0;
  if (s == Stream::offload) return multistream ? 5 : 2;  // copies run on copy engines either way
  if (!multistream) return 1;                             // every collective on one stream (XLA default)
  return static_cast<int>(s);                             // ep 1, fsdp 2, tp 3, pp 4
}

// A collective's priced cost on a class (its NVLink and network slowdowns applied), and its
// time alone: the latency, then its bytes at the bottleneck resource's rate. Max-min sharing only
// lowers the rate, so the simulator never runs it faster.
CollectiveCost class_comm_cost(const Pricer& pricer, const RankClass& rc, const Op& op) {
  CollectiveCost cc = pricer.comm_cost(op, rc.pp_stage).at(std::max(op.bytes, op.recv_bytes));
  for (auto* a : {&cc.s_per_byte, &cc.own_s_per_byte}) {  // a fused EP kernel's own rates as its links'
    (*a)[static_cast<size_t>(Resource::nvlink)] *= rc.nvlink_slowdown;
    (*a)[static_cast<size_t>(Resource::nic)] *= rc.network_slowdown;
    (*a)[static_cast<size_t>(Resource::fabric)] *= rc.network_slowdown;
  }
  return cc;
}
double uncontended_comm_s(const CollectiveCost& cc, const Op& op) {
  const double bytes = std::max(op.bytes, op.recv_bytes).value();
  return cc.bottleneck_s_per_byte() == 0 ? cc.latency.value() : cc.latency.value() + bytes * cc.bottleneck_s_per_byte();
}

struct Running {
  int cls = 0;
  int32_t op = 0;
  bool comm = false;
  bool offload = false;
  bool memory_bound = false;  // a compute op limited by HBM bandwidth (elementwise, optimizer)
  bool latency_bound = false;  // XLA's one-shot copy kernel: a few blocks, its rate set by latency, not SMs
  double sm_share = 0;         // comm: fraction of the SMs its kernel holds
  double latency_left = 0;  // s (comm: fixed latency first)
  double work_left = 0;     // compute: s at full SMs; comm: bytes
  std::array<double, kResourceCount> a{};  // comm: s per byte per resource
  double own = 0;  // comm: the kernel's own s per byte, a cap on its rate (CollectiveCost::own_s_per_byte)
  double rate = 0;
  double hbm_per_byte = 2.0;  // comm: HBM bytes per byte of its size (CollectiveCost::hbm_bytes_per_byte)
};

// A DES core with the four-member surface of ASTRA-sim's event queue: now, empty, step, schedule.
class Engine {
 public:
  Engine(const StepGraph& g, const Pricer& pr, const StackOptions& stack)
      : g_(g), pr_(pr), stack_(stack), multi_(stack.multistream_collectives), host_op_s_(stack.host_op_s),
        graph_launch_s_(stack.graph_launch_s) {
    // Queues per lane; a second lane of every queue when some op runs on it (fwd/bwd overlap).
    base_queues_ = multi_ ? 6 : 3;
    int lanes = 1;
    for (const RankClass& rc : g.classes)
      for (const Op& op : rc.ops) lanes = std::max(lanes, op.lane + 1);
    const int nq = base_queues_ * lanes;
    for (const RankClass& rc : g.classes) {
      ClassState cs;
      cs.queues.assign(static_cast<size_t>(nq), {});
      cs.timing.assign(rc.ops.size(), {});
      cs.done.assign(rc.ops.size(), 0);
      for (int32_t i = 0; i < static_cast<int32_t>(rc.ops.size()); ++i) {
        const Op& op = rc.ops[static_cast<size_t>(i)];
        const int q = queue_of(op.stream, multi_) + op.lane * base_queues_;
        cs.queues[static_cast<size_t>(q)].push_back(i);
        cs.timing[static_cast<size_t>(i)].queue = q;
      }
      cs.issue.assign(rc.ops.size(), 0.0);
      cs.issue_end.assign(rc.ops.size(), 0.0);
      cs.issued.assign(rc.ops.size(), 0);
      cs.lane_ops.assign(static_cast<size_t>(lanes), {});
      for (int32_t i = 0; i < static_cast<int32_t>(rc.ops.size()); ++i)
        cs.lane_ops[rc.ops[static_cast<size_t>(i)].lane].push_back(i);
      cs.lane_next.assign(static_cast<size_t>(lanes), 0);
      cs.lane_wait.assign(static_cast<size_t>(lanes), -1);
      cs.head.assign(static_cast<size_t>(nq), 0);
      cs.busy.assign(static_cast<size_t>(nq), 0);
      cls_.push_back(std::move(cs));
    }
    // Stragglers: classes that share one program synchronize their collectives.
    sync_.assign(g.classes.size(), {});
    arrived_.assign(g.classes.size(), {});
    copies_.assign(g.classes.size(), {});
    for (size_t c = 0; c < g.classes.size(); ++c) {
      const int w = g.classes[c].sync_with;
      if (w < 0) continue;
      copies_[static_cast<size_t>(w)].push_back(c);
    }
    // A collective is shared by the stage class and every copy of its program (a straggler, the
    // typical EP ranks): each waits for all of them, not only for the stage class (with two copies
    // the typical ranks started while the stage class still waited for the straggler).
    for (size_t w = 0; w < g.classes.size(); ++w) {
      if (copies_[w].empty()) continue;
      std::vector<size_t> all = copies_[w];
      all.push_back(w);
      for (size_t c : all)
        for (size_t o : all)
          if (o != c) sync_[c].push_back(o);
    }
    for (size_t c = 0; c < g.classes.size(); ++c) arrived_[c].assign(g.classes[c].ops.size(), 0.0);
    spinning_.assign(g.classes.size(), 0);
    // Pipeline: a receive waits for the partner stage's matching send (same micro-batch and chunk).
    // Partners are stage classes; a class that copies a stage's program (straggler, typical EP
    // ranks) receives from the same sends as its stage class, and a receive also waits for the same
    // send of every copy of the partner stage's program (ready(), copies_): the ranks fed by a slow
    // GPU wait for it.
    // Each class's sends indexed once by (name suffix, micro-batch, chunk, receiving stage), the
    // first of equal keys kept (a scan of the peer's ops per receive was receives x ops).
    // The suffix is a view into the op's interned name (OpName: it lives as long as the process):
    // no string is built per send or receive.
    using SendKey = std::tuple<std::string_view, int, int, int>;
    std::vector<std::optional<std::map<SendKey, int32_t>>> sends(g.classes.size());
    auto sends_of = [&](size_t c) -> const std::map<SendKey, int32_t>& {
      if (!sends[c]) {
        sends[c].emplace();
        const auto& ops = g.classes[c].ops;
        for (size_t j = 0; j < ops.size(); ++j)
          if (name_starts(ops[j].name, "pp.send"))
            sends[c]->try_emplace(SendKey{std::string_view(ops[j].name.str()).substr(7), ops[j].micro_batch, ops[j].chunk, ops[j].peer_stage},
                                  static_cast<int32_t>(j));
      }
      return *sends[c];
    };
    for (size_t c = 0; c < g.classes.size(); ++c) {
      const auto& ops = g.classes[c].ops;
      cls_[c].peer.assign(ops.size(), {-1, -1});
      const int self = g.classes[c].sync_with >= 0 ? g.classes[c].sync_with : static_cast<int>(c);
      for (size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        // pp.recv, pp.recv.bwd, pp.recv.grad pair with pp.send, pp.send.bwd, pp.send.grad.
        if (!name_starts(op.name, "pp.recv")) continue;
        if (op.peer_stage < 0 || static_cast<size_t>(op.peer_stage) >= g.classes.size()) continue;
        const auto& index = sends_of(static_cast<size_t>(op.peer_stage));
        if (const auto it = index.find(SendKey{std::string_view(op.name.str()).substr(7), op.micro_batch, op.peer_chunk, self});
            it != index.end())
          cls_[c].peer[i] = {op.peer_stage, it->second};
      }
    }
    // Who must look again when an op of class p ends: p, the classes receiving p's pipeline sends,
    // and the classes whose collectives start with p's.
    listeners_.assign(g.classes.size(), {});
    for (size_t c = 0; c < g.classes.size(); ++c) {
      for (const auto& [pc, pi] : cls_[c].peer)
        if (pc >= 0) {
          listeners_[static_cast<size_t>(pc)].push_back(c);
          for (size_t o : copies_[static_cast<size_t>(pc)]) listeners_[o].push_back(c);
        }
      for (size_t o : sync_[c]) listeners_[c].push_back(o);
    }
    for (auto& l : listeners_) {
      std::sort(l.begin(), l.end());
      l.erase(std::unique(l.begin(), l.end()), l.end());
    }
    dirty_.assign(g.classes.size(), 1);
    class_wake_.assign(g.classes.size(), kInf);
    scanned_.assign(g.classes.size(), 0);
    by_class_.assign(g.classes.size(), {});
  }

  double now() const { return now_; }
  bool empty() const { return running_.empty(); }
  // Ops wait for the host to issue them: the next time one becomes issued (infinite: none).
  double wake() const { return wake_; }
  void advance_to_wake() {
    if (std::isfinite(wake_) && wake_ > now_) now_ = wake_;
  }

  // Starts every op that heads its queue with its dependencies done. Passes over the classes repeat
  // while one may start something; a class is looked at only when something it waits for changed
  // since it last was (dirty_: an op of its own or of a class it listens to ended or started at
  // once, a collective peer started, or the time its host issues an op has come), so a pass costs
  // the classes touched, not all of them. Starts happen in the order a scan of every class would.
  void schedule() {
    for (size_t c = 0; c < cls_.size(); ++c) {
      scanned_[c] = 0;
      if (class_wake_[c] <= now_ + 1e-15) dirty_[c] = 1;
    }
    bool any = true;
    while (any) {
      any = false;
      for (size_t c = 0; c < cls_.size(); ++c) {
        if (!dirty_[c]) continue;
        dirty_[c] = 0;
        if (!scanned_[c]) {  // its wake is recomputed from what its scans this call find blocked
          scanned_[c] = 1;
          class_wake_[c] = kInf;
        }
        scanning_ = c;
        ClassState& cs = cls_[c];
        advance_host(c);
        for (size_t q = 0; q < cs.queues.size(); ++q) {
          if (cs.busy[q] || cs.head[q] >= cs.queues[q].size()) continue;
          const int32_t i = cs.queues[q][cs.head[q]];
          if (!ready(c, i)) continue;
          if (!issued(c, i)) continue;
          const Op& op = g_.classes[c].ops[static_cast<size_t>(i)];
          if (!sync_[c].empty() && is_group_collective(op)) {
            if (arrived_[c][static_cast<size_t>(i)] == 0.0) {
              arrived_[c][static_cast<size_t>(i)] = now_ + 1.0;  // store arrival + 1
              ++spinning_[c];  // its kernel is launched and spins for the peers, holding its SMs
            }
            if (!peers_arrived(c, i)) continue;
          }
          start(c, i);
        }
      }
      for (size_t c = 0; c < cls_.size() && !any; ++c) any = dirty_[c] != 0;
    }
    wake_ = *std::min_element(class_wake_.begin(), class_wake_.end());
  }

  // Advances to the next completion and retires what completed.
  void step() {
    rates();
    double dt = kInf;
    for (const Running& r : running_) {
      const double left = r.latency_left > 0 ? r.latency_left : r.work_left;
      const double rate = r.latency_left > 0 ? 1.0 : r.rate;
      dt = std::min(dt, rate > 0 ? left / rate : kInf);
    }
    if (std::isfinite(wake_) && wake_ > now_) dt = std::min(dt, wake_ - now_);
    if (!std::isfinite(dt)) dt = 0;
    now_ += dt;
    // Compacted in place, in order (the next rates() reads them in this order).
    size_t kept = 0;
    for (Running& r : running_) {
      if (r.latency_left > 0) {
        r.latency_left -= dt;
        if (r.latency_left <= 1e-15) r.latency_left = 0;
      } else {
        r.work_left -= dt * r.rate;
      }
      const bool finished = r.latency_left == 0 && r.work_left <= 1e-12 * std::max(1.0, r.work_left + dt * r.rate);
      if (finished) {
        ClassState& cs = cls_[static_cast<size_t>(r.cls)];
        cs.done[static_cast<size_t>(r.op)] = 1;
        cs.timing[static_cast<size_t>(r.op)].end = Seconds(now_);
        const int q = cs.timing[static_cast<size_t>(r.op)].queue;
        cs.busy[static_cast<size_t>(q)] = 0;
        ++cs.head[static_cast<size_t>(q)];
        cs.finish = std::max(cs.finish, now_);
        ended(static_cast<size_t>(r.cls));
      } else {
        running_[kept++] = r;
      }
    }
    running_.resize(kept);
  }

  SimResult result() const {
    SimResult out;
    for (const ClassState& cs : cls_) {
      SimClass sc;
      sc.ops = cs.timing;
      sc.utilization = cs.util;
      for (size_t i = 0; i < cs.timing.size(); ++i)
        if (arrived_[out.classes.size()][i] > 0) {
          const Seconds w(std::max(0.0, cs.timing[i].start.value() - (arrived_[out.classes.size()][i] - 1.0)));
          sc.ops[i].waited = w;
          sc.wait += w;
        }
      sc.finish = Seconds(cs.finish);
      sc.host_busy = Seconds(cs.host_busy);
      sc.host_ops = cs.host_ops;
      sc.graph_launches = cs.graph_launches;
      for (size_t q = 0; q < cs.queues.size(); ++q) {
        const size_t b = q % static_cast<size_t>(base_queues_);
        sc.queues.push_back(b == 0 ? Stream::compute : !multi_ ? (b == 1 ? Stream::ep_comm : Stream::offload) : static_cast<Stream>(b));
        sc.queue_lanes.push_back(static_cast<uint8_t>(q / static_cast<size_t>(base_queues_)));
      }
      // Without multistream collectives one queue carries every group's collectives: it is named
      // for the streams of the ops it ran ("collectives: ep_comm + fsdp_comm"), not for the first.
      const std::vector<Op>& ops = g_.classes[out.classes.size()].ops;
      std::vector<std::array<bool, kStreamCount>> carried(cs.queues.size());
      for (size_t i = 0; i < ops.size(); ++i)
        carried[static_cast<size_t>(cs.timing[i].queue)][static_cast<size_t>(ops[i].stream)] = true;
      for (size_t q = 0; q < cs.queues.size(); ++q) {
        std::string label;
        int n = 0;
        for (int k = 0; k < kStreamCount; ++k)
          if (carried[q][static_cast<size_t>(k)]) label += (n++ ? " + " : "") + std::string(to_string(static_cast<Stream>(k)));
        sc.queue_labels.push_back(n > 1 ? "collectives: " + label : n == 1 ? label : std::string(to_string(sc.queues[q])));
      }
      out.step_time = std::max(out.step_time, sc.finish);
      out.classes.push_back(std::move(sc));
    }
    return out;
  }

  // The step with no contention: every op starts when the simulator's conditions hold (its queue's
  // previous op done, its dependencies and matched send done, issued by the host, a synchronized
  // collective's peers arrived) and runs its priced time alone (a compute op at all the SMs, a
  // collective at its bottleneck's rate). Each condition is a max over ends, and the simulator
  // never runs an op faster than that, so by induction no op starts or ends earlier in the
  // simulation: the finish is a lower bound of simulate()'s step. One pass over the ops (a queue
  // head advances while it can; passes repeat while any did), no events, no rates.
  double uncontended() {
    std::vector<std::vector<double>> qend(cls_.size()), arrival(cls_.size());
    for (size_t c = 0; c < cls_.size(); ++c) {
      qend[c].assign(cls_[c].queues.size(), 0.0);
      if (!sync_[c].empty()) arrival[c].assign(g_.classes[c].ops.size(), -1.0);
    }
    double finish = 0;
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t c = 0; c < cls_.size(); ++c) {
        ClassState& cs = cls_[c];
        const RankClass& rc = g_.classes[c];
        advance_host(c);
        for (size_t q = 0; q < cs.queues.size(); ++q) {
          while (cs.head[q] < cs.queues[q].size()) {
            const int32_t i = cs.queues[q][cs.head[q]];
            const size_t k = static_cast<size_t>(i);
            if (!ready(c, i) || !cs.issued[k]) break;
            const Op& op = rc.ops[k];
            double t = std::max(qend[c][q], cs.issue[k]);
            for (int32_t dep : op.deps)
              if (dep >= 0) t = std::max(t, cs.timing[static_cast<size_t>(dep)].end.value());
            const auto [pc, pi] = cs.peer[k];
            if (pc >= 0) {
              t = std::max(t, cls_[static_cast<size_t>(pc)].timing[static_cast<size_t>(pi)].end.value());
              for (size_t o : copies_[static_cast<size_t>(pc)]) t = std::max(t, cls_[o].timing[static_cast<size_t>(pi)].end.value());
            }
            if (!sync_[c].empty() && is_group_collective(op)) {
              arrival[c][k] = t;
              bool all = true;
              for (size_t o : sync_[c]) {
                if (cls_[o].done[k]) t = std::max(t, cls_[o].timing[k].start.value());
                else if (arrival[o][k] < 0) all = false;
                else t = std::max(t, arrival[o][k]);
              }
              if (!all) break;
            }
            double d = 0;
            if (op.collective == Collective::none) d = behind_host(cs, k, op, t, pr_.compute_time(op).value() * rc.compute_slowdown);
            else if (pc < 0) d = uncontended_comm_s(class_comm_cost(pr_, rc, op), op);  // a matched receive ends with its send
            cs.timing[k].start = Seconds(t);
            cs.timing[k].end = Seconds(t + d);
            cs.done[k] = 1;
            qend[c][q] = t + d;
            ++cs.head[q];
            finish = std::max(finish, t + d);
            progress = true;
            advance_host(c);
          }
        }
      }
    }
    if (!all_done()) throw std::logic_error("uncontended schedule deadlocked: an op waits for one that never runs");
    return finish;
  }

  bool all_done() const {
    for (const ClassState& cs : cls_)
      for (size_t q = 0; q < cs.queues.size(); ++q)
        if (cs.head[q] < cs.queues[q].size()) return false;
    return true;
  }

 private:
  struct ClassState {
    std::vector<std::vector<int32_t>> queues;
    std::vector<size_t> head;
    std::vector<char> busy;
    std::vector<OpTiming> timing;
    std::vector<char> done;
    std::vector<std::pair<int, int32_t>> peer;
    std::vector<UtilSample> util;
    double finish = 0;
    // The host issuing the class's program: when each op was issued and whether it has been, per
    // lane its ops in program order, the next of them to issue and the host wait it is held at
    // (-1: none), and the host's clock (see advance_host).
    std::vector<double> issue;
    std::vector<double> issue_end;  // when its last piece was issued (a library's host loop), else its issue
    std::vector<char> issued;
    std::vector<std::vector<int32_t>> lane_ops;
    std::vector<size_t> lane_next;
    std::vector<int32_t> lane_wait;
    double host_clock = 0;
    double host_busy = 0, host_ops = 0;  // what the host spent issuing, and the framework ops it issued
    int64_t graph_launches = 0;
  };

  // One host thread issues ops in program order, host_op_s x Op::host_ops each (a part captured in
  // a CUDA graph: one graph launch for its run of ops). After a host wait (a sync op) it issues
  // nothing more of that lane until the GPU has finished that op; the other lane of an overlapped
  // forward/backward pair goes on meanwhile, as the framework's interleaved pieces of the two units
  // (Megatron's combined 1F1B, DualPipe's overlapped_forward_backward) have the other unit's work
  // queued around the wait. One clock for both lanes: the host's time is spent once. With
  // host_op_s 0 and no graphs every op is issued at once, except those behind a wait.
  void advance_host(size_t c) {
    ClassState& cs = cls_[c];
    const std::vector<Op>& ops = g_.classes[c].ops;
    for (;;) {
      size_t lane = cs.lane_ops.size(), next = ops.size();
      for (size_t l = 0; l < cs.lane_ops.size(); ++l) {
        if (cs.lane_next[l] >= cs.lane_ops[l].size()) continue;
        if (cs.lane_wait[l] >= 0 && !cs.done[static_cast<size_t>(cs.lane_wait[l])]) continue;
        const auto i = static_cast<size_t>(cs.lane_ops[l][cs.lane_next[l]]);
        if (i < next) next = i, lane = l;
      }
      if (lane == cs.lane_ops.size()) return;
      if (const int32_t w = cs.lane_wait[lane]; w >= 0) {
        cs.host_clock = std::max(cs.host_clock, cs.timing[static_cast<size_t>(w)].end.value());
        cs.lane_wait[lane] = -1;
      }
      const Op& op = ops[next];
      double cost = host_op_s_ * op.host_ops;
      // A library's host loop over the op's pieces (a multi-stream grouped GEMM's groups): the GPU
      // may start on the first piece once it is issued; the op cannot end before the last one is.
      double loop = pr_.host_loop_time(op).value();
      if (op.graph != 0) {
        const size_t n = cs.lane_next[lane];
        const Op* prev = n > 0 ? &ops[static_cast<size_t>(cs.lane_ops[lane][n - 1])] : nullptr;
        const bool same_run = prev && prev->graph == op.graph && prev->layer == op.layer &&
                              prev->micro_batch == op.micro_batch && prev->phase == op.phase;
        cost = same_run ? 0.0 : graph_launch_s_;
        loop = 0;  // captured with the graph
        if (!same_run) ++cs.graph_launches;
      } else {
        cs.host_ops += op.host_ops;
      }
      cs.host_busy += cost + loop;
      const double first = loop / static_cast<double>(pieces(op));
      cs.host_clock += cost + first;
      cs.issue[next] = cs.host_clock;
      cs.host_clock += loop - first;
      cs.issue_end[next] = cs.host_clock;
      cs.issued[next] = 1;
      ++cs.lane_next[lane];
      if (op.category == Category::sync) cs.lane_wait[lane] = static_cast<int32_t>(next);
    }
  }

  static double pieces(const Op& op) { return static_cast<double>(std::max<int64_t>(1, op.groups)); }

  // The GPU time of op k started at `start`, `gpu` seconds when issued at once: an op whose host
  // loop is still issuing its pieces ends no sooner than the last piece's issue plus that piece's
  // share of the work. (Under the contended model the wait for the host is counted as the op's
  // work: while it lasts the op holds its share of the SMs and HBM as if it ran, so what runs beside
  // it is slowed a little, and the op itself a little more than the host's pace alone would.)
  static double behind_host(const ClassState& cs, size_t k, const Op& op, double start, double gpu) {
    const double lag = cs.issue_end[k] - start;
    if (cs.issue_end[k] <= cs.issue[k] || lag <= 0) return gpu;
    return std::max(gpu, lag + gpu / pieces(op));
  }

  bool issued(size_t c, int32_t i) {
    const ClassState& cs = cls_[c];
    if (!cs.issued[static_cast<size_t>(i)]) return false;
    const double t = cs.issue[static_cast<size_t>(i)];
    if (t <= now_ + 1e-15) return true;
    class_wake_[scanning_] = std::min(class_wake_[scanning_], t);
    return false;
  }

  bool ready(size_t c, int32_t i) const {
    const ClassState& cs = cls_[c];
    const Op& op = g_.classes[c].ops[static_cast<size_t>(i)];
    for (int32_t dep : op.deps)
      if (dep >= 0 && !cs.done[static_cast<size_t>(dep)]) return false;
    const auto [pc, pi] = cs.peer[static_cast<size_t>(i)];
    if (pc >= 0) {
      if (!cls_[static_cast<size_t>(pc)].done[static_cast<size_t>(pi)]) return false;
      for (size_t o : copies_[static_cast<size_t>(pc)])
        if (!cls_[o].done[static_cast<size_t>(pi)]) return false;
    }
    return true;
  }

  // A collective shared with synchronized classes starts when every one of them has reached it
  // (each class's copy heads its queue with its dependencies done): the early ones wait.
  bool is_group_collective(const Op& op) const {
    return op.collective != Collective::none && op.collective != Collective::d2h && op.collective != Collective::h2d &&
           op.collective != Collective::send_recv;
  }
  bool peers_arrived(size_t c, int32_t i) {
    for (size_t o : sync_[c]) {
      const ClassState& os = cls_[o];
      if (os.done[static_cast<size_t>(i)]) continue;
      const int q = os.timing[static_cast<size_t>(i)].queue;
      const bool at_head = os.head[static_cast<size_t>(q)] < os.queues[static_cast<size_t>(q)].size() &&
                           os.queues[static_cast<size_t>(q)][os.head[static_cast<size_t>(q)]] == i;
      if (!at_head || !ready(o, i)) return false;
      advance_host(o);  // the peer's host may not have been brought up to date in this pass yet
      if (!issued(o, i)) return false;  // its host has not issued it yet (a later host wait ended)
    }
    return true;
  }

  void start(size_t c, int32_t i) {
    ClassState& cs = cls_[c];
    const Op& op = g_.classes[c].ops[static_cast<size_t>(i)];
    if (!arrived_[c].empty() && arrived_[c][static_cast<size_t>(i)] > 0) --spinning_[c];
    for (size_t o : sync_[c]) dirty_[o] = 1;  // a peer waiting for this collective's start may go
    Running r;
    r.cls = static_cast<int>(c);
    r.op = i;
    cs.timing[static_cast<size_t>(i)].start = Seconds(now_);
    cs.busy[static_cast<size_t>(cs.timing[static_cast<size_t>(i)].queue)] = 1;
    const RankClass& rc = g_.classes[c];
    if (op.collective == Collective::none) {
      r.work_left = behind_host(cs, static_cast<size_t>(i), op, now_, pr_.compute_time(op).value() * rc.compute_slowdown);
      r.memory_bound = op.category == Category::memory || op.category == Category::optimizer;
      r.latency_bound = op.one_shot_peers > 0;
    } else {
      const CollectiveCost cc = class_comm_cost(pr_, rc, op);
      r.comm = true;
      r.offload = op.category == Category::offload;
      // A fused EP kernel holds the SMs the stack gives it; other collectives comm_sm_fraction.
      const bool fused_ep = op.collective == Collective::all_to_all && op.group == Group::ep &&
                            stack_.dispatcher == Dispatcher::fused_dedup;
      const GpuSpec& gpu = pr_.scenario().system.gpu();
      r.sm_share = fused_ep ? ep_kernel_sms(stack_, gpu, pr_.calibration()) / gpu.sms
                            : pr_.calibration()[Param::comm_sm_fraction];
      r.latency_left = cc.latency.value();
      r.work_left = std::max(op.bytes, op.recv_bytes).value();
      r.a = cc.s_per_byte;
      r.own = cc.own_bottleneck_s_per_byte();
      r.hbm_per_byte = cc.hbm_bytes_per_byte;
      if (cc.bottleneck_s_per_byte() == 0) r.work_left = 0;
      if (r.latency_left == 0) r.latency_left = 0;
    }
    // A pipeline receive matched with its send: the transfer is the send's (one transfer, one
    // time); the receive could not start before the send was done (ready()), so it ends at once.
    if (cs.peer[static_cast<size_t>(i)].first >= 0) r.latency_left = r.work_left = 0;
    if (r.latency_left <= 0 && r.work_left <= 0) {
      cs.done[static_cast<size_t>(i)] = 1;
      cs.timing[static_cast<size_t>(i)].end = Seconds(now_);
      cs.busy[static_cast<size_t>(cs.timing[static_cast<size_t>(i)].queue)] = 0;
      ++cs.head[static_cast<size_t>(cs.timing[static_cast<size_t>(i)].queue)];
      ended(c);
      return;
    }
    running_.push_back(r);
  }

  // An op of class c ended: c and the classes listening to it look again at the next pass.
  void ended(size_t c) {
    dirty_[c] = 1;
    for (size_t o : listeners_[c]) dirty_[o] = 1;
  }

  // Compute ops run at full speed unless communication kernels of their class are running: each
  // holds its own thread blocks, comm_sm_fraction of the SMs (a fused EP kernel the stack's ep_sms),
  // so concurrent ones leave the rest (at least 10 %); copies of the offload stream use copy
  // engines, not SMs; XLA's one-shot copy kernel is latency-bound and keeps its rate. Communication
  // ops in their byte phase share each resource max-min fairly (water filling).
  void rates() {
    const double f = pr_.calibration()[Param::comm_sm_fraction];
    for (auto& v : by_class_) v.clear();
    for (Running& r : running_) by_class_[static_cast<size_t>(r.cls)].push_back(&r);
    for (size_t c = 0; c < cls_.size(); ++c) {
      if (by_class_[c].empty()) {  // nothing runs: every resource idle (a sample only when that is news)
        auto& v = cls_[c].util;
        if (v.empty() || v.back().util != std::array<double, kResourceCount>{}) v.push_back(UtilSample{Seconds(now_), {}});
        continue;
      }
      int compute_kernels = 0;
      double comm_sms = f * spinning_[c];
      std::vector<Running*>& flows = flows_;
      flows.clear();
      for (Running* rp : by_class_[c]) {
        Running& r = *rp;
        if (r.comm && !r.offload) comm_sms += r.sm_share;
        if (!r.comm && !r.latency_bound) ++compute_kernels;
        if (r.comm && r.latency_left == 0) flows.push_back(&r);
      }
      // Compute kernels of two lanes running at once split the SMs left between them.
      const double compute_share = std::max(0.1, 1.0 - comm_sms) / std::max(1, compute_kernels);
      for (Running* r : by_class_[c])
        if (!r->comm) r->rate = r->latency_bound ? 1.0 : compute_share;
      std::array<double, kResourceCount> cap;
      cap.fill(1.0);
      struct Log {
        Engine* e;
        size_t c;
        std::array<double, kResourceCount>* cap;
        ~Log() {
          UtilSample u{Seconds(e->now_), {}};
          for (int k = 0; k < kResourceCount; ++k) u.util[static_cast<size_t>(k)] = std::clamp(1.0 - (*cap)[static_cast<size_t>(k)], 0.0, 1.0);
          auto& v = e->cls_[c].util;
          if (v.empty() || v.back().util != u.util) v.push_back(u);
        }
      } log{this, c, &cap};
      std::vector<Running*>& open = open_;
      open.assign(flows.begin(), flows.end());
      for (Running* r : open) r->rate = 0;
      while (!open.empty()) {
        double lambda = kInf;
        int bottleneck = -1;
        for (int k = 0; k < kResourceCount; ++k) {
          double demand = 0;
          for (Running* r : open) demand += r->a[static_cast<size_t>(k)];
          if (demand <= 0) continue;
          const double l = cap[static_cast<size_t>(k)] / demand;
          if (l < lambda) lambda = l, bottleneck = k;
        }
        // A kernel slower than its fair share of every link (its own limit, 1 / own) runs at its
        // own rate and leaves the rest of its links to the others: frozen first, then the
        // water-filling goes on without it.
        double slowest_own = kInf;
        for (Running* r : open)
          if (r->own > 0) slowest_own = std::min(slowest_own, 1.0 / r->own);
        if (slowest_own <= lambda) {
          std::vector<Running*>& rest = rest_;
          rest.clear();
          for (Running* r : open) {
            if (r->own > 0 && 1.0 / r->own <= slowest_own) {
              r->rate = slowest_own;
              for (int k = 0; k < kResourceCount; ++k) cap[static_cast<size_t>(k)] -= slowest_own * r->a[static_cast<size_t>(k)];
            } else {
              rest.push_back(r);
            }
          }
          open.swap(rest);
          continue;
        }
        if (bottleneck < 0) {
          for (Running* r : open) r->rate = kInf;
          break;
        }
        std::vector<Running*>& rest = rest_;
        rest.clear();
        for (Running* r : open) {
          if (r->a[static_cast<size_t>(bottleneck)] > 0) {
            r->rate = lambda;
            for (int k = 0; k < kResourceCount; ++k) cap[static_cast<size_t>(k)] -= lambda * r->a[static_cast<size_t>(k)];
          } else {
            rest.push_back(r);
          }
        }
        open.swap(rest);
      }
      // Communication moves its bytes through HBM too (each algorithm its own count per byte of
      // its size, CollectiveCost::hbm_bytes_per_byte; a host copy once): memory-bound compute gets
      // what is left of the achieved HBM bandwidth.
      double hbm_used = 0;
      for (Running* r : flows)
        if (std::isfinite(r->rate)) hbm_used += r->rate * (r->offload ? 1.0 : r->hbm_per_byte);
      const double left = std::max(0.1, 1.0 - hbm_used / hbm_bytes_per_s_);
      for (Running* r : by_class_[c])
        if (r->memory_bound) r->rate = std::min(r->rate, left);
    }
  }

  const StepGraph& g_;
  const Pricer& pr_;
  const StackOptions stack_;  // the stack simulated (callers may pass another than the scenario's)
  bool multi_;
  double host_op_s_ = 0, graph_launch_s_ = 0;
  double wake_ = kInf;
  int base_queues_ = 3;
  double hbm_bytes_per_s_ = pr_.scenario().system.gpu().hbm_bandwidth.value() * pr_.calibration()[Param::hbm_fraction];
  std::vector<ClassState> cls_;
  std::vector<std::vector<size_t>> sync_;       // classes whose collectives start together
  std::vector<std::vector<size_t>> copies_;     // per stage class: the classes running its program (sync_with it)
  std::vector<std::vector<double>> arrived_;    // when each collective was reached (+1; 0: not yet)
  std::vector<int> spinning_;                   // per class: collectives launched, waiting for peers
  std::vector<Running> running_;
  double now_ = 0;
  // The scheduler's bookkeeping (schedule()): per class, whether to look again, the earliest time
  // its host issues an op it found blocked, whether this call scanned it yet; the classes that
  // look again when one's op ends; the class being scanned; running ops by class (rates()).
  std::vector<char> dirty_, scanned_;
  std::vector<double> class_wake_;
  std::vector<std::vector<size_t>> listeners_;
  size_t scanning_ = 0;
  std::vector<std::vector<Running*>> by_class_;
  // rates()'s scratch lists, kept between calls so that an event allocates nothing.
  std::vector<Running*> flows_, open_, rest_;
};

}  // namespace

SimResult simulate(const StepGraph& g, const Pricer& pricer, const StackOptions& stack) {
  Engine e(g, pricer, stack);
  e.schedule();
  while (!e.empty() || std::isfinite(e.wake())) {
    if (e.empty()) e.advance_to_wake();
    else e.step();
    e.schedule();
  }
  if (!e.all_done()) throw std::logic_error("simulation deadlocked: an op waits for one that never runs");
  return e.result();
}

std::vector<std::pair<double, double>> exposed_intervals(const RankClass& rc, const SimClass& sc) {
  // Sweep over op starts and ends: +1/-1 for communication, +2/-2 for compute.
  std::vector<std::pair<double, int>> ev;
  for (size_t i = 0; i < rc.ops.size() && i < sc.ops.size(); ++i) {
    const int k = is_communication(rc.ops[i].category) ? 1 : 2;
    ev.push_back({sc.ops[i].start.value(), k});
    ev.push_back({sc.ops[i].end.value(), -k});
  }
  std::sort(ev.begin(), ev.end());
  std::vector<std::pair<double, double>> out;
  int comm_on = 0, comp_on = 0;
  double last = 0;
  for (auto [t, k] : ev) {
    if (comm_on > 0 && comp_on == 0 && t > last) {
      if (!out.empty() && out.back().second >= last) out.back().second = t;
      else out.emplace_back(last, t);
    }
    last = t;
    if (k == 1) ++comm_on;
    if (k == -1) --comm_on;
    if (k == 2) ++comp_on;
    if (k == -2) --comp_on;
  }
  return out;
}

std::vector<double> exposed_by_op(const RankClass& rc, const SimClass& sc) {
  // The same sweep; each stretch of exposed time is split evenly over the communication ops
  // running in it, so the shares add up to the exposed time.
  const size_t n = std::min(rc.ops.size(), sc.ops.size());
  struct Ev {
    double t;
    int kind;  // -2 compute end, -1 comm end, +1 comm start, +2 compute start
    size_t op;
  };
  std::vector<Ev> ev;
  for (size_t i = 0; i < n; ++i) {
    if (!(sc.ops[i].end > sc.ops[i].start)) continue;  // an instant (a matched pipeline receive) covers no time
    const int k = is_communication(rc.ops[i].category) ? 1 : 2;
    ev.push_back({sc.ops[i].start.value(), k, i});
    ev.push_back({sc.ops[i].end.value(), -k, i});
  }
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) { return a.t < b.t || (a.t == b.t && a.kind < b.kind); });
  std::vector<double> out(rc.ops.size(), 0.0);
  std::vector<size_t> comm;  // communication ops running
  int comp_on = 0;
  double last = 0;
  for (const Ev& e : ev) {
    if (!comm.empty() && comp_on == 0 && e.t > last)
      for (size_t i : comm) out[i] += (e.t - last) / static_cast<double>(comm.size());
    last = e.t;
    if (e.kind == 1) comm.push_back(e.op);
    if (e.kind == -1)
      if (const auto it = std::find(comm.begin(), comm.end(), e.op); it != comm.end()) comm.erase(it);
    comp_on += e.kind == 2 ? 1 : e.kind == -2 ? -1 : 0;
  }
  return out;
}

Seconds idle_time(const RankClass& rc, const SimClass& sc) {
  std::vector<std::pair<double, double>> spans;
  for (size_t i = 0; i < rc.ops.size() && i < sc.ops.size(); ++i)
    if (sc.ops[i].end > sc.ops[i].start) spans.emplace_back(sc.ops[i].start.value(), sc.ops[i].end.value());
  std::sort(spans.begin(), spans.end());
  double busy = 0, reach = 0;
  for (auto [a, b] : spans) {
    if (b <= reach) continue;
    busy += b - std::max(a, reach);
    reach = b;
  }
  return Seconds(std::max(0.0, sc.finish.value() - busy));
}

std::string queue_name(const SimClass& sc, size_t queue) {
  const Stream s = queue < sc.queues.size() ? sc.queues[queue] : Stream::compute;
  const bool second = queue < sc.queue_lanes.size() && sc.queue_lanes[queue] > 0;
  const std::string base = queue < sc.queue_labels.size() ? sc.queue_labels[queue] : std::string(to_string(s));
  return base + (second ? " (backward lane)" : "");
}

Seconds class_op_time(const RankClass& rc, const Op& op, const Pricer& pricer) {
  if (op.collective == Collective::none) return Seconds(pricer.compute_time(op).value() * rc.compute_slowdown);
  return Seconds(uncontended_comm_s(class_comm_cost(pricer, rc, op), op));
}

Seconds serial_time(const RankClass& rc, const Pricer& pricer) {
  Seconds t;
  for (const Op& op : rc.ops) t += class_op_time(rc, op, pricer);
  return t;
}

Seconds schedule_bound(const StepGraph& g, const Pricer& pricer, const StackOptions& stack) {
  Engine e(g, pricer, stack);
  return Seconds(e.uncontended());
}

Seconds compute_bound(const StepGraph& g, const Pricer& pricer) {
  Seconds best;
  for (const RankClass& rc : g.classes) {
    double work = 0;
    for (const Op& op : rc.ops)
      if (op.collective == Collective::none && op.one_shot_peers <= 0) work += pricer.compute_time(op).value();
    best = std::max(best, Seconds(work * rc.compute_slowdown));
  }
  return best;
}

Seconds comm_bound(const StepGraph& g, const Pricer& pricer, const StackOptions& stack) {
  Seconds best;
  std::vector<double> per_queue;
  for (const RankClass& rc : g.classes) {
    per_queue.clear();
    for (const Op& op : rc.ops) {
      if (op.collective == Collective::none || op.collective == Collective::send_recv) continue;
      const double t = uncontended_comm_s(class_comm_cost(pricer, rc, op), op);
      // The queue the Engine gives it: its stream's, on the op's lane (a lane's queues apart).
      const size_t q = static_cast<size_t>(queue_of(op.stream, stack.multistream_collectives) + op.lane * kStreamCount);
      if (q >= per_queue.size()) per_queue.resize(q + 1, 0.0);
      per_queue[q] += t;
    }
    for (const double t : per_queue) best = std::max(best, Seconds(t));
  }
  return best;
}

}  // namespace moeperf
