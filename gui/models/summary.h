// The headline figures of a prediction, as the summary panel above the views shows them: the step
// with its band, tokens/s/GPU, TFLOPS/GPU, MFU, exposed communication, memory (fits, with its
// headroom, or short by how much), the cluster's tokens/s and the GPUs used of those bought.
//
//   for (const SummaryItem& i : summary_items(*report)) show(i.label, i.value);
#pragma once

#include <QString>
#include <QStringList>
#include <vector>

#include "model/study/predict.h"

namespace moeperf::gui {

struct SummaryItem {
  QString key;    // "step", "tokens_per_s_per_gpu", "tflops", "mfu", "exposed_comm", "memory", "cluster", "gpus"
  QString label;  // "Step"
  QString value;  // "4.768 s (4.50 – 5.04)"
  bool warn = false;  // drawn in red: memory short
};

std::vector<SummaryItem> summary_items(const StepReport& r);

// What the CLI's text report says beside the figures, as lines under them: the band's terms (the
// parts' fit spread, the end-to-end term), the profile and stack that priced the step, what the
// host spent issuing and what it costs the step (io::host_lines_text), and every
// note of the prediction (a rate no measurement set, routing simplified, EP groups across racks).
QStringList summary_notes(const StepReport& r);

}  // namespace moeperf::gui
