#include "gui/widgets/screenshot.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include "gui/models/scenario_loader.h"
#include "gui/models/timeline_data.h"
#include "gui/models/topology_data.h"
#include "model/hardware/topology.h"
#include "gui/widgets/breakdown_view.h"
#include "gui/models/compare_diff.h"
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

namespace {
double r6(double v) { return QString::number(v, 'g', 6).toDouble(); }
QJsonObject report_figures(const StepReport& r) {
  return {{QStringLiteral("scenario"), QString::fromStdString(r.name)},
          {QStringLiteral("gpus"), static_cast<double>(r.gpus)},
          {QStringLiteral("step_time_s"), r6(r.step_time.value())},
          {QStringLiteral("model_tflops_per_gpu"), r6(r.model_tflops_per_gpu)},
          {QStringLiteral("exposed_comm_fraction"), r6(r.exposed_comm_fraction)},
          {QStringLiteral("fits_in_memory"), r.memory.fits}};
}
}  // namespace

QByteArray shot_figures(const StepReport& report, const ShotOptions& opt, const Studies* studies, QSize image) {
  QJsonObject j = report_figures(report);
  const char* names[] = {"timeline", "breakdown", "waterfall", "scaling", "topology", "compare"};
  j[QStringLiteral("view")] = QString::fromUtf8(names[static_cast<int>(opt.view)]);
  j[QStringLiteral("image")] = QJsonArray{image.width(), image.height()};
  if (opt.view == View::timeline || opt.view == View::compare) {
    QJsonArray lanes;
    for (const Lane& l : build_timeline(report).lanes) lanes.append(QString::fromStdString(l.label));
    j[QStringLiteral("lanes")] = lanes;
  }
  if (opt.view == View::compare && opt.other) {
    j[QStringLiteral("other")] = report_figures(*opt.other);
    // The difference table under the timelines (compare_diff), upper against lower.
    const CompareDiff d = compare_diff(report, *opt.other, 12);
    QJsonArray fields, rows;
    for (const std::string& f : d.fields) fields.append(QString::fromStdString(f));
    for (const DiffRow& r : d.rows)
      rows.append(QJsonObject{{QStringLiteral("what"), QString::fromStdString(r.group)},
                              {QStringLiteral("name"), QString::fromStdString(r.name)},
                              {QStringLiteral("upper_s"), r6(r.upper)},
                              {QStringLiteral("lower_s"), r6(r.lower)}});
    j[QStringLiteral("differing_fields")] = fields;
    j[QStringLiteral("difference")] = rows;
  }
  if (opt.view == View::breakdown) {
    QJsonObject b;
    for (int c = 0; c < kCategoryCount; ++c)
      if (report.breakdown[static_cast<size_t>(c)].value() > 0)
        b[QString::fromUtf8(to_string(static_cast<Category>(c)))] = r6(report.breakdown[static_cast<size_t>(c)].value());
    j[QStringLiteral("breakdown_s")] = b;
  }
  if (opt.view == View::waterfall && studies) {
    QJsonArray bars;
    for (const WaterfallBar& b : studies->waterfall)
      bars.append(QJsonObject{{QStringLiteral("name"), QString::fromStdString(b.name)},
                              {QStringLiteral("changes"), QString::fromStdString(b.changes)},
                              {QStringLiteral("tflops_per_gpu"), r6(b.tflops_per_gpu)},
                              {QStringLiteral("step_time_s"), r6(b.step_time_s)},
                              {QStringLiteral("fits"), b.fits}});
    j[QStringLiteral("bars")] = bars;
  }
  if (opt.view == View::scaling && studies) {
    QJsonArray pts;
    for (const ScalingPoint& p : studies->scaling)
      pts.append(QJsonObject{{QStringLiteral("gpus"), static_cast<double>(p.gpus)},
                             {QStringLiteral("tokens_per_s_per_gpu"), r6(p.tokens_per_s_per_gpu)},
                             {QStringLiteral("efficiency"), r6(p.efficiency)},
                             {QStringLiteral("fits"), p.fits},
                             {QStringLiteral("lost"), QString::fromStdString(lost_text(p, 10))}});
    j[QStringLiteral("points")] = pts;
  }
  if (opt.view == View::topology) {
    QJsonObject counts;
    for (int k = 0; k < kVertexKinds; ++k)
      counts[QString::fromUtf8(to_string(static_cast<VertexKind>(k)))] =
          static_cast<double>(report.topology->count(static_cast<VertexKind>(k)));
    j[QStringLiteral("vertices")] = counts;
    // The links' colors: the step's mean utilization of each resource.
    QJsonObject util;
    const auto u = step_utilization(report);
    for (int k = 0; k < kResourceCount; ++k)
      util[QString::fromUtf8(to_string(static_cast<Resource>(k)))] = r6(u[static_cast<size_t>(k)]);
    j[QStringLiteral("mean_utilization")] = util;
  }
  return QJsonDocument(j).toJson(QJsonDocument::Indented);
}

int screenshot(const QString& scenario, const QStringList& sets, const ShotOptions& opt, const QString& out,
               QString* error, const QString& figures) {
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
  if (!figures.isEmpty()) {
    QSaveFile g(figures);
    if (!g.open(QIODevice::WriteOnly) || g.write(shot_figures(*r.report, o, studies.get(), img.size())) < 0 || !g.commit()) {
      if (error) *error = QStringLiteral("cannot write %1").arg(figures);
      return 1;
    }
  }
  return 0;
}

}  // namespace moeperf::gui
