// The MoE layer on a backend (CPU: Eigen GEMMs, single-threaded as ranks already fill the cores,
// and the reference kernels of kernels/reference; CUDA: device memory, our kernels, cuBLAS), over
// the communicator. Host vectors hold what host code reads or writes; the ops run on their mirrors.
// The pieces (recorder, watchdog, layer buffers, mirrors) are in run_parts.h; the measurements
// JSON in measurements_json.cpp.
#include "executor/run.h"

#include <csignal>

#include "executor/attention_block.h"
#include "executor/run_parts.h"
#include "model/pricing/collective.h"
#include "model/workload/flops.h"

namespace moeperf::exec {

using namespace detail;

int64_t dry_run_last_row_offset(int64_t tokens, int top_k, int64_t hidden) {
  return ref::row_offset_bytes(tokens * top_k - 1, hidden, static_cast<int64_t>(sizeof(float)));
}

RunResult run_scenario(const Scenario& s, const RunOptions& o, Communicator& comm, DeviceExchange* device_exchange) {
  const std::unique_ptr<Backend> backend = make_backend(o.backend, comm.local_rank());
  Backend& be = *backend;
  DeviceExchange* const dev_x = be.host_memory() ? nullptr : device_exchange;  // moves device buffers only
  const ModelSpec& m = s.model;
  if (!m.is_moe()) throw InputError("moeperf run executes MoE layers: " + m.name + " has no experts");
  const int ranks = comm.size(), rank = comm.rank();
  if (m.experts % ranks != 0)
    throw InputError("the EP group is the " + std::to_string(ranks) + " ranks; it must divide the " +
                     std::to_string(m.experts) + " experts");
  RunResult res;
  Dims& d = res.dims;
  auto scaled = [&](int64_t v) { return std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(v) / o.scale))); };
  d.tokens = scaled(s.batch.micro_batch * s.batch.seq_len / s.parallelism.cp / s.parallelism.tp);
  d.hidden = scaled(m.hidden);
  d.ffn = scaled(m.expert_ffn);
  d.shared_ffn = m.shared_experts > 0 ? scaled(m.expert_ffn * m.shared_experts) : 0;
  d.experts = m.experts;
  d.top_k = m.top_k;
  d.ranks = ranks;
  // The attention block before the MoE block: GQA/MHA on host memory (the CPU backend) without TP
  // or CP; heads divided by --scale, head dim kept; sequences of the scenario's length (scaled).
  {
    const AttentionSpec& a = m.attention;
    const Parallelism& par = s.parallelism;
    if (o.moe_only) {
      res.notes += "--moe-only: the attention block is not run; ";
    } else if (!be.host_memory()) {
      res.notes += "attention block not run on the " + be.name() + " backend yet (cuDNN's fused attention: issue 20's GPU run); ";
    } else if (par.tp > 1 || par.cp > 1) {
      res.notes += "attention block not run: the executor has no tensor or context parallelism; ";
    } else {
      if (a.kind == AttentionKind::mla) {  // head dims kept; heads and the low ranks divided by --scale
        d.mla = true;
        d.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
        d.rope_dim = a.qk_rope_head_dim;
        d.v_dim = a.v_head_dim;
        d.heads = d.kv_heads = std::max<int64_t>(1, std::llround(a.heads / o.scale));
        d.q_lora = a.q_lora_rank > 0 ? scaled(a.q_lora_rank) : 0;
        d.kv_lora = scaled(a.kv_lora_rank);
      } else {
        d.head_dim = d.v_dim = a.head_dim;
        d.qk_norm = a.qk_norm;
        d.kv_heads = std::max<int64_t>(1, std::llround(a.kv_heads / o.scale));
        d.heads = std::max<int64_t>(d.kv_heads, std::llround(a.heads / o.scale));
        if (d.heads % d.kv_heads != 0) d.heads = d.kv_heads * std::max<int64_t>(1, d.heads / d.kv_heads);
      }
      const int64_t seq = std::max<int64_t>(1, scaled(s.batch.seq_len));
      const int64_t nseq = std::max<int64_t>(1, std::llround(static_cast<double>(d.tokens) / static_cast<double>(seq)));
      d.seq = d.tokens % nseq == 0 ? d.tokens / nseq : d.tokens;
      int first_moe = 0;  // the executor runs the first MoE layer's attention shape
      while (first_moe + 1 < m.layers && !m.is_moe_layer(first_moe)) ++first_moe;
      d.window = is_sliding(m, first_moe) ? std::max<int64_t>(1, scaled(a.sliding_window)) : 0;
      if (d.window >= d.seq) d.window = 0;
      d.chunk = is_chunked(m, first_moe) ? std::max<int64_t>(1, scaled(a.chunk_size)) : 0;
      if (d.chunk >= d.seq) d.chunk = 0;
      // Llama 4's NoPE layers rotate nothing and (its QK-norm being where it rotates) normalize nothing.
      d.rope = uses_rope(m, first_moe);
      if (!d.rope && a.kind != AttentionKind::mla) d.qk_norm = false;
      d.fsdp = par.fsdp > 1 && ranks > 1;
      if (par.fsdp > 1 && par.fsdp != ranks)
        res.notes += "the attention weights are sharded over the " + std::to_string(ranks) + " launched ranks (the scenario says fsdp = " +
                     std::to_string(par.fsdp) + "); ";
    }
  }
  if (ranks != s.parallelism.ep)
    res.notes += "the EP group is the " + std::to_string(ranks) + " launched ranks (the scenario says ep = " +
                 std::to_string(s.parallelism.ep) + "); ";
  if (o.scale != 1.0) res.notes += "dimensions divided by --scale " + fmt("%g", o.scale) + " to fit this machine; ";
  res.gemm_peak_method = be.gemm_peak_method();
  res.device_json = be.device_json();
  if (dev_x) {
    res.communicator = dev_x->name();
    res.communicator_detail = "count exchange, dispatch, combine and their backward: " + dev_x->name() +
                              " on device buffers; gates, the shared expert's reduce-scatter and barriers: " + comm.name() + " on the host";
    res.notes += "backend " + be.name() + ": " + res.communicator_detail + "; ";
  } else {
    res.communicator = comm.name();
    res.communicator_detail = "every exchange: " + comm.name() + (be.host_memory() ? "" : ", staged through host memory");
    if (!be.host_memory())
      res.notes += "backend " + be.name() + ": the all-to-alls and the count exchange go through host memory over the " + comm.name() +
                   " communicator (their times include the device-host copies; moeperf sends them through NCCL on device buffers "
                   "when it is built with NCCL and launched under MPI with more than one rank); ";
  }

  Layer L;
  L.init(s, d, rank, ranks);
  std::unique_ptr<AttentionBlock> attn;
  if (d.heads > 0) attn = std::make_unique<AttentionBlock>(d, rank, ranks);
  const int64_t T = d.tokens, H = d.hidden, F = d.ffn, E = d.experts, K = d.top_k, EL = L.el, R = T * K;
  // The same sizes as doubles, for byte and FLOP counts.
  const double fT = static_cast<double>(T), fH = static_cast<double>(H), fF = static_cast<double>(F),
               fE = static_cast<double>(E), fR = static_cast<double>(R), fK = static_cast<double>(K),
               fEL = static_cast<double>(EL);
  (void)fK;
  // This machine's ceilings as the layer meets them: every rank measures at once, as every rank
  // then runs its ops at once (on a CPU the ranks share caches, memory and the clock's headroom:
  // measured one at a time, the peak was the lone core's, and the layer's GEMMs ran ~20 % below
  // what it priced them at). Measured before the timed steps and after each, the median of those
  // per rank, the mean over the ranks: the ops' figures are medians over the steps, and one
  // measurement at the start priced a whole run at a passing spell of a shared VM (seen: the
  // layer's GEMMs predicted 30 % slow, and 19 % fast, against a peak taken once).
  std::vector<double> peaks, copies;
  auto measure_ceilings = [&] {
    comm.barrier();
    peaks.push_back(be.measure_gemm_peak());
    copies.push_back(be.measure_copy_bandwidth());
  };
  measure_ceilings();
  Recorder rec{&res.ops, &be};
  Watchdog dog(o.timeout_s, rank);
  res.expert_rows.assign(static_cast<size_t>(E), 0.0);

  // Host vectors hold what host code reads or writes (routing skew, counts, gates); the backend's
  // ops work on their mirrors (the vectors themselves on the CPU backend).
  std::vector<float> x(static_cast<size_t>(T * H)), dy(static_cast<size_t>(T * H));
  fill(x.data(), T * H, kXSeed + static_cast<uint64_t>(rank), 1.0f);
  // With the attention block, x0 is the layer's input and x (the MoE block's input) its output.
  const std::vector<float> x0 = x;
  std::vector<float> dx0(attn ? static_cast<size_t>(T * H) : 0), dh(attn ? static_cast<size_t>(T * H) : 0);
  fill(dy.data(), T * H, kDySeed + static_cast<uint64_t>(rank), 1.0f);
  std::vector<float> logits(static_cast<size_t>(T * E)), topk_w(static_cast<size_t>(R)), rows(static_cast<size_t>(R * H));
  std::vector<int32_t> topk_idx(static_cast<size_t>(R));
  std::vector<int64_t> counts(static_cast<size_t>(E)), offsets(static_cast<size_t>(E) + 1), row_of_slot(static_cast<size_t>(R)),
      slot_of_row(static_cast<size_t>(R));
  std::vector<float> y(static_cast<size_t>(T * H)), y_first;
  Mirror<float> d_x(be, x), d_dy(be, dy), d_router(be, L.router), d_bias(be, L.bias), d_w1(be, L.w1), d_w2(be, L.w2), d_s1(be, L.s1),
      d_s2(be, L.s2), d_logits(be, logits), d_topk_w(be, topk_w), d_rows(be, rows), d_y(be, y);
  Mirror<int32_t> d_idx(be, topk_idx);
  Mirror<int64_t> d_counts(be, counts), d_offsets(be, offsets), d_ros(be, row_of_slot), d_sor(be, slot_of_row);
  for (Mirror<float>* b : {&d_x, &d_dy, &d_router, &d_bias, &d_w1, &d_w2, &d_s1, &d_s2}) b->up();
  // An all-to-all of backend buffers through the host communicator (staged through host memory
  // when the backend's memory is not host memory).
  // With a device exchange (NCCL) the buffers go device to device: the backend's pending work is
  // finished first (the exchange runs on its own stream) and the exchange is done on return.
  // Returns the exchange's device time when the device exchange measured it (0: the caller's clock).
  auto a2a = [&](Mirror<float>& src, const std::vector<int64_t>& sb, Mirror<float>& dst, const std::vector<int64_t>& rb,
                 const char* op) -> double {
    if (dev_x) {
      be.synchronize();
      return dev_x->alltoallv(src.d(), sb, dst.d(), rb, op);
    }
    src.down();
    comm.alltoallv(src.h().data(), sb, dst.h().data(), rb);
    dst.up();
    return 0.0;
  };
  bool checked = false;

  for (int step = 0; step < o.warmup + o.steps; ++step) {
    rec.record = step >= o.warmup;
    dog.arm(step);
    for (int layer = 0; layer < o.layers; ++layer) {
      // ---------------- forward
      if (attn) {
        attn->forward(be, comm, rec, x0.data(), x.data());
        if (!checked && layer == 0)
          if (const std::string e = attn->check_forward(x0.data(), x.data()); !e.empty()) gate_failed(comm, e);
      }
      rec.time("moe.router", 4.0 * (fT * fH + fH * fE + fT * fE), 2.0 * fT * fH * fE, GemmShape{fT, fE, fH}, [&] {
        be.gemm(d_x.d(), d_router.d(), d_logits.d(), T, E, H, false, false, false);
      });
      d_logits.down();
      L.skew(logits, step);
      d_logits.up();
      rec.time("moe.topk", 4.0 * fT * fE + 8.0 * fR, 0, [&] {
        be.router_topk(d_logits.d(), m.router.bias ? d_bias.d() : nullptr, L.rp, d_idx.d(), d_topk_w.d());
      });
      rec.time_rows("moe.permute", 4.0 * (fT * fH + fR * fH) + 16.0 * fR, fR, [&] {
        be.expert_counts(d_idx.d(), T, static_cast<int>(K), E, d_counts.d(), d_offsets.d());
        be.permute_map(d_idx.d(), T, static_cast<int>(K), E, d_offsets.d(), d_ros.d(), d_sor.d());
        be.permute(d_x.d(), T, H, static_cast<int>(K), d_sor.d(), d_rows.d());
      });
      // Count exchange: each peer learns how many rows of each of its experts we send (the counts
      // come to the host first).
      std::vector<int64_t> counts_from(static_cast<size_t>(ranks * EL));
      const bool fault_here = step == o.fault_step && rank == o.fault_rank;
      // The counts come to the host before the exchange (their copy is not the exchange's time: the
      // model prices a framework's host wait apart from the exchange's collective).
      d_counts.down();
      d_offsets.down();
      std::vector<int64_t> to_announce = counts;
      if (fault_here && o.fault == RunOptions::Fault::counts) to_announce[static_cast<size_t>(((rank + 1) % ranks) * EL)] += 1;
      rec.wait("moe.count_exchange", comm);
      rec.time_exchange("moe.count_exchange", 8.0 * fEL * (ranks - 1), [&] {
        double device_s = 0;
        if (dev_x)
          counts_from = dev_x->exchange_counts(to_announce, EL, &device_s);
        else
          comm.alltoallv(to_announce.data(), std::vector<int64_t>(static_cast<size_t>(ranks), 8 * EL), counts_from.data(),
                         std::vector<int64_t>(static_cast<size_t>(ranks), 8 * EL));
        return device_s;
      });
      // Gate (every step): each peer's announced rows equal the rows its dispatch carries (from its
      // permutation offsets, exchanged apart from the counts); a mismatch would corrupt the
      // all-to-all, so it ends the job naming the peer.
      {
        std::vector<int64_t> sends(static_cast<size_t>(ranks)), carried(static_cast<size_t>(ranks));
        for (int p = 0; p < ranks; ++p)
          sends[static_cast<size_t>(p)] = offsets[static_cast<size_t>((p + 1) * EL)] - offsets[static_cast<size_t>(p * EL)];
        comm.alltoallv(sends.data(), std::vector<int64_t>(static_cast<size_t>(ranks), 8), carried.data(),
                       std::vector<int64_t>(static_cast<size_t>(ranks), 8));
        for (int p = 0; p < ranks; ++p) {
          int64_t announced = 0;
          for (int64_t xe = 0; xe < EL; ++xe) announced += counts_from[static_cast<size_t>(p * EL + xe)];
          if (announced != carried[static_cast<size_t>(p)])
            gate_failed(comm, "count exchange in step " + std::to_string(step) + ": rank " + std::to_string(p) + " announced " +
                                  std::to_string(announced) + " rows for this rank's experts, but its dispatch carries " +
                                  std::to_string(carried[static_cast<size_t>(p)]));
        }
      }
      std::vector<int64_t> send_b(static_cast<size_t>(ranks)), recv_b(static_cast<size_t>(ranks));
      int64_t recv_rows = 0;
      double frecv_rows = 0;
      for (int p = 0; p < ranks; ++p) {
        send_b[static_cast<size_t>(p)] = (offsets[static_cast<size_t>((p + 1) * EL)] - offsets[static_cast<size_t>(p * EL)]) * H * 4;
        int64_t c = 0;
        for (int64_t xe = 0; xe < EL; ++xe) c += counts_from[static_cast<size_t>(p * EL + xe)];
        recv_b[static_cast<size_t>(p)] = c * H * 4;
        recv_rows += c;
      }
      frecv_rows = static_cast<double>(recv_rows);
      // The bytes of each exchange as the model counts an all-to-all: what leaves a rank for the
      // others, at the busiest rank (dispatch and the combine's backward send send_b; the combine
      // and the dispatch's backward send recv_b back).
      double a2a_out = 0, a2a_back = 0;
      {
        double mine[2] = {0, 0};
        for (int p = 0; p < ranks; ++p)
          if (p != rank) mine[0] += static_cast<double>(send_b[static_cast<size_t>(p)]), mine[1] += static_cast<double>(recv_b[static_cast<size_t>(p)]);
        std::vector<double> all(static_cast<size_t>(2 * ranks));
        comm.allgather(mine, sizeof mine, all.data());
        for (int r = 0; r < ranks; ++r)
          a2a_out = std::max(a2a_out, all[static_cast<size_t>(2 * r)]), a2a_back = std::max(a2a_back, all[static_cast<size_t>(2 * r + 1)]);
      }
      // Gate (every step): dropless - every routed row arrives somewhere, none twice.
      double totals[2] = {static_cast<double>(recv_rows), static_cast<double>(R)};
      comm.allreduce_sum(totals, 2);
      if (totals[0] != totals[1] || totals[1] != static_cast<double>(T * K * ranks))
        gate_failed(comm, "dropless: " + fmt("%.0f rows received, %.0f routed", totals[0], totals[1]));
      if (rec.record)
        for (int64_t e = 0; e < E; ++e) res.expert_rows[static_cast<size_t>(e)] += static_cast<double>(counts[static_cast<size_t>(e)]);
      if (fault_here && o.fault != RunOptions::Fault::counts) {
        const bool hang = o.fault == RunOptions::Fault::hang, kill = o.fault == RunOptions::Fault::kill;
        std::fprintf(stderr, "moeperf run: rank %d: fault injected in step %d: %s\n", rank, step,
                     hang ? "hanging in the dispatch" : kill ? "killed (SIGKILL) in the dispatch" : "exiting in the dispatch");
        std::fflush(stderr);
        if (kill) std::raise(SIGKILL);
        if (hang)
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        std::_Exit(3);
      }
      std::vector<float> recv(static_cast<size_t>(recv_rows * H)), grouped_in(static_cast<size_t>(recv_rows * H));
      Mirror<float> d_recv(be, recv), d_grouped_in(be, grouped_in);
      rec.wait("moe.dispatch", comm);
      rec.time_exchange("moe.dispatch", a2a_out, [&] { return a2a(d_rows, send_b, d_recv, recv_b, "moe.dispatch"); });
      std::vector<int64_t> eoff;
      // perm: expert-major row i <- peer-major row perm[i]; inv undoes it (a full permutation).
      std::vector<int64_t> perm = regroup_map(counts_from, ranks, EL, eoff), inv(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      Mirror<int64_t> d_perm(be, perm), d_inv(be, inv);
      d_perm.up();
      d_inv.up();
      rec.time_rows("moe.regroup", 8.0 * frecv_rows * fH, frecv_rows, [&] { be.gather_rows(d_recv.d(), d_perm.d(), recv_rows, H, d_grouped_in.d()); });
      std::vector<float> h1(static_cast<size_t>(recv_rows * 2 * F)), act(static_cast<size_t>(recv_rows * F)),
          h2(static_cast<size_t>(recv_rows * H));
      Mirror<float> d_h1(be, h1), d_act(be, act), d_h2(be, h2);
      rec.time("moe.expert_fc1", 4.0 * (frecv_rows * fH + fEL * fH * 2 * fF + frecv_rows * 2 * fF), 2.0 * frecv_rows * fH * 2 * fF,
               GemmShape{frecv_rows / fEL, 2 * fF, fH, fEL, true}, [&] { be.grouped_gemm(d_grouped_in.d(), d_w1.d(), eoff, H, 2 * F, d_h1.d()); });
      rec.time("moe.act", 4.0 * frecv_rows * 3 * fF, 0, [&] { be.swiglu_fwd(d_h1.d(), recv_rows, F, d_act.d()); });
      rec.time("moe.expert_fc2", 4.0 * (frecv_rows * fF + fEL * fF * fH + frecv_rows * fH), 2.0 * frecv_rows * fF * fH,
               GemmShape{frecv_rows / fEL, fH, fF, fEL, true}, [&] { be.grouped_gemm(d_act.d(), d_w2.d(), eoff, F, H, d_h2.d()); });
      rec.time_rows("moe.regroup", 8.0 * frecv_rows * fH, frecv_rows, [&] { be.gather_rows(d_h2.d(), d_inv.d(), recv_rows, H, d_recv.d()); });
      std::vector<float> back(static_cast<size_t>(R * H));
      Mirror<float> d_back(be, back);
      rec.wait("moe.combine", comm);
      rec.time_exchange("moe.combine", a2a_back, [&] { return a2a(d_recv, recv_b, d_back, send_b, "moe.combine"); });
      rec.time_rows("moe.unpermute", 4.0 * (fR * fH + fT * fH) + 4.0 * fR, fR, [&] {
        be.unpermute(d_back.d(), T, H, static_cast<int>(K), d_ros.d(), d_topk_w.d(), d_y.d());
      });
      std::vector<float> sh1, sact;
      std::unique_ptr<Mirror<float>> d_sh1, d_sact;
      if (d.shared_ffn > 0) {
        const int64_t S = d.shared_ffn;
        const double fS = static_cast<double>(S);
        sh1.resize(static_cast<size_t>(T * 2 * S));
        sact.resize(static_cast<size_t>(T * S));
        d_sh1 = std::make_unique<Mirror<float>>(be, sh1);
        d_sact = std::make_unique<Mirror<float>>(be, sact);
        rec.time("moe.shared_fc1", 4.0 * (fT * fH + fH * 2 * fS + fT * 2 * fS), 2.0 * fT * fH * 2 * fS, GemmShape{fT, 2 * fS, fH}, [&] {
          be.gemm(d_x.d(), d_s1.d(), d_sh1->d(), T, 2 * S, H, false, false, false);
        });
        rec.time("moe.shared_act", 4.0 * fT * 3 * fS, 0, [&] { be.swiglu_fwd(d_sh1->d(), T, S, d_sact->d()); });
        rec.time("moe.shared_fc2", 4.0 * (fT * fS + fS * fH + 2 * fT * fH), 2.0 * fT * fS * fH, GemmShape{fT, fH, fS}, [&] {
          be.gemm(d_sact->d(), d_s2.d(), d_y.d(), T, H, S, false, false, true);
        });
      }

      // ---------------- correctness gates, once, before the timed steps
      if (!checked && layer == 0) {
        for (Mirror<float>* b : {&d_rows, &d_topk_w, &d_y}) b->down();
        d_idx.down();
        d_ros.down();
        d_sor.down();
        if (d_sact) d_sact->down();
        // Single-rank reference for this rank's tokens, with every expert's weights generated locally.
        std::vector<float> w1(static_cast<size_t>(E * H * 2 * F)), w2(static_cast<size_t>(E * F * H));
        for (int64_t e = 0; e < E; ++e) L.expert_weights(e, w1.data() + e * H * 2 * F, w2.data() + e * F * H);
        std::vector<float> r1(static_cast<size_t>(R * 2 * F)), ra(static_cast<size_t>(R * F)), r2(static_cast<size_t>(R * H)),
            yref(static_cast<size_t>(T * H));
        ref::grouped_gemm(rows.data(), w1.data(), offsets.data(), E, H, 2 * F, r1.data());
        ref::swiglu_fwd(r1.data(), R, F, ra.data());
        ref::grouped_gemm(ra.data(), w2.data(), offsets.data(), E, F, H, r2.data());
        ref::unpermute(r2.data(), T, H, static_cast<int>(K), row_of_slot.data(), topk_w.data(), yref.data());
        if (d.shared_ffn > 0)  // on the host, as the CPU backend's GEMM computes it
          MapM(yref.data(), T, H).noalias() += CMapM(sact.data(), T, d.shared_ffn) * CMapM(L.s2.data(), d.shared_ffn, H);
        double err = 0, mag = 0;
        for (size_t i = 0; i < yref.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(y[i] - yref[i]))), mag = std::max(mag, std::fabs(static_cast<double>(yref[i])));
        if (!(err <= 1e-4 * std::max(mag, 1e-30)))
          gate_failed(comm, fmt("multi-rank output differs from the single-rank reference: max |diff| %.3g vs max |y| %.3g", err, mag));
        res.gates.push_back("multi-rank output equals the single-rank FP32 reference within 1e-4 of max |y| (" + fmt("%.2g", err / mag) + ")");
        // Payload oracle: (source rank, token, slot, expert) travels with every row; each arrives once,
        // at an expert of the receiving rank, and the combine brings every slot back to its place.
        std::vector<int64_t> pay(static_cast<size_t>(R * 4)), got(static_cast<size_t>(recv_rows * 4)), ret(static_cast<size_t>(R * 4));
        for (int64_t r = 0; r < R; ++r) {
          const int64_t slot = slot_of_row[static_cast<size_t>(r)];
          pay[static_cast<size_t>(r * 4)] = rank, pay[static_cast<size_t>(r * 4 + 1)] = slot / K, pay[static_cast<size_t>(r * 4 + 2)] = slot,
                                     pay[static_cast<size_t>(r * 4 + 3)] = topk_idx[static_cast<size_t>(slot)];
        }
        std::vector<int64_t> sb4(send_b), rb4(recv_b);
        for (auto& v : sb4) v = v / (H * 4) * 32;
        for (auto& v : rb4) v = v / (H * 4) * 32;
        comm.alltoallv(pay.data(), sb4, got.data(), rb4);
        std::set<std::pair<int64_t, int64_t>> seen;
        int64_t row = 0;
        for (int p = 0; p < ranks; ++p)
          for (int64_t xe = 0; xe < EL; ++xe)
            for (int64_t c = 0; c < counts_from[static_cast<size_t>(p * EL + xe)]; ++c, ++row) {
              const int64_t* g = &got[static_cast<size_t>(row * 4)];
              if (g[0] != p || g[1] < 0 || g[1] >= T || g[3] != rank * EL + xe || !seen.insert({g[0], g[2]}).second)
                gate_failed(comm, "payload: a dispatched row arrived at the wrong place or twice");
            }
        comm.alltoallv(got.data(), rb4, ret.data(), sb4);
        for (int64_t r = 0; r < R; ++r)
          if (ret[static_cast<size_t>(r * 4 + 2)] != slot_of_row[static_cast<size_t>(r)] || ret[static_cast<size_t>(r * 4)] != rank)
            gate_failed(comm, "payload: the combine did not bring a row back to its slot");
        res.gates.push_back("payload: every (source rank, token, slot) row reached the rank of its expert once and came back to its slot");
        // Permute then un-permute with weights 1/k is the identity.
        std::vector<float> ones(static_cast<size_t>(R), 1.0f / static_cast<float>(K)), ident(static_cast<size_t>(T * H));
        ref::unpermute(rows.data(), T, H, static_cast<int>(K), row_of_slot.data(), ones.data(), ident.data());
        for (size_t i = 0; i < ident.size(); ++i)
          if (std::fabs(ident[i] - x[i]) > 1e-6f * (1 + std::fabs(x[i]))) gate_failed(comm, "permute then un-permute is not the identity");
        res.gates.push_back("permute then un-permute (weights 1/k) is the identity within 1e-6");
        // Determinism: the expert path and the combine again, on the same inputs, give the same bits.
        {
          std::vector<float> b1(h1.size()), ba(act.size()), b2(h2.size()), rv(recv.size()), bk(back.size()), y2(y.size());
          Mirror<float> d_b1(be, b1), d_ba(be, ba), d_b2(be, b2), d_rv(be, rv), d_bk(be, bk), d_y2(be, y2);
          be.grouped_gemm(d_grouped_in.d(), d_w1.d(), eoff, H, 2 * F, d_b1.d());
          be.swiglu_fwd(d_b1.d(), recv_rows, F, d_ba.d());
          be.grouped_gemm(d_ba.d(), d_w2.d(), eoff, F, H, d_b2.d());
          be.gather_rows(d_b2.d(), d_inv.d(), recv_rows, H, d_rv.d());
          a2a(d_rv, recv_b, d_bk, send_b, "moe.combine (determinism gate)");
          be.unpermute(d_bk.d(), T, H, static_cast<int>(K), d_ros.d(), d_topk_w.d(), d_y2.d());
          if (d.shared_ffn > 0)
            be.gemm(d_sact->d(), d_s2.d(), d_y2.d(), T, H, d.shared_ffn, false, false, true);
          d_y2.down();
          if (std::memcmp(y2.data(), y.data(), sizeof(float) * y.size()) != 0) gate_failed(comm, "two runs of the layer differ in their bits");
          res.gates.push_back("two runs of the expert path and combine give identical bits");
        }
        y_first = y;
      }

      // ---------------- backward
      std::vector<float> dx(static_cast<size_t>(T * H), 0.0f);
      Mirror<float> d_dx(be, dx);
      d_dx.up();
      if (d.shared_ffn > 0) {
        const int64_t S = d.shared_ffn;
        const double fS = static_cast<double>(S);
        std::vector<float> dact(static_cast<size_t>(T * S)), dh1(static_cast<size_t>(T * 2 * S)), ds1(static_cast<size_t>(H * 2 * S)),
            ds2(static_cast<size_t>(S * H));
        Mirror<float> d_dact_s(be, dact), d_dh1_s(be, dh1), d_ds1(be, ds1), d_ds2(be, ds2);
        rec.time("moe.shared_fc2.dgrad", 4.0 * (fT * fH + fS * fH + fT * fS), 2.0 * fT * fS * fH, GemmShape{fT, fS, fH}, [&] {
          be.gemm(d_dy.d(), d_s2.d(), d_dact_s.d(), T, S, H, false, true, false);
        });
        rec.time("moe.shared_fc2.wgrad", 4.0 * (fT * fS + fT * fH + fS * fH), 2.0 * fT * fS * fH, GemmShape{fS, fH, fT}, [&] {
          be.gemm(d_sact->d(), d_dy.d(), d_ds2.d(), S, H, T, true, false, false);
        });
        rec.time("moe.shared_act.bwd", 4.0 * fT * 5 * fS, 0, [&] { be.swiglu_bwd(d_sh1->d(), d_dact_s.d(), T, S, d_dh1_s.d()); });
        rec.time("moe.shared_fc1.dgrad", 4.0 * (fT * 2 * fS + fH * 2 * fS + fT * fH), 2.0 * fT * fH * 2 * fS, GemmShape{fT, fH, 2 * fS}, [&] {
          be.gemm(d_dh1_s.d(), d_s1.d(), d_dx.d(), T, H, 2 * S, false, true, false);
        });
        rec.time("moe.shared_fc1.wgrad", 4.0 * (fT * fH + fT * 2 * fS + fH * 2 * fS), 2.0 * fT * fH * 2 * fS, GemmShape{fH, 2 * fS, fT}, [&] {
          be.gemm(d_x.d(), d_dh1_s.d(), d_ds1.d(), H, 2 * S, T, true, false, false);
        });
        // The shared expert is data-parallel over the EP ranks: its gradients are reduce-scattered
        // (ZeRO / FSDP style). Gate: the shards add up to the sum of every rank's gradient.
        const int64_t shard = (H * 2 * S + ranks - 1) / ranks;
        std::vector<float> padded(static_cast<size_t>(shard * ranks), 0.0f), mine(static_cast<size_t>(shard));
        d_ds1.down();  // to the host communicator (untimed, as the CPU backend's copy into `padded`)
        std::copy(ds1.begin(), ds1.end(), padded.begin());
        rec.wait("moe.shared_grad.reduce_scatter", comm);
        rec.time("moe.shared_grad.reduce_scatter", 4.0 * fH * 2 * fS, 0,
                 [&] { comm.reduce_scatter_sum(padded.data(), mine.data(), shard); });
        if (!checked && layer == 0) {
          double sums[2] = {0, 0};
          for (float v : mine) sums[0] += static_cast<double>(v);
          for (float v : ds1) sums[1] += static_cast<double>(v);
          comm.allreduce_sum(sums, 2);
          if (std::fabs(sums[0] - sums[1]) > 1e-3 * (1 + std::fabs(sums[1])))
            gate_failed(comm, "reduce-scatter of the shared expert's gradient lost or duplicated a shard");
          res.gates.push_back("reduce-scatter: the shared expert's gradient shards add up to the ranks' summed gradient");
        }
      }
      std::vector<float> drows(static_cast<size_t>(R * H)), dw(static_cast<size_t>(R));
      Mirror<float> d_drows(be, drows), d_dw(be, dw);
      rec.time_rows("moe.unpermute.bwd", 4.0 * (2 * fR * fH + fT * fH), fR, [&] {
        be.unpermute_bwd(d_back.d(), d_dy.d(), T, H, static_cast<int>(K), d_ros.d(), d_topk_w.d(), d_drows.d(), d_dw.d());
      });
      std::vector<float> drecv(static_cast<size_t>(recv_rows * H)), dgrouped(static_cast<size_t>(recv_rows * H));
      Mirror<float> d_drecv(be, drecv), d_dgrouped(be, dgrouped);
      rec.wait("moe.combine.bwd", comm);
      rec.time_exchange("moe.combine.bwd", a2a_out, [&] { return a2a(d_drows, send_b, d_drecv, recv_b, "moe.combine.bwd"); });
      rec.time_rows("moe.regroup", 8.0 * frecv_rows * fH, frecv_rows, [&] { be.gather_rows(d_drecv.d(), d_perm.d(), recv_rows, H, d_dgrouped.d()); });
      std::vector<float> dact(static_cast<size_t>(recv_rows * F)), dh1(static_cast<size_t>(recv_rows * 2 * F)),
          dw1(static_cast<size_t>(EL * H * 2 * F)), dw2(static_cast<size_t>(EL * F * H)), dxr(static_cast<size_t>(recv_rows * H));
      Mirror<float> d_dact(be, dact), d_dh1(be, dh1), d_dw1(be, dw1), d_dw2(be, dw2), d_dxr(be, dxr);
      be.fill(d_dw1.d(), EL * H * 2 * F, std::nanf(""));  // a zero-token expert must overwrite these with zeros
      be.fill(d_dw2.d(), EL * F * H, std::nanf(""));
      rec.time("moe.expert_fc2.dgrad", 4.0 * (frecv_rows * fH + fEL * fF * fH + frecv_rows * fF), 2.0 * frecv_rows * fF * fH,
               GemmShape{frecv_rows / fEL, fF, fH, fEL, true}, [&] { be.grouped_dgrad(d_dgrouped.d(), d_w2.d(), eoff, F, H, d_dact.d()); });
      rec.time("moe.expert_fc2.wgrad", 4.0 * (frecv_rows * fF + frecv_rows * fH + fEL * fF * fH), 2.0 * frecv_rows * fF * fH,
               GemmShape{fF, fH, frecv_rows / fEL, fEL, true}, [&] { be.grouped_wgrad(d_act.d(), d_dgrouped.d(), eoff, F, H, d_dw2.d()); });
      rec.time("moe.act.bwd", 4.0 * frecv_rows * 5 * fF, 0, [&] { be.swiglu_bwd(d_h1.d(), d_dact.d(), recv_rows, F, d_dh1.d()); });
      rec.time("moe.expert_fc1.dgrad", 4.0 * (frecv_rows * 2 * fF + fEL * fH * 2 * fF + frecv_rows * fH), 2.0 * frecv_rows * fH * 2 * fF,
               GemmShape{frecv_rows / fEL, fH, 2 * fF, fEL, true}, [&] { be.grouped_dgrad(d_dh1.d(), d_w1.d(), eoff, H, 2 * F, d_dxr.d()); });
      rec.time("moe.expert_fc1.wgrad", 4.0 * (frecv_rows * fH + frecv_rows * 2 * fF + fEL * fH * 2 * fF), 2.0 * frecv_rows * fH * 2 * fF,
               GemmShape{fH, 2 * fF, frecv_rows / fEL, fEL, true}, [&] { be.grouped_wgrad(d_grouped_in.d(), d_dh1.d(), eoff, H, 2 * F, d_dw1.d()); });
      rec.time_rows("moe.regroup", 8.0 * frecv_rows * fH, frecv_rows, [&] { be.gather_rows(d_dxr.d(), d_inv.d(), recv_rows, H, d_drecv.d()); });
      rec.wait("moe.dispatch.bwd", comm);
      rec.time_exchange("moe.dispatch.bwd", a2a_back, [&] { return a2a(d_drecv, recv_b, d_drows, send_b, "moe.dispatch.bwd"); });
      std::vector<float> dxe(static_cast<size_t>(T * H));
      Mirror<float> d_dxe(be, dxe);
      rec.time_rows("moe.permute.bwd", 4.0 * (fR * fH + fT * fH), fR, [&] {
        be.permute_bwd(d_drows.d(), T, H, static_cast<int>(K), d_ros.d(), d_dxe.d());
      });
      // Router: routing-weight gradients back through the score function, then its GEMM.
      std::vector<float> dlogits(static_cast<size_t>(T * E)), drouter(static_cast<size_t>(H * E));
      Mirror<float> d_dlogits(be, dlogits), d_drouter(be, drouter);
      rec.time("moe.topk.bwd", 4.0 * (2 * fT * fE + 2 * fR), 0,
               [&] { be.router_bwd(d_logits.d(), d_idx.d(), d_dw.d(), L.rp, d_dlogits.d()); });
      rec.time("moe.router.dgrad", 4.0 * (fT * fE + fH * fE + fT * fH), 2.0 * fT * fE * fH, GemmShape{fT, fH, fE},
               [&] { be.gemm(d_dlogits.d(), d_router.d(), d_dxe.d(), T, H, E, false, true, true); });
      rec.time("moe.router.wgrad", 4.0 * (fT * fH + fT * fE + fH * fE), 2.0 * fT * fE * fH, GemmShape{fH, fE, fT},
               [&] { be.gemm(d_x.d(), d_dlogits.d(), d_drouter.d(), H, E, T, true, false, false); });
      // Gate (every step): experts that received no rows have exact zero weight gradients.
      bool idle_expert = false;
      for (int64_t xe = 0; xe < EL; ++xe) idle_expert = idle_expert || eoff[static_cast<size_t>(xe) + 1] == eoff[static_cast<size_t>(xe)];
      if (idle_expert) {
        d_dw1.down();
        d_dw2.down();
      }
      for (int64_t xe = 0; xe < EL; ++xe)
        if (eoff[static_cast<size_t>(xe) + 1] == eoff[static_cast<size_t>(xe)]) {
          for (int64_t i = 0; i < H * 2 * F; ++i)
            if (dw1[static_cast<size_t>(xe * H * 2 * F + i)] != 0.0f) gate_failed(comm, "a zero-token expert's FC1 weight gradient is not zero");
          for (int64_t i = 0; i < F * H; ++i)
            if (dw2[static_cast<size_t>(xe * F * H + i)] != 0.0f) gate_failed(comm, "a zero-token expert's FC2 weight gradient is not zero");
        }
      if (attn) {  // the gradient at the MoE block's input, plus the residual's, into the attention block
        d_dx.down();
        d_dxe.down();
        for (size_t i = 0; i < dh.size(); ++i) dh[i] = dy[i] + dx[i] + dxe[i];
        attn->backward(be, comm, rec, x0.data(), dh.data(), dx0.data());
        if (!checked && layer == 0) {
          for (const std::string& e : {attn->check_backward(x0.data(), dh.data(), dx0.data()), attn->check_fsdp(comm)})
            if (!e.empty()) gate_failed(comm, e);
          for (const std::string& g : attn->gates()) res.gates.push_back(g);
        }
      }
      if (!checked && layer == 0) checked = true;
    }
    comm.barrier();
    dog.disarm();
    if (rec.record) measure_ceilings();
  }
  {
    std::vector<double> all(static_cast<size_t>(2 * ranks));
    const double mine[2] = {median(peaks), median(copies)};
    comm.allgather(mine, sizeof mine, all.data());
    res.gemm_peak_flops = res.copy_bandwidth = 0;
    for (int r = 0; r < ranks; ++r)
      res.gemm_peak_flops += all[static_cast<size_t>(2 * r)] / ranks, res.copy_bandwidth += all[static_cast<size_t>(2 * r + 1)] / ranks;
    res.gemm_peak_method += "; measured on every rank at once before the timed steps and after each (" + std::to_string(peaks.size()) +
                            " times), the median per rank, the mean over the ranks";
  }
  res.timing_method = be.timing_method();  // after the steps: whether the flush buffer fitted is known now
  if (!y_first.empty()) res.gates.push_back("dropless on every step: rows received over all ranks = T x k x ranks");
  // The measured histogram over all ranks; experts without tokens were checked on their ranks.
  comm.allreduce_sum(res.expert_rows.data(), static_cast<int64_t>(res.expert_rows.size()));
  std::string idle;
  for (size_t e = 0; e < res.expert_rows.size(); ++e)
    if (res.expert_rows[e] == 0) idle += (idle.empty() ? "" : ", ") + std::to_string(e);
  if (!idle.empty())
    res.gates.push_back("experts " + idle + " got no tokens: their weight gradients are exact zeros on their ranks, every step");

  // The cost model's prediction for the same ops on this machine (its measured GEMM rate as the
  // dense peak, its measured copy bandwidth as HBM; communication at the copy bandwidth).
  Scenario cpu = s;
  GpuSpec& g = cpu.system.domain.tray.gpu;
  g.name = "this CPU (measured)";
  g.dense_bf16 = g.dense_fp8 = FlopsPerSecond(res.gemm_peak_flops);
  g.dense_mxfp8.reset();
  g.dense_nvfp4.reset();
  g.hbm_bandwidth = BytesPerSecond(res.copy_bandwidth);
  if (be.host_memory()) {  // one core per rank, Eigen's register block as the tile (as calibrate reads a run, model/io/parts.cpp)
    g.sms = 1;
    if (const auto [tm, tn] = be.gemm_tile(); tm > 0 && tn > 0)
      cpu.calibration.set(Param::gemm_tile_m, tm), cpu.calibration.set(Param::gemm_tile_n, tn);
  } else if (!res.device_json.empty()) {  // the device's own SMs, as calibrate reads the file (machine.gpu.sms), not the scenario GPU's
    const nlohmann::json dev = nlohmann::json::parse(res.device_json);
    if (dev.contains("sms") && dev.at("sms").is_number_integer() && dev.at("sms").get<int>() > 0) g.sms = dev.at("sms").get<int>();
    g.name = dev.value("name", g.name) + " (measured)";
  }
  cpu.gpus = 1;
  const Topology topo = Topology::build(cpu.system, 1);
  const Pricer pr(cpu, topo, cpu.calibration);
  // The exchanges on this machine's topology (the suite's system file), as the model prices a
  // collective of the ranks: the communicator's algorithm (the fastest at the op's bytes per rank
  // where the library chooses its own).
  std::optional<Topology> machine_topo;
  if (o.machine && ranks > 1) {
    try {
      machine_topo = Topology::build(*o.machine, ranks);
    } catch (const std::exception& e) {
      res.notes += "the exchanges are priced at the copy bandwidth: " + o.machine_file + " does not hold " + std::to_string(ranks) +
                   " ranks (" + e.what() + "); ";
    }
  }
  for (auto& [name, st] : res.ops) {
    pick_median_call(st);
    Op op;
    op.name = name;
    op.dtype = Dtype::fp32;
    op.flops = Flops(st.flops);
    op.hbm_bytes = Bytes(st.bytes);
    op.rows = st.rows;
    if (name.rfind("wait.", 0) == 0) continue;  // the ranks' skew: no op of the model
    if (is_comm_op(name)) {
      if (machine_topo) {
        const Collective c = exchange_collective(name);
        std::vector<int64_t> members(static_cast<size_t>(ranks));
        std::iota(members.begin(), members.end(), int64_t{0});
        st.collective = to_string(c);
        st.algorithm = comm.algorithm(st.collective);
        double best = std::numeric_limits<double>::infinity();
        for (const CollectiveCost& cc : collective_algorithms(c, members, *machine_topo, cpu.calibration))
          if (st.algorithm.empty() || st.algorithm == cc.algorithm) best = std::min(best, cc.time(Bytes(st.bytes)).value());
        st.predicted_s = best;
      } else {
        st.predicted_s = st.bytes * (ranks > 1 ? 2.0 : 1.0) / res.copy_bandwidth;
      }
      continue;
    }
    if (st.attention) {
      st.predicted_s = attention_seconds(st.attention_shape, st.flops, st.bytes, g, cpu.calibration).value();
      continue;
    }
    op.category = st.flops > 0 ? Category::gemm : Category::memory;
    // A grouped GEMM is priced (and written for calibrate) as the scenario's stack prices its
    // experts' kernel, so that the run's prediction is predict's.
    // The executor runs its backend's grouped GEMM (the CPU and CUDA backends: a loop of one GEMM per
    // group, executor/backend.h), priced as the stack's kernel so that the run's prediction is
    // predict's; but never Transformer Engine's host loop: a multi_stream stack's experts are written
    // and priced as a pointer-array kernel, so that the records cannot set the host's cost per group
    // (gemm_multi_stream_group_s) from a loop whose host cost is the executor's. (The loop's launches
    // then fall in the per-group GPU term a fit of these records sets.)
    st.shape.kernel = !st.shape.ragged ? GroupedKernel::contiguous
                      : s.stack.grouped_kernel == GroupedKernel::multi_stream ? GroupedKernel::ptr_array
                                                                              : s.stack.grouped_kernel;
    if (op.category == Category::gemm && st.shape.m > 0)  // the GEMM as it ran (what calibrate reads too)
      st.predicted_s = std::max(gemm_seconds(st.shape, op.dtype, st.flops, st.bytes, g, cpu.calibration).value(),
                                gemm_host_seconds(st.shape, cpu.calibration).value());
    else
      st.predicted_s = pr.compute_time(op).value();
  }
  return res;
}

}  // namespace moeperf::exec
