// A sweep over one scenario file: the points (the product of --vary axes, crossed with the points
// of a --grid file), derive rules that keep a layout consistent at each point
// ("parallelism.fsdp=gpus/(ep*tp*pp*dp)"), and one row per point: its figures, or why it is
// infeasible (the loader's message: a layout that does not divide; or memory that does not fit).
// Rows are independent, so any number of threads may run them; their text depends only on the
// point, so the output is the same bytes whatever the order they ran in.
//
//   SweepSpec sp = {.scenario = "examples/deepseek-v3/gb300-optimized.json"};
//   sp.axes.push_back(parse_vary("parallelism.ep=8,16,32"));
//   sp.derive.push_back(parse_derive("parallelism.fsdp=gpus/(ep*tp*pp*dp)"));
//   for (size_t i = 0; i < sweep_size(sp); ++i) std::cout << csv_row(run_point(sp, i));
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "model/io/load.h"

namespace moeperf::io {

struct SweepAxis {
  std::string path;                 // dotted, as --set
  std::vector<std::string> values;  // each as --set takes it (JSON text or a bare string)
};
struct DeriveRule {
  std::string path;  // the field it sets
  std::string expr;  // + - * / ( ), numbers, field names: gpus, tp, cp, pp, vpp, ep, etp, fsdp, dp,
                     // micro_batch, global_batch, seq_len, or any dotted path of the scenario
};
struct SweepSpec {
  std::string scenario;
  std::vector<Override> sets;                  // fixed overrides (--set), applied first
  std::vector<SweepAxis> axes;                 // the product, the last axis varying fastest
  std::vector<std::vector<Override>> grid;     // irregular points (--grid), each crossed with the axes
  std::vector<DeriveRule> derive;              // evaluated in order at every point, after its values
  double train_tokens = 0;                     // > 0: a time-to-train column for this budget
};

// "PATH=V1,V2,..." or a range "PATH=A..B*F" (geometric, factor F > 1) or "PATH=A..B+S" (step S > 0),
// both inclusive of B when reached. Throws SpecError naming the argument.
SweepAxis parse_vary(const std::string& arg);
DeriveRule parse_derive(const std::string& arg);
// {"kind": "sweep_grid", "points": [{"parallelism.ep": 8, "parallelism.fsdp": 16}, ...]}
std::vector<std::vector<Override>> load_sweep_grid(const std::string& path);

size_t sweep_size(const SweepSpec& sp);
// The overrides of point i (grid point, then axis values), before derive rules.
std::vector<Override> sweep_point(const SweepSpec& sp, size_t i);

struct SweepRow {
  size_t index = 0;
  std::vector<Override> point;    // the varied values
  std::vector<Override> derived;  // what the derive rules set
  std::string status;             // "ok", "infeasible" (bad layout, or memory short) or "failed"
  std::string reason;             // why, when not ok
  bool predicted = false;         // the figures below hold
  double step_time_s = 0, step_time_low_s = 0, step_time_high_s = 0;
  double tokens_per_s_per_gpu = 0, model_tflops_per_gpu = 0, mfu = 0, exposed_comm_fraction = 0;
  double peak_memory_gb = 0, hbm_capacity_gb = 0;
  double cluster_tokens_per_s = 0, time_to_train_days = 0;
  // With a token budget: the GPU-hours of the whole NVLink domains held for it (gpus_bought x the
  // time to train), and its cost when the system file gives a price per GPU-hour (else empty).
  double gpu_hours_held = 0;
  std::optional<double> cost_to_train_usd;
  int64_t gpus_bought = 0;
};
SweepRow run_point(const SweepSpec& sp, size_t i);
// Before any point runs: what fails every point alike is bad input of the sweep itself, thrown
// (exit 2) rather than written as a row per point with one reason: the base file unreadable or
// malformed, an unknown key (a misspelt --set, --vary or --derive path), a top-level field of the
// scenario missing. Found by loading the first point; its other errors (a layout rule, a value)
// are left to its row.
void check_sweep(const SweepSpec& sp);

// Output: CSV (a header, then a line per row) or JSON Lines. Numbers are printed with fixed
// precision so the bytes depend on the row only.
std::string sweep_csv_header(const SweepSpec& sp);
std::string sweep_csv_row(const SweepSpec& sp, const SweepRow& r);
// How point i's CSV line starts (its index and values): --resume checks a file's lines with it.
std::string sweep_csv_key(const SweepSpec& sp, size_t i);
std::string sweep_jsonl_row(const SweepRow& r);

}  // namespace moeperf::io
