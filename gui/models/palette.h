// One color per Category, and one for exposed communication (running while no compute runs),
// distinct from every category color. Overlapped communication keeps its category's color.
#pragma once

#include <QColor>

#include "model/workload/step.h"

namespace moeperf::gui {

QColor category_color(Category c);
QColor exposed_comm_color();
QColor span_color(Category c, bool exposed);
// The measured-median marker of a hardware run drawn over the timeline (pure black).
QColor measured_color();
// Study charts (waterfall, scaling): the main series, and a result that does not fit memory.
QColor series_color();
QColor no_fit_color();

}  // namespace moeperf::gui
