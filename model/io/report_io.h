// StepReport as text, JSON (the keys of the README's CLI section) and CSV (one row per op).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "model/study/predict.h"

namespace moeperf::io {

// `top` > 0 limits the op table to the ops with the most kernel seconds; `train_tokens` > 0 adds the
// time (energy, cost) to train that many tokens.
void write_report_text(const StepReport& r, std::ostream& out, bool per_op = true, int top = 0, double train_tokens = 0);
// "tp 1 x cp 1 x pp 16 x ep 64 x fsdp 1 x dp 2, schedule dualpipe"
std::string layout_text(const Scenario& s);
// A schedule's name as scenario files write it ("1f1b", "interleaved", "dualpipe", "dualpipev", "zbh1").
const char* schedule_name(PipelineSchedule s);
// The band's terms as the text report prints them: {"parts", "+/- 4.8 %: per op class ..."},
// {"end to end", "+34 %: the published case of stack ... ran 1.34x the predicted step (...)"}.
std::vector<std::pair<std::string, std::string>> band_terms_text(const StepReport& r);
// What the host spent issuing the reported rank's program and, when predict's second simulation ran
// (StepReport::host_cost), what that costs the step, as the text report prints them:
// {"host issuing", "1.730 s   (24.9 % of the step, ...)"}, {"host's cost", "0.016 s   (...)"}.
// Empty when the host spent nothing (a stack whose host runs ahead, or --serial).
std::vector<std::pair<std::string, std::string>> host_lines_text(const StepReport& r);
// Every pipeline stage's HBM in GB, "112.1, 108.3, ..." (the middle elided past 16 stages); empty
// without pipeline parallelism.
std::string stage_memory_text(const MemoryReport& m);
std::string report_json(const StepReport& r, int indent = 2, double train_tokens = 0);
void write_report_csv(const StepReport& r, std::ostream& out);

}  // namespace moeperf::io
