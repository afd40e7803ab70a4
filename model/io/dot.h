// Graphviz export of a topology: one node per vertex (shaped by kind), one edge per cable
// (the two directed links of a cable shown once, labelled with the per-direction bandwidth).
#pragma once

#include <ostream>

#include "model/hardware/topology.h"

namespace moeperf::io {

void write_dot(const Topology& t, std::ostream& out);

}  // namespace moeperf::io
