#include "model/io/report_io.h"

#include "model/workload/flops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "model/io/stacks.h"
#include "model/pricing/cost.h"
#include "model/sim/sim.h"
#include "model/workload/pipeline_layout.h"
#include "model/workload/step.h"

namespace moeperf::io {
namespace {

std::string f(double v, int prec = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}
std::string gb(Bytes b) { return f(in_gigabytes(b), 1) + " GB"; }

// Ops sorted by their share of the exposed communication, largest first (only those with some).
std::vector<const OpSummary*> exposed_ops(const StepReport& r) {
  std::vector<const OpSummary*> v;
  for (const auto& o : r.ops)
    if (o.exposed.value() > 0) v.push_back(&o);
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->exposed > b->exposed; });
  return v;
}

}  // namespace

const char* schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
    case PipelineSchedule::dualpipe: return "dualpipe";
    case PipelineSchedule::dualpipev: return "dualpipev";
    case PipelineSchedule::zb_h1: return "zbh1";
  }
  return "?";
}

// The model as loaded, in a line: what a user checks a Hugging Face config was read as. Which layers
// are MoE: "from layer k" for the usual shape, the list (shortened) for an interleaved one.
std::string model_text(const ModelSpec& m) {
  std::string t = m.name + ": " + std::to_string(m.layers) + " layers";
  if (m.is_moe()) {
    t += " (" + std::to_string(m.moe_layers()) + " MoE";
    if (m.moe_map.empty()) {
      if (m.dense_layers > 0) t += " from layer " + std::to_string(m.dense_layers);
    } else {
      std::vector<int> moe;
      for (int l = 0; l < m.layers; ++l)
        if (m.is_moe_layer(l)) moe.push_back(l);
      t += ": ";
      for (size_t i = 0; i < moe.size(); ++i) {
        if (moe.size() > 6 && i == 3) {
          t += " ... " + std::to_string(moe.back());
          break;
        }
        t += (i ? ", " : "") + std::to_string(moe[i]);
      }
    }
    t += "), " + std::to_string(m.experts) + " experts top-" + std::to_string(m.top_k);
    if (m.shared_experts > 0) t += " + " + std::to_string(m.shared_experts) + " shared";
  } else {
    t += ", dense";
  }
  t += ", hidden " + std::to_string(m.hidden) + (m.attention.kind == AttentionKind::mla ? ", MLA" : ", GQA");
  // Local attention, where a model has it: how many layers attend through a window or a chunk.
  int sliding = 0, chunked = 0;
  for (int l = 0; l < m.layers; ++l) {
    sliding += is_sliding(m, l);
    chunked += is_chunked(m, l);
  }
  if (sliding > 0) t += ", window " + std::to_string(m.attention.sliding_window) + " on " + std::to_string(sliding) + " layers";
  if (chunked > 0) t += ", chunks of " + std::to_string(m.attention.chunk_size) + " on " + std::to_string(chunked) + " layers";
  return t;
}

std::string layout_text(const Scenario& s) {
  const Parallelism& p = s.parallelism;
  std::string t = "tp " + std::to_string(p.tp) + " x cp " + std::to_string(p.cp) + " x pp " + std::to_string(p.pp);
  if (p.vpp > 1) t += " (vpp " + std::to_string(p.vpp) + ")";
  if (p.folded)
    t += " x dp " + std::to_string(p.dp) + "; experts folded: etp " + std::to_string(p.etp) + " x ep " +
         std::to_string(p.ep) + " x edp " + std::to_string(p.expert_data_parallel());
  else
    t += " x ep " + std::to_string(p.ep) + " x fsdp " + std::to_string(p.fsdp) + " x dp " + std::to_string(p.dp);
  if (p.pp > 1) t += ", schedule " + std::string(schedule_name(p.schedule));
  return t;
}

std::string stage_memory_text(const MemoryReport& m) {
  std::string t;
  const size_t n = m.hbm_by_stage.size();
  if (n < 2) return t;
  for (size_t st = 0; st < n; ++st) {
    if (n > 16 && st == 8) {
      t += " ... (" + std::to_string(n - 12) + " more: --format json)";
      st = n - 4;
    }
    t += (st == 0 ? "" : ", ") + f(m.hbm_by_stage[st].value() / 1e9, 1);
  }
  return t;
}

std::vector<std::pair<std::string, std::string>> host_lines_text(const StepReport& r) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!(r.host_busy.value() > 0) || !r.scenario) return out;
  const StackOptions& st = r.scenario->stack;
  const double step = r.step_time.value();
  auto share = [&](double v) { return f(step > 0 ? 100 * v / step : 0, 1); };
  // The library loops: what the host spent beyond its framework ops and graph launches.
  const double loops = r.host_busy.value() - r.host_ops * st.host_op_s - static_cast<double>(r.graph_launches) * st.graph_launch_s;
  std::string t = f(r.host_busy.value(), 3) + " s   (" + share(r.host_busy.value()) + " % of the step, the reported rank's program: " +
                  f(r.host_ops, 0) + " framework ops at " + f(st.host_op_s * 1e6, 1) + " us, " + std::to_string(r.graph_launches) +
                  " CUDA graph launches at " + f(st.graph_launch_s * 1e6, 1) + " us";
  if (loops > 1e-9) t += ", " + f(loops, 3) + " s of libraries' host loops";
  out.emplace_back("host issuing", t + ")");
  if (r.host_cost)
    out.emplace_back("host's cost", f(r.host_cost->value(), 3) + " s   (" + share(r.host_cost->value()) +
                                        " % of the step: the step less the same step under a host that issues every op at once)");
  return out;
}

std::vector<std::pair<std::string, std::string>> band_terms_text(const StepReport& r) {
  std::vector<std::pair<std::string, std::string>> out;
  if (r.band > 0) {
    std::string t = "+/- " + f(100 * r.band, 1) + " %: per op class its share of the step x its fit spread (";
    bool first = true;
    for (auto& [cls, v] : r.band_terms) {
      if (v < 0.0005) continue;
      t += (first ? "" : ", ") + cls + " " + f(100 * v, 1) + " %";
      first = false;
    }
    out.emplace_back("parts", t + ")");
  }
  if (const auto& e = r.end_to_end) {
    const std::string stack = e->stack.empty() ? "the built-in defaults" : "stack " + e->stack;
    const std::string ran = e->cases == 1 ? "ran " + f(e->slowest, 2) + "x"
                                          : "ran " + f(e->fastest, 2) + "x to " + f(e->slowest, 2) + "x";
    const double over = std::max(0.0, e->slowest - 1), under = std::max(0.0, 1 - e->fastest);
    std::string side = over > 0 ? "+" + f(100 * over, 0) + " %" : "";
    if (under > 0) side += (side.empty() ? "" : " / ") + ("-" + f(100 * under, 0) + " %");
    std::string t = (side.empty() ? std::string("0 %") : side) + ": ";
    if (e->own_stack)
      t += "the " + (e->cases == 1 ? std::string("published case") : std::to_string(e->cases) + " published cases") + " of " + stack +
           (e->same_config ? " as configured here " : " (none as configured here) ") + ran;
    else
      t += "no published case ran on " + stack + "; the " + std::to_string(e->cases) + " cases of every stack " + ran;
    out.emplace_back("end to end", t + " the predicted step (" + e->source + "; tests, never fitted)");
  }
  return out;
}

void write_report_text(const StepReport& r, std::ostream& out, bool per_op, int top, double train_tokens) {
  const double step = r.step_time.value();
  const Scenario& scen = *r.scenario;
  out << r.name << "\n";
  out << "  model                  " << model_text(scen.model) << "\n";
  out << "  GPUs                   " << r.gpus << " x " << scen.system.gpu().name << "; " << r.topology->domains()
      << " NVLink domain" << (r.topology->domains() > 1 ? "s (racks or nodes)" : " (rack or node)") << " used, "
      << r.topology->gpus_per_domain() << " GPUs of each domain's " << scen.system.domain.gpus() << "\n";
  out << "  layout                 " << layout_text(scen) << "\n";
  if (scen.parallelism.pp > 1) {
    const Parallelism& p = scen.parallelism;
    const auto stages = stage_layout_descriptions(scen);
    out << "  pipeline layout        " << (p.layout.empty() ? "layers split evenly" : (p.balance_layout ? "balanced " : "") + p.layout_spec) << " ("
        << virtual_stages(scen) << " virtual stages" << (pipeline_chunks(scen) > 1 ? ", " + std::to_string(pipeline_chunks(scen)) + " per stage" : "")
        << "; E embedding, m MTP, L loss)\n";
    const size_t n = stages.size();
    for (size_t st = 0; st < n; ++st) {
      if (n > 16 && st == 2) {
        out << "    ... " << n - 4 << " more stages (--format json)\n";
        st = n - 3;
        continue;
      }
      std::string line;
      for (const std::string& c : stages[st]) line += (line.empty() ? "" : " | ") + c;
      std::string label = "stage " + std::to_string(st);
      out << "    " << label << std::string(label.size() < 21 ? 21 - label.size() : 1, ' ') << line << "\n";
    }
  }
  out << "  batch per step         " << scen.batch.global_batch << " sequences x " << scen.batch.seq_len << " tokens; "
      << scen.micro_batches() << " micro-batch" << (scen.micro_batches() > 1 ? "es" : "") << " of " << scen.batch.micro_batch
      << " per data-parallel rank\n";
  out << "  step time              " << f(step, 3) << " s";
  const bool lopsided = std::abs(r.band_high - r.band_low) >= 0.005;
  if (lopsided) out << " (-" << f(100 * r.band_low, 0) << " % / +" << f(100 * r.band_high, 0) << " %)";
  else if (r.band_high > 0) out << " (+/- " << f(100 * r.band_high, 0) << " %)";
  out << (r.simulated ? "   (simulated: streams overlap, links shared)\n"
                      : "   (serial: every op back to back on one queue, no overlap; no end-to-end term)\n");
  if (r.band > 0 || r.end_to_end) {
    out << "    band                 " << f(r.step_low(), 3) << " - " << f(r.step_high(), 3) << " s";
    if (r.end_to_end) out << ": the parts' and the end-to-end term in quadrature";
    out << "\n";
  }
  for (const auto& [term, text] : band_terms_text(r)) out << "      " << term << std::string(19 - term.size(), ' ') << text << "\n";
  out << "  profile                " << r.profile << "\n";
  out << "  stack                  "
      << (r.stack.empty() ? std::string("built-in defaults (an inline stack without a base)") : r.stack);
  for (const auto& b : builtin_stacks())
    if (b.first == r.stack) out << " (stacks/" << r.stack << ".json)";
  out << "\n";
  out << "  sum of op times        " << f(r.serial_step_time.value(), 3)
      << " s   (the busiest rank's ops back to back, uncontended: no overlap and no pipeline waits)\n";
  if (scen.parallelism.pp > 1)
    out << "  pipeline bubble        " << f(r.idle.value(), 3) << " s   (" << f(step > 0 ? 100 * r.idle.value() / step : 0, 1)
        << " % of the step: the reported stage runs no kernel, waiting for other stages; per stage under rank classes)\n";
  else if (r.idle.value() > 0)
    out << "  idle                   " << f(r.idle.value(), 3) << " s   (" << f(step > 0 ? 100 * r.idle.value() / step : 0, 1)
        << " % of the step: no kernel runs)\n";
  for (const auto& [label, text] : host_lines_text(r)) out << "  " << label << std::string(23 - label.size(), ' ') << text << "\n";
  out << "  tokens/s/GPU           " << f(r.tokens_per_s_per_gpu, 0) << "   (" << f(r.tokens_per_step_per_gpu, 0)
      << " tokens per GPU per step)\n";
  out << "  TFLOPS/GPU             " << f(r.model_tflops_per_gpu, 1) << "   (MaxText count: "
      << f(r.model_flops_per_token / 1e9, 2) << " GFLOP/token)\n";
  const PowerPrice& pp = scen.system.power_price;
  if (r.energy_per_step)
    out << "  energy                 " << f(r.energy_per_step->value() / 3.6e6, 2) << " kWh per step, "
        << f(*r.kwh_per_million_tokens, 2) << " kWh per million tokens   (" << pp.power_basis << ")\n";
  if (r.usd_per_million_tokens)
    out << "  cost                   $" << f(*r.usd_per_million_tokens, 2) << " per million tokens   (" << pp.price_basis
        << ")\n";
  out << "  capacity               " << f(r.cluster_tokens_per_s / 1e6, 3) << " M tokens/s on the job's " << r.gpus
      << " GPUs; " << r.gpus_bought << " GPUs held (" << r.domains_used << " NVLink domain" << (r.domains_used > 1 ? "s" : "")
      << " of " << scen.system.domain.gpus() << ")\n";
  if (train_tokens > 0) {
    const TrainingBudget b = training_budget(r, train_tokens);
    out << "  time to train          " << f(b.seconds / 86400, 1) << " days for " << f(train_tokens / 1e12, 3) << " T tokens ("
        << f(b.seconds / 3600 * static_cast<double>(r.gpus_bought) / 1e6, 3) << " M GPU-hours held)";
    if (b.mwh) out << ", " << f(*b.mwh, 0) << " MWh";
    if (b.usd) out << ", $" << f(*b.usd / 1e6, 2) << " M";
    out << "\n";
  }
  out << "  MFU                    " << f(100 * r.mfu, 1) << " % of dense BF16 peak\n";
  out << "  communication          " << f(100 * r.comm_fraction_of_kernel_time, 1)
      << " % of accumulated kernel time; exposed " << f(100 * r.exposed_comm_fraction, 1) << " % of the step ("
      << f(r.exposed_comm.value(), 3) << " s)\n";
  const std::vector<const OpSummary*> exposed = exposed_ops(r);
  if (!exposed.empty()) {
    out << "    exposed by op:";
    const size_t shown = std::min<size_t>(exposed.size(), 5);
    for (size_t i = 0; i < shown; ++i)
      out << (i ? ", " : " ") << exposed[i]->name << " " << f(exposed[i]->exposed.value(), 3) << " s";
    if (exposed.size() > shown) out << " (+" << exposed.size() - shown << " more: --format json)";
    out << "\n";
  }
  if (r.scenario->model.is_moe())
    out << "  expert load            " << f(r.load.mean_rows, 0) << " rows per rank on average, busiest "
        << f(r.load.max_rows, 0) << " (x" << f(r.load.max_rows / r.load.mean_rows, 3) << "), padded "
        << f(r.load.max_rank_tile_rows, 0) << "\n";
  const MemoryReport& m = r.memory;
  out << "  memory per GPU         " << gb(m.hbm_total) << " of " << gb(m.hbm_capacity) << " usable HBM"
      << (m.fits_hbm ? "" : "  DOES NOT FIT: short by " + gb(m.hbm_shortfall));
  if (m.hbm_by_stage.size() > 1) out << " (pipeline stage " << m.pp_stage << ", the fullest; below: its parts)";
  out << "\n";
  // Every stage's HBM: an uneven layout or 1F1B's warm-up fills the first stages most.
  if (m.hbm_by_stage.size() > 1) out << "    per stage (GB) " << stage_memory_text(m) << "\n";
  out << "    weights " << gb(m.weights)
      << (m.weight_cache.value() > 0 ? " (+ " + gb(m.weight_cache) + " of quantized copies kept for the step)" : std::string())
      << ", gradients " << gb(m.gradients) << ", optimizer " << gb(m.optimizer_states)
      << ", FSDP buffers " << gb(m.fsdp_buffers) << "\n";
  const double mif = m.micro_batches_in_flight;
  out << "    activations " << gb(m.activations) << " (" << (mif == std::floor(mif) ? f(mif, 0) : f(mif, 2))
      << " micro-batch" << (mif != 1 ? "es" : "") << " in flight), comm buffers " << gb(m.comm_buffers)
      << ", transient " << gb(m.transient) << ", runtime " << gb(m.runtime_reserve) << "\n";
  out << "    host offload " << gb(m.offloaded_to_host) << " of " << gb(m.host_capacity)
      << (m.fits_host ? "" : "  DOES NOT FIT: short by " + gb(m.host_shortfall));
  if (m.offloaded_to_host.value() > 0) out << " (without offload these would need " << gb(m.offloaded_if_kept) << " more HBM)";
  out << "\n";
  out << "  breakdown (kernel seconds per category, summed over streams):\n";
  for (int c = 0; c < kCategoryCount; ++c) {
    const double s = r.breakdown[static_cast<size_t>(c)].value();
    if (s > 0) out << "    " << to_string(static_cast<Category>(c)) << std::string(16 - std::string(to_string(static_cast<Category>(c))).size(), ' ')
                   << f(s, 3) << " s\n";
  }
  if (r.sim && static_cast<size_t>(r.busiest_class) < r.sim->classes.size()) {
    const SimClass& q = r.sim->classes[static_cast<size_t>(r.busiest_class)];
    out << "  hardware queues        ";
    for (size_t i = 0; i < q.queues.size(); ++i) out << (i ? " | " : "") << queue_name(q, i);
    out << "\n";
  }
  if (r.graph->classes.size() > 1) {
    out << "  rank classes (who waits for whom):\n";
    for (size_t c = 0; c < r.graph->classes.size(); ++c) {
      const RankClass& rc = r.graph->classes[c];
      const SimClass& sc = r.sim->classes[c];
      out << "    " << rc.name << " (" << rc.ranks << " GPU" << (rc.ranks > 1 ? "s" : "") << "): finishes at "
          << f(sc.finish.value(), 3) << " s";
      if (const double idle = idle_time(rc, sc).value(); idle >= 0.0005) out << ", no kernel for " << f(idle, 3) << " s";
      if (sc.wait.value() > 0) out << ", its collectives waited " << f(sc.wait.value(), 3) << " s for a slower class";
      out << "\n";
    }
  }
  for (const auto& n : r.notes) out << "  note: " << n << "\n";
  if (!per_op) return;
  std::vector<const OpSummary*> v;
  for (const auto& o : r.ops) v.push_back(&o);
  std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
  const size_t rows = top > 0 ? std::min(v.size(), static_cast<size_t>(top)) : v.size();
  out << "  ops (busiest rank class" << (rows < v.size() ? ", top " + std::to_string(rows) + " of " + std::to_string(v.size()) + " by seconds" : "")
      << "):\n";
  out << "    name                          count   seconds   serial_s  exposed_s      TFLOP    GB_HBM    GB_msg\n";
  for (size_t i = 0; i < rows; ++i) {
    const OpSummary* o = v[i];
    std::string name = o->name;
    name.resize(30, ' ');
    char line[200];
    std::snprintf(line, sizeof line, "    %s %6lld %9.4f %10.4f %10.4f %10.2f %9.2f %9.2f\n", name.c_str(),
                  static_cast<long long>(o->count), o->seconds.value(), o->serial_seconds.value(), o->exposed.value(),
                  o->flops.value() / 1e12, in_gigabytes(o->hbm_bytes), in_gigabytes(o->message_bytes));
    out << line;
  }
}

std::string report_json(const StepReport& r, int indent, double train_tokens) {
  nlohmann::json j;
  j["name"] = r.name;
  j["gpus"] = r.gpus;
  j["step_time_s"] = r.step_time.value();
  j["simulated"] = r.simulated;
  j["step_time_s_low"] = r.step_low();
  j["step_time_s_high"] = r.step_high();
  j["band"] = r.band;
  j["band_terms"] = r.band_terms;
  j["band_low"] = r.band_low;
  j["band_high"] = r.band_high;
  if (const auto& e = r.end_to_end)
    j["band_end_to_end"] = {{"stack", e->stack}, {"own_stack", e->own_stack}, {"same_config", e->same_config}, {"cases", e->cases},
                            {"slowest", e->slowest}, {"fastest", e->fastest}, {"source", e->source}};
  j["profile"] = r.profile;
  j["stack"] = r.stack;
  j["serial_step_time_s"] = r.serial_step_time.value();
  j["layout"] = layout_text(*r.scenario);
  const Parallelism& p = r.scenario->parallelism;
  j["parallelism"] = {{"tp", p.tp}, {"cp", p.cp}, {"pp", p.pp}, {"vpp", p.vpp}, {"ep", p.ep}, {"fsdp", p.fsdp},
                      {"dp", p.dp}, {"schedule", schedule_name(p.schedule)}};
  if (p.folded) {
    j["parallelism"]["etp"] = p.etp;
    j["parallelism"]["edp"] = p.expert_data_parallel();
    j["parallelism"]["folded"] = true;
  }
  j["micro_batches"] = r.scenario->micro_batches();
  if (p.pp > 1)
    j["pipeline_layout"] = {{"spec", p.layout.empty() ? std::string("even") : p.layout_spec},
                            {"balanced", p.balance_layout},
                            {"virtual_stages", virtual_stages(*r.scenario)},
                            {"stages", stage_layout_descriptions(*r.scenario)}};
  j["nvlink_domains_used"] = r.topology->domains();
  j["gpus_per_domain_used"] = r.topology->gpus_per_domain();
  j["idle_s"] = r.idle.value();
  j["pipeline_bubble_s"] = p.pp > 1 ? r.idle.value() : 0.0;
  j["pipeline_bubble_fraction"] = p.pp > 1 && r.step_time.value() > 0 ? r.idle.value() / r.step_time.value() : 0.0;
  j["exposed_comm_s"] = r.exposed_comm.value();
  j["host_busy_s"] = r.host_busy.value();
  j["host_busy_fraction"] = r.step_time.value() > 0 ? r.host_busy.value() / r.step_time.value() : 0.0;
  j["host_framework_ops"] = r.host_ops;
  j["host_graph_launches"] = r.graph_launches;
  if (r.host_cost) j["host_cost_s"] = r.host_cost->value();
  if (r.energy_per_step) {
    j["energy_per_step_j"] = r.energy_per_step->value();
    j["energy_kwh_per_million_tokens"] = *r.kwh_per_million_tokens;
    j["power_basis"] = r.scenario->system.power_price.power_basis;
  }
  if (r.usd_per_million_tokens) {
    j["cost_usd_per_million_tokens"] = *r.usd_per_million_tokens;
    j["price_basis"] = r.scenario->system.power_price.price_basis;
  }
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["cluster_tokens_per_s"] = r.cluster_tokens_per_s;
  j["gpus_bought"] = r.gpus_bought;
  if (train_tokens > 0) {
    const TrainingBudget b = training_budget(r, train_tokens);
    j["train_tokens"] = train_tokens;
    j["time_to_train_s"] = b.seconds;
    j["time_to_train_days"] = b.seconds / 86400;
    if (b.mwh) j["energy_to_train_mwh"] = *b.mwh;
    if (b.usd) j["cost_to_train_usd"] = *b.usd;
  }
  j["model_flops_per_token"] = r.model_flops_per_token;
  j["flop_convention"] = "maxtext";
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["comm_fraction_of_kernel_time"] = r.comm_fraction_of_kernel_time;
  j["exposed_comm_fraction"] = r.exposed_comm_fraction;
  j["peak_memory_bytes_per_gpu"] = r.memory.hbm_total.value();
  j["hbm_capacity_bytes"] = r.memory.hbm_capacity.value();
  j["host_offload_bytes_per_gpu"] = r.memory.offloaded_to_host.value();
  j["fits_in_memory"] = r.memory.fits;
  nlohmann::json mem;
  mem["weights"] = r.memory.weights.value();
  mem["weight_cache"] = r.memory.weight_cache.value();
  mem["gradients"] = r.memory.gradients.value();
  mem["optimizer_states"] = r.memory.optimizer_states.value();
  mem["fsdp_buffers"] = r.memory.fsdp_buffers.value();
  mem["activations"] = r.memory.activations.value();
  mem["comm_buffers"] = r.memory.comm_buffers.value();
  mem["transient"] = r.memory.transient.value();
  mem["runtime_reserve"] = r.memory.runtime_reserve.value();
  mem["offloaded_to_host"] = r.memory.offloaded_to_host.value();
  mem["hbm_shortfall"] = r.memory.hbm_shortfall.value();
  mem["host_shortfall"] = r.memory.host_shortfall.value();
  mem["pp_stage"] = r.memory.pp_stage;
  mem["hbm_by_stage"] = nlohmann::json::array();
  for (const Bytes& b : r.memory.hbm_by_stage) mem["hbm_by_stage"].push_back(b.value());
  for (int c = 0; c < kTensorClassCount; ++c)
    mem["activations_by_class"][to_string(static_cast<TensorClass>(c))] = r.memory.activations_by_class[static_cast<size_t>(c)].value();
  // Not a class: the expert input rows an autograd stack keeps whatever the recompute list says
  // (activations_by_class and this sum to activations).
  mem["activations_expert_input_rows"] = r.memory.activations_expert_rows.value();
  j["memory"] = mem;
  for (int c = 0; c < kCategoryCount; ++c)
    j["breakdown"][to_string(static_cast<Category>(c))] = r.breakdown[static_cast<size_t>(c)].value();
  for (const auto& o : r.ops)
    j["ops"][o.name] = {{"count", o.count}, {"seconds", o.seconds.value()}, {"serial_seconds", o.serial_seconds.value()},
                        {"category", to_string(o.category)}, {"flops", o.flops.value()}, {"bytes", o.bytes.value()},
                        {"hbm_bytes", o.hbm_bytes.value()}, {"message_bytes", o.message_bytes.value()},
                        {"exposed_seconds", o.exposed.value()}};
  j["exposed_comm_by_op"] = nlohmann::json::array();
  for (const OpSummary* o : exposed_ops(r)) j["exposed_comm_by_op"].push_back({{"name", o->name}, {"seconds", o->exposed.value()}});
  j["expert_load"] = {{"mean_rows", r.load.mean_rows}, {"max_rows", r.load.max_rows},
                      {"max_rank_tile_rows", r.load.max_rank_tile_rows}, {"distinct_ranks", r.load.distinct_ranks}};
  j["notes"] = r.notes;
  for (size_t c = 0; c < r.graph->classes.size(); ++c)
    j["rank_classes"].push_back({{"name", r.graph->classes[c].name}, {"ranks", r.graph->classes[c].ranks},
                                 {"finish_s", r.sim->classes[c].finish.value()},
                                 {"collective_wait_s", r.sim->classes[c].wait.value()},
                                 {"idle_s", idle_time(r.graph->classes[c], r.sim->classes[c]).value()}});
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `bytes` is the op's HBM bytes (compute) or its message (communication), as before; the
// hbm_bytes and message_bytes columns say which, as the JSON's fields do.
void write_report_csv(const StepReport& r, std::ostream& out) {
  out << "name,category,count,seconds,serial_seconds,flops,bytes,hbm_bytes,message_bytes,exposed_seconds\n";
  for (const auto& o : r.ops)
    out << o.name << "," << to_string(o.category) << "," << o.count << "," << o.seconds.value() << ","
        << o.serial_seconds.value() << "," << o.flops.value() << "," << o.bytes.value() << "," << o.hbm_bytes.value() << ","
        << o.message_bytes.value() << "," << o.exposed.value() << "\n";
}

}  // namespace moeperf::io
