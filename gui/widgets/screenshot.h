// Headless rendering of one view to a PNG (what `moeperf-gui --screenshot` does), for docs and tests.
//
//   QImage img = render_view(report, {View::breakdown, QSize(1600, 900)});
#pragma once

#include <QByteArray>
#include <QHash>
#include <QImage>
#include <QSize>
#include <QString>
#include <QStringList>
#include <memory>

#include "gui/models/study_data.h"
#include "model/study/predict.h"

namespace moeperf::gui {

enum class View { timeline, breakdown, waterfall, scaling, topology, compare };

// range: seconds shown by the timeline ({0, 0}: the whole step).
struct ShotOptions {
  View view = View::timeline;
  QSize size = QSize(1600, 900);
  double t0 = 0, t1 = 0;
  std::vector<int64_t> scale_gpus = kDefaultScaleGpus;  // the scaling view's sweep
  GrowAxis grow = GrowAxis::fsdp;
  // The compare view: the lower timeline's report (render_view) or scenario file (screenshot(),
  // loaded without the --set overrides, which apply to SCENARIO only); SCENARIO is the upper one.
  std::shared_ptr<const StepReport> other;
  QString other_path;
  QHash<QString, double> measured;  // the timeline's measured-median markers (a hardware run's)
};

// The waterfall and scaling views draw `studies` (build_studies(*report, opt.scale_gpus, opt.grow) when null).
QImage render_view(std::shared_ptr<const StepReport> report, const ShotOptions& opt = {},
                   std::shared_ptr<const Studies> studies = nullptr);

// The figures a rendered view shows, as JSON (what scripts/screenshots.sh keeps beside each PNG and
// its check compares): the scenario, step time, TFLOPS/GPU and exposed communication, plus the
// view's own numbers (waterfall bars, scaling points, breakdown seconds, lanes, topology counts),
// each rounded to 6 significant digits.
QByteArray shot_figures(const StepReport& report, const ShotOptions& opt, const Studies* studies, QSize image);

// Loads SCENARIO, renders and writes OUT (via a temporary, so a failure writes nothing); with
// `figures` non-empty, also that file (shot_figures).
// Returns 0, 2 for bad input (message in *error; for the waterfall and scaling views also a study
// the model rejects), 1 when the PNG cannot be written.
int screenshot(const QString& scenario, const QStringList& sets, const ShotOptions& opt, const QString& out,
               QString* error, const QString& figures = {});

}  // namespace moeperf::gui
