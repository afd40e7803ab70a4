#include "model/study/calibrate.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "model/error.h"
#include "model/hash.h"
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
    // The pointer-array cost per group first: a record of a pointer-array kernel over many small
    // groups (Hopper's one BF16 record: 128 groups of 512 rows) is its time per group, and cannot
    // tell its dtype's level from it; that level is then the dense records' (or borrowed).
    case PartClass::gemm:
      return {Param::gemm_ptr_array_group_s, Param::gemm_multi_stream_group_s, Param::gemm_fraction_bf16,
              Param::gemm_fraction_fp8,      Param::gemm_fraction_mxfp8,       Param::gemm_fraction_nvfp4,
              Param::gemm_k_half,            Param::gemm_group_overhead_s};
    case PartClass::attention:
      return {Param::attention_fwd_fraction, Param::attention_bwd_fraction, Param::attention_kv_half,
              Param::attention_hd_half, Param::attention_tile_rows};
    case PartClass::collective:
      return {Param::nvlink_fraction,    Param::nvls_fraction,    Param::ib_fraction,  Param::host_reduce_fraction,
              Param::host_cache_speedup, Param::host_cache_bytes, Param::nvlink_step_s, Param::nvls_step_s};
    case PartClass::ep:
      return {Param::ep_nvlink_fraction, Param::ep_network_fraction, Param::ep_sm_half, Param::deepep_nvlink_fraction,
              Param::deepep_sm_half, Param::ep_peer_cost, Param::deepep_peer_cost, Param::ep_combine_sm_half, Param::ep_combine_peer_cost,
              Param::deepep_combine_sm_half, Param::deepep_combine_peer_cost, Param::ep_api_copy_passes,
              Param::ep_row_sm_s, Param::deepep_row_sm_s, Param::oneshot_copy_latency_s};
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
      // Measured back to back: a kernel whose host issues it more slowly than the GPU runs it
      // (a multi-stream grouped GEMM's loop over its groups) runs at the host's pace.
      const double t = std::max(gemm_seconds(r.gemm, r.dtype, flops, r.bytes, r.gpu, cal).value(),
                                gemm_host_seconds(r.gemm, cal).value());
      return r.metric == PartMetric::seconds ? t : flops / t;
    }
    case PartClass::attention: {
      // Priced at the FLOPs the kernel executes, its rate quoted in the publisher's count.
      const double t = attention_seconds(r.attention, r.exec_flops > 0 ? r.exec_flops : r.flops, r.bytes, r.gpu, cal).value();
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
      // Each row also costs its SM time (ep_row_sm_s / SMs) beside its bytes: the rate of the rows as
      // counted, of row_bytes each.
      auto with_rows = [&](double rate) { return ep_row_rate(rate, r.row_bytes, r.sms, cal, r.deepep); };
      if (r.rdma) {  // as the pricer: DeepEP's RDMA side at the NIC's rate, HybridEP's by its SMs
        // The GPU's scale-out rate as the pricer takes it (Topology::scaleout_bandwidth_per_gpu):
        // the NIC's port, the fabric switch's port, and the NIC's host link (PCIe), the narrowest.
        const NicSpec& nc = r.system->domain.tray.nic;
        double nic = nc.port_bandwidth.value();
        if (r.system->fabric) nic = std::min(nic, r.system->fabric->sw.port_bandwidth.value());
        if (nc.host_link_bandwidth.value() > 0) nic = std::min(nic, nc.host_link_bandwidth.value());
        const double per_node = static_cast<double>(job_gpus_per_domain(*r.system, static_cast<int64_t>(r.ep)));
        const double nodes = std::max(2.0, std::ceil(r.ep / std::max(1.0, per_node)));
        const double fr = ep_sm_factor(r.sms * (nodes - 1.0), cal, false);
        // DeepEP's RDMA kernels at the NIC's rate alone; HybridEP's rows pay their SM time here too.
        const double counted = nic * cal[Param::ep_network_fraction] * (r.deepep ? 1.0 : fr) * nodes / (nodes - 1.0);
        const double kernel = r.deepep ? counted : with_rows(counted);
        return r.torch_api ? 1.0 / (1.0 / kernel + ep_api_copy_s_per_byte(r.gpu, cal)) : kernel;
      }
      const double n = std::max(2.0, r.ep);
      const double c = (r.op == "ep.combine" ? ep_combine_factor(r.sms, n, cal, r.deepep) : 1.0) * ep_peer_factor(n, cal, r.deepep);
      const double kernel = with_rows(r.gpu.nvlink_bandwidth().value() *
                                      cal[r.deepep ? Param::deepep_nvlink_fraction : Param::ep_nvlink_fraction] * f * c * n /
                                      (n - 1.0));
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
// A parameter is identified by a set of records when its sensitivity column (unit norm over every
// usable record of the class) leaves at least this much outside the span of the columns pivoted
// before it: an absolute floor on the QR's diagonal, so a weak column does not hide a strong one.
constexpr double kIdentifiable = 1e-2;

struct ClassRecords {
  std::vector<const PartRecord*> fit, held, check;
};

// The record's prediction after a step of `p` from `cal` over its prediction at `cal`, and the
// step in units of the parameter's range: a tenth of its value, or a thousandth of its range for a
// term off at 0 (into the bounds).
struct Step {
  double ratio, step;
};
Step perturb(const PartRecord& r, Param p, const Calibration& cal) {
  const ParamDef& d = param_def(p);
  Calibration c = cal;
  const double x = c[p];
  double h = x > 0 ? 0.1 * x : (d.max - d.min) * 1e-3;
  if (x + h > d.max) h = -h;
  c.set(p, x + h);
  return {predict_part(r, c) / predict_part(r, cal), h / (d.max - d.min)};
}

// Whether the record's prediction moves when `p` moves from `cal`. A record sets a parameter only
// where it depends on it: a tenth more of the parameter moves the record's prediction by at least
// half a percent. (A step latency of a few microseconds in a gigabyte collective moves it by a few
// millionths: such records left the fit free to push the step anywhere for a thousandth of their
// error.) A shape term off at 0: any effect of switching it on.
bool moves(const PartRecord& r, Param p, const Calibration& cal) {
  const double change = std::abs(perturb(r, p, cal).ratio - 1);
  return cal[p] > 0 ? change >= 0.005 : change > 1e-9;
}

// The record's log prediction per unit of `p`'s range, by the step moves() takes: a column of the
// fit's Jacobian at `cal` (0 where the prediction is not finite).
double sensitivity(const PartRecord& r, Param p, const Calibration& cal) {
  const Step s = perturb(r, p, cal);
  const double v = std::log(s.ratio) / s.step;
  return std::isfinite(v) ? v : 0.0;
}

// How many of `cols` the records `rows` can tell apart: the numerical rank of their sensitivity
// matrix (entries of records that do not move a parameter zeroed, each column scaled to unit norm
// over every usable record, so a column that is a multiple of another - a head-dim term seen on
// one head dim only, which scales every record as the level does - adds nothing).
using Sens = std::map<const PartRecord*, std::vector<double>>;
int rank_of(const std::vector<const PartRecord*>& rows, const std::vector<size_t>& cols, const Sens& s,
            const std::vector<double>& norm) {
  if (rows.empty() || cols.empty()) return 0;
  Eigen::MatrixXd m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(cols.size()));
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < cols.size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) =
          norm[cols[j]] > 0 ? s.at(rows[i])[cols[j]] / norm[cols[j]] : 0.0;
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(m);
  int rank = 0;  // pivots come in decreasing order; count the ones above the absolute floor
  for (Eigen::Index k = 0; k < std::min(m.rows(), m.cols()); ++k) rank += std::abs(qr.matrixR()(k, k)) > kIdentifiable;
  return rank;
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
    // A parameter at a bound that the descent direction pushes out of the box is held there, and the
    // step is solved for the others alone: a step solved with it free assumes a move the clamp then
    // takes back, and the rest of the step is off by that much (the fit crawled for thousands of
    // iterations on such steps, with DeepEP's NVLink fraction at 1 and the combine SM terms at 0).
    std::vector<Eigen::Index> act;
    for (Eigen::Index j = 0; j < u.size(); ++j)
      if (!((u(j) <= 0.0 && g(j) > 0) || (u(j) >= 1.0 && g(j) < 0))) act.push_back(j);
    if (act.empty()) break;  // every parameter held at a bound by the gradient: a constrained minimum
    const auto na = static_cast<Eigen::Index>(act.size());
    Eigen::MatrixXd Aa(na, na);
    Eigen::VectorXd ga(na);
    for (Eigen::Index a = 0; a < na; ++a) {
      ga(a) = g(act[static_cast<size_t>(a)]);
      for (Eigen::Index b = 0; b < na; ++b) Aa(a, b) = A(act[static_cast<size_t>(a)], act[static_cast<size_t>(b)]);
    }
    bool improved = false;
    for (int tries = 0; tries < 12 && !improved; ++tries) {
      Eigen::MatrixXd Ad = Aa;
      for (Eigen::Index j = 0; j < Ad.rows(); ++j) Ad(j, j) += lambda * (Aa(j, j) + 1e-9);
      const Eigen::VectorXd sa = Ad.ldlt().solve(-ga);
      Eigen::VectorXd un = u;
      for (Eigen::Index a = 0; a < na; ++a) un(act[static_cast<size_t>(a)]) += sa(a);
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
  // Classes with fewer than 3 degrees of freedom and no inherited spread (with their records' RMS log
  // error before the fit), and the widest spread of the classes this fit measured well.
  std::vector<std::pair<std::string, double>> underdetermined;
  double measured = 0;
  const std::string gen = mine.front()->generation;
  for (int ci = 0; ci < static_cast<int>(PartClass::kCount); ++ci) {
    const auto cls = static_cast<PartClass>(ci);
    ClassRecords g;
    std::vector<const PartRecord*> usable;
    for (const PartRecord* r : mine)
      if (r->cls == cls) (r->check_only ? g.check : usable).push_back(r);
    if (usable.empty() && g.check.empty()) continue;
    // Which record moves which of the class's parameters, at the values the class starts from, and
    // by how much (the sensitivity columns that decide what a set of records can identify).
    const std::vector<Param> params = class_params(cls);
    std::map<const PartRecord*, std::vector<bool>> mover;
    Sens sens;
    std::vector<double> norm(params.size(), 0.0);
    for (const PartRecord* r : usable) {
      auto& m = mover[r];
      auto& sv = sens[r];
      for (size_t j = 0; j < params.size(); ++j) {
        m.push_back(moves(*r, params[j], rep.fitted));
        sv.push_back(m.back() ? sensitivity(*r, params[j], rep.fitted) : 0.0);
        norm[j] += sv.back() * sv.back();
      }
    }
    for (double& v : norm) v = std::sqrt(v);
    std::vector<size_t> all_cols(params.size());
    for (size_t j = 0; j < params.size(); ++j) all_cols[j] = j;
    // One record in four (n / 4, rounded down) is held back: those whose ids hash lowest (FNV-1a,
    // 64 bits: the same on every machine), not every fourth in id order: ids come in families (a
    // HybridEP configuration's dispatch, combine and their torch-API rows), and every fourth by id
    // held back one kind of row alone. Not held back when the records fitted without it identify
    // fewer of the class's parameters than with it (holding back the one record of a second head
    // dim would leave the head-dim term unfitted, though every record "moves" it).
    std::vector<std::pair<uint64_t, size_t>> by_hash;
    for (size_t i = 0; i < usable.size(); ++i) by_hash.emplace_back(fnv1a64(usable[i]->id), i);
    std::sort(by_hash.begin(), by_hash.end());
    std::vector<bool> candidate(usable.size(), false);
    for (size_t k = 0; k < usable.size() / 4; ++k) candidate[by_hash[k].second] = true;
    std::vector<const PartRecord*> candidates;
    for (size_t i = 0; i < usable.size(); ++i) (candidate[i] ? candidates : g.fit).push_back(usable[i]);
    // Nor when it alone shows how a parameter's term varies: its sensitivity to the parameter lies
    // outside the fitted records' range by more than that range is wide (DeepEP's combine at 32
    // ranks, the peer term's one record beyond 8 ranks: with the combines at 8 alone the term is
    // seen doing one thing, and the fit without it put the 32-rank combine 86 % too fast).
    // (Against the records fitted before any candidate is placed, so the order of the candidates
    // does not matter; outside by more than a tenth of the largest sensitivity too, so a level that
    // moves every record alike does not keep a record another resource partly binds.)
    const std::vector<const PartRecord*> fit_before = g.fit;
    auto only_variation = [&](const PartRecord* r) {
      for (size_t j = 0; j < params.size(); ++j) {
        if (!mover.at(r)[j]) continue;
        const double x = sens.at(r)[j];
        double lo = 0, hi = 0;
        int seen = 0;
        for (const PartRecord* f : fit_before)
          if (mover.at(f)[j]) {
            const double v = sens.at(f)[j];
            lo = seen ? std::min(lo, v) : v, hi = seen ? std::max(hi, v) : v;
            ++seen;
          }
        if (seen >= 2 && std::max(lo - x, x - hi) > std::max(hi - lo, 0.1 * std::max(std::abs(lo), std::abs(hi)))) return true;
      }
      return false;
    };
    for (const PartRecord* r : candidates) {
      std::vector<const PartRecord*> with = g.fit;
      with.push_back(r);
      (rank_of(with, all_cols, sens, norm) > rank_of(g.fit, all_cols, sens, norm) || only_variation(r) ? g.fit : g.held).push_back(r);
    }
    std::sort(g.fit.begin(), g.fit.end(), [](const PartRecord* a, const PartRecord* b) { return a->id < b->id; });
    ClassFit cf;
    cf.cls = cls;
    cf.generation = gen;
    cf.fitted = static_cast<int>(g.fit.size());
    cf.held_back = static_cast<int>(g.held.size());
    cf.checked = static_cast<int>(g.check.size());
    const Calibration before = rep.fitted;
    // A parameter is fitted only when some fitted record's prediction moves with it (those records
    // are what it was fitted on) and the fitted records tell it apart from the parameters freed
    // before it (class_params' order): no more parameters than the records identify.
    std::vector<Param> free;
    std::vector<size_t> free_cols;
    std::map<Param, std::vector<std::string>> fitted_on;
    for (size_t j = 0; j < params.size(); ++j) {
      for (const PartRecord* r : g.fit)
        if (mover[r][j]) fitted_on[params[j]].push_back(r->id);
      if (!fitted_on.count(params[j])) continue;
      std::vector<size_t> with = free_cols;
      with.push_back(j);
      if (rank_of(g.fit, with, sens, norm) > rank_of(g.fit, free_cols, sens, norm)) {
        free.push_back(params[j]);
        free_cols.push_back(j);
      }
    }
    cf.iterations = solve(g.fit, free, rep.fitted, start);
    for (Param p : free) rep.fitted.borrowed.erase(p);
    // A GEMM dtype no record of the generation measures, and no earlier generation fitted (still at
    // its default), takes the median of the dtype fractions this generation's records did fit: the
    // same tensor cores under the same clocks and power limit (Blackwell's records put BF16 and
    // MXFP8 within 1 % of each other), where the default is a guess with no record behind it.
    if (cls == PartClass::gemm) {
      const std::vector<Param> fractions = {Param::gemm_fraction_bf16, Param::gemm_fraction_fp8,
                                            Param::gemm_fraction_mxfp8, Param::gemm_fraction_nvfp4};
      // A borrowed level that some fitted record depends on (Hopper's BF16 under its pointer-array
      // record) moves the parameters solved around it: they are solved again at it, and the median
      // taken again, until it holds (a fixed point: the borrowed level is the median of the
      // fractions as finally fitted, not of a solve before the last).
      for (int round = 0; round < 20; ++round) {
        std::vector<double> fitted;
        std::string donors;
        for (Param p : fractions)
          if (std::find(free.begin(), free.end(), p) != free.end()) {
            fitted.push_back(rep.fitted[p]);
            donors += std::string(donors.empty() ? "" : ", ") + std::string(param_def(p).name);
          }
        if (fitted.empty()) break;
        std::sort(fitted.begin(), fitted.end());
        const size_t m = fitted.size();
        const double median = m % 2 ? fitted[m / 2] : (fitted[m / 2 - 1] + fitted[m / 2]) / 2;
        bool moved = false;
        for (Param p : fractions)
          if (std::find(free.begin(), free.end(), p) == free.end() && (start.is_default(p) || start.borrowed.count(p))) {
            moved = moved || (fitted_on.count(p) && std::abs(rep.fitted[p] - median) > 1e-9 * median);
            rep.fitted.set(p, median);
            rep.fitted.borrowed[p] = "the median of " + donors + " fitted on " + gen + "'s records (no record of its own dtype)";
          }
        if (!moved) break;
        cf.iterations += solve(g.fit, free, rep.fitted, start);
        if (round == 19) {  // not settled in 20 rounds: the level is the median of the last solve's fractions, said so
          std::vector<double> last;
          for (Param p : fractions)
            if (std::find(free.begin(), free.end(), p) != free.end()) last.push_back(rep.fitted[p]);
          std::sort(last.begin(), last.end());
          const double med = last.size() % 2 ? last[last.size() / 2] : (last[last.size() / 2 - 1] + last[last.size() / 2]) / 2;
          for (Param p : fractions)
            if (rep.fitted.borrowed.count(p) && std::find(free.begin(), free.end(), p) == free.end()) {
              rep.fitted.set(p, med);
              rep.fitted.borrowed[p] += " (not settled after 20 rounds of solving at it)";
            }
        }
      }
    }
    for (Param p : params) {
      ParamFit pf{p, before[p], rep.fitted[p], {}, {}, 0};
      if (auto it = fitted_on.find(p); it != fitted_on.end()) pf.movers = static_cast<int>(it->second.size());
      if (std::find(free.begin(), free.end(), p) != free.end()) pf.fitted_on = fitted_on[p];
      // Borrowed here or by the generation the fit started from (and not fitted now).
      if (auto it = rep.fitted.borrowed.find(p); it != rep.fitted.borrowed.end() && pf.fitted_on.empty()) pf.borrowed = it->second;
      cf.params.push_back(pf);
    }
    double ss = 0, ss_before = 0;
    int cnt = 0;
    for (const auto* set : {&g.fit, &g.held, &g.check})
      for (const PartRecord* r : *set) {
        RecordFit rf{r, predict_part(*r, before) / r->value - 1, predict_part(*r, rep.fitted) / r->value - 1,
                     set == &g.held};
        if (set != &g.check) {
          ss += std::pow(std::log1p(rf.after), 2);
          ss_before += std::pow(std::log1p(rf.before), 2);
          ++cnt;
        }
        cf.records.push_back(rf);
      }
    cf.rms_log_after = cnt ? std::sqrt(ss / cnt) : 0;
    // The class's spread is the residuals' standard deviation with the freed parameters' degrees of
    // freedom taken out (n records, p fitted: sum of squares / (n - p)), as a fit of p terms to n
    // points leaves n - p independent residuals. Fewer than three left (four records fit by two
    // terms, or as many terms as records) is not evidence of accuracy: the class keeps at least
    // the starting profile's spread.
    const int dof = cnt - static_cast<int>(free.size());
    double spread = cnt ? std::sqrt(ss / std::max(1, dof)) : 0;
    cf.spread = spread;
    if (dof < 3) {
      if (auto it = start.residual_rms.find(to_string(cls)); it != start.residual_rms.end()) spread = std::max(spread, it->second);
      else if (cnt) underdetermined.emplace_back(to_string(cls), std::sqrt(ss_before / cnt));
    } else if (cnt) {
      measured = std::max(measured, spread);
    }
    if (cnt) rep.fitted.residual_rms[to_string(cls)] = spread;
    rep.classes.push_back(std::move(cf));
  }
  // A class too thinly measured to show its own spread, with none to inherit, takes the widest of
  // the classes this fit measured well (three degrees of freedom or more; not a value inherited
  // from the start), rather than the near-zero residual of an exact fit; when none was, the RMS of
  // its own records' log errors before the fit (how far the start was from them).
  for (const auto& [cls, before] : underdetermined)
    rep.fitted.residual_rms[cls] = std::max(rep.fitted.residual_rms[cls], measured > 0 ? measured : before);
  // What this generation's records did not set and a fit of another generation did (the start's
  // value, not the default): carried, with the profile it came from (or, carried there too, the one
  // before it), so that predict can say which of its rates no record of the GPU's generation backs.
  // A start of the same generation (or the defaults) may still carry values set for it from
  // another generation's profile (calibrate --carry): those alone are listed.
  rep.fitted.carried.clear();
  rep.fitted.generation = gen;
  const bool other_start = start.profile != "defaults" && start.generation != gen;
  if (other_start || !start.carried.empty()) {
    std::set<Param> fitted_here;
    for (const ClassFit& c : rep.classes)
      for (const ParamFit& p : c.params)
        if (!p.fitted_on.empty()) fitted_here.insert(p.param);
    for (const ParamDef& d : param_defs()) {
      if (!other_start && !start.carried.count(d.id)) continue;
      if (fitted_here.count(d.id) || rep.fitted.borrowed.count(d.id) || start.is_default(d.id) || rep.fitted[d.id] != start[d.id])
        continue;
      const auto it = start.carried.find(d.id);
      rep.fitted.carried[d.id] = it != start.carried.end() ? it->second : start.profile;
    }
  }
  return rep;
}

}  // namespace moeperf
