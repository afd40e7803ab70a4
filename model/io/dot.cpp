#include "model/io/dot.h"

#include <string>

namespace moeperf::io {

void write_dot(const Topology& t, std::ostream& out) {
  out << "graph moeperf {\n  graph [overlap=false, splines=true];\n";
  for (int64_t v = 0; v < t.vertex_count(); ++v) {
    const VertexKind k = t.kind(v);
    const char* shape = k == VertexKind::gpu ? "box" : k == VertexKind::cpu ? "component"
                        : k == VertexKind::nic ? "cds" : "ellipse";
    out << "  v" << v << " [label=\"" << to_string(k) << " " << v << "\", shape=" << shape << "];\n";
  }
  for (int64_t e = 0; e < t.link_count(); ++e) {
    const LinkInfo l = t.link(e);
    if (l.from > l.to) continue;  // the reverse direction of the same cable
    out << "  v" << l.from << " -- v" << l.to << " [label=\"" << to_string(l.kind) << " "
        << in_gigabytes_per_second(l.bandwidth) << " GB/s\"];\n";
  }
  out << "}\n";
}

}  // namespace moeperf::io
