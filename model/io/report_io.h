// StepReport as text, JSON (keys of the architecture doc's CLI contract) and CSV (one row per op).
#pragma once

#include <ostream>
#include <string>

#include "model/predict.h"

namespace moeperf::io {

void write_report_text(const StepReport& r, std::ostream& out, bool per_op = true);
std::string report_json(const StepReport& r, int indent = 2);
void write_report_csv(const StepReport& r, std::ostream& out);

}  // namespace moeperf::io
