// The measurements JSON of `moeperf run --out`: per op calls, bytes, FLOPs, min/median/max seconds
// and the cost model's prediction on this machine; machine, revision, date, histogram, gates.
#include "executor/run.h"

#include "executor/run_parts.h"

namespace moeperf::exec {

using namespace detail;

std::string measurements_json(const Scenario& s, const RunOptions& o, const RunResult& r, const Communicator& comm) {
  nlohmann::json j;
  j["kind"] = "measurements";
  j["scenario"] = {{"name", s.name}, {"file", o.scenario_file}};
  j["backend"] = o.backend;
  j["communicator"] = r.communicator.empty() ? comm.name() : r.communicator;
  j["communicator_detail"] = r.communicator_detail;
  j["ranks"] = comm.size();
  j["dims"] = {{"tokens_per_rank", r.dims.tokens}, {"hidden", r.dims.hidden}, {"expert_ffn", r.dims.ffn},
               {"shared_ffn", r.dims.shared_ffn}, {"experts", r.dims.experts}, {"top_k", r.dims.top_k}, {"scale", o.scale}};
  if (r.dims.heads > 0)
    j["dims"]["attention"] = {{"type", r.dims.mla ? "mla" : "gqa"}, {"heads", r.dims.heads}, {"kv_heads", r.dims.kv_heads},
                              {"head_dim", r.dims.head_dim}, {"v_head_dim", r.dims.v_dim}, {"seq", r.dims.seq}, {"window", r.dims.window}, {"chunk", r.dims.chunk},
                              {"causal", true}, {"qk_norm", r.dims.qk_norm}, {"fsdp", r.dims.fsdp}};
  if (r.dims.mla)
    j["dims"]["attention"].update({{"q_lora_rank", r.dims.q_lora}, {"kv_lora_rank", r.dims.kv_lora}, {"qk_rope_head_dim", r.dims.rope_dim}});
  j["steps"] = o.steps;
  j["warmup"] = o.warmup;
  j["layers"] = o.layers;
  std::string cpu_model = "unknown";
  if (std::ifstream in("/proc/cpuinfo"); in)
    for (std::string line; std::getline(in, line);)
      if (line.rfind("model name", 0) == 0) {
        cpu_model = line.substr(line.find(':') + 2);
        break;
      }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["machine"] = {{"cpu", cpu_model}, {"cores", std::thread::hardware_concurrency()}, {"host", host},
                  {"gemm_peak_flops_measured", r.gemm_peak_flops}, {"gemm_peak_method", r.gemm_peak_method},
                  {"timing_method", r.timing_method},
                  {"copy_bandwidth_measured", r.copy_bandwidth}};
  if (!r.device_json.empty()) j["machine"]["gpu"] = nlohmann::json::parse(r.device_json);
  j["git_revision"] = MOEPERF_GIT_REVISION;
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["date"] = date;
  for (const auto& [name, st] : r.ops) {
    std::vector<double> v = st.seconds;
    std::sort(v.begin(), v.end());
    const double med = st.median_s;  // the median call's, whose work bytes/flops/shape are
    const char* kind = name.rfind("wait.", 0) == 0 ? "wait"
                       : is_comm_op(name)         ? "communication"
                       : st.attention             ? "attention"
                       : st.flops > 0             ? "gemm"
                                                  : "memory";
    j["ops"][name] = {{"kind", kind},
                      {"calls", st.calls}, {"bytes_per_call", st.bytes}, {"flops_per_call", st.flops},
                      {"min_s", v.empty() ? 0 : v.front()}, {"median_s", med}, {"max_s", v.empty() ? 0 : v.back()},
                      {"predicted_s", st.predicted_s}};
    if (st.shape.m > 0)
      j["ops"][name]["shape"] = {{"m", st.shape.m}, {"n", st.shape.n}, {"k", st.shape.k}, {"groups", st.shape.groups},
                                 {"ragged", st.shape.ragged},
                                 {"kernel", st.shape.kernel == GroupedKernel::ptr_array    ? "ptr_array"
                                            : st.shape.kernel == GroupedKernel::multi_stream ? "multi_stream"
                                                                                             : "contiguous"}};
    if (st.rows > 0) j["ops"][name]["rows_per_call"] = st.rows;
    if (!st.collective.empty()) j["ops"][name]["collective"] = st.collective, j["ops"][name]["group"] = comm.size();
    if (!st.algorithm.empty()) j["ops"][name]["algorithm"] = st.algorithm;
    if (st.attention)  // as the cost model prices it: mean keys per query, mean head dim, direction
      j["ops"][name]["attention"] = {{"keys", st.attention_shape.keys}, {"head_dim", st.attention_shape.head_dim},
                                     {"backward", st.attention_shape.backward}, {"masked_edges", st.attention_shape.masked_edges},
                                     {"bwd_work", st.attention_shape.bwd_work}};
    if (st.flops > 0 && med > 0) j["ops"][name]["achieved_flops"] = st.flops / med, j["ops"][name]["fraction_of_measured_peak"] = st.flops / med / r.gemm_peak_flops;
  }
  if (!o.machine_json.empty()) {  // the machine the exchanges were priced on, so the file stands alone
    j["system_file"] = o.machine_file;
    j["system"] = nlohmann::json::parse(o.machine_json);
  }
  j["expert_rows_histogram"] = r.expert_rows;
  j["gates_passed"] = r.gates;
  j["notes"] = r.notes;
  return j.dump(2);
}


}  // namespace moeperf::exec
