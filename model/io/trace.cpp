#include "model/io/trace.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/pricing/collective.h"

namespace moeperf::io {
namespace {

// Minimal JSON string escaping for op names (ASCII identifiers in practice).
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// Trace times are microseconds with three decimals (nanoseconds). Start and end are each rounded to
// the nanosecond and the duration is their difference, so an op that starts where the previous one
// on its track ends never overlaps it by a rounding step (Perfetto would nest them).
int64_t to_ns(Seconds t) { return std::llround(t.value() * 1e9); }
std::string us(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%lld.%03lld", ns < 0 ? "-" : "", static_cast<long long>(std::llabs(ns) / 1000),
                static_cast<long long>(std::llabs(ns) % 1000));
  return b;
}

}  // namespace

void write_chrome_trace(const StepReport& r, std::ostream& out) {
  const StepGraph& g = *r.graph;
  const SimResult& sim = *r.sim;
  char buf[512];
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"scenario\":\"" << esc(r.name) << "\",\"gpus\":" << r.gpus
      << ",\"step_time_s\":" << r.step_time.value() << "},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  int64_t flow_id = 0;
  for (size_t c = 0; c < g.classes.size(); ++c) {
    const RankClass& rc = g.classes[c];
    const SimClass& sc = sim.classes[c];
    const int pid = static_cast<int>(c) + 1;
    sep();
    out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << pid << ",\"args\":{\"name\":\"" << esc(rc.name) << " ("
        << rc.ranks << " GPUs)\"}}";
    for (size_t q = 0; q < sc.queues.size(); ++q) {
      sep();
      out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << pid << ",\"tid\":" << q << ",\"args\":{\"name\":\""
          << queue_name(sc, q) << "\"}}";
    }
    for (size_t i = 0; i < rc.ops.size(); ++i) {
      const Op& op = rc.ops[i];
      const OpTiming& t = sc.ops[i];
      const int64_t ts = to_ns(t.start), dur = to_ns(t.end) - ts;
      sep();
      std::snprintf(buf, sizeof buf,
                    "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,"
                    "\"args\":{\"layer\":%d,\"micro_batch\":%d,\"flops\":%.6g,\"hbm_bytes\":%.6g,\"bytes\":%.6g",
                    esc(op.name).c_str(), to_string(op.category), pid, t.queue, us(ts).c_str(), us(dur).c_str(), op.layer, op.micro_batch,
                    op.flops.value(), op.hbm_bytes.value(), op.bytes.value());
      out << buf;
      if (op.collective != Collective::none)
        out << ",\"collective\":\"" << to_string(op.collective) << "\",\"group\":\"" << to_string(op.group) << "\"";
      out << "}}";
      // Flow arrows for dependencies that cross queues.
      for (int32_t d : op.deps) {
        if (d < 0) continue;
        const OpTiming& from = sc.ops[static_cast<size_t>(d)];
        if (from.queue == t.queue) continue;
        ++flow_id;
        sep();
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"s\",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%lld,\"pid\":%d,\"tid\":%d,\"ts\":%s},\n"
                      "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"dep\",\"cat\":\"dep\",\"id\":%lld,\"pid\":%d,\"tid\":%d,\"ts\":%s}",
                      static_cast<long long>(flow_id), pid, from.queue, us(to_ns(from.end) - 1).c_str(),
                      static_cast<long long>(flow_id), pid, t.queue, us(ts).c_str());
        out << buf;
      }
    }
    for (const UtilSample& u : sc.utilization) {
      sep();
      std::snprintf(buf, sizeof buf,
                    "{\"ph\":\"C\",\"name\":\"link utilization\",\"pid\":%d,\"ts\":%.3f,\"args\":{\"nvlink\":%.4f,"
                    "\"nic\":%.4f,\"fabric\":%.4f,\"host\":%.4f}}",
                    pid, u.time.value() * 1e6, u.util[0], u.util[1], u.util[2], u.util[3]);
      out << buf;
    }
  }
  out << "\n]}\n";
}

}  // namespace moeperf::io
