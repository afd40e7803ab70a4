// `moeperf run`: executes a layer of a scenario's model forward and backward on a backend (CPU:
// Eigen GEMMs and the reference kernels; CUDA: issue 7) over a communicator (MPI or loopback): the
// attention block (executor/attention_block.h; host memory only; GQA, MHA or MLA) then the MoE block; checks
// the correctness gates before any timing counts, measures every op, and writes measurements JSON
// with the cost model's prediction for the same ops beside each measured time.
//
//   RunOptions o; o.steps = 5;
//   RunResult r = run_scenario(scenario, o, *comm);    // every rank calls it
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/comm.h"
#include "model/pricing/efficiency.h"
#include "model/specs.h"

namespace moeperf::exec {

struct RunOptions {
  std::string backend = "cpu";
  int layers = 1;
  int steps = 3;
  int warmup = 1;
  double scale = 1.0;       // divide hidden, FFN sizes and tokens by this (say so in the output)
  bool moe_only = false;    // the MoE block alone (no attention block before it)
  double timeout_s = 300;   // a step that does not finish in time ends the job with a message
  std::string scenario_file;
  // This machine as a system (the suite's --write-system file): the run's exchanges are priced on
  // its topology by the collective model, and the measurements embed it (machine_json, the file's
  // text) so calibrate reads the exchanges as collective records.
  std::optional<SystemSpec> machine;
  std::string machine_file, machine_json;
  std::string out;          // measurements JSON (rank 0 writes it)
  // Fault injection for tests (MOEPERF_FAULT=RANK:STEP[:KIND]): in that step's dispatch the rank
  // exits, hangs, is killed (SIGKILL), or announces one row too many to the next rank in the
  // count exchange while sending the true rows.
  enum class Fault { none, exit, hang, kill, counts };
  int fault_rank = -1, fault_step = -1;
  Fault fault = Fault::none;
};

// A correctness gate failed: the caller ends the job on every rank (Communicator::abort).
class GateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OpStats {
  int64_t calls = 0;
  // The median call's work (pick_median_call): the routing, and with it the rows an expert GEMM
  // or an exchange moves, changes every step, so a time is written beside the work it did.
  double bytes = 0, flops = 0;            // per call
  double rows = 0;                        // row gathers (permute, regroup, un-permute): rows per call
  std::vector<double> seconds;            // one per timed call
  struct Work {
    double bytes = 0, flops = 0, rows = 0;
    GemmShape shape;
  };
  std::vector<Work> work;                 // one per timed call, beside `seconds`
  double median_s = 0;                    // the median call's time (the lower of the middle two for an even count)
  double predicted_s = 0;                 // the cost model, per call, on this machine's measured peaks
  GemmShape shape;                        // GEMMs: the problem as the cost model prices it (m = 0: not a GEMM)
  std::string collective;                 // exchanges priced on the machine file's topology: all_to_all, all_gather, reduce_scatter
  std::string algorithm;                  // the communicator's algorithm for it ("ring", "direct"), priced as that one
  bool attention = false;                 // an attention core: priced by its keys and head dim
  AttentionShape attention_shape;
};

struct Dims {
  int64_t tokens = 0, hidden = 0, ffn = 0, shared_ffn = 0, experts = 0;
  int top_k = 0, ranks = 1;
  // The attention block before the MoE block (heads = 0: not run): GQA/MHA heads of head_dim over
  // sequences of seq tokens (tokens / seq of them), causal, with a sliding window when window > 0.
  int64_t heads = 0, kv_heads = 0, head_dim = 0, seq = 0, window = 0;
  int64_t chunk = 0;  // chunked local attention (Llama 4's chunked layers): keys of the query's own chunk only
  bool rope = true;   // false: a NoPE layer (Llama 4's global layers rotate nothing; MLA always rotates its rope part)
  // MLA (DeepSeek-V3, Kimi-K2): head_dim is the Q/K dim (nope + rope), v_dim the V dim, kv_heads =
  // heads; q_lora 0 means a plain Q projection. GQA/MHA: v_dim = head_dim.
  bool mla = false;
  int64_t q_lora = 0, kv_lora = 0, rope_dim = 0, v_dim = 0;
  bool qk_norm = false;  // GQA/MHA: an RMSNorm over each head of Q and K after the projections (Qwen3, OLMoE)
  bool fsdp = false;  // the attention weights sharded over the ranks: gathered before use, gradients reduce-scattered
};

struct RunResult {
  Dims dims;
  std::map<std::string, OpStats> ops;
  std::vector<double> expert_rows;        // measured histogram: rows per expert, all ranks, all steps
  std::vector<std::string> gates;         // passed gates, in words
  double gemm_peak_flops = 0;             // this machine's measured large-GEMM rate
  double copy_bandwidth = 0;              // measured memcpy bandwidth (read + write)
  std::string gemm_peak_method;           // what gemm_peak_flops measured, in words (per backend)
  std::string timing_method;              // how each op was timed, in words (Backend::timing_method)
  std::string device_json;                // the backend's device as a JSON object ("" on the CPU)
  std::string communicator;               // "nccl" when the all-to-alls went through the device exchange, else the host communicator's name
  std::string communicator_detail;        // which exchanges went where, in words
  std::string notes;
};

// `device_exchange` (optional, backends with device memory only): the count exchange, dispatch, combine and
// their backward go through it on device buffers; the rest (gates, the shared expert's
// reduce-scatter, barriers) stays on `comm`.
RunResult run_scenario(const Scenario& s, const RunOptions& o, Communicator& comm, DeviceExchange* device_exchange = nullptr);

// The measurements JSON (what rank 0 writes with --out); "communicator" is r.communicator.
std::string measurements_json(const Scenario& s, const RunOptions& o, const RunResult& r, const Communicator& comm);

// Dry run of the 64-bit index arithmetic at a size past 2^31 (no allocation): returns the byte
// offset of the last row of the permuted buffer for `tokens` x `top_k` rows of `hidden` floats.
int64_t dry_run_last_row_offset(int64_t tokens, int top_k, int64_t hidden);

}  // namespace moeperf::exec
