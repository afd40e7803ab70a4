#include "gui/widgets/screenshot.h"

#include <QSaveFile>

#include "gui/models/scenario_loader.h"
#include "gui/widgets/breakdown_view.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/scaling_view.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/topology_view.h"
#include "gui/widgets/waterfall_view.h"

namespace moeperf::gui {

QImage render_view(std::shared_ptr<const StepReport> report, const ShotOptions& opt,
                   std::shared_ptr<const Studies> studies) {
  const QSize size = opt.size;
  std::unique_ptr<QWidget> w;
  if ((opt.view == View::waterfall || opt.view == View::scaling) && !studies && report)
    studies = std::make_shared<const Studies>(build_studies(*report, opt.scale_gpus, opt.grow));
  if (opt.view == View::waterfall) {
    auto* v = new WaterfallView();
    w.reset(v);
    v->resize(size);
    v->setStudies(studies);
  } else if (opt.view == View::scaling) {
    auto* v = new ScalingView();
    w.reset(v);
    v->resize(size);
    v->setStudies(studies);
  } else if (opt.view == View::topology) {
    auto* v = new TopologyView();
    w.reset(v);
    v->resize(size);
    v->setReport(report);
  } else if (opt.view == View::compare) {
    auto* c = new CompareView();
    w.reset(c);
    c->resize(size);
    c->setReports(report, opt.other);
    if (opt.t1 > opt.t0) c->setRange(opt.t0, opt.t1);
  } else if (opt.view == View::timeline) {
    auto* t = new TimelineView();
    w.reset(t);
    t->resize(size);
    t->setReport(report);
    t->setMeasured(opt.measured);
    if (opt.t1 > opt.t0) t->setRange(opt.t0, opt.t1);
  } else {
    auto* b = new BreakdownView();
    w.reset(b);
    b->resize(size);
    b->setReport(report);
  }
  w->setAttribute(Qt::WA_DontShowOnScreen);
  w->show();
  QImage img(size, QImage::Format_RGB32);
  img.fill(Qt::white);
  w->render(&img);
  return img;
}

int screenshot(const QString& scenario, const QStringList& sets, const ShotOptions& opt, const QString& out,
               QString* error) {
  std::vector<std::string> s;
  for (const QString& x : sets) s.push_back(x.toStdString());
  const LoadResult r = load_and_predict(scenario.toStdString(), s);
  if (!r.report) {
    if (error) *error = QString::fromStdString(r.error);
    return 2;
  }
  ShotOptions o = opt;
  if (opt.view == View::compare && !o.other) {
    const LoadResult b = load_and_predict(opt.other_path.toStdString());
    if (!b.report) {
      if (error) *error = QString::fromStdString(b.error);
      return 2;
    }
    o.other = b.report;
  }
  std::shared_ptr<const Studies> studies;
  if (opt.view == View::waterfall || opt.view == View::scaling) {
    studies = std::make_shared<const Studies>(build_studies(*r.report, opt.scale_gpus, opt.grow));
    const std::string& e = opt.view == View::waterfall ? studies->waterfall_error : studies->scaling_error;
    if (!e.empty()) {  // the study rejected the input (a GPU count the mesh does not divide)
      if (error) *error = QString::fromStdString(e);
      return 2;
    }
  }
  const QImage img = render_view(r.report, o, studies);
  QSaveFile f(out);
  if (!f.open(QIODevice::WriteOnly) || !img.save(&f, "PNG") || !f.commit()) {
    if (error) *error = QStringLiteral("cannot write %1").arg(out);
    return 1;
  }
  return 0;
}

}  // namespace moeperf::gui
