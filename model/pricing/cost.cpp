#include "model/pricing/cost.h"

#include <algorithm>
#include <cmath>

#include "model/pricing/efficiency.h"

namespace moeperf {

const char* to_string(Dtype d) {
  switch (d) {
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp8: return "fp8";
    case Dtype::fp8_block: return "fp8_block";
    case Dtype::mxfp8: return "mxfp8";
    case Dtype::nvfp4: return "nvfp4";
  }
  return "?";
}

FlopsPerSecond gemm_peak(Dtype d, const GpuSpec& g, Dtype* priced_as) {
  Dtype p = d;
  FlopsPerSecond r = g.dense_bf16;
  switch (d) {
    case Dtype::fp32:  // FP32 GEMMs run as TF32/BF16 tensor-core work in training stacks
    case Dtype::bf16:
    case Dtype::fp16: p = Dtype::bf16; r = g.dense_bf16; break;
    case Dtype::fp8:
    case Dtype::fp8_block: r = g.dense_fp8; break;  // the same tensor-core MMA; block scales are applied around it
    case Dtype::mxfp8:
      if (g.dense_mxfp8) r = *g.dense_mxfp8;
      else { p = Dtype::fp8; r = g.dense_fp8; }
      break;
    case Dtype::nvfp4:
      if (g.dense_nvfp4) r = *g.dense_nvfp4;
      else if (g.dense_mxfp8) { p = Dtype::mxfp8; r = *g.dense_mxfp8; }
      else { p = Dtype::fp8; r = g.dense_fp8; }
      break;
  }
  if (priced_as) *priced_as = p;
  return r;
}

double ep_kernel_sms(const StackOptions& stack, const GpuSpec& gpu, const Calibration& cal) {
  const double sms = gpu.sms;
  return stack.ep_sms > 0 ? std::min<double>(stack.ep_sms, sms) : cal[Param::comm_sm_fraction] * sms;
}

const std::vector<CollectiveCost>& CollectiveMemo::get(const Key& k, const std::function<std::vector<CollectiveCost>()>& make) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(k); it != map_.end()) return it->second;
  }
  auto v = make();  // outside the lock: two threads may price the same group once each; the first is kept
  const std::lock_guard<std::mutex> lock(mu_);
  return map_.emplace(k, std::move(v)).first->second;
}

Pricer::Pricer(const Scenario& s, const Topology& t, const Calibration& cal, CollectiveMemo* memo)
    : s_(s), t_(t), cal_(cal), host_(host_copy_cost(t, s.system, cal)),
      host_d2h_(host_copy_cost(t, s.system, cal, true)), memo_(memo) {
  for (Dtype d : {s.precision.dense_gemm, s.precision.expert_gemm}) {
    Dtype p = d;
    gemm_peak(d, s.system.gpu(), &p);
    if (p != d) {
      std::string note = std::string(to_string(d)) + " GEMMs priced as " + to_string(p) + ": " + s.system.gpu().name +
                         " has no native " + to_string(d) + " tensor-core rate";
      if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
    }
  }
}

std::optional<Param> rate_param(const Op& op, const GpuSpec& gpu) {
  if (op.collective != Collective::none) return std::nullopt;
  switch (op.category) {
    case Category::gemm: {
      Dtype priced = op.dtype;
      gemm_peak(op.dtype, gpu, &priced);
      return priced_fraction_param(op.dtype, priced);
    }
    case Category::attention: return op.phase == Phase::backward ? Param::attention_bwd_fraction : Param::attention_fwd_fraction;
    case Category::memory:
    case Category::optimizer: return Param::hbm_fraction;
    default: return std::nullopt;
  }
}

std::vector<Param> shape_params(const Op& op) {
  if (op.collective != Collective::none) return {};
  switch (op.category) {
    case Category::gemm: return {Param::gemm_k_half};
    case Category::attention: return {Param::attention_kv_half, Param::attention_hd_half};
    default: return {};
  }
}

Seconds Pricer::compute_time(const Op& op) const {
  const GpuSpec& g = s_.system.gpu();
  switch (op.category) {
    case Category::gemm: {
      // Without a shape (a GEMM given only by its FLOPs), a square one of the same work.
      GemmShape shape{static_cast<double>(op.m), static_cast<double>(op.n), static_cast<double>(op.k),
                      static_cast<double>(std::max<int64_t>(1, op.groups)), op.ragged};  // Op::ragged: > 1 group
      shape.kernel = op.grouped_kernel;
      shape.m_padded = op.m_padded;
      if (op.m <= 0 || op.n <= 0 || op.k <= 0) {
        const double side = std::cbrt(std::max(1.0, op.flops.value() / 2.0));
        shape = GemmShape{side, side, side, 1, false};
      }
      return gemm_seconds(shape, op.dtype, op.flops.value(), op.hbm_bytes.value(), g, cal_, op.launches);
    }
    case Category::attention: {
      AttentionShape shape{static_cast<double>(op.k), static_cast<double>(op.n), op.phase == Phase::backward,
                           op.mask_edges};
      // A backward op executes attention_bwd_work(qk, vd) x the forward's FLOPs and counts 2 x as
      // model FLOPs (layers.cpp): their ratio gives its work per score for the head-dim term.
      if (shape.backward && op.model_flops.value() > 0) shape.bwd_work = 2.0 * op.flops.value() / op.model_flops.value();
      return attention_seconds(shape, op.flops.value(), op.hbm_bytes.value(), g, cal_, op.launches);
    }
    case Category::sync: return Seconds(cal_[Param::host_sync_s]);
    case Category::ep_comm: {
      // XLA's one-shot ragged all-to-all (collective none, on the compute stream): one block group
      // per peer, each moving its peer's rows at bytes-in-flight / latency (Little's law), the
      // busiest peer's share setting the time; two rendezvous kernels bracket it.
      if (op.one_shot_peers <= 0 || op.one_shot_in_flight <= 0) return Seconds(0);
      const double peers = static_cast<double>(op.one_shot_peers);
      const double per_peer = std::max(op.bytes, op.recv_bytes).value() / std::max(1.0, peers - 1.0);
      return Seconds(per_peer * cal_[Param::oneshot_copy_latency_s] / op.one_shot_in_flight +
                     2.0 * cal_[Param::nvlink_step_s] + op.launches * cal_[Param::kernel_launch_s]);
    }
    case Category::memory:
    case Category::optimizer: return memory_seconds(op.hbm_bytes.value(), g, cal_, op.launches, op.rows);
    default: return Seconds(0);
  }
}

CollectiveCost Pricer::comm_cost(const Op& op, int stage) const {
  if (op.collective == Collective::d2h) return host_d2h_;
  if (op.collective == Collective::h2d) return host_;
  const AllToAllShape shape{op.collective == Collective::all_to_all && op.fanout > 0 ? op.fanout : 1.0,
                            op.collective == Collective::all_to_all ? op.node_fanout : 0.0};
  const bool fused_ep = op.collective == Collective::all_to_all && op.group == Group::ep &&
                        s_.stack.dispatcher == Dispatcher::fused_dedup;
  const bool combine = fused_ep && op.combine;
  // A pipeline hand-off: this stage and its peer (the next one when the op names none).
  const int pp = static_cast<int>(s_.parallelism.pp);
  const int from = std::clamp(stage, 0, std::max(pp - 1, 0));
  const int to = std::clamp(op.peer_stage >= 0 ? op.peer_stage : from + 1 < pp ? from + 1 : from - 1, 0, std::max(pp - 1, 0));
  const int pair = op.group == Group::pp ? std::min(from, to) * pp + std::max(from, to) : -1;
  const double row_bytes = fused_ep ? op.row_bytes : 0.0;
  const auto key = std::make_tuple(op.collective, op.group, shape.fanout, shape.node_fanout, combine, pair, row_bytes);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    std::vector<int64_t> members;
    if (op.group == Group::pp) {
      const auto all = group_members(Group::pp, s_.parallelism, 0);
      members = {all[static_cast<size_t>(std::min(from, to))], all[static_cast<size_t>(std::max(from, to))]};
    } else {
      // The group that crosses the most domains: where an EP, tp, cp or data-parallel group
      // straddles a domain boundary only some groups cross InfiniBand, and the step waits for them
      // (the expert load counts the widest EP group's domains too: expert_load).
      auto w = widest_.find(op.group);
      if (w == widest_.end()) w = widest_.emplace(op.group, widest_group(op.group, s_.parallelism, t_, s_.gpus)).first;
      members = w->second;
    }
    Calibration cal = cal_;  // a fused EP kernel: its own rates, alone on its links
    Calibration link = cal_;  // and the share of each link its bytes take (the kernel at full speed)
    if (fused_ep) {
      // A fused EP kernel (DeepEP/HybridEP-like) moves the rows with its own thread blocks: its
      // measured NVLink and RDMA fractions, at the SMs a communication kernel holds; a combine
      // also sums each token's rows on the receiver, which slows its NVLink part.
      const bool deepep = s_.stack.ep_kernel == EpKernel::deepep;
      const double sms = ep_kernel_sms(s_.stack, s_.system.gpu(), cal_);
      const double f = ep_sm_factor(sms, cal_, deepep);
      const double n = static_cast<double>(members.size());
      // The NVLink terms of the EP size count the peers a rank reaches over NVLink, its domain's
      // members (calibrate fits them on records inside one domain); the other domains' peers are
      // the network's.
      const std::vector<std::vector<int64_t>> domains = by_domain(t_, members);
      double nvl_peers = 1;
      for (const auto& d : domains) nvl_peers = std::max(nvl_peers, static_cast<double>(d.size()));
      const double c = (combine ? ep_combine_factor(sms, nvl_peers, cal_, deepep) : 1.0) * ep_peer_factor(nvl_peers, cal_, deepep);
      const double nvlink = cal_[deepep ? Param::deepep_nvlink_fraction : Param::ep_nvlink_fraction];
      // Each row's SM time beside its bytes (ep_row_sm_s), as a lower byte rate on each link: what a
      // link's rate keeps, with the row bytes counted per byte sent (over NVLink the kernel handles
      // its own rows too, n / (n - 1) of the rows it sends, as the records count them).
      auto rows = [&](double link_rate, double counted_row_bytes, bool dp) {
        return link_rate > 0 ? ep_row_rate(link_rate, counted_row_bytes, sms, cal_, dp) / link_rate : 1.0;
      };
      const double nvl_rows = row_bytes > 0 && n > 1 ? row_bytes * (n - 1.0) / n : 0.0;
      cal.set(Param::nvlink_fraction, nvlink * f * c * rows(t_.nvlink_bandwidth_per_gpu().value() * nvlink * f * c, nvl_rows, deepep));
      link.set(Param::nvlink_fraction, nvlink);
      // Over RDMA DeepEP's normal kernels reach the NIC's rate at their default SMs (V1 on H800:
      // 58 and 51 GB/s of rows counted per node hit at 4 and 8 nodes and 24 SMs, 43.5 and 44.6 GB/s
      // on a 50 GB/s NIC); its SM curve (deepep_sm_half) is fitted on NVLink records and is not the
      // NIC's. HybridEP's RDMA rate follows its SMs times the remote nodes it writes to: each SM
      // keeps requests in flight to every remote peer (Little's law), so at 2 nodes 4 SMs reach 22
      // GB/s of the NIC on H100 and at 4 nodes 40 (calibrate.cpp prices its records the same way).
      const double nodes = static_cast<double>(domains.size());
      const double net = cal_[Param::ep_network_fraction] * (deepep ? 1.0 : ep_sm_factor(sms * std::max(1.0, nodes - 1.0), cal_, false));
      // HybridEP's rows cost their SM time over RDMA too, counted as calibrate counts its RDMA records:
      // a token once per node hit, its own included, (D - 1)/D of them over the NIC. DeepEP's RDMA
      // kernels run at the NIC's rate (as priced above, no SM term).
      const double net_rows = row_bytes > 0 && nodes > 1 && !deepep ? row_bytes * (nodes - 1.0) / nodes : 0.0;
      cal.set(Param::ib_fraction, net * rows(t_.scaleout_bandwidth_per_gpu().value() * net, net_rows, false));
      link.set(Param::ib_fraction, cal_[Param::ep_network_fraction]);
    }
    auto algorithms = [&](const Calibration& k) {
      if (!memo_) return collective_algorithms(op.collective, members, t_, k, shape);
      return memo_->get({op.collective, members, shape.fanout, shape.node_fanout, k[Param::nvlink_fraction], k[Param::ib_fraction]},
                        [&] { return collective_algorithms(op.collective, members, t_, k, shape); });
    };
    std::vector<CollectiveCost> v = algorithms(cal);
    if (fused_ep) {
      // The kernel alone runs at its own rates (its SMs, the combine's sums): that is its own limit;
      // its links carry its bytes at the kernel's full-speed fractions, so a pipeline send or a
      // second exchange beside it takes what the kernel leaves of a link, not half of it.
      const std::vector<CollectiveCost> on_links = algorithms(link);
      if (on_links.size() == v.size())
        for (size_t i = 0; i < v.size(); ++i) {
          v[i].own_s_per_byte = v[i].s_per_byte;
          v[i].s_per_byte = on_links[i].s_per_byte;
        }
    }
    it = cache_.emplace(key, std::move(v)).first;
    if (fused_ep && s_.stack.ep_buffer_copies && s_.stack.ep_kernel == EpKernel::hybridep) {
      // Through HybridEP's PyTorch API the rows also pass over HBM between the kernel's buffers and
      // the framework's tensors, in series with the kernel: added to its own seconds per byte (the
      // exchange's time grows by the copies' whichever resource bounds it; the links are idle
      // meanwhile) and to the HBM traffic the simulator takes from memory-bound kernels beside it.
      // The copies move every row the rank handles, its own included, where the exchange's size
      // counts the rows to other ranks, (n - 1)/n of them (as calibrate prices the records).
      const double n = static_cast<double>(members.size()), all_rows = n > 1 ? n / (n - 1) : 1.0;
      const double copy = ep_api_copy_s_per_byte(s_.system.gpu(), cal_) * all_rows;
      for (CollectiveCost& c : it->second) {
        for (double& x : c.own_s_per_byte)
          if (x > 0) x += copy;  // in series with whichever resource bounds the exchange
        c.hbm_bytes_per_byte += cal_[Param::ep_api_copy_passes] * all_rows;
      }
    }
  }
  // The fastest algorithm at this op's size (NCCL's tuner chooses per size the same way).
  const Bytes size = std::max(op.bytes, op.recv_bytes);
  const CollectiveCost* best = &it->second.front();
  for (const CollectiveCost& c : it->second)
    if (c.time(size) < best->time(size)) best = &c;
  return *best;
}

Seconds Pricer::host_loop_time(const Op& op) const {
  if (op.category != Category::gemm || !op.ragged || op.grouped_kernel != GroupedKernel::multi_stream) return Seconds(0);
  GemmShape shape{static_cast<double>(op.m), static_cast<double>(op.n), static_cast<double>(op.k),
                  static_cast<double>(std::max<int64_t>(1, op.groups)), true};
  shape.kernel = GroupedKernel::multi_stream;
  return gemm_host_seconds(shape, cal_);
}

Seconds Pricer::time(const Op& op, int stage) const {
  if (op.collective == Collective::none) return compute_time(op);
  const CollectiveCost c = comm_cost(op, stage);
  return c.time(std::max(op.bytes, op.recv_bytes));
}

}  // namespace moeperf
