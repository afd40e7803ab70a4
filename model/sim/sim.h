// Discrete-event simulation of one training step: the streams of every rank class run their ops
// in program order; an op starts when it heads its stream's queue and its dependencies are done.
// Concurrent communication ops share the resources they load (NVLink, NIC, fabric, host link) as
// fluids, max-min fair, recomputed whenever an op starts or ends; a running communication kernel
// takes comm_sm_fraction of the SMs from compute. Pipeline bubbles come from the send/receive
// dependencies between stage classes, not from a formula.
//
// The engine's surface is the four members of a DES core (now, empty, step, schedule) in
// sim.cpp; this header gives the step-level entry point.
//
//   SimResult r = simulate(graph, pricer, scenario.stack);
//   Seconds step = r.step_time;
#pragma once

#include <string>
#include <vector>

#include "model/pricing/cost.h"
#include "model/workload/step.h"

namespace moeperf {

struct OpTiming {
  Seconds start, end;
  int queue = 0;   // hardware queue the op ran on (see SimClass::queues)
  Seconds waited;  // a collective: how long its kernel was already running, waiting for a slower
                   // synchronized class, before `start` (a profiler counts it as kernel time)
};

// Utilization of each communication resource (0..1) from `time` until the next sample.
struct UtilSample {
  Seconds time;
  std::array<double, kResourceCount> util{};
};

struct SimClass {
  std::vector<OpTiming> ops;            // parallel to RankClass::ops
  std::vector<UtilSample> utilization;  // per resource, piecewise constant
  std::vector<Stream> queues;           // queue index -> the first logical stream mapped to it
  std::vector<uint8_t> queue_lanes;     // queue index -> its lane (1: backward units under fwd/bwd overlap)
  std::vector<std::string> queue_labels;  // queue index -> what it carries (queue_name adds the lane)
  Seconds finish;
  Seconds wait;                         // time its collectives waited for a synchronized (straggler) class
  // The host that issued its program: seconds spent issuing (framework ops at host_op_s, graph
  // launches, libraries' loops; host waits excluded), framework ops issued outside graphs, graph launches.
  Seconds host_busy;
  double host_ops = 0;
  int64_t graph_launches = 0;
};

// A queue's name for traces and timelines: the stream, "(backward lane)" on the second lane.
std::string queue_name(const SimClass& sc, size_t queue);

struct SimResult {
  std::vector<SimClass> classes;
  Seconds step_time;
};

SimResult simulate(const StepGraph& g, const Pricer& pricer, const StackOptions& stack);

// Time intervals [start, end) of a class's step when some communication runs and no compute does
// (exposed communication), merged and sorted.
std::vector<std::pair<double, double>> exposed_intervals(const RankClass& rc, const SimClass& sc);

// How much of the exposed communication time each op of the class accounts for (indexed like
// rc.ops; 0 for compute): a stretch where k communication ops run and no compute is split k ways,
// so the shares add up to the length of exposed_intervals().
std::vector<double> exposed_by_op(const RankClass& rc, const SimClass& sc);

// Time in [0, sc.finish) when the class runs no op at all on any queue: under pipeline parallelism,
// the pipeline bubble (waiting for another stage's activations or gradients).
Seconds idle_time(const RankClass& rc, const SimClass& sc);

// One op's time alone on the class: its priced time with the class's slowdowns (a straggler's or
// the fleet's compute slowdown, its NVLink and network slowdowns), as the simulator runs it
// uncontended.
Seconds class_op_time(const RankClass& rc, const Op& op, const Pricer& pricer);

// The sum of op times (the "serial estimate"): every op back to back, uncontended, no overlap,
// no waiting for other pipeline stages; each at class_op_time.
Seconds serial_time(const RankClass& rc, const Pricer& pricer);

// A lower bound on simulate()'s step without simulating: the busiest class's compute work, each
// compute op at its priced time (times the class's compute slowdown). The simulator never runs a
// compute kernel faster than that (its rate is the SM share left, at most 1, and two lanes split
// it), so a class is busy at least that long. XLA's latency-bound one-shot copies keep their rate
// beside other kernels and are left out. Communication, launches and waits only add.
Seconds compute_bound(const StepGraph& g, const Pricer& pricer);

// The same for communication: per class and per queue the simulator gives its collectives (one
// for all without multistream collectives, one per kind with them), their uncontended times
// summed. A queue runs one collective at a time, and a collective never beats its latency plus its
// bytes at its bottleneck resource's rate (max-min sharing only lowers the rate). Pipeline sends
// and receives are left out (a matched receive ends with its send).
Seconds comm_bound(const StepGraph& g, const Pricer& pricer, const StackOptions& stack);

// The step scheduled with no contention (schedule_bound): most often the tightest of the three
// (with fwd/bwd overlap its two lanes' compute kernels run side by side at full speed, where
// compute_bound adds them, so it may come out below compute_bound; both are bounds). Every op
// starts when the simulator would let it (queue order, dependencies, matched sends, the host's
// issue, synchronized peers) and runs its priced time alone; the simulator only adds (SMs shared
// with communication kernels, links shared max-min), so its step is at least this finish. Costs
// one pass over the ops, no events: a fraction of a simulation.
Seconds schedule_bound(const StepGraph& g, const Pricer& pricer, const StackOptions& stack);

}  // namespace moeperf
