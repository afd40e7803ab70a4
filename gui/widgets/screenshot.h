// Headless rendering of one view to a PNG (what `moeperf-gui --screenshot` does), for docs and tests.
//
//   QImage img = render_view(report, {View::breakdown, QSize(1600, 900)});
#pragma once

#include <QImage>
#include <QSize>
#include <QString>
#include <QStringList>
#include <memory>

#include "model/predict.h"

namespace moeperf::gui {

enum class View { timeline, breakdown };

// range: seconds shown by the timeline ({0, 0}: the whole step).
struct ShotOptions {
  View view = View::timeline;
  QSize size = QSize(1600, 900);
  double t0 = 0, t1 = 0;
};

QImage render_view(std::shared_ptr<const StepReport> report, const ShotOptions& opt = {});

// Loads SCENARIO, renders and writes OUT (via a temporary, so a failure writes nothing).
// Returns 0, 2 for bad input (message in *error), 1 when the PNG cannot be written.
int screenshot(const QString& scenario, const QStringList& sets, const ShotOptions& opt, const QString& out,
               QString* error);

}  // namespace moeperf::gui
