#include "model/study/calibrate.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>

#include "model/error.h"
#include "model/pricing/collective.h"
#include "model/pricing/cost.h"

namespace moeperf {

const char* to_string(PartClass c) {
  switch (c) {
    case PartClass::memory: return "memory";
    case PartClass::host_copy: return "host_copy";
    case PartClass::gemm: return "gemm";
    case PartClass::attention: return "attention";
    case PartClass::collective: return "collective";
    case PartClass::ep: return "ep";
    case PartClass::kCount: break;
  }
  return "?";
}

std::vector<Param> class_params(PartClass c) {
  switch (c) {
    case PartClass::memory: return {Param::hbm_fraction, Param::memory_row_s};
    case PartClass::host_copy: return {Param::host_link_fraction, Param::host_link_d2h_fraction};
    case PartClass::gemm:
      return {Param::gemm_fraction_bf16, Param::gemm_fraction_fp8,   Param::gemm_fraction_mxfp8,
              Param::gemm_fraction_nvfp4, Param::gemm_k_half,        Param::gemm_group_overhead_s};
    case PartClass::attention:
      return {Param::attention_fwd_fraction, Param::attention_bwd_fraction, Param::attention_kv_half,
              Param::attention_hd_half, Param::attention_tile_rows};
    case PartClass::collective:
      return {Param::nvlink_fraction,    Param::nvls_fraction,    Param::ib_fraction,  Param::host_reduce_fraction,
              Param::host_cache_speedup, Param::host_cache_bytes, Param::nvlink_step_s, Param::nvls_step_s};
    case PartClass::ep:
      return {Param::ep_nvlink_fraction, Param::ep_network_fraction, Param::ep_sm_half, Param::deepep_nvlink_fraction,
              Param::deepep_sm_half, Param::ep_combine_sm_half, Param::ep_combine_peer_cost,
              Param::deepep_combine_sm_half, Param::deepep_combine_peer_cost, Param::ep_api_copy_passes,
              Param::oneshot_copy_latency_s};
    case PartClass::kCount: break;
  }
  return {};
}

std::string gpu_generation(const GpuSpec& g) {
  if (g.cc_major == 9) return "hopper";
  if (g.cc_major == 10 && g.cc_minor == 0) return "blackwell";
  if (g.cc_major == 10 && g.cc_minor == 3) return "blackwell-ultra";
  return g.name;
}

namespace {

double collective_time(const PartRecord& r, const Calibration& cal) {
  const Topology& t = *r.topology;
  std::vector<int64_t> members(static_cast<size_t>(r.gpus));
  for (int64_t i = 0; i < r.gpus; ++i) members[static_cast<size_t>(i)] = i;
  const auto algos = collective_algorithms(r.collective, members, t, cal);
  const CollectiveCost* best = nullptr;
  for (const CollectiveCost& c : algos) {
    if (!r.algorithm.empty() && r.algorithm != c.algorithm) continue;
    if (!best || c.time(Bytes(r.bytes)) < best->time(Bytes(r.bytes))) best = &c;
  }
  if (!best) best = &algos.front();
  return best->time(Bytes(r.bytes)).value();
}

}  // namespace

double predict_part(const PartRecord& r, const Calibration& cal) {
  switch (r.cls) {
    case PartClass::gemm: {
      const double flops = r.flops > 0 ? r.flops : r.gemm.flops();
      const double t = gemm_seconds(r.gemm, r.dtype, flops, r.bytes, r.gpu, cal).value();
      return r.metric == PartMetric::seconds ? t : flops / t;
    }
    case PartClass::attention: {
      const double t = attention_seconds(r.attention, r.flops, r.bytes, r.gpu, cal).value();
      return r.metric == PartMetric::seconds ? t : r.flops / t;
    }
    case PartClass::memory: {
      const double t = memory_seconds(r.bytes, r.gpu, cal, 1, r.rows).value();
      return r.metric == PartMetric::seconds ? t : r.bytes / t;
    }
    case PartClass::host_copy: {
      const CollectiveCost c = host_copy_cost(*r.topology, *r.system, cal, r.op == "host.d2h");
      const double s = c.time(Bytes(r.bytes)).value();
      return r.metric == PartMetric::seconds ? s : r.bytes / s;
    }
    case PartClass::collective: {
      const double t = collective_time(r, cal);
      if (r.metric == PartMetric::seconds) return t;
      const double alg = r.bytes / t;
      return r.metric == PartMetric::bus_bandwidth ? alg * bus_factor(r.collective, r.gpus) : alg;
    }
    case PartClass::ep: {
      // Algorithm bandwidth: the rows a rank sends (its own included) over the kernel's time. Over
      // NVLink the rows to other ranks, (n - 1)/n of them, cross the GPU's links. Over RDMA the
      // benchmarks (DeepEP's test_internode and HybridEP's, "RDMA/IB algorithm bandwidth") count a
      // token once per node its top-k hits, its own node included: on D nodes under the records'
      // uniform routing (D - 1)/D of those rows cross the NIC (the records reach 77 GB/s on a
      // 50 GB/s NIC at 2 nodes, 58 at 4). The pricer sends the remote rows alone over the network
      // (all_to_all_hierarchical_cost, one row per node hit), so the record is priced as those.
      if (r.in_flight > 0) return r.ep * r.in_flight / cal[Param::oneshot_copy_latency_s];
      const double f = ep_sm_factor(r.sms, cal, r.deepep);
      if (r.rdma) {  // as the pricer: DeepEP's RDMA side at the NIC's rate, HybridEP's by its SMs
        const double nic = r.system->domain.tray.nic.port_bandwidth.value();
        const double per_node = static_cast<double>(job_gpus_per_domain(*r.system, static_cast<int64_t>(r.ep)));
        const double nodes = std::max(2.0, std::ceil(r.ep / std::max(1.0, per_node)));
        const double fr = ep_sm_factor(r.sms * (nodes - 1.0), cal, false);
        const double kernel = nic * cal[Param::ep_network_fraction] * (r.deepep ? 1.0 : fr) * nodes / (nodes - 1.0);
        return r.torch_api ? 1.0 / (1.0 / kernel + ep_api_copy_s_per_byte(r.gpu, cal)) : kernel;
      }
      const double n = std::max(2.0, r.ep);
      const double c = r.op == "ep.combine" ? ep_combine_factor(r.sms, n, cal, r.deepep) : 1.0;
      const double kernel = r.gpu.nvlink_bandwidth().value() *
                            cal[r.deepep ? Param::deepep_nvlink_fraction : Param::ep_nvlink_fraction] * f * c * n / (n - 1.0);
      // Through the PyTorch API the rows also pass over HBM between the kernel's buffers and the
      // framework's tensors, in series with the kernel (as the pricer adds it: ep_api_copy_s_per_byte).
      return r.torch_api ? 1.0 / (1.0 / kernel + ep_api_copy_s_per_byte(r.gpu, cal)) : kernel;
    }
    case PartClass::kCount: break;
  }
  return 0;
}

ErrorStats error_stats(const std::vector<RecordFit>& v, bool after, int which) {
  std::vector<double> e;
  for (const RecordFit& r : v) {
    const int kind = r.record->check_only ? 2 : r.held_back ? 1 : 0;
    if (kind == which) e.push_back(std::abs(after ? r.after : r.before));
  }
  ErrorStats s;
  s.n = static_cast<int>(e.size());
  if (e.empty()) return s;
  std::sort(e.begin(), e.end());
  s.median = e.size() % 2 ? e[e.size() / 2] : (e[e.size() / 2 - 1] + e[e.size() / 2]) / 2;
  s.worst = e.back();
  return s;
}

namespace {

constexpr double kPrior = 1e-3;  // pull toward the start, per normalised unit, against a record's log error

struct ClassRecords {
  std::vector<const PartRecord*> fit, held, check;
};

// Whether the record's prediction moves when `p` moves (by a thousandth of its range) from `cal`.
bool moves(const PartRecord& r, Param p, const Calibration& cal) {
  const ParamDef& d = param_def(p);
  Calibration c = cal;
  const double x = c[p];
  if (x > 0) {
    // A record sets a parameter only where it depends on it: a tenth more of the parameter moves
    // the record's prediction by at least half a percent. (A step latency of a few microseconds
    // in a gigabyte collective moves it by a few millionths: such records left the fit free to
    // push the step anywhere for a thousandth of their error.)
    const double h = 0.1 * x;
    c.set(p, x + h <= d.max ? x + h : x - h);
    return std::abs(predict_part(r, c) / predict_part(r, cal) - 1) >= 0.005;
  }
  const double h = (d.max - d.min) * 1e-3;  // a shape term off at 0: any effect of switching it on
  c.set(p, x + h <= d.max ? x + h : x - h);
  return std::abs(predict_part(r, c) / predict_part(r, cal) - 1) > 1e-9;
}

// Projected Levenberg-Marquardt on u in [0, 1]^p (each parameter normalised to its bounds).
int solve(const std::vector<const PartRecord*>& recs, const std::vector<Param>& params, Calibration& cal,
          const Calibration& start) {
  const size_t p = params.size(), n = recs.size();
  if (p == 0 || n == 0) return 0;
  auto to_u = [&](size_t j, double x) {
    const ParamDef& d = param_def(params[j]);
    return (x - d.min) / (d.max - d.min);
  };
  auto to_x = [&](size_t j, double u) {
    const ParamDef& d = param_def(params[j]);
    return d.min + std::clamp(u, 0.0, 1.0) * (d.max - d.min);
  };
  Eigen::VectorXd u(static_cast<Eigen::Index>(p)), u0(static_cast<Eigen::Index>(p));
  for (size_t j = 0; j < p; ++j) {
    u(static_cast<Eigen::Index>(j)) = to_u(j, cal[params[j]]);
    u0(static_cast<Eigen::Index>(j)) = to_u(j, start[params[j]]);
  }
  auto residuals = [&](const Eigen::VectorXd& uu) {
    Calibration c = cal;
    for (size_t j = 0; j < p; ++j) c.set(params[j], to_x(j, uu(static_cast<Eigen::Index>(j))));
    Eigen::VectorXd r(static_cast<Eigen::Index>(n + p));
    for (size_t i = 0; i < n; ++i) {
      const double pred = predict_part(*recs[i], c);
      r(static_cast<Eigen::Index>(i)) = std::sqrt(recs[i]->weight) * std::log(std::max(pred, 1e-300) / recs[i]->value);
    }
    for (size_t j = 0; j < p; ++j)
      r(static_cast<Eigen::Index>(n + j)) = kPrior * (uu(static_cast<Eigen::Index>(j)) - u0(static_cast<Eigen::Index>(j)));
    return r;
  };
  double lambda = 1e-2;
  Eigen::VectorXd r = residuals(u);
  double cost = r.squaredNorm();
  int it = 0;
  bool converged = false;
  while (it < 200 && !converged) {
    ++it;
    Eigen::MatrixXd J(static_cast<Eigen::Index>(n + p), static_cast<Eigen::Index>(p));
    for (size_t j = 0; j < p; ++j) {
      const auto jj = static_cast<Eigen::Index>(j);
      const double h = u(jj) > 0.5 ? -1e-6 : 1e-6;  // step into the box
      Eigen::VectorXd uh = u;
      uh(jj) += h;
      J.col(jj) = (residuals(uh) - r) / h;
    }
    const Eigen::MatrixXd A = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * r;
    bool improved = false;
    for (int tries = 0; tries < 12 && !improved; ++tries) {
      Eigen::MatrixXd Ad = A;
      for (Eigen::Index j = 0; j < Ad.rows(); ++j) Ad(j, j) += lambda * (A(j, j) + 1e-9);
      Eigen::VectorXd step = Ad.ldlt().solve(-g);
      Eigen::VectorXd un = u + step;
      for (Eigen::Index j = 0; j < un.size(); ++j) un(j) = std::clamp(un(j), 0.0, 1.0);
      const Eigen::VectorXd rn = residuals(un);
      const double cn = rn.squaredNorm();
      if (cn < cost) {
        converged = cost - cn < 1e-12 * std::max(1.0, cn);
        u = un, r = rn, cost = cn, improved = true;
        lambda = std::max(lambda / 3, 1e-9);
      } else {
        lambda *= 4;
      }
    }
    converged = converged || !improved;  // no step lowers the cost: a (constrained) minimum
  }
  for (size_t j = 0; j < p; ++j) cal.set(params[j], to_x(j, u(static_cast<Eigen::Index>(j))));
  return it;
}

}  // namespace

FitReport fit_parts(const std::vector<PartRecord>& records, const Calibration& start, const std::string& generation) {
  std::vector<const PartRecord*> mine;
  for (const PartRecord& r : records)
    if (generation.empty() || r.generation == generation) mine.push_back(&r);
  if (mine.empty()) throw InputError("no measurement record is of GPU generation \"" + generation + "\"");
  if (generation.empty())
    for (const PartRecord* r : mine)
      if (r->generation != mine.front()->generation)
        throw InputError("the records are of several GPU generations (" + mine.front()->generation + ", " +
                         r->generation + "): name one with --generation");
  std::sort(mine.begin(), mine.end(), [](const PartRecord* a, const PartRecord* b) { return a->id < b->id; });
  FitReport rep;
  rep.fitted = start;
  const std::string gen = mine.front()->generation;
  for (int ci = 0; ci < static_cast<int>(PartClass::kCount); ++ci) {
    const auto cls = static_cast<PartClass>(ci);
    ClassRecords g;
    std::vector<const PartRecord*> usable;
    for (const PartRecord* r : mine)
      if (r->cls == cls) (r->check_only ? g.check : usable).push_back(r);
    if (usable.empty() && g.check.empty()) continue;
    // Which record moves which of the class's parameters, at the values the class starts from.
    const std::vector<Param> params = class_params(cls);
    std::map<const PartRecord*, std::vector<bool>> mover;
    std::vector<int> movers(params.size(), 0);
    for (const PartRecord* r : usable) {
      auto& m = mover[r];
      for (size_t j = 0; j < params.size(); ++j) {
        m.push_back(moves(*r, params[j], rep.fitted));
        movers[j] += m.back();
      }
    }
    // Every fourth record is held back, unless it is the only one that moves one of the class's
    // parameters (holding it back would leave that parameter unfitted).
    auto sole_mover = [&](const PartRecord* r) {
      for (size_t j = 0; j < params.size(); ++j)
        if (mover[r][j] && movers[j] == 1) return true;
      return false;
    };
    for (size_t i = 0; i < usable.size(); ++i)
      (usable.size() >= 4 && i % 4 == 3 && !sole_mover(usable[i]) ? g.held : g.fit).push_back(usable[i]);
    ClassFit cf;
    cf.cls = cls;
    cf.generation = gen;
    cf.fitted = static_cast<int>(g.fit.size());
    cf.held_back = static_cast<int>(g.held.size());
    cf.checked = static_cast<int>(g.check.size());
    const Calibration before = rep.fitted;
    // A parameter is fitted only when some fitted record's prediction moves with it; those records
    // are what it was fitted on.
    std::vector<Param> free;
    std::map<Param, std::vector<std::string>> fitted_on;
    for (size_t j = 0; j < params.size(); ++j) {
      for (const PartRecord* r : g.fit)
        if (mover[r][j]) fitted_on[params[j]].push_back(r->id);
      if (fitted_on.count(params[j])) free.push_back(params[j]);
    }
    // No more parameters than records: the level terms (listed first) before the shape terms.
    if (free.size() > g.fit.size()) free.resize(g.fit.size());
    cf.iterations = solve(g.fit, free, rep.fitted, start);
    for (Param p : params) {
      ParamFit pf{p, before[p], rep.fitted[p], {}, 0};
      if (auto it = fitted_on.find(p); it != fitted_on.end()) pf.movers = static_cast<int>(it->second.size());
      if (std::find(free.begin(), free.end(), p) != free.end()) pf.fitted_on = fitted_on[p];
      cf.params.push_back(pf);
    }
    double ss = 0;
    int cnt = 0;
    for (const auto* set : {&g.fit, &g.held, &g.check})
      for (const PartRecord* r : *set) {
        RecordFit rf{r, predict_part(*r, before) / r->value - 1, predict_part(*r, rep.fitted) / r->value - 1,
                     set == &g.held};
        if (set != &g.check) {
          ss += std::pow(std::log1p(rf.after), 2);
          ++cnt;
        }
        cf.records.push_back(rf);
      }
    cf.rms_log_after = cnt ? std::sqrt(ss / cnt) : 0;
    // A spread from fewer than four records (which as many parameters can fit exactly) is not
    // evidence of accuracy: the class keeps at least the starting profile's spread.
    double spread = cf.rms_log_after;
    if (cnt < 4)
      if (auto it = start.residual_rms.find(to_string(cls)); it != start.residual_rms.end()) spread = std::max(spread, it->second);
    if (cnt) rep.fitted.residual_rms[to_string(cls)] = spread;
    rep.classes.push_back(std::move(cf));
  }
  return rep;
}

}  // namespace moeperf
