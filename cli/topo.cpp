// moeperf topo: a system summarized: GPUs, switches by tier, per-GPU and bisection bandwidth.
#include "cli/commands.h"

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include "model/hardware/topology.h"
#include "model/io/dot.h"
#include "model/io/units_parse.h"

namespace moeperf::cli {
namespace {

int cmd_topo(const std::string& file, int64_t gpus_opt, const std::string& dot, const std::string& format) {
  check_output_path("--dot", dot, {file});
  const SystemSpec sys = io::load_system(file);
  const int64_t gpus = gpus_opt > 0 ? gpus_opt : sys.default_gpus;
  const auto t0 = std::chrono::steady_clock::now();
  const Topology t = Topology::build(sys, gpus);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const GpuSpec& g = sys.gpu();
  if (!dot.empty()) {
    std::ostringstream s;
    io::write_dot(t, s);
    write_atomically(dot, s.str());
  }
  if (format == "json") {
    nlohmann::json j;
    j["system"] = sys.name;
    j["file"] = file;
    j["gpu"] = g.name;
    j["gpus"] = t.gpus();
    j["nvlink_domains"] = t.domains();
    j["gpus_per_domain"] = t.gpus_per_domain();
    for (int k = 0; k < kVertexKinds; ++k) j["vertices"][to_string(static_cast<VertexKind>(k))] = t.count(static_cast<VertexKind>(k));
    j["links"] = t.link_count();
    j["fabric_tiers"] = t.fabric_tiers();
    j["nvlink_bytes_per_s_per_gpu_per_direction"] = t.nvlink_bandwidth_per_gpu().value();
    j["scaleout_bytes_per_s_per_gpu_per_direction"] = t.scaleout_bandwidth_per_gpu().value();
    j["nvlink_domain_bisection_bytes_per_s"] = t.nvlink_domain_bisection().value();
    j["scaleout_bisection_bytes_per_s"] = t.scaleout_bisection().value();
    j["graph_build_s"] = build_s;
    j["graph_bytes"] = t.memory_bytes();
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "system        " << sys.name << "  (" << file << ")\n";
  std::cout << "GPUs          " << t.gpus() << " x " << g.name << " in " << t.domains() << " NVLink domain"
            << (t.domains() > 1 ? "s" : "") << " of " << t.gpus_per_domain() << " (" << sys.domain.name << ", "
            << sys.domain.gpus() << " GPUs each)\n";
  std::cout << "switches      NVLink " << t.count(VertexKind::nvswitch) << " (" << sys.domain.switch_chips
            << " per domain)";
  if (t.fabric_tiers() > 0)
    std::cout << ", leaf " << t.count(VertexKind::leaf) << ", spine " << t.count(VertexKind::spine) << ", core "
              << t.count(VertexKind::core) << " (" << t.fabric_tiers() << "-tier " << sys.fabric->sw.name << ", "
              << (t.adaptive_routing() ? "adaptive routing" : "static ECMP: flows collide on uplinks") << ")";
  std::cout << "\n";
  std::cout << "other         CPUs " << t.count(VertexKind::cpu) << ", NICs " << t.count(VertexKind::nic) << "\n";
  std::cout << "NVLink/GPU    " << fmt(in_gigabytes_per_second(t.nvlink_bandwidth_per_gpu()), 0)
            << " GB/s per direction (" << g.nvlink_links << " links x "
            << fmt(in_gigabytes_per_second(g.nvlink_bandwidth_per_link), 0) << " GB/s)\n";
  if (t.fabric_tiers() > 0)
    std::cout << "scale-out/GPU " << fmt(in_gigabits_per_second(t.scaleout_bandwidth_per_gpu()), 0) << " Gb/s = "
              << fmt(in_gigabytes_per_second(t.scaleout_bandwidth_per_gpu()), 0) << " GB/s per direction ("
              << sys.domain.tray.nic.name
              << (t.scaleout_host_link_bound() ? ", bound by its host link " + sys.domain.tray.nic.host_link_name : std::string())
              << ")\n";
  else
    std::cout << "scale-out/GPU none (no fabric)\n";
  std::cout << "bisection     NVLink domain " << fmt(in_terabytes_per_second(t.nvlink_domain_bisection()), 2)
            << " TB/s per direction";
  if (t.fabric_tiers() > 0)
    std::cout << "; scale-out fabric " << fmt(in_terabytes_per_second(t.scaleout_bisection()), 2)
              << " TB/s per direction";
  std::cout << "\n";
  std::cout << "graph         " << t.vertex_count() << " vertices, " << t.link_count() << " directed links, "
            << fmt(static_cast<double>(t.memory_bytes()) / 1e6, 1) << " MB, built in " << fmt(build_s * 1e3, 1)
            << " ms\n";
  if (!dot.empty()) std::cout << "dot           written to " << dot << "\n";
  return kExitOk;
}

}  // namespace

Command add_topo(CLI::App& app) {
  struct Opts {
    std::string file, dot, format = "text";
    int64_t gpus = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("topo", "Summarize a system: GPUs, switches by tier, per-GPU and bisection bandwidth");
  sub->add_option("SYSTEM", o->file, "system file, e.g. topologies/gb300-nvl72.json")->required();
  sub->add_option("--gpus", o->gpus, "GPU count (default: the system file's \"gpus\")")->check(gpu_count());
  sub->add_option("--dot", o->dot, "also write the graph in Graphviz format to this file");
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  return {sub, [o] { return cmd_topo(o->file, o->gpus, o->dot, o->format); }};
}

}  // namespace moeperf::cli
