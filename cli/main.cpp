// moeperf: the command-line front end. Exit codes: 0 ok, 1 the work failed, 2 bad input.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/error.h"
#include "model/io/dot.h"
#include "model/io/load.h"
#include "model/io/report_io.h"
#include "model/io/trace.h"
#include "model/predict.h"
#include "model/topology.h"

namespace {

using namespace moeperf;
constexpr int kExitOk = 0, kExitFailed = 1, kExitBadInput = 2;

// Writes a file only once its whole content is known: a temporary beside it, then a rename.
void write_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + path);
  }
  std::filesystem::rename(tmp, path);
}

std::string fmt(double v, int prec = 1) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

int cmd_topo(const std::string& file, int64_t gpus_opt, const std::string& dot, const std::string& format) {
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
              << t.count(VertexKind::core) << " (" << t.fabric_tiers() << "-tier " << sys.fabric->sw.name << ")";
  std::cout << "\n";
  std::cout << "other         CPUs " << t.count(VertexKind::cpu) << ", NICs " << t.count(VertexKind::nic) << "\n";
  std::cout << "NVLink/GPU    " << fmt(in_gigabytes_per_second(t.nvlink_bandwidth_per_gpu()), 0)
            << " GB/s per direction (" << g.nvlink_links << " links x "
            << fmt(in_gigabytes_per_second(g.nvlink_bandwidth_per_link), 0) << " GB/s)\n";
  if (t.fabric_tiers() > 0)
    std::cout << "scale-out/GPU " << fmt(in_gigabits_per_second(t.scaleout_bandwidth_per_gpu()), 0) << " Gb/s = "
              << fmt(in_gigabytes_per_second(t.scaleout_bandwidth_per_gpu()), 0) << " GB/s per direction ("
              << sys.domain.tray.nic.name << ")\n";
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

std::vector<io::Override> overrides(const std::vector<std::string>& sets) {
  std::vector<io::Override> out;
  for (const auto& s : sets) out.push_back(io::parse_override(s));
  return out;
}

int cmd_predict(const std::string& file, const std::vector<std::string>& sets, const std::string& format, bool serial,
                const std::string& trace) {
  const Scenario s = io::load_scenario(file, overrides(sets));
  PredictOptions opt;
  opt.simulate = !serial;
  const StepReport r = predict(s, Calibration{}, opt);
  if (!trace.empty()) {
    std::ostringstream t;
    io::write_chrome_trace(r, t);
    write_atomically(trace, t.str());
  }
  if (format == "json") {
    std::cout << io::report_json(r) << "\n";
  } else if (format == "csv") {
    io::write_report_csv(r, std::cout);
  } else {
    io::write_report_text(r, std::cout);
  }
  return kExitOk;
}

int cmd_validate(const std::vector<std::string>& files) {
  int bad = 0;
  for (const std::string& f : files) {
    try {
      const io::Validated v = io::validate_file(f);
      std::cout << "ok     " << f << "  [" << v.kind << "] " << v.summary << "\n";
    } catch (const InputError& e) {
      std::cerr << "error  " << e.what() << "\n";
      ++bad;
    }
  }
  if (bad) std::cerr << bad << " of " << files.size() << " file" << (files.size() > 1 ? "s" : "") << " failed\n";
  return bad ? kExitBadInput : kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"moeperf: predict, explain and measure dropless-MoE training speed on GPU clusters"};
  app.set_version_flag("--version", "moeperf 0.1.0");
  app.require_subcommand(1);

  std::string topo_file, topo_dot, topo_format = "text";
  int64_t topo_gpus = 0;
  auto* topo = app.add_subcommand("topo", "Summarize a system: GPUs, switches by tier, per-GPU and bisection bandwidth");
  topo->add_option("SYSTEM", topo_file, "system file, e.g. topologies/gb300-nvl72.json")->required();
  topo->add_option("--gpus", topo_gpus, "GPU count (default: the system file's \"gpus\")")->check(CLI::PositiveNumber);
  topo->add_option("--dot", topo_dot, "also write the graph in Graphviz format to this file");
  topo->add_option("--format", topo_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string predict_file, predict_format = "text";
  std::vector<std::string> predict_sets;
  bool predict_serial = false;
  std::string predict_trace;
  auto* predict_cmd = app.add_subcommand("predict", "Predict one training step: time, tokens/s/GPU, TFLOPS/GPU, memory, per-op breakdown");
  predict_cmd->add_option("SCENARIO", predict_file, "scenario file, e.g. examples/deepseek-v3/gb300-optimized.json")->required();
  predict_cmd->add_option("--set", predict_sets, "override a scenario field: PATH=VALUE (repeatable), e.g. parallelism.ep=16");
  predict_cmd->add_option("--format", predict_format, "text, json or csv")->check(CLI::IsMember({"text", "json", "csv"}));
  predict_cmd->add_flag("--serial", predict_serial, "the serial estimate only: every op back to back, no overlap");
  predict_cmd->add_option("--trace", predict_trace, "write the simulated step as Chrome-trace JSON (Perfetto, HTA)");

  std::vector<std::string> validate_files;
  auto* validate = app.add_subcommand("validate", "Check files (systems, models, scenarios, building blocks); exit 2 if any is wrong");
  validate->add_option("FILE", validate_files, "files to check")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  try {
    if (*topo) return cmd_topo(topo_file, topo_gpus, topo_dot, topo_format);
    if (*validate) return cmd_validate(validate_files);
    if (*predict_cmd) return cmd_predict(predict_file, predict_sets, predict_format, predict_serial, predict_trace);
  } catch (const InputError& e) {
    std::cerr << "moeperf: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "moeperf: failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitFailed;
}
