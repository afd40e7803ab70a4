#include "model/study/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "model/error.h"
#include "model/study/predict.h"

namespace moeperf {
namespace {

std::string text(double v, const char* unit) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g %s", v, unit);
  return b;
}

// One knob: its current value as text, and the scenario with the knob scaled by f (or flipped).
struct Knob {
  std::string name, kind, value;
  bool flip = false;
  std::function<bool(Scenario&, double)> apply;  // false: the knob is absent in this scenario
};

std::vector<Knob> knobs(const Scenario& base) {
  std::vector<Knob> k;
  // `at`: the knob's value now; at 0 (a system file's latency "0 s") a relative change moves
  // nothing, and the term says so instead of printing a change of nothing.
  auto hw = [&](std::string name, std::string value, double at, std::function<bool(Scenario&, double)> f) {
    if (at == 0.0) f = [](Scenario&, double) -> bool { throw InputError("at 0, which a relative change leaves at 0"); };
    k.push_back({std::move(name), "hardware", std::move(value), false, std::move(f)});
  };
  const GpuSpec& g = base.system.gpu();
  hw("GPU dense FLOP rate (every format)", text(g.dense_bf16.value() / 1e12, "TFLOP/s BF16"), g.dense_bf16.value(), [](Scenario& s, double f) {
    GpuSpec& x = s.system.domain.tray.gpu;
    x.dense_bf16 *= f, x.dense_fp8 *= f;
    if (x.dense_mxfp8) *x.dense_mxfp8 *= f;
    if (x.dense_nvfp4) *x.dense_nvfp4 *= f;
    return true;
  });
  hw("HBM bandwidth", text(g.hbm_bandwidth.value() / 1e12, "TB/s"), g.hbm_bandwidth.value(), [](Scenario& s, double f) {
    s.system.domain.tray.gpu.hbm_bandwidth *= f;
    return true;
  });
  hw("NVLink bandwidth per link", text(g.nvlink_bandwidth_per_link.value() / 1e9, "GB/s"), g.nvlink_bandwidth_per_link.value(), [](Scenario& s, double f) {
    s.system.domain.tray.gpu.nvlink_bandwidth_per_link *= f;
    if (s.system.domain.nvswitch) s.system.domain.nvswitch->port_bandwidth *= f;
    return true;
  });
  hw("NVLink latency", text(base.system.domain.nvlink_latency.value() * 1e6, "us"), base.system.domain.nvlink_latency.value(), [](Scenario& s, double f) {
    s.system.domain.nvlink_latency *= f;
    return true;
  });
  hw("NIC port bandwidth (scale-out)", text(base.system.domain.tray.nic.port_bandwidth.value() * 8 / 1e9, "Gb/s"),
     base.system.domain.tray.nic.port_bandwidth.value(),
     [](Scenario& s, double f) {
       s.system.domain.tray.nic.port_bandwidth *= f;
       if (s.system.fabric) s.system.fabric->sw.port_bandwidth *= f;
       return true;
     });
  if (base.system.fabric)
    hw("fabric switch latency", text(base.system.fabric->sw.latency.value() * 1e9, "ns"),
       base.system.fabric->sw.latency.value() + base.system.fabric->nic_to_leaf_latency.value(), [](Scenario& s, double f) {
      if (!s.system.fabric) return false;
      s.system.fabric->sw.latency *= f;
      s.system.fabric->nic_to_leaf_latency *= f;
      return true;
    });
  hw("host link (CPU-GPU) bandwidth", text(base.system.domain.tray.cpu.gpu_link_bidirectional.value() / 1e9, "GB/s bidirectional"),
     base.system.domain.tray.cpu.gpu_link_bidirectional.value() + base.system.domain.tray.nic.host_link_bandwidth.value(),
     [](Scenario& s, double f) {
       s.system.domain.tray.cpu.gpu_link_bidirectional *= f;
       s.system.domain.tray.nic.host_link_bandwidth *= f;
       return true;
     });
  hw("CPU memory bandwidth", text(base.system.domain.tray.cpu.memory_bandwidth.value() / 1e9, "GB/s"), base.system.domain.tray.cpu.memory_bandwidth.value(), [](Scenario& s, double f) {
    s.system.domain.tray.cpu.memory_bandwidth *= f;
    return true;
  });
  // Every efficiency parameter but the tile shapes (counts, not rates) and the memory reserve.
  for (const ParamDef& d : param_defs()) {
    const std::string n(d.name);
    if (n.rfind("gemm_tile_", 0) == 0 || d.id == Param::runtime_reserve_gib) continue;
    const Param id = d.id;
    char v[64];
    std::snprintf(v, sizeof v, "%.4g %s", base.calibration[id], std::string(d.unit).c_str());
    k.push_back({"param " + n, "efficiency", v, false, [id](Scenario& s, double f) {
                   const ParamDef& pd = param_def(id);
                   // A relative change of 0 is 0: say so rather than print a change of nothing.
                   if (s.calibration[id] == 0.0) throw InputError("at 0, which a relative change leaves at 0");
                   const double x = s.calibration[id] * f;
                   if (x < pd.min - 1e-12 || x > pd.max + 1e-12) throw InputError("outside the parameter's range");
                   s.calibration.set(id, x);
                   return true;
                 }});
  }
  // The stack: numeric settings scaled, on/off mechanisms flipped.
  auto num = [&](std::string name, double value, const char* unit, double StackOptions::*field) {
    k.push_back({"stack." + name, "stack", text(value, unit), false, [field](Scenario& s, double f) {
                   s.stack.*field *= f;
                   return true;
                 }});
  };
  const StackOptions& st = base.stack;
  // (<= 0 is MaxText's default sizing, not a factor a relative change moves.)
  if (st.a2a_buffer_factor > 0) num("a2a_buffer_factor", st.a2a_buffer_factor, "x", &StackOptions::a2a_buffer_factor);
  if (st.host_op_s > 0) num("host_op_s", st.host_op_s * 1e6, "us", &StackOptions::host_op_s);
  num("host_ops_per_op", st.host_ops_per_op, "", &StackOptions::host_ops_per_op);
  if (st.graph_launch_s > 0) num("graph_launch_s", st.graph_launch_s * 1e6, "us", &StackOptions::graph_launch_s);
  auto flip = [&](std::string name, bool StackOptions::*field) {
    k.push_back({"stack." + name, "stack", st.*field ? "on" : "off", true, [field](Scenario& s, double) {
                   s.stack.*field = !(s.stack.*field);
                   return true;
                 }});
  };
  flip("multistream_collectives", &StackOptions::multistream_collectives);
  flip("overlap.fsdp_prefetch", &StackOptions::fsdp_prefetch);
  flip("overlap.a2a_with_shared_expert", &StackOptions::a2a_with_shared_expert);
  flip("overlap.fwd_bwd", &StackOptions::fwd_bwd_overlap);
  flip("overlap.grad_reduce", &StackOptions::grad_reduce_overlap);
  flip("remat_dispatch", &StackOptions::remat_dispatch);
  flip("a2a_zero_fill", &StackOptions::a2a_zero_fill);
  flip("ep_buffer_copies", &StackOptions::ep_buffer_copies);
  flip("permute_after_dispatch", &StackOptions::permute_after_dispatch);
  flip("router_fusion", &StackOptions::router_fusion);
  flip("permute_fusion", &StackOptions::permute_fusion);
  flip("pdl_quantize", &StackOptions::pdl_quantize);
  flip("norm_quantize_fusion", &StackOptions::norm_quantize_fusion);
  flip("residual_fusion", &StackOptions::residual_fusion);
  flip("fused_qkv", &StackOptions::fused_qkv);
  flip("weight_quant_cache", &StackOptions::weight_quant_cache);
  return k;
}

}  // namespace

double SensitivityTerm::largest() const {
  const double m = !flip && std::isfinite(minus_s) ? std::fabs(minus_s) : 0.0, p = std::isfinite(plus_s) ? std::fabs(plus_s) : 0.0;
  return std::max(m, p);
}

SensitivityResult sensitivity(const Scenario& s, double rel, const std::function<void(std::vector<std::function<void()>>&)>& run) {
  SensitivityResult out;
  out.rel = rel;
  out.step_s = predict(s, s.calibration).step_time.value();
  const std::vector<Knob> ks = knobs(s);
  out.terms.resize(ks.size());
  std::vector<std::function<void()>> jobs;
  for (size_t i = 0; i < ks.size(); ++i) {
    SensitivityTerm& t = out.terms[i];
    t.name = ks[i].name, t.kind = ks[i].kind, t.value = ks[i].value, t.flip = ks[i].flip;
    for (int side = ks[i].flip ? 1 : 0; side < 2; ++side)
      jobs.push_back([&, i, side] {
        const double f = side == 0 ? 1 - rel : 1 + rel;
        SensitivityTerm& term = out.terms[i];
        try {
          Scenario x = s;
          if (!ks[i].apply(x, f)) return;
          const double d = predict(x, x.calibration).step_time.value() - out.step_s;
          (side == 0 ? term.minus_s : term.plus_s) = d;
        } catch (const std::exception& e) {
          // Each side writes its own note slot: no two jobs write the same string.
          (side == 0 ? term.minus_note : term.plus_note) = e.what();
        }
      });
  }
  if (run) run(jobs);
  else
    for (auto& j : jobs) j();
  for (auto& t : out.terms) {
    if (!t.minus_note.empty() && t.minus_note == t.plus_note) {  // both sides for one reason: once
      t.note = t.minus_note;
      continue;
    }
    if (!t.minus_note.empty()) t.note = (t.flip ? "" : "-: ") + t.minus_note;
    if (!t.plus_note.empty()) t.note += (t.note.empty() ? "" : "; ") + std::string(t.flip ? "" : "+: ") + t.plus_note;
  }
  std::stable_sort(out.terms.begin(), out.terms.end(), [](const auto& a, const auto& b) { return a.largest() > b.largest(); });
  return out;
}

}  // namespace moeperf
