// moeperf plan: the best layouts of a scenario's model, system and batch on N GPUs, with their
// predicted figures and bands, and what the runner-up loses to the best.
#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/ranks.h"
#include "model/io/plan.h"
#include "model/limits.h"
#include "model/io/report_io.h"

namespace moeperf::cli {
namespace {

struct PlanOpts {
  std::string file, objective = "tokens_per_s", tokens, format = "text", schedules = "1f1b,interleaved";
  std::vector<int64_t> vpps = {2};
  int64_t max_passes = 2048;
  std::vector<std::string> sets;
  int64_t gpus = 0, global_batch = 0;
  int top = 5, jobs = 0;
  bool no_prune = false, balance = false;
};

// 2048 -> "2,048", as the rest of the text writes counts.
std::string fmt_count(int64_t n) {
  std::string t = std::to_string(n);
  for (auto i = static_cast<std::ptrdiff_t>(t.size()) - 3; i > 0; i -= 3) t.insert(static_cast<size_t>(i), ",");
  return t;
}

int cmd_plan(const PlanOpts& o) {
  const Scenario s = load_named(o.file, o.sets);
  io::PlanOptions po;
  po.gpus = o.gpus, po.top = o.top, po.objective = o.objective, po.global_batch = o.global_batch;
  po.prune = !o.no_prune;
  po.balance = o.balance;
  po.schedules = io::parse_schedules(o.schedules);
  po.vpps = o.vpps;
  po.max_layer_passes = o.max_passes;
  if (!o.tokens.empty()) po.train_tokens = parse_token_count("--tokens", o.tokens);
  int jobs = 1;
  auto run = [&](std::vector<std::function<void()>>& work) { jobs = run_on_threads(o.jobs, work); };
  // Under moeperf-mpi each rank searches every size-th candidate; rank 0 gathers the counts and
  // each rank's best (candidate, step) pairs, ranks them and predicts the best whole.
  Ranks& rk = ranks();
  if (rk.size() > 1) {
    po.shard = rk.rank(), po.shards = rk.size();
    po.merge = [&rk](io::PlanResult& res, std::vector<std::pair<size_t, double>>& found) {
      nlohmann::json mine = {{"counts", {res.invalid, res.no_fit, res.predicted, res.failed, res.too_fine, res.bounded,
                                         res.compute_bounded, res.comm_bounded, res.schedule_bounded, res.balanced_is_even}},
                             {"found", found}};
      const std::vector<std::string> all = rk.gather(mine.dump());
      if (rk.rank() != 0) return false;
      res.invalid = res.no_fit = res.predicted = res.failed = res.too_fine = res.bounded = res.compute_bounded = res.comm_bounded = res.schedule_bounded =
          res.balanced_is_even = 0;
      found.clear();
      for (const std::string& text : all) {
        const auto j = nlohmann::json::parse(text);
        const auto c = j["counts"].get<std::vector<size_t>>();
        res.invalid += c[0], res.no_fit += c[1], res.predicted += c[2], res.failed += c[3];
        res.too_fine += c[4], res.bounded += c[5], res.compute_bounded += c[6], res.comm_bounded += c[7], res.schedule_bounded += c[8];
        res.balanced_is_even += c[9];
        for (const auto& f : j["found"]) found.emplace_back(f[0].get<size_t>(), f[1].get<double>());
      }
      return true;
    };
  }
  // Progress on stderr (rank 0's share of the candidates under MPI): a search of thousands of
  // layouts takes a minute.
  std::unique_ptr<Progress> bar;
  if (rk.rank() == 0) {
    po.progress = [&bar](size_t done, size_t total) {
      if (!bar) bar = std::make_unique<Progress>("plan", "layouts", total);
      bar->update(done, done == total);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  io::PlanResult r;
  if (agree([&] { r = io::plan(s, o.file, po, run); })) return kExitBadInput;
  if (rk.rank() != 0) return kExitOk;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string threads = workers_text(jobs);
  if (o.format == "json") {
    nlohmann::json j;
    j["gpus"] = o.gpus;
    j["global_batch"] = r.global_batch;
    j["objective"] = o.objective;
    j["schedules"] = nlohmann::json::array();
    for (PipelineSchedule x : po.schedules) j["schedules"].push_back(io::schedule_name(x));
    j["vpps"] = po.vpps;
    j["searched"] = {{"candidates", r.candidates}, {"invalid", r.invalid}, {"do_not_fit", r.no_fit}, {"too_many_passes", r.too_fine}, {"pruned_by_bound", r.bounded}, {"pruned_by_compute_bound", r.compute_bounded}, {"pruned_by_comm_bound", r.comm_bounded}, {"pruned_by_schedule_bound", r.schedule_bounded}, {"balanced_is_even", r.balanced_is_even},
                     {"predicted", r.predicted}, {"failed", r.failed}, {"seconds", secs}, {"threads", jobs}, {"processes", rk.size()}};
    j["best"] = nlohmann::json::array();
    for (const auto& e : r.best) {
      const StepReport& x = e.report;
      j["best"].push_back({{"layout", e.layout}, {"set", e.sets}, {"objective", e.objective},
                           {"step_time_s", x.step_time.value()}, {"step_time_s_low", x.step_low()},
                           {"step_time_s_high", x.step_high()},
                           {"tokens_per_s_per_gpu", x.tokens_per_s_per_gpu}, {"cluster_tokens_per_s", x.cluster_tokens_per_s},
                           {"model_tflops_per_gpu", x.model_tflops_per_gpu}, {"mfu", x.mfu},
                           {"exposed_comm_fraction", x.exposed_comm_fraction},
                           {"peak_memory_bytes_per_gpu", x.memory.hbm_total.value()}, {"gpus_bought", x.gpus_bought}});
    }
    nlohmann::json loss = nlohmann::json::object();
    for (const auto& [k, v] : r.runner_up_loss) loss[k] = v;
    j["runner_up_loss_s"] = loss;
    if (r.own)
      j["scenario_layout"] = {{"layout", io::layout_text(*r.own->scenario)}, {"step_time_s", r.own->step_time.value()},
                              {"tokens_per_s_per_gpu", r.own->tokens_per_s_per_gpu},
                              {"model_tflops_per_gpu", r.own->model_tflops_per_gpu},
                              {"fits_in_memory", r.own->memory.fits}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("plan: %s on %lld GPUs (global batch %lld sequences), by %s\n", s.model.name.c_str(), static_cast<long long>(o.gpus),
              static_cast<long long>(r.global_batch), o.objective.c_str());
  std::printf("  searched %zu layouts in %.1f s on %s: %zu invalid (the loader's layout rules), %zu with over %s "
              "micro-batch x layer passes left out, %zu do not fit in memory (checked before pricing), %zu pruned by their FLOP "
              "bound, %zu by their priced compute ops, %zu by a collective queue, %zu by their uncontended schedule, %zu "
              "predicted%s%s\n",
              r.candidates, secs, threads.c_str(), r.invalid, r.too_fine, fmt_count(o.max_passes).c_str(), r.no_fit, r.bounded, r.compute_bounded, r.comm_bounded,
              r.schedule_bounded, r.predicted,
              r.failed ? (", " + std::to_string(r.failed) + " failed").c_str() : "",
              r.balanced_is_even ? (", " + std::to_string(r.balanced_is_even) + " balanced splits that were the even one (a candidate of its own)").c_str() : "");
  int rank = 0;
  for (const auto& e : r.best) {
    const StepReport& x = e.report;
    std::printf("  %d. %s\n", ++rank, e.layout.c_str());
    std::printf("     step %.3f s (%.3f - %.3f), %.0f tokens/s/GPU, %.1f TFLOPS/GPU, MFU %.1f %%, exposed comm %.1f %%, %.1f GB/GPU",
                x.step_time.value(), x.step_low(), x.step_high(), x.tokens_per_s_per_gpu,
                x.model_tflops_per_gpu, 100 * x.mfu, 100 * x.exposed_comm_fraction, x.memory.hbm_total.value() / 1e9);
    if (o.objective == "time_to_train") std::printf(", %.1f days", e.objective);
    if (o.objective == "cost") std::printf(", $%.2f per million tokens", e.objective);
    std::printf("\n");
  }
  if (r.best.size() > 1 && !r.runner_up_loss.empty()) {
    std::printf("  the runner-up loses %.3f s per step to the best:", r.best[1].report.step_time.value() - r.best[0].report.step_time.value());
    // The four largest terms by size, and what the others add up to: the line sums to the difference.
    int n = 0;
    double rest = 0;
    for (const auto& [k, v] : r.runner_up_loss) {
      if (std::abs(v) >= 0.0005 && n < 4) std::printf("%s %s %+.3f s", n++ > 0 ? "," : "", k.c_str(), v);
      else rest += v;
    }
    if (std::abs(rest) >= 0.0005) std::printf(", others %+.3f s", rest);
    std::printf("\n");
  }
  if (r.own) {
    const StepReport& x = *r.own;
    const double gain = x.step_time.value() / r.best.front().report.step_time.value() - 1;
    std::printf("  the scenario's own layout (%s): step %.3f s, %.0f tokens/s/GPU%s; %s\n", io::layout_text(*x.scenario).c_str(),
                x.step_time.value(), x.tokens_per_s_per_gpu, x.memory.fits ? "" : ", does not fit in memory",
                gain > 1e-9 ? ("the best is " + fmt(100 * gain, 1) + " % faster").c_str() : "no layout found is faster");
  }
  std::printf("  predict the best: moeperf predict %s", o.file.c_str());
  for (const auto& x : o.sets) std::printf(" --set '%s'", x.c_str());
  for (const auto& x : r.best.front().sets) std::printf(" --set '%s'", x.c_str());
  std::printf("\n");
  return kExitOk;
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOpts>();
  auto* sub = app.add_subcommand("plan", "The best layouts (TP, CP, PP, VPP, EP, ETP, FSDP/DP, micro-batch, recompute) of a scenario on N GPUs");
  sub->add_option("SCENARIO", o->file, "scenario file (its model, system, batch per GPU, precision and stack)")->required();
  sub->add_option("--gpus", o->gpus, "GPUs to plan for")->required()->check(gpu_count());
  sub->add_option("--top", o->top, "layouts shown")->check(whole_at_least_one("a count"));
  sub->add_option("--objective", o->objective, "tokens_per_s, time_to_train (with --tokens) or cost (a price in the system file)")
      ->check(CLI::IsMember({"tokens_per_s", "time_to_train", "cost"}));
  sub->add_option("--tokens", o->tokens, "token budget for time_to_train, e.g. 15T");
  sub->add_option("--global-batch", o->global_batch, "sequences per step (default: the scenario's per GPU x --gpus)")
      ->check(whole_in(1, limits::kGlobalBatch, "a sequence count"));
  sub->add_option("--set", o->sets, "override a scenario field first: PATH=VALUE");
  sub->add_option("--jobs", o->jobs, "threads (default: every core)")->check(whole_at_least_one("a thread count"));
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  sub->add_flag("--balance", o->balance,
                "each pipelined layout with its stages balanced too (parallelism.layout \"balanced\"), beside its even "
                "split; one lowering more per candidate");
  sub->add_option("--schedules", o->schedules,
                  "pipeline schedules searched for pp > 1, comma-separated: 1f1b, interleaved (vpp 2), zbh1, dualpipe, "
                  "dualpipev, or all (default 1f1b,interleaved)");
  sub->add_option("--vpp", o->vpps, "virtual stages per GPU tried under the interleaved schedule, comma-separated (default 2)")
      ->delimiter(',')
      ->check(whole_at_least(2, "a virtual stage count"));
  sub->add_option("--max-passes", o->max_passes,
                  "leave out layouts with more micro-batch x layer passes per step (default 2048; slow to simulate)")
      ->check(whole_at_least_one("a pass count"));
  sub->add_flag("--no-prune", o->no_prune, "simulate every valid layout that fits (slow; checks that the bounds lose nothing)");
  return {sub, [o] { return cmd_plan(*o); }};
}

}  // namespace moeperf::cli
