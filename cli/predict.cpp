// moeperf predict: one training step predicted: time, throughput, memory, bubble, exposed communication by op.
#include "cli/commands.h"

#include <iostream>
#include <sstream>
#include "model/io/report_io.h"
#include "model/io/trace.h"
#include "model/study/predict.h"

namespace moeperf::cli {
namespace {

int cmd_predict(const std::string& file, const std::vector<std::string>& sets, const std::string& format, bool serial,
                const std::string& trace, int top, const std::string& tokens_arg) {
  const double tokens = tokens_arg.empty() ? 0 : parse_token_count("--tokens", tokens_arg);
  check_output_path("--trace", trace, {file});
  const Scenario s = load_named(file, sets);
  PredictOptions opt;
  opt.simulate = !serial;
  StepReport r = predict(s, s.calibration, opt);
  add_host_cost(r, s.calibration);  // what the host costs the step: a second simulation, where it spent anything
  if (!trace.empty()) {
    std::ostringstream t;
    io::write_chrome_trace(r, t);
    write_atomically(trace, t.str());
  }
  if (format == "json") {
    std::cout << io::report_json(r, 2, tokens) << "\n";
  } else if (format == "csv") {
    io::write_report_csv(r, std::cout);
  } else {
    io::write_report_text(r, std::cout, true, top, tokens);
  }
  return kExitOk;
}

}  // namespace

Command add_predict(CLI::App& app) {
  struct Opts {
    std::string file, format = "text", trace, tokens;
    std::vector<std::string> sets;
    bool serial = false;
    int top = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("predict", "Predict one training step: time, tokens/s/GPU, TFLOPS/GPU, memory, per-op breakdown");
  sub->add_option("SCENARIO", o->file, "scenario file, e.g. examples/deepseek-v3/gb300-optimized.json")->required();
  sub->add_option("--set", o->sets, "override a scenario field: PATH=VALUE (repeatable), e.g. parallelism.ep=16");
  sub->add_option("--format", o->format, "text, json or csv")->check(CLI::IsMember({"text", "json", "csv"}));
  sub->add_flag("--serial", o->serial, "the sum of op times only: every op back to back on one queue, no overlap, no pipeline waits");
  sub->add_option("--trace", o->trace, "write the simulated step as Chrome-trace JSON (Perfetto, HTA)");
  sub->add_option("--top", o->top, "text: show only the N ops with the most kernel seconds (default: all)")
      ->check(whole_at_least_one("an op count"));
  sub->add_option("--tokens", o->tokens, "a token budget (15T, 300B, 2.5e12): adds the time, energy and cost to train it");
  return {sub, [o] { return cmd_predict(o->file, o->sets, o->format, o->serial, o->trace, o->top, o->tokens); }};
}

}  // namespace moeperf::cli
