// Chrome-trace JSON of a simulated step (opens in Perfetto and Holistic Trace Analysis): one
// process per rank class, one thread per hardware queue (ops on a queue never overlap), op name,
// bytes and FLOPs in args, flow arrows for cross-queue dependencies, and counter tracks with the
// utilization of each communication resource.
#pragma once

#include <ostream>

#include "model/study/predict.h"

namespace moeperf::io {

void write_chrome_trace(const StepReport& r, std::ostream& out);

}  // namespace moeperf::io
