// The widgets offscreen: the timeline screenshot checked by pixels against the model's timings,
// the headless screenshot path, the window keeping its scenario when a malformed one is opened,
// the scenario dock's re-validation and save, File > Export, and Run on hardware (the CLI, CPU).
#include <QApplication>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QLineSeries>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QSpinBox>
#include <QTabWidget>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <QFileInfo>
#include <QItemSelectionModel>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMessageBox>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QWheelEvent>

#include "gui/models/palette.h"
#include "gui/models/scenario_loader.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/screenshot.h"
#include "gui/widgets/scaling_view.h"
#include "gui/widgets/scenario_panel.h"
#include "gui/widgets/plan_view.h"
#include "gui/widgets/study_view.h"
#include "gui/widgets/summary_panel.h"
#include "gui/models/summary.h"
#include "model/io/plan.h"
#include "model/io/sweep.h"
#include <QStandardItemModel>
#include "model/io/stacks.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/topology_view.h"
#include "gui/widgets/waterfall_view.h"
#include "tests/model/io/trace_fixtures.h"

using namespace moeperf;
using namespace moeperf::gui;

namespace {

const QString kDir = QStringLiteral(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/");
const QSize kShot(1600, 900);

std::shared_ptr<const StepReport> load(const QString& name) {
  const LoadResult r = load_and_predict((kDir + name).toStdString());
  if (!r.report) qFatal("%s", r.error.c_str());
  return r.report;
}

struct Shot {
  std::unique_ptr<TimelineView> view;
  QImage image;
};

Shot shoot(std::shared_ptr<const StepReport> r) {
  Shot s{std::make_unique<TimelineView>(), QImage(kShot, QImage::Format_RGB32)};
  s.view->resize(kShot);
  s.view->setReport(std::move(r));
  s.image.fill(Qt::white);
  s.view->render(&s.image);
  return s;
}

// Pixel columns of the plot where some lane of `rank_class` shows `color` (the legend excluded).
// Columns, not area: exposure is a property of time, and a scenario with more communication queues
// paints the same exposed instant once per queue; columns / plot width ~ exposed time / step time.
int64_t columns_with(const Shot& s, int rank_class, QColor color) {
  const QRgb want = color.rgb();
  std::vector<bool> hit(static_cast<size_t>(s.image.width()), false);
  for (size_t l = 0; l < s.view->timeline().lanes.size(); ++l) {
    if (s.view->timeline().lanes[l].rank_class != rank_class) continue;
    const QRect r = s.view->laneRect(static_cast<int>(l)).intersected(s.image.rect());
    for (int y = r.top(); y <= r.bottom(); ++y)
      for (int x = r.left(); x <= r.right(); ++x)
        if (s.image.pixel(x, y) == want) hit[static_cast<size_t>(x)] = true;
  }
  return std::count(hit.begin(), hit.end(), true);
}

int compute_lane(const TimelineView& v, int rank_class) {
  const auto& lanes = v.timeline().lanes;
  for (size_t i = 0; i < lanes.size(); ++i)
    if (lanes[i].rank_class == rank_class && lanes[i].stream == Stream::compute) return static_cast<int>(i);
  return -1;
}

// A GEMM of the busiest class at least `min_px` wide on the screenshot, the widest one.
int wide_gemm(const StepReport& r, const TimelineView& v) {
  const auto c = static_cast<size_t>(r.busiest_class);
  int best = -1;
  double best_d = 0;
  for (size_t i = 0; i < r.graph->classes[c].ops.size(); ++i) {
    const double d = (r.sim->classes[c].ops[i].end - r.sim->classes[c].ops[i].start).value();
    if (r.graph->classes[c].ops[i].category == Category::gemm && d > best_d) best = static_cast<int>(i), best_d = d;
  }
  return v.timeGeometry().time_to_x(best_d) - v.timeGeometry().time_to_x(0) >= 3 ? best : -1;
}

// The column of a result table whose header reads `name`, or -1.
int column_named(const QStandardItemModel& m, const QString& name) {
  for (int c = 0; c < m.columnCount(); ++c)
    if (m.horizontalHeaderItem(c)->text() == name) return c;
  return -1;
}

}  // namespace

class TimelineShotTest : public QObject {
  Q_OBJECT
 private slots:
  void legendFitsAtScreenshotWidth() {
    // The README's 1600 px screenshots: the summary row (scenario, GPUs, step, exposed) and the
    // swatch row each fit the width, so nothing is elided; the summary row shows the step time.
    for (const QString& name : {QStringLiteral("gb300-optimized.json"), QStringLiteral("h800-dualpipe.json")}) {
      Shot s = shoot(load(name));
      const QFontMetrics fm(s.view->font());
      const QString text = s.view->summaryText();
      QVERIFY(text.contains(QStringLiteral(" · step ")));
      // The band: the fitted profile's, widened on the slow side by the published cases of its stack.
      QVERIFY2(text.contains(QStringLiteral(" ± ")) || text.contains(QStringLiteral(" / +")), qPrintable(text));
      QVERIFY2(fm.horizontalAdvance(text) <= kShot.width() - 16, qPrintable(text));
      QVERIFY2(s.view->legendItemsWidth() <= kShot.width() - 16, qPrintable(QString::number(s.view->legendItemsWidth())));
      // The summary row holds dark text pixels as far right as its text reaches.
      const int row_top = kShot.height() - TimelineView::legendHeight();
      int rightmost = 0;
      for (int y = row_top; y < row_top + 26; ++y)
        for (int x = 0; x < kShot.width(); ++x)
          if (qGray(s.image.pixel(x, y)) < 100) rightmost = std::max(rightmost, x);
      QVERIFY2(rightmost >= 8 + fm.horizontalAdvance(text) - 12, qPrintable(QString::number(rightmost)));
    }
  }
  void measuredMarkerOverMeasuredOp() {
    const auto r = load(QStringLiteral("gb300-optimized.json"));
    Shot s = shoot(r);
    const int lane = compute_lane(*s.view, r->busiest_class);
    const int op = wide_gemm(*r, *s.view);
    QVERIFY(lane >= 0 && op >= 0);
    const QRect row = s.view->laneRect(lane);
    auto marker_pixels = [&](const QImage& img, QRect area) {
      int n = 0;
      area = area.intersected(img.rect());
      for (int y = area.top(); y <= area.bottom(); ++y)
        for (int x = area.left(); x <= area.right(); ++x) n += img.pixel(x, y) == measured_color().rgb();
      return n;
    };
    QCOMPARE(marker_pixels(s.image, row), 0);  // no run yet: no marker
    const auto c = static_cast<size_t>(r->busiest_class);
    const OpTiming& t = r->sim->classes[c].ops[static_cast<size_t>(op)];
    const double median = 0.5 * (t.end - t.start).value();
    s.view->setMeasured({{QString::fromStdString(r->graph->classes[c].ops[static_cast<size_t>(op)].name), median}});
    QVERIFY(!s.view->measuredMarks().empty());
    s.image.fill(Qt::white);
    s.view->render(&s.image);
    // The tick where the measurement ends, inside the op's (GEMM-colored) predicted span.
    const int x = s.view->xForTime(t.start.value() + median);
    QVERIFY(x > s.view->xForTime(t.start.value()) && x < s.view->xForTime(t.end.value()));
    QVERIFY2(marker_pixels(s.image, QRect(x - 2, row.top(), 5, row.height())) >= row.height() / 2,
             "no measured tick at start + median on the compute lane");
    s.view->setMeasured({});  // cleared: no marker
    s.image.fill(Qt::white);
    s.view->render(&s.image);
    QCOMPARE(marker_pixels(s.image, row), 0);
  }
  void gemmColorWhereGemmsRun() {
    const auto r = load(QStringLiteral("gb300-optimized.json"));
    const Shot s = shoot(r);
    const int lane = compute_lane(*s.view, r->busiest_class);
    QVERIFY(lane >= 0);
    const QRect row = s.view->laneRect(lane);
    const auto c = static_cast<size_t>(r->busiest_class);
    const RankClass& rc = r->graph->classes[c];
    const SimClass& sc = r->sim->classes[c];
    // Every GEMM at least 3 px wide is painted in the GEMM color at its middle, on the compute row.
    int checked = 0;
    for (size_t i = 0; i < rc.ops.size(); ++i) {
      if (rc.ops[i].category != Category::gemm || sc.ops[i].queue != s.view->timeline().lanes[static_cast<size_t>(lane)].queue)
        continue;
      const double a = sc.ops[i].start.value(), b = sc.ops[i].end.value();
      if (s.view->timeGeometry().time_to_x(b) - s.view->timeGeometry().time_to_x(a) < 3) continue;
      const int x = s.view->xForTime((a + b) / 2);
      QCOMPARE(QColor(s.image.pixel(x, row.center().y())), category_color(Category::gemm));
      ++checked;
    }
    QVERIFY2(checked > 0, "no GEMM wide enough to check at 1600 px");
    QVERIFY(wide_gemm(*r, *s.view) >= 0);
  }
  void exposedCommunicationFewerPixelsWhenOptimized() {
    const auto base = load(QStringLiteral("gb300-baseline.json"));
    const auto opt = load(QStringLiteral("gb300-optimized.json"));
    // What the model says: less exposed communication in the optimized step (seconds; its share of
    // a shorter step need not be smaller), and the pixels follow the model's shares.
    QVERIFY(base->exposed_comm.value() > opt->exposed_comm.value());
    const Shot sb = shoot(base), so = shoot(opt);
    const int64_t n_base = columns_with(sb, base->busiest_class, exposed_comm_color());
    const int64_t n_opt = columns_with(so, opt->busiest_class, exposed_comm_color());
    const double w = sb.view->timeGeometry().width;
    qInfo("exposed-communication columns: baseline %lld (model: %.0f), optimized %lld (model: %.0f)",
          static_cast<long long>(n_base), base->exposed_comm_fraction * w, static_cast<long long>(n_opt),
          opt->exposed_comm_fraction * w);
    QVERIFY(n_base > 0 && n_opt > 0);
    QCOMPARE(n_opt < n_base, opt->exposed_comm_fraction < base->exposed_comm_fraction);
  }
  void commandLineScreenshot() {
    // The executable as a user runs it: exit 0 and a 1600x900 PNG; malformed: exit 2, message, no file.
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("shot.png"));
    QProcess p;
    p.start(QStringLiteral(MOEPERF_GUI), {QStringLiteral("--screenshot"), out, QStringLiteral("--view"),
                                          QStringLiteral("timeline"), kDir + QStringLiteral("gb300-optimized.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QCOMPARE(QImage(out).size(), kShot);
    const QString bad = dir.filePath(QStringLiteral("bad.png"));
    p.start(QStringLiteral(MOEPERF_GUI), {QStringLiteral("--screenshot"), bad, kDir + QStringLiteral("gb300-optimized.json"),
                                          QStringLiteral("--set"), QStringLiteral("parallelism.ep=7")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    const LoadResult expected =
        load_and_predict((kDir + QStringLiteral("gb300-optimized.json")).toStdString(), {"parallelism.ep=7"});
    QVERIFY(!expected.report);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains(QString::fromStdString(expected.error)));
    QVERIFY(!QFile::exists(bad));
  }
  void wheelZoomsAroundCursorDragPans() {
    TimelineView v;
    v.resize(kShot);
    v.setReport(load(QStringLiteral("gb300-optimized.json")));
    const double x = 400, t = v.timeGeometry().x_to_time(x), len = v.timeGeometry().t1 - v.timeGeometry().t0;
    const QPointF at(v.plotLeft() + x, v.laneRect(0).center().y());
    QWheelEvent wheel(at, v.mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                      false);
    QApplication::sendEvent(&v, &wheel);
    // One notch magnifies 1.25x around the cursor: the range is len / 1.25 and t stays at x.
    QVERIFY(qAbs(v.timeGeometry().t1 - v.timeGeometry().t0 - len / 1.25) < 1e-12);
    QVERIFY(qAbs(v.timeGeometry().x_to_time(x) - t) < 1e-12);
    // A 100-px drag to the right moves the range left by 100 / width of its length.
    const double t0 = v.timeGeometry().t0, span = v.timeGeometry().t1 - v.timeGeometry().t0, w = v.timeGeometry().width;
    const QPoint p0 = at.toPoint(), p1 = p0 + QPoint(100, 0);
    QTest::mousePress(&v, Qt::LeftButton, {}, p0);
    QMouseEvent move(QEvent::MouseMove, QPointF(p1), v.mapToGlobal(QPointF(p1)), Qt::NoButton, Qt::LeftButton,
                     Qt::NoModifier);
    QApplication::sendEvent(&v, &move);
    QTest::mouseRelease(&v, Qt::LeftButton, {}, p1);
    QVERIFY(qAbs(v.timeGeometry().t0 - (t0 - 100 / w * span)) < 1e-12);
  }
  void headlessScreenshotWritesPngOrNothing() {
    QTemporaryDir dir;
    const QString good = dir.filePath(QStringLiteral("t.png")), bad = dir.filePath(QStringLiteral("bad.png"));
    QString error;
    ShotOptions breakdown, timeline;
    breakdown.view = View::breakdown;
    QCOMPARE(screenshot(kDir + QStringLiteral("gb300-optimized.json"), {}, breakdown, good, &error), 0);
    QCOMPARE(QImage(good).size(), kShot);
    {
      // The breakdown's bars carry the category colors: GEMM (the largest share) and exposed communication.
      const QImage img(good);
      int gemm_px = 0, exposed_px = 0;
      for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) {
          const QRgb p = img.pixel(x, y);
          gemm_px += p == category_color(Category::gemm).rgb();
          exposed_px += p == exposed_comm_color().rgb();
        }
      QVERIFY2(gemm_px > 1000, qPrintable(QString::number(gemm_px)));
      QVERIFY2(exposed_px > 100, qPrintable(QString::number(exposed_px)));
    }
    const QString malformed = dir.filePath(QStringLiteral("m.json"));
    QFile f(malformed);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"name\": \"broken\", ");
    f.close();
    QCOMPARE(screenshot(malformed, {}, timeline, bad, &error), 2);
    QVERIFY(error.startsWith(malformed));
    QVERIFY(!QFile::exists(bad));
  }
};

namespace {

QImage render(QWidget& w) {
  QImage img(kShot, QImage::Format_RGB32);
  img.fill(Qt::white);
  w.render(&img);
  return img;
}

// Widget pixel of a chart value (chart coordinates of `series`).
QPoint chart_pixel(QChartView& v, QPointF value, QAbstractSeries* series) {
  return v.mapFromScene(v.chart()->mapToScene(v.chart()->mapToPosition(value, series)));
}

}  // namespace

class StudyViewsTest : public QObject {
  Q_OBJECT
 private slots:
  void waterfallBarsAreTheModelsSteps() {
    // The series hold waterfall(baseline_of(s), s, cal): one bar per step, each in the fits set or
    // the does-not-fit set (0 in the other), labeled with the step's name.
    const auto r = load(QStringLiteral("gb300-optimized.json"));
    const Scenario& s = *r->scenario;
    const auto steps = walk(io::ablation_states(s), s.calibration);
    WaterfallView v;
    v.resize(kShot);
    v.setStudies(std::make_shared<const Studies>(build_studies(*r)));
    QCOMPARE(v.chart()->series().size(), 1);
    auto* series = qobject_cast<QStackedBarSeries*>(v.chart()->series().front());
    QVERIFY(series);
    const QList<QBarSet*> sets = series->barSets();
    QVERIFY(!sets.isEmpty());
    QCOMPARE(sets[0]->count(), static_cast<int>(steps.size()));
    auto* axis = qobject_cast<QBarCategoryAxis*>(v.chart()->axes(Qt::Horizontal).front());
    QVERIFY(axis);
    QCOMPARE(axis->count(), static_cast<int>(steps.size()));
    for (int i = 0; i < sets[0]->count(); ++i) {
      const auto& st = steps[static_cast<size_t>(i)];
      double sum = 0;
      for (QBarSet* set : sets) sum += set->at(i);
      QCOMPARE(sum, st.report.model_tflops_per_gpu);
      QCOMPARE(sets[0]->at(i), st.report.memory.fits ? st.report.model_tflops_per_gpu : 0.0);
      QVERIFY(axis->at(i).startsWith(QString::fromStdString(st.name)));
    }
    // Screenshot: the middle of every bar is painted in its color.
    QVERIFY(steps.back().report.memory.fits);  // this scenario fits: the bars are in barColor()
    const QImage img = render(v);
    for (int i = 0; i < sets[0]->count(); ++i) {
      const auto& st = steps[static_cast<size_t>(i)];
      const QPoint at = chart_pixel(v, QPointF(i, st.report.model_tflops_per_gpu / 2), series);
      const QColor want = st.report.memory.fits ? WaterfallView::barColor() : WaterfallView::noFitColor();
      QCOMPARE(QColor(img.pixel(at)), want);
    }
  }
  void scalingAxisEndsOnARoundTop() {
    // The lowest of 4-8 intervals of 1, 2, 2.5 or 5 x 10^k at or above the asked top; fewer on a tie.
    QCOMPARE(ScalingView::roundAxis(6160.0), std::make_pair(7000.0, 7));  // Qt's nice numbers gave 8,000
    QCOMPARE(ScalingView::roundAxis(110.0), std::make_pair(120.0, 6));
    QCOMPARE(ScalingView::roundAxis(8000.0), std::make_pair(8000.0, 4));
    QCOMPARE(ScalingView::roundAxis(0.0), std::make_pair(1.0, 4));
    QCOMPARE(ScalingView::roundAxis(9.0), std::make_pair(10.0, 5));  // not 4 x 2.5: labels without decimals
    QCOMPARE(ScalingView::roundAxis(95.0), std::make_pair(100.0, 4));  // 4 x 25
    // The chart uses it: the top of the throughput axis for gb300-scaling.json's points.
    const auto r = load(QStringLiteral("gb300-scaling.json"));
    ScalingView v;
    v.setStudies(std::make_shared<const Studies>(build_studies(*r)));
    double top = 0;
    for (int i = 0; i < v.throughputSeries()->count(); ++i) top = std::max(top, v.throughputSeries()->at(i).y());
    auto* y = qobject_cast<QValueAxis*>(v.chart()->axes(Qt::Vertical, v.throughputSeries()).front());
    QVERIFY(y);
    QCOMPARE(y->max(), ScalingView::roundAxis(top * 1.1).first);
    QCOMPARE(y->tickCount(), ScalingView::roundAxis(top * 1.1).second + 1);
  }
  void scalingLinesAreApart() {
    // A configuration that fits at every point: both lines drawn, throughput well above efficiency.
    const auto r = load(QStringLiteral("gb300-scaling.json"));
    ScalingView v;
    v.resize(kShot);
    v.setStudies(std::make_shared<const Studies>(build_studies(*r)));
    QCOMPARE(v.noFitSeries()->count(), 0);
    const double plot = v.chart()->plotArea().height();
    for (int i = 0; i < v.throughputSeries()->count(); ++i) {
      const QPoint a = chart_pixel(v, v.throughputSeries()->at(i), v.throughputSeries());
      const QPoint b = chart_pixel(v, v.efficiencySeries()->at(i), v.efficiencySeries());
      QVERIFY2(b.y() - a.y() > 0.2 * plot, qPrintable(QStringLiteral("%1 vs %2").arg(a.y()).arg(b.y())));
    }
    // Each line in its own color: the efficiency point is drawn green, the throughput one blue.
    const QImage img = render(v);
    QCOMPARE(QColor(img.pixel(chart_pixel(v, v.efficiencySeries()->at(1), v.efficiencySeries()))), ScalingView::efficiencyColor());
    QCOMPARE(QColor(img.pixel(chart_pixel(v, v.throughputSeries()->at(1), v.throughputSeries()))), ScalingView::throughputColor());
  }
  void scalingPointsAreScaleResults() {
    // gb200-optimized: the optimized config on B200 (less HBM): its 128-GPU point does not fit.
    const auto r = load(QStringLiteral("gb200-optimized.json"));
    const Scenario& s = *r->scenario;
    const auto pts = scale(s, {128, 256, 512, 1024}, GrowAxis::fsdp, s.calibration);
    QVERIFY(!pts.front().report.memory.fits);
    ScalingView v;
    v.resize(kShot);
    v.setStudies(std::make_shared<const Studies>(build_studies(*r)));
    QVERIFY(v.throughputSeries() && v.efficiencySeries() && v.fitSeries() && v.noFitSeries());
    QCOMPARE(v.throughputSeries()->count(), static_cast<int>(pts.size()));
    int nofit = 0;
    for (size_t i = 0; i < pts.size(); ++i) {
      const int k = static_cast<int>(i);
      QCOMPARE(v.throughputSeries()->at(k), QPointF(static_cast<double>(pts[i].gpus), pts[i].report.tokens_per_s_per_gpu));
      QCOMPARE(v.efficiencySeries()->at(k).y(), 100 * pts[i].efficiency);
      QScatterSeries* marked = pts[i].report.memory.fits ? v.fitSeries() : v.noFitSeries();
      QVERIFY(marked->points().contains(v.throughputSeries()->at(k)));
      nofit += !pts[i].report.memory.fits;
    }
    QCOMPARE(v.noFitSeries()->count(), nofit);
    QCOMPARE(v.fitSeries()->count() + v.noFitSeries()->count(), static_cast<int>(pts.size()));
    QCOMPARE(v.noFitSeries()->name(), QStringLiteral("does not fit"));
    // Screenshot: the 128-GPU point is a red square.
    const QImage img = render(v);
    const QPoint at = chart_pixel(v, v.throughputSeries()->at(0), v.noFitSeries());
    QCOMPARE(QColor(img.pixel(at)), ScalingView::noFitColor());
  }
  void topologyDrawsEveryGpuAndSwitch() {
    // gb200-nvl72, one rack: 72 GPU boxes and 18 NVLink switch boxes, each painted in its color.
    const auto r = load(QStringLiteral("gb200-optimized.json"));
    const Topology t = Topology::build(r->scenario->system, 72);
    TopologyView v;
    v.resize(kShot);
    v.setData(build_topology_data(t, step_utilization(*r)));
    const QImage img = render(v);
    int gpus = 0, switches = 0;
    for (size_t i = 0; i < v.data().nodes.size(); ++i) {
      const VertexKind k = t.kind(v.data().nodes[i].vertex);
      if (k != VertexKind::gpu && k != VertexKind::nvswitch) continue;
      QCOMPARE(QColor(img.pixel(v.nodeRect(static_cast<int>(i)).center().toPoint())), TopologyView::kindColor(k));
      (k == VertexKind::gpu ? gpus : switches) += 1;
    }
    QCOMPARE(gpus, 72);
    QCOMPARE(switches, 18);
    QCOMPARE(int64_t{gpus}, t.count(VertexKind::gpu));
    QCOMPARE(int64_t{switches}, t.count(VertexKind::nvswitch));
  }
  void commandLineViews() {
    QTemporaryDir dir;
    for (const QString& view : {QStringLiteral("waterfall"), QStringLiteral("scaling"), QStringLiteral("topology")}) {
      const QString out = dir.filePath(view + QStringLiteral(".png"));
      QProcess p;
      p.start(QStringLiteral(MOEPERF_GUI), {QStringLiteral("--screenshot"), out, QStringLiteral("--view"), view,
                                            kDir + QStringLiteral("gb300-optimized.json")});
      QVERIFY(p.waitForFinished(60000));
      QCOMPARE(p.exitCode(), 0);
      QCOMPARE(QImage(out).size(), kShot);
    }
    // A sweep the model rejects (100 GPUs: not a multiple of ep 8): exit 2, scale()'s message, no file.
    const QString bad = dir.filePath(QStringLiteral("bad.png"));
    QProcess p;
    p.start(QStringLiteral(MOEPERF_GUI), {QStringLiteral("--screenshot"), bad, QStringLiteral("--view"),
                                          QStringLiteral("scaling"), QStringLiteral("--scale-gpus"), QStringLiteral("100"),
                                          kDir + QStringLiteral("gb300-optimized.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    const Studies st = build_studies(*load(QStringLiteral("gb300-optimized.json")), {100});
    QVERIFY(!st.scaling_error.empty());
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains(QString::fromStdString(st.scaling_error)));
    QVERIFY(!QFile::exists(bad));
  }
  void windowHasTheTabs() {
    MainWindow w;
    QVERIFY(w.openScenario(kDir + QStringLiteral("gb300-optimized.json")));
    QStringList tabs;
    for (int i = 0; i < w.tabs()->count(); ++i) tabs << w.tabs()->tabText(i);
    QVERIFY(tabs.contains(QStringLiteral("Waterfall")) && tabs.contains(QStringLiteral("Scaling")) &&
            tabs.contains(QStringLiteral("Topology")));
    QCOMPARE(w.topologyView()->data().drawn(VertexKind::gpu), w.report()->topology->gpus());
    QVERIFY(w.waterfallView()->studies() && !w.waterfallView()->studies()->waterfall.empty());
    QVERIFY(w.scalingView()->studies() && !w.scalingView()->studies()->scaling.empty());
  }
};

class MainWindowTest : public QObject {
  Q_OBJECT
 private slots:
  void compareSharesTheTimeAxis() {
    const auto a = load(QStringLiteral("gb300-optimized.json"));
    const auto b = load(QStringLiteral("gb300-baseline.json"));
    CompareView v;
    v.resize(kShot);
    v.setAttribute(Qt::WA_DontShowOnScreen);
    v.show();
    v.setReports(a, b);
    QCOMPARE(&v.upper()->timeGeometry(), &v.lower()->timeGeometry());  // one geometry
    QCOMPARE(v.upper()->timeGeometry().t1, std::max(a->step_time.value(), b->step_time.value()));
    QVERIFY(v.upperLabel().contains(format_seconds(a->step_time.value())));
    QVERIFY(v.lowerLabel().contains(format_seconds(b->step_time.value())));
    QVERIFY(v.upperLabel().contains(QString::fromStdString(a->name)));
    QVERIFY(v.lowerLabel().contains(QString::fromStdString(b->name)));
    // The difference under the timelines: the fields that differ, then the step (lower - upper),
    // its terms adding up to each side's step, the categories as each breakdown has them, and the
    // ops that moved most, largest first.
    QVERIFY2(v.fieldsText().contains(QStringLiteral("stack.dispatcher")), qPrintable(v.fieldsText()));
    QStandardItemModel* dm = v.diffModel();
    QVERIFY(dm->rowCount() > 10);
    QCOMPARE(dm->item(0, 1)->text(), QStringLiteral("step"));
    QCOMPARE(dm->item(0, 2)->data(Qt::UserRole).toDouble(), a->step_time.value());
    QCOMPARE(dm->item(0, 3)->data(Qt::UserRole).toDouble(), b->step_time.value());
    QCOMPARE(dm->item(0, 4)->data(Qt::UserRole).toDouble(), b->step_time.value() - a->step_time.value());
    double terms_a = 0, terms_b = 0, last_move = 1e300;
    int ops = 0;
    for (int r = 1; r < dm->rowCount(); ++r) {
      const QString what = dm->item(r, 0)->text(), name = dm->item(r, 1)->text();
      const double up = dm->item(r, 2)->data(Qt::UserRole).toDouble(), low = dm->item(r, 3)->data(Qt::UserRole).toDouble();
      if (what == QStringLiteral("step terms")) terms_a += up, terms_b += low;
      if (what == QStringLiteral("kernel seconds") && name == QStringLiteral("ep_comm")) {
        QCOMPARE(up, a->breakdown[static_cast<size_t>(Category::ep_comm)].value());
        QCOMPARE(low, b->breakdown[static_cast<size_t>(Category::ep_comm)].value());
      }
      if (what == QStringLiteral("ops")) {
        ++ops;
        QVERIFY(std::abs(low - up) <= last_move);
        last_move = std::abs(low - up);
      }
    }
    QVERIFY(std::abs(terms_a - a->step_time.value()) < 1e-9 * a->step_time.value());
    QVERIFY(std::abs(terms_b - b->step_time.value()) < 1e-9 * b->step_time.value());
    QCOMPARE(ops, 12);
    // The baseline's largest move: its one-shot dispatch, far slower than NCCL EP's.
    QVERIFY2(dm->item(dm->rowCount() - ops, 1)->text().startsWith(QStringLiteral("moe.")), qPrintable(dm->item(dm->rowCount() - ops, 1)->text()));
    // One scenario alone: no difference, and the hint.
    CompareView alone;
    alone.setReports(a, nullptr);
    QCOMPARE(alone.diffModel()->rowCount(), 0);
    QCOMPARE(alone.fieldsText(), QStringLiteral("Open a second scenario to see what differs"));
    for (TimelineView* zoomed : {v.lower(), v.upper()}) {
      const double t0 = zoomed->timeGeometry().t0, t1 = zoomed->timeGeometry().t1;
      const QPointF at(zoomed->plotLeft() + 300, zoomed->height() / 2);
      QWheelEvent e(at, zoomed->mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier,
                    Qt::NoScrollPhase, false);
      QApplication::sendEvent(zoomed, &e);
      const TimelineGeometry& u = v.upper()->timeGeometry();
      const TimelineGeometry& l = v.lower()->timeGeometry();
      QVERIFY(u.t1 - u.t0 < t1 - t0);  // zoomed in
      QCOMPARE(u.t0, l.t0);
      QCOMPARE(u.t1, l.t1);
      QCOMPARE(v.upper()->xForTime(0.5), v.lower()->xForTime(0.5));
    }
  }
  void compareScreenshotHasBothTimelines() {
    ShotOptions opt;
    opt.view = View::compare;
    opt.other = load(QStringLiteral("gb300-baseline.json"));
    const QImage img = render_view(load(QStringLiteral("gb300-optimized.json")), opt);
    QCOMPARE(img.size(), opt.size);
    const QRgb gemm = category_color(Category::gemm).rgb();
    // The lower timeline starts at its heading, the second band of the headings' colour.
    const QRgb heading = QColor(0xee, 0xf2, 0xf7).rgb();
    int split = 0;
    for (int y = 40; y < img.height() && !split; ++y)
      if (img.pixel(2, y) == heading && img.pixel(2, y - 1) != heading) split = y;
    QVERIFY(split > img.height() / 5 && split < img.height() * 3 / 4);
    int upper = 0, lower = 0;
    for (int y = 0; y < img.height(); ++y)
      for (int x = 200; x < img.width(); ++x)  // the plot, not the legend swatches
        if (img.pixel(x, y) == gemm) (y < split ? upper : lower) += 1;
    QVERIFY2(upper > 1000 && lower > 1000, qPrintable(QStringLiteral("gemm pixels %1 / %2").arg(upper).arg(lower)));
    // The headless command.
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("compare.png"));
    QProcess p;
    p.start(QStringLiteral(MOEPERF_GUI), {QStringLiteral("--screenshot"), out, QStringLiteral("--view"), QStringLiteral("compare"),
                                          QStringLiteral("--compare"), kDir + QStringLiteral("gb300-baseline.json"),
                                          kDir + QStringLiteral("gb300-optimized.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QCOMPARE(QImage(out).size(), QSize(1600, 900));
    p.start(QStringLiteral(MOEPERF_GUI), {QStringLiteral("--screenshot"), dir.filePath(QStringLiteral("x.png")), QStringLiteral("--view"),
                                          QStringLiteral("compare"), kDir + QStringLiteral("gb300-optimized.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);  // compare without --compare
    QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("x.png"))));
  }
  void openSecondScenario() {
    MainWindow w;
    QVERIFY(w.openScenario(kDir + QStringLiteral("gb300-optimized.json")));
    QSignalSpy done(w.compareJob(), &ScenarioJob::finished);
    w.requestCompareScenario(kDir + QStringLiteral("gb300-baseline.json"));  // File > Open second scenario
    QVERIFY(done.wait(60000));
    const auto b = w.compareReport();
    QVERIFY(b);
    QVERIFY(w.compareView()->upperLabel().contains(format_seconds(w.report()->step_time.value())));
    QVERIFY(w.compareView()->lowerLabel().contains(format_seconds(b->step_time.value())));
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.compareView()));
    // Bad input: the message in the banner, the second scenario kept.
    QTemporaryDir dir;
    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{ not json");
    f.close();
    w.requestCompareScenario(bad);
    QVERIFY(done.wait(60000));
    QVERIFY(!w.errorText().isEmpty());
    QCOMPARE(w.compareReport(), b);
    QVERIFY(w.compareView()->lowerLabel().contains(format_seconds(b->step_time.value())));
    QString error;
    const QString png = dir.filePath(QStringLiteral("compare.png"));
    QVERIFY2(w.exportPng(png, &error), qPrintable(error));  // the Compare tab exported
    QVERIFY(!QImage(png).isNull());
  }
  // File > Pin scenario as second: the scenario shown becomes the lower timeline as it is; an edit
  // in the dock then moves only the upper one, and the difference table names the edited field.
  void pinnedScenarioStaysWhileTheDockEdits() {
    MainWindow w;
    const QString small = QStringLiteral(MOEPERF_SOURCE_DIR "/examples/executor/cpu-small.json");
    QVERIFY(w.openScenario(small));
    const auto before = w.report();
    QVERIFY(w.pinCompareScenario());
    QCOMPARE(w.compareReport(), before);
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.compareView()));
    QSignalSpy spy(w.job(), &ScenarioJob::finished);
    w.scenarioPanel()->setFieldText(QStringLiteral("batch.micro_batch"), QStringLiteral("1"));
    QVERIFY(spy.wait(60000));
    QVERIFY(w.report() != before);
    QCOMPARE(w.compareReport(), before);  // the pinned one stays
    QVERIFY(w.compareView()->lowerLabel().contains(format_seconds(before->step_time.value())));
    QVERIFY(w.compareView()->upperLabel().contains(format_seconds(w.report()->step_time.value())));
    QVERIFY2(w.compareView()->fieldsText().contains(QStringLiteral("batch.micro_batch")), qPrintable(w.compareView()->fieldsText()));
    MainWindow empty;
    QVERIFY(!empty.pinCompareScenario());
  }
  void malformedScenarioKeepsPrevious() {
    MainWindow w;
    const QString good = kDir + QStringLiteral("gb300-optimized.json");
    QVERIFY(w.openScenario(good));
    const auto before = w.report();
    QVERIFY(w.errorText().isEmpty());
    // Valid JSON, invalid scenario: ep = 7 breaks the layout rule (and does not divide the experts).
    QVERIFY(!w.openScenario(good, {QStringLiteral("parallelism.ep=7")}));
    const LoadResult expected = load_and_predict(good.toStdString(), {"parallelism.ep=7"});
    QVERIFY(!expected.report);
    QCOMPARE(w.errorText(), QString::fromStdString(expected.error));  // moeperf's InputError::what()
    QCOMPARE(w.report(), before);
    QCOMPARE(w.scenarioPath(), good);
    // A value of the wrong kind typed into a field: the message names the edit, not a command-line --set.
    QVERIFY(!w.openScenario(good, {QStringLiteral("parallelism.ep=abc")}));
    QVERIFY2(w.errorText().contains(QStringLiteral("expected a positive integer, got \"abc\" (set by the edit parallelism.ep=abc)")),
             qPrintable(w.errorText()));
    QVERIFY2(!w.errorText().contains(QStringLiteral("--set")), qPrintable(w.errorText()));
    QCOMPARE(w.report(), before);
    // Not even JSON: same outcome, the loader's message shown, the report kept.
    QTemporaryDir dir;
    const QString broken = dir.filePath(QStringLiteral("broken.json"));
    QFile f(broken);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"name\": ");
    f.close();
    QVERIFY(!w.openScenario(broken));
    QVERIFY(w.errorText().startsWith(broken));
    QCOMPARE(w.report(), before);
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("Not loaded: %1 (showing the previous scenario)").arg(broken));
    // A window that shows nothing yet says so rather than naming a previous scenario.
    MainWindow fresh;
    QVERIFY(!fresh.openScenario(broken));
    QVERIFY(fresh.errorText().startsWith(broken));
    QCOMPARE(fresh.statusBar()->currentMessage(), QStringLiteral("Not loaded: %1 (no scenario shown: File > Open one)").arg(broken));
    QVERIFY(w.openScenario(good));  // a good one clears the message
    QVERIFY(w.errorText().isEmpty());
  }
  void staleBackgroundLoadIsDropped() {
    MainWindow w;
    QSignalSpy spy(w.job(), &ScenarioJob::finished);
    const QString first = kDir + QStringLiteral("gb300-baseline.json");
    const QString second = kDir + QStringLiteral("gb300-optimized.json");
    w.requestScenario(first);
    w.requestScenario(second);  // overtakes the first: only its result may arrive
    QVERIFY(spy.wait(30000));
    QTest::qWait(200);  // let the first request's (dropped) result come back too
    QCOMPARE(spy.count(), 1);
    QCOMPARE(w.scenarioPath(), second);
    QVERIFY(w.report() && w.report()->step_time.value() > 0);
  }
  // Issue 16: EP 8 -> 16 on the 128-GPU GB300 scenario keeps the GPU count: FSDP 16 -> 8 derived,
  // said in the dock, the prediction the CLI's for ep 16 x fsdp 8; with DP as the free axis, DP
  // takes the change; with nothing, the loader's layout message comes back beside EP. The summary
  // panel above the views shows the new figures.
  // The Scaling tab's GPU counts and axis in the window: predicted off the GUI thread, the points
  // scale()'s; a bad list is refused with a message and the chart kept.
  void scalingTabTakesItsGpuCountsAndAxis() {
    MainWindow w;
    QVERIFY(w.openScenario(kDir + QStringLiteral("gb300-optimized.json")));
    QVERIFY(w.rescale(QStringLiteral("128, 512"), QStringLiteral("dp")));
    QTRY_VERIFY_WITH_TIMEOUT(w.scalingView()->studies()->scaling.size() == 2, 60000);
    const Studies* st = w.scalingView()->studies();
    QCOMPARE(st->axis, GrowAxis::dp);
    const auto want = scale(*w.report()->scenario, {128, 512}, GrowAxis::dp, w.report()->scenario->calibration);
    for (size_t i = 0; i < 2; ++i) {
      QCOMPARE(st->scaling[i].gpus, want[i].gpus);
      QCOMPARE(st->scaling[i].tokens_per_s_per_gpu, want[i].report.tokens_per_s_per_gpu);
    }
    QCOMPARE(w.scalingView()->throughputSeries()->count(), 2);
    QVERIFY(!w.rescale(QStringLiteral("128,abc"), QStringLiteral("fsdp")));
    QVERIFY(w.scalingMessage().contains(QStringLiteral("got \"abc\"")));
    QCOMPARE(w.scalingView()->studies()->scaling.size(), size_t{2});
  }
  // The panel's profile chooser: the system's own generation until one is chosen; choosing
  // another reprices the scenario with it, and the summary and status bar name it.
  void panelChoosesTheCalibrationProfile() {
    const QString good = kDir + QStringLiteral("gb300-optimized.json");
    MainWindow w;
    QVERIFY(w.openScenario(good));
    ScenarioPanel* p = w.scenarioPanel();
    QVERIFY(p->fieldText(QStringLiteral("calibration")).isEmpty());
    QVERIFY(QString::fromStdString(w.report()->profile).startsWith(QStringLiteral("blackwell-ultra")));
    const auto before = w.report();
    p->setFieldText(QStringLiteral("calibration"), QStringLiteral("hopper"));
    QTRY_VERIFY_WITH_TIMEOUT(w.report() != before && !w.job()->busy(), 60000);
    QVERIFY2(QString::fromStdString(w.report()->profile).startsWith(QStringLiteral("hopper")), w.report()->profile.c_str());
    const LoadResult cli = load_and_predict(good.toStdString(), {"calibration=hopper"});
    QVERIFY(cli.report);
    QCOMPARE(w.report()->step_time.value(), cli.report->step_time.value());
    QVERIFY(w.report()->step_time.value() != before->step_time.value());
    QVERIFY2(w.summaryPanel()->notes()[2].contains(QStringLiteral("hopper")), qPrintable(w.summaryPanel()->notes()[2]));
    QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("profile hopper")), qPrintable(w.statusBar()->currentMessage()));
  }
  void panelKeepsTheGpuCountAndTheSummaryFollows() {
    const QString good = kDir + QStringLiteral("gb300-optimized.json");
    MainWindow w;
    QVERIFY(w.openScenario(good));
    ScenarioPanel* p = w.scenarioPanel();
    QCOMPARE(p->fieldText(QStringLiteral("parallelism.ep")), QStringLiteral("8"));
    QCOMPARE(p->fieldText(QStringLiteral("parallelism.fsdp")), QStringLiteral("16"));
    // The summary shows the report's figures, as summary_items formats them.
    for (const SummaryItem& i : summary_items(*w.report())) QCOMPARE(w.summaryPanel()->value(i.key), i.value);
    QVERIFY(w.summaryPanel()->value(QStringLiteral("memory")).startsWith(QStringLiteral("fits: ")));
    QVERIFY(w.summaryPanel()->value(QStringLiteral("gpus")).startsWith(QStringLiteral("128 of 144 bought")));
    // Under the figures, what the CLI's report says beside them: the band's terms (the end-to-end
    // term of the stack's published case), the profile and stack, the host's two lines, and every note.
    const QStringList& notes = w.summaryPanel()->notes();
    QCOMPARE(notes, summary_notes(*w.report()));
    QVERIFY(notes.size() >= 3);
    QVERIFY2(notes[0].startsWith(QStringLiteral("Band, parts: +/- ")), qPrintable(notes[0]));
    QVERIFY2(notes[1].startsWith(QStringLiteral("Band, end to end: +")) && notes[1].contains(QStringLiteral("maxtext-te-2026-09")),
             qPrintable(notes[1]));
    QVERIFY2(notes[2].contains(QStringLiteral("blackwell-ultra")), qPrintable(notes[2]));
    QVERIFY2(notes[3].startsWith(QStringLiteral("Host issuing: ")), qPrintable(notes[3]));
    QVERIFY2(notes[4].startsWith(QStringLiteral("Host's cost: ")), qPrintable(notes[4]));
    QCOMPARE(notes.size(), 5 + static_cast<int>(w.report()->notes.size()));
    const auto before = w.report();
    p->setFieldText(QStringLiteral("parallelism.ep"), QStringLiteral("16"));
    QCOMPARE(p->fieldText(QStringLiteral("parallelism.fsdp")), QStringLiteral("8"));
    QCOMPARE(p->derivedNote(), QStringLiteral("FSDP 16 → 8 keeps 128 GPUs"));
    QTRY_VERIFY_WITH_TIMEOUT(w.report() != before && !w.job()->busy(), 60000);
    QVERIFY(p->errorFor(QStringLiteral("parallelism.ep")).isEmpty());
    const LoadResult cli = load_and_predict(good.toStdString(), {"parallelism.ep=16", "parallelism.fsdp=8"});
    QVERIFY(cli.report);
    QCOMPARE(w.report()->step_time.value(), cli.report->step_time.value());
    QCOMPARE(w.summaryPanel()->value(QStringLiteral("step")), summary_items(*cli.report).front().value);
    QCOMPARE(w.summaryPanel()->value(QStringLiteral("tokens_per_s_per_gpu")), QString::number(cli.report->tokens_per_s_per_gpu, 'f', 0));
    // DP as the free axis: EP 16 -> 32 sets DP (FSDP 8 x EP 32 = 256 > 128 GPUs: not divisible) ...
    p->setFreeAxis(QStringLiteral("parallelism.dp"));
    p->setFieldText(QStringLiteral("parallelism.fsdp"), QStringLiteral("4"));
    QCOMPARE(p->fieldText(QStringLiteral("parallelism.dp")), QStringLiteral("2"));
    QCOMPARE(p->derivedNote(), QStringLiteral("DP 1 → 2 keeps 128 GPUs"));
    p->setFieldText(QStringLiteral("parallelism.ep"), QStringLiteral("64"));
    QCOMPARE(p->derivedNote(), QStringLiteral("DP not derived: tp x cp x pp x ep x fsdp = 256 does not divide 128 GPUs"));
    QTRY_VERIFY_WITH_TIMEOUT(!w.job()->busy(), 60000);
    QVERIFY(!p->errorFor(QStringLiteral("parallelism.ep")).isEmpty() || !w.errorText().isEmpty());
    // Nothing derived: the layout rule's message, as before this issue.
    p->setFreeAxis(QString());
    p->setFieldText(QStringLiteral("parallelism.ep"), QStringLiteral("16"));
    QCOMPARE(p->fieldText(QStringLiteral("parallelism.dp")), QStringLiteral("2"));  // untouched
  }
  // The Sweep tab: a small sweep in the background (EP 4, 8, 16, 3 with FSDP derived): one row per
  // point, the CLI's figures; EP 3 infeasible with the loader's reason; the chart's points are the
  // feasible rows' tokens/s/GPU against EP; sorting by tokens/s works; a double-click opens the
  // point in the timeline.
  void sweepTabRunsAStudyAndOpensARow() {
    const QString good = kDir + QStringLiteral("gb300-optimized.json");
    MainWindow w;
    QVERIFY(w.openScenario(good));
    StudyView* v = w.studyView();
    v->setVary(QStringLiteral("parallelism.ep=4,8,16,3"));
    v->setDerive(QStringLiteral("parallelism.fsdp=gpus/(ep*tp*pp*dp)"));
    QSignalSpy done(v->job(), &SweepJob::finished);
    v->run(2);
    QVERIFY(done.wait(120000));
    QCOMPARE(done.front().front().toBool(), false);  // not cancelled
    QStandardItemModel* m = v->rowsModel();
    QCOMPARE(m->rowCount(), 4);
    const io::SweepSpec sp = SweepJob::spec(good, {}, {QStringLiteral("parallelism.ep=4,8,16,3")},
                                            {QStringLiteral("parallelism.fsdp=gpus/(ep*tp*pp*dp)")});
    auto col = [m](const QString& name) { return column_named(*m, name); };
    const int status = col(QStringLiteral("status")), tps = col(QStringLiteral("tokens/s/GPU")), reason = col(QStringLiteral("reason"));
    QVERIFY(status > 0 && tps > 0 && reason > 0);
    for (int r = 0; r < 4; ++r) {
      const io::SweepRow want = io::run_point(sp, static_cast<size_t>(r));
      QCOMPARE(m->item(r, status)->text(), QString::fromStdString(want.status));
      if (want.predicted) {
        QCOMPARE(m->item(r, tps)->data(Qt::UserRole).toDouble(), want.tokens_per_s_per_gpu);
      } else {
        QCOMPARE(m->item(r, reason)->text(), QString::fromStdString(want.reason));
        QVERIFY(!want.reason.empty());
      }
    }
    QCOMPARE(m->item(3, status)->text(), QStringLiteral("infeasible"));
    QCOMPARE(m->item(3, 1)->text(), QStringLiteral("3"));
    QCOMPARE(m->item(1, col(QStringLiteral("parallelism.fsdp (derived)")))->text(), QStringLiteral("16"));
    // The chart: EP on x, the three feasible points in EP order.
    QCOMPARE(v->chartXTitle(), QStringLiteral("parallelism.ep"));
    const QList<QPointF> pts = v->throughputSeries()->points();
    QCOMPARE(pts.size(), 3);
    const double xs[] = {4, 8, 16};
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(pts[i].x(), xs[i]);
      QCOMPARE(pts[i].y(), io::run_point(sp, static_cast<size_t>(i)).tokens_per_s_per_gpu);
    }
    // Sorting by tokens/s/GPU, highest first: the first row is the best feasible point.
    v->table()->sortByColumn(tps, Qt::DescendingOrder);
    const double top = v->table()->model()->index(0, tps).data(Qt::UserRole).toDouble();
    QCOMPARE(top, std::max({pts[0].y(), pts[1].y(), pts[2].y()}));
    // MOEPERF_TEST_SHOTS=DIR: the window on the Sweep tab as a PNG, to look at.
    if (const QString shots = qEnvironmentVariable("MOEPERF_TEST_SHOTS"); !shots.isEmpty()) {
      w.resize(1400, 900);
      w.tabs()->setCurrentWidget(v);
      QVERIFY(w.grab().save(shots + QStringLiteral("/sweep-tab.png")));
    }
    // The row for EP 16 opens in the timeline with its layout.
    QCOMPARE(v->pointSets(2), (QStringList{QStringLiteral("parallelism.ep=16"), QStringLiteral("parallelism.fsdp=8")}));
    QSignalSpy loaded(w.job(), &ScenarioJob::finished);
    emit v->openPoint(good, v->pointSets(2));
    QVERIFY(loaded.wait(60000));
    QCOMPARE(w.report()->scenario->parallelism.ep, 16);
    QCOMPARE(w.report()->scenario->parallelism.fsdp, 8);
    QCOMPARE(w.tabs()->currentIndex(), 0);
    // Cancel: a longer sweep stops early and says so.
    v->setVary(QStringLiteral("gpus=128..4096*2; parallelism.ep=1,2,4,8,16,32,64"));
    QSignalSpy done2(v->job(), &SweepJob::finished);
    v->run(1);
    v->cancel();
    QVERIFY(done2.wait(120000));
    QCOMPARE(done2.front().front().toBool(), true);
    QVERIFY(v->rowsModel()->rowCount() < 42);
    QVERIFY2(v->statusText().startsWith(QStringLiteral("Cancelled after")), qPrintable(v->statusText()));
  }
  // The Sweep tab with a token budget: each row's days to train, GPU-hours held and cost (the
  // system's price, set in the dock) are io::run_point's; the second chart puts every feasible
  // point at (days, M$) and draws the Pareto front: fastest first, each cheaper than every faster
  // point, and every point off it both slower and costlier than some point on it.
  void sweepTabChartsTimeToTrainAgainstCost() {
    const QString good = kDir + QStringLiteral("gb300-optimized.json");
    const QString price = QStringLiteral("system.price.usd_per_gpu_hour=3");
    MainWindow w;
    QVERIFY(w.openScenario(good, {price}));
    StudyView* v = w.studyView();
    v->setVary(QStringLiteral("gpus=128,256; parallelism.ep=4,8"));
    v->setDerive(QStringLiteral("parallelism.fsdp=gpus/(ep*tp*pp*dp); batch.global_batch=6*gpus"));
    v->setTokens(QStringLiteral("15T"));
    QSignalSpy done(v->job(), &SweepJob::finished);
    v->run(2);
    QVERIFY(done.wait(120000));
    io::SweepSpec sp = SweepJob::spec(good, {price}, {QStringLiteral("gpus=128,256"), QStringLiteral("parallelism.ep=4,8")},
                                      {QStringLiteral("parallelism.fsdp=gpus/(ep*tp*pp*dp)"), QStringLiteral("batch.global_batch=6*gpus")});
    sp.train_tokens = 15e12;
    QStandardItemModel* m = v->rowsModel();
    QCOMPARE(m->rowCount(), 4);
    auto col = [m](const QString& name) { return column_named(*m, name); };
    const int days = col(QStringLiteral("days to train")), held = col(QStringLiteral("GPU-hours held")), cost = col(QStringLiteral("cost $"));
    QVERIFY(days > 0 && held > 0 && cost > 0);
    std::vector<QPointF> all;
    for (int r = 0; r < 4; ++r) {
      const io::SweepRow want = io::run_point(sp, static_cast<size_t>(r));
      QCOMPARE(want.status, std::string("ok"));
      QVERIFY(want.cost_to_train_usd.has_value());
      QCOMPARE(m->item(r, days)->data(Qt::UserRole).toDouble(), want.time_to_train_days);
      QCOMPARE(m->item(r, held)->data(Qt::UserRole).toDouble(), want.gpu_hours_held);
      QCOMPARE(m->item(r, cost)->data(Qt::UserRole).toDouble(), *want.cost_to_train_usd);
      // Closed forms: the days are the budget over the cluster's rate; held hours count whole domains.
      QVERIFY(std::abs(want.time_to_train_days - 15e12 / want.cluster_tokens_per_s / 86400) < 1e-9 * want.time_to_train_days);
      QVERIFY(std::abs(want.gpu_hours_held - want.time_to_train_days * 24 * static_cast<double>(want.gpus_bought)) < 1e-6 * want.gpu_hours_held);
      all.emplace_back(want.time_to_train_days, *want.cost_to_train_usd / 1e6);
    }
    v->setChartKind(1);
    QVERIFY(v->costSeries() && v->paretoSeries() && !v->throughputSeries());
    QCOMPARE(v->chartXTitle(), QStringLiteral("days to train"));
    QCOMPARE(v->costSeries()->points().size(), 4);
    const QList<QPointF> front = v->paretoSeries()->points();
    // Here EP 4 on 256 GPUs is both the fastest and the cheapest (2026-12-04): the others lie behind it.
    QVERIFY(!front.isEmpty() && front.size() < 4);
    for (int i = 1; i < front.size(); ++i) QVERIFY(front[i].x() > front[i - 1].x() && front[i].y() < front[i - 1].y());
    for (const QPointF& p : all) {
      if (front.contains(p)) continue;
      bool dominated = false;
      for (const QPointF& f : front) dominated = dominated || (f.x() <= p.x() && f.y() <= p.y());
      QVERIFY2(dominated, qPrintable(QStringLiteral("(%1, %2) is neither on the front nor behind it").arg(p.x()).arg(p.y())));
    }
    if (const QString shots = qEnvironmentVariable("MOEPERF_TEST_SHOTS"); !shots.isEmpty()) {
      w.resize(1400, 900);
      w.tabs()->setCurrentWidget(v);
      QVERIFY(w.grab().save(shots + QStringLiteral("/sweep-pareto.png")));
    }
    // Back to tokens/s/GPU: against the GPU count, as before.
    v->setChartKind(0);
    QVERIFY(v->throughputSeries() && !v->costSeries());
    QCOMPARE(v->chartXTitle(), QStringLiteral("gpus"));
    // A budget the CLI refuses is refused here.
    v->setTokens(QStringLiteral("lots"));
    v->run(2);
    QVERIFY2(v->statusText().startsWith(QStringLiteral("--tokens lots: expected a token count")), qPrintable(v->statusText()));
    // A misspelt path fails every point alike: refused in the window, no run, the last rows kept.
    v->setTokens(QString());
    const int rows_before = v->rowsModel()->rowCount();
    QVERIFY(rows_before > 0);
    v->setVary(QStringLiteral("parallelism.epp=4,8"));
    v->run(2);
    QVERIFY2(v->statusText().contains(QStringLiteral("/parallelism/epp: unknown key \"epp\"")) &&
                 v->statusText().endsWith(QStringLiteral("(every point of the sweep has it)")),
             qPrintable(v->statusText()));
    QVERIFY(!v->job()->busy());
    QCOMPARE(v->rowsModel()->rowCount(), rows_before);
  }
  // The Plan tab: `moeperf plan` of the scenario shown (with the panel's edits) off the GUI thread;
  // its rows are io::plan's best for the same options, in order, with the same figures; a row opens
  // its layout in the timeline with the same step; a bad schedule list is refused in the window; a
  // cancelled plan says so and shows the best of what it searched. Qwen3-30B-A3B on 4 GB300 keeps
  // the plan to a second.
  void planTabRanksLayoutsAndOpensOne() {
    const QString good = kDir + QStringLiteral("gb300-optimized.json");
    const QString small = QStringLiteral("model=../models/qwen3-30b-a3b/config.json");
    MainWindow w;
    QVERIFY(w.openScenario(good, {small}));
    PlanView* v = w.planView();
    QCOMPARE(w.tabs()->tabText(w.tabs()->indexOf(v)), QStringLiteral("Plan"));
    // The count to plan for starts at the scenario's, and stays where the user puts it.
    QCOMPARE(v->findChild<QSpinBox*>(QStringLiteral("planGpus"))->value(), 128);
    v->setGpus(4);
    v->setTop(5);
    v->setSchedules(QStringLiteral("1f1b,zbh1"));
    v->setBalance(true);
    QSignalSpy done(v->job(), &PlanJob::finished);
    auto* run = v->findChild<QPushButton*>(QStringLiteral("runPlan"));
    auto* stop = v->findChild<QPushButton*>(QStringLiteral("cancelPlan"));
    auto* bar = v->findChild<QProgressBar*>();
    QVERIFY(run && stop && bar);
    QVERIFY(run->isEnabled() && !stop->isEnabled());
    v->run(2);
    // Running: Run off, Cancel on, the status says what runs.
    QVERIFY(!run->isEnabled() && stop->isEnabled());
    QVERIFY2(v->statusText().startsWith(QStringLiteral("Planning ")), qPrintable(v->statusText()));
    QVERIFY(done.wait(120000));
    QCOMPARE(done.front().front().toBool(), false);  // not cancelled
    // Done: the buttons back, the bar full at the candidate count.
    QVERIFY(run->isEnabled() && !stop->isEnabled());
    QCOMPARE(bar->value(), bar->maximum());
    QVERIFY(bar->maximum() > 1);
    QVERIFY2(v->job()->error().isEmpty(), qPrintable(v->job()->error()));
    io::PlanOptions o;
    o.gpus = 4, o.top = 5, o.balance = true;
    o.schedules = {PipelineSchedule::one_f_one_b, PipelineSchedule::zb_h1};
    const io::PlanResult want = io::plan(io::load_scenario(good.toStdString(), {io::parse_override(small.toStdString())}),
                                         good.toStdString(), o);
    QStandardItemModel* m = v->rowsModel();
    QCOMPARE(m->rowCount(), 5);
    auto col = [m](const QString& name) { return column_named(*m, name); };
    const int layout = col(QStringLiteral("layout")), step = col(QStringLiteral("step s")), tps = col(QStringLiteral("tokens/s/GPU"));
    QVERIFY(layout > 0 && step > 0 && tps > 0);
    for (int r = 0; r < 5; ++r) {
      const io::PlanEntry& e = want.best[static_cast<size_t>(r)];
      QCOMPARE(m->item(r, layout)->text(), QString::fromStdString(e.layout));
      QCOMPARE(m->item(r, step)->data(Qt::UserRole).toDouble(), e.report.step_time.value());
      QCOMPARE(m->item(r, tps)->data(Qt::UserRole).toDouble(), e.report.tokens_per_s_per_gpu);
      if (r > 0) QVERIFY(m->item(r, step)->data(Qt::UserRole).toDouble() >= m->item(r - 1, step)->data(Qt::UserRole).toDouble());
    }
    QVERIFY2(v->statusText().contains(QStringLiteral("%1 layouts searched").arg(want.candidates)), qPrintable(v->statusText()));
    QVERIFY2(v->statusText().contains(QStringLiteral("the runner-up loses")), qPrintable(v->statusText()));
    // MOEPERF_TEST_SHOTS=DIR: the window on the Plan tab as a PNG, to look at.
    if (const QString shots = qEnvironmentVariable("MOEPERF_TEST_SHOTS"); !shots.isEmpty()) {
      w.resize(1400, 900);
      w.tabs()->setCurrentWidget(v);
      QVERIFY(w.grab().save(shots + QStringLiteral("/plan-tab.png")));
    }
    // The second row opens with the scenario's edit first, then its layout's --set list.
    QStringList sets{small};
    for (const std::string& x : want.best[1].sets) sets << QString::fromStdString(x);
    QCOMPARE(v->pointSets(1), sets);
    QSignalSpy loaded(w.job(), &ScenarioJob::finished);
    emit v->openPoint(good, v->pointSets(1));
    QVERIFY(loaded.wait(60000));
    QCOMPARE(w.report()->step_time.value(), want.best[1].report.step_time.value());
    QCOMPARE(w.report()->gpus, 4);
    QCOMPARE(w.tabs()->currentIndex(), 0);
    // The layout's overrides of fields the dock does not show are listed there and kept for the
    // next edit; Clear drops them (the scenario is predicted again without them).
    ScenarioPanel* panel = w.scenarioPanel();
    QVERIFY2(panel->hiddenText().contains(QStringLiteral("parallelism.vpp=")), qPrintable(panel->hiddenText()));
    QVERIFY(panel->form().overrides().contains(small));
    for (const QString& h : panel->form().hiddenOverrides()) QVERIFY(panel->form().overrides().contains(h));
    QSignalSpy again(w.job(), &ScenarioJob::finished);
    panel->clearHidden();
    QVERIFY(again.wait(60000));
    QCOMPARE(panel->hiddenText(), QStringLiteral("none"));
    QVERIFY(panel->form().hiddenOverrides().isEmpty());
    std::vector<std::string> kept;
    for (const QString& x : panel->form().overrides()) kept.push_back(x.toStdString());
    QCOMPARE(w.report()->step_time.value(), load_and_predict(good.toStdString(), kept).report->step_time.value());
    // A schedule list the CLI refuses is refused here with its message; the table stays.
    v->setSchedules(QStringLiteral("1f1b,gpipe"));
    v->run(2);
    QVERIFY(!v->job()->busy());
    QVERIFY2(v->statusText().startsWith(QStringLiteral("--schedules 1f1b,gpipe: unknown schedule \"gpipe\"")), qPrintable(v->statusText()));
    QCOMPARE(m->rowCount(), 5);
    v->setSchedules(QStringLiteral("1f1b"));
    v->setVpps(QStringLiteral("2,1"));
    v->run(2);
    QVERIFY(!v->job()->busy());
    QVERIFY2(v->statusText().startsWith(QStringLiteral("--vpp 2,1: expected virtual stages per GPU")), qPrintable(v->statusText()));
    v->setVpps(QStringLiteral("2"));
    v->setObjective(QStringLiteral("time_to_train"), QStringLiteral("15X"));
    v->run(2);
    QVERIFY(!v->job()->busy());
    QVERIFY2(v->statusText().startsWith(QStringLiteral("--tokens 15X: expected a token count like 15T")), qPrintable(v->statusText()));
    QCOMPARE(m->rowCount(), 5);
    v->setObjective(QStringLiteral("tokens_per_s"));
    // Cancel: DeepSeek-V3 on 2,048 GPUs of the scenario stops early and says so.
    v->setSchedules(QStringLiteral("all"));
    v->setBalance(false);
    v->setGpus(2048);
    v->setSource([good] { return std::make_pair(good, QStringList{}); });
    QSignalSpy progressed(v->job(), &PlanJob::progress);
    QSignalSpy done2(v->job(), &PlanJob::finished);
    v->run(1);
    QVERIFY(progressed.wait(120000));
    v->cancel();
    QVERIFY(done2.wait(120000));
    QCOMPARE(done2.front().front().toBool(), true);
    QVERIFY(progressed.back().at(0).toInt() < progressed.back().at(1).toInt());
    // Either nothing was simulated yet, or the best found so far is predicted, alone.
    if (v->job()->result()) {
      QVERIFY2(v->statusText().startsWith(QStringLiteral("Cancelled after %1 of %2 layouts")
                                              .arg(v->job()->searched())
                                              .arg(v->job()->result()->candidates)),
               qPrintable(v->statusText()));
      QVERIFY(v->job()->searched() < v->job()->result()->candidates);
      QCOMPARE(m->rowCount(), 1);
    } else {
      QCOMPARE(v->statusText(), QStringLiteral("Cancelled before any layout was predicted"));
      QCOMPARE(m->rowCount(), 0);
    }
  }
  void panelEditRevalidates() {
    const QString small = QStringLiteral(MOEPERF_SOURCE_DIR "/examples/executor/cpu-small.json");
    MainWindow w;
    QVERIFY(w.openScenario(small));
    ScenarioPanel* p = w.scenarioPanel();
    QCOMPARE(p->fieldText(QStringLiteral("parallelism.ep")), QStringLiteral("4"));
    const auto before = w.report();
    QSignalSpy spy(w.job(), &ScenarioJob::finished);
    // ep = 7 on 4 GPUs: moeperf's own message, beside EP; the previous report stays.
    std::string want;
    try {
      (void)io::load_scenario(small.toStdString(), {io::parse_override("parallelism.ep=7")});
    } catch (const io::SpecError& e) {
      want = e.what();
    }
    QVERIFY(!want.empty());
    p->setFieldText(QStringLiteral("parallelism.ep"), QStringLiteral("7"));
    QVERIFY(spy.wait(30000));
    QCOMPARE(p->errorFor(QStringLiteral("parallelism.ep")), QString::fromStdString(want));
    QCOMPARE(w.report(), before);
    QTemporaryDir bad;
    QString refused;
    QVERIFY(!w.saveScenario(bad.filePath(QStringLiteral("bad.json")), &refused));  // never saves a rejected edit
    QVERIFY2(refused.contains(QString::fromStdString(want)), qPrintable(refused));
    // Typing "1" then "2" into micro_batch (ep back to 4): stale runs are dropped, the last one wins.
    p->setFieldText(QStringLiteral("parallelism.ep"), QStringLiteral("4"));
    p->setFieldText(QStringLiteral("batch.micro_batch"), QStringLiteral("2"));
    QTRY_VERIFY_WITH_TIMEOUT(w.report() != before && !w.job()->busy(), 30000);
    QVERIFY(p->errorFor(QStringLiteral("parallelism.ep")).isEmpty());
    const LoadResult mb2 = load_and_predict(small.toStdString(), {"batch.micro_batch=2"});
    QVERIFY(mb2.report);
    QCOMPARE(w.report()->step_time.value(), mb2.report->step_time.value());
    QVERIFY(w.report()->step_time.value() != before->step_time.value());
    // Save + reload: the saved file predicts what the edited window shows.
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("edited.json"));
    QString error;
    QVERIFY2(w.saveScenario(out, &error), qPrintable(error));
    const auto edited = w.report();
    QVERIFY(w.openScenario(out));
    QCOMPARE(w.report()->step_time.value(), edited->step_time.value());
    QCOMPARE(p->fieldText(QStringLiteral("batch.micro_batch")), QStringLiteral("2"));
  }
  // Dock edits are not lost without a question: closing the window (or File > Open, or a Sweep or
  // Plan row that does not carry them) asks Save, Discard or Cancel; Cancel keeps the window and
  // the edits, Save writes them to the file first, and a row setting the edited path asks nothing.
  void unsavedEditsAreAskedForBeforeTheyAreLost() {
    QTemporaryDir dir;
    const QString file = dir.filePath(QStringLiteral("mine.json"));
    {
      MainWindow setup;
      QVERIFY(setup.openScenario(QStringLiteral(MOEPERF_SOURCE_DIR "/examples/executor/cpu-small.json")));
      QString error;
      QVERIFY2(setup.saveScenario(file, &error), qPrintable(error));  // a copy whose references point back
    }
    MainWindow w;
    w.show();
    QVERIFY(w.openScenario(file));
    int asked = 0, answer = QMessageBox::Cancel;
    w.setDiscardQuestion([&] {
      ++asked;
      return answer;
    });
    QVERIFY(w.unsavedEdits().isEmpty());
    QVERIFY(w.close());  // nothing to lose: no question
    QCOMPARE(asked, 0);
    w.show();
    ScenarioPanel* p = w.scenarioPanel();
    QSignalSpy spy(w.job(), &ScenarioJob::finished);
    p->setFieldText(QStringLiteral("batch.micro_batch"), QStringLiteral("2"));
    QVERIFY(spy.wait(30000));
    QCOMPARE(w.unsavedEdits(), QStringList{QStringLiteral("batch.micro_batch=2")});
    // A row that sets the same path carries it on (the row's value is the one chosen): no question.
    QVERIFY(w.confirmDiscardEdits({QStringLiteral("batch.micro_batch=4")}));
    QCOMPARE(asked, 0);
    // Cancel: the window stays, with its edit.
    QVERIFY(!w.close());
    QCOMPARE(asked, 1);
    QVERIFY(w.isVisible());
    QCOMPARE(p->fieldText(QStringLiteral("batch.micro_batch")), QStringLiteral("2"));
    // Save: the file holds the edit, and the window closes.
    answer = QMessageBox::Save;
    QVERIFY(w.close());
    QCOMPARE(asked, 2);
    QVERIFY(w.unsavedEdits().isEmpty());
    const LoadResult saved = load_and_predict(file.toStdString());
    QVERIFY(saved.report);
    QCOMPARE(saved.report->scenario->batch.micro_batch, 2);
    QCOMPARE(saved.report->step_time.value(), w.report()->step_time.value());
    // Discard: the edit is dropped by the caller, nothing is written.
    w.show();
    p->setFieldText(QStringLiteral("batch.micro_batch"), QStringLiteral("1"));
    QVERIFY(spy.wait(30000));
    answer = QMessageBox::Discard;
    QVERIFY(w.confirmDiscardEdits());
    QCOMPARE(asked, 3);
    QCOMPARE(load_and_predict(file.toStdString()).report->scenario->batch.micro_batch, 2);
  }
  void exportsWriteParseableFiles() {
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    QVERIFY(w.openScenario(QStringLiteral(MOEPERF_SOURCE_DIR "/examples/executor/cpu-small.json")));
    QTemporaryDir dir;
    QString error;
    for (int tab = 0; tab < w.tabs()->count(); ++tab) {  // every view through the screenshot renderer
      w.tabs()->setCurrentIndex(tab);
      const QString png = dir.filePath(QStringLiteral("view%1.png").arg(tab));
      QVERIFY2(w.exportPng(png, &error), qPrintable(error));
      const QImage img(png);
      QVERIFY2(!img.isNull() && img.width() > 100 && img.height() > 100, qPrintable(png));
    }
    const QString trace = dir.filePath(QStringLiteral("step.trace.json"));
    QVERIFY2(w.exportTrace(trace, &error), qPrintable(error));
    QFile t(trace);
    QVERIFY(t.open(QIODevice::ReadOnly));
    QJsonParseError pe{};
    const QJsonDocument doc = QJsonDocument::fromJson(t.readAll(), &pe);
    QVERIFY2(pe.error == QJsonParseError::NoError, qPrintable(pe.errorString()));
    QVERIFY(!doc.isNull() && (doc.isArray() ? !doc.array().isEmpty() : !doc.object().isEmpty()));
    const QString csv = dir.filePath(QStringLiteral("ops.csv"));
    QVERIFY2(w.exportCsv(csv, &error), qPrintable(error));
    QFile c(csv);
    QVERIFY(c.open(QIODevice::ReadOnly | QIODevice::Text));
    QCOMPARE(c.readLine().trimmed(), QByteArray("name,category,count,seconds,serial_seconds,flops,bytes,hbm_bytes,message_bytes,exposed_seconds"));
    QVERIFY(!c.readLine().trimmed().isEmpty());  // at least one op row
    // A path that cannot be written fails with a message and leaves nothing.
    QVERIFY(!w.exportCsv(dir.filePath(QStringLiteral("missing/ops.csv")), &error));
    QVERIFY(!error.isEmpty());
  }
  void hardwareRunFillsMeasured() {
    const QString cli = QFileInfo(QStringLiteral(MOEPERF_GUI)).absolutePath() + QStringLiteral("/moeperf");
    if (!QFileInfo(cli).isExecutable()) QSKIP("the moeperf CLI is not built next to moeperf-gui");
    MainWindow w;
    QVERIFY(w.openScenario(QStringLiteral(MOEPERF_SOURCE_DIR "/examples/executor/cpu-small.json")));
    QSignalSpy done(w.hardwareRun(), &HardwareRun::finished);
    w.runOnHardware({QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--warmup"), QStringLiteral("0")}, cli);
    QVERIFY(done.wait(90000));
    QVERIFY2(done.at(0).at(0).toBool(), qPrintable(w.hardwareRun()->error() + QLatin1Char('\n') + w.hardwareLog()));
    QVERIFY(w.hardwareLog().contains(QStringLiteral("measurements written to")));  // the child's lines, as progress
    const TimelineModel* m = w.opModel();
    int moe = 0, attn = 0, measured = 0;
    for (int row = 0; row < m->rowCount(); ++row) {
      const QString name = m->index(row, TimelineModel::ColName).data().toString();
      const auto it = w.hardwareRun()->medians().constFind(name);
      const QModelIndex cell = m->index(row, TimelineModel::ColMeasured);
      if (it == w.hardwareRun()->medians().constEnd()) {  // not measured (dense MLP, embedding, optimizer): blank
        QVERIFY(cell.data().toString().isEmpty());
        QCOMPARE(cell.data(TimelineModel::SortRole).toDouble(), -1.0);
        continue;
      }
      // The executor runs a layer: its attention block, then the MoE block.
      QVERIFY2(name.startsWith(QStringLiteral("moe.")) || name.startsWith(QStringLiteral("attn.")), qPrintable(name));
      (name.startsWith(QStringLiteral("moe.")) ? moe : attn) += 1;
      ++measured;
      QCOMPARE(cell.data(TimelineModel::SortRole).toDouble(), *it);
      QCOMPARE(cell.data().toString(), format_seconds(*it));
    }
    QVERIFY2(moe > 0 && attn > 0 && measured == moe + attn, "no moe.* or no attn.* op of the table got a measured time");
    // The timeline overlay: a mark for every op named in the medians, and only those.
    const auto& marks = w.timelineView()->measuredMarks();
    QVERIFY(!marks.empty());
    for (const MeasuredMark& mk : marks) {
      const QString name = QString::fromStdString(
          w.report()->graph->classes[static_cast<size_t>(mk.rank_class)].ops[static_cast<size_t>(mk.op)].name);
      QVERIFY(w.hardwareRun()->medians().contains(name));
      QVERIFY(std::abs(mk.measured_end - mk.start - w.hardwareRun()->medians().value(name)) < 1e-12);
    }
    // File > Export of the timeline keeps the markers.
    QTemporaryDir dir;
    QString error;
    const QString png = dir.filePath(QStringLiteral("measured.png"));
    QVERIFY2(w.exportPng(png, &error), qPrintable(error));
    const QImage img = QImage(png).convertToFormat(QImage::Format_RGB32);
    int black = 0;
    for (int y = 0; y < img.height() - TimelineView::legendHeight(); ++y)  // the plot, above the legend
      for (int x = w.timelineView()->plotLeft(); x < img.width(); ++x) black += img.pixel(x, y) == measured_color().rgb();
    QVERIFY(black > 0);
  }
  // Run > Load measurements or trace: a profiler trace spreads each class's measured time over the
  // prediction's ops of that class; the executor's file goes by op name; a bad file keeps what is
  // shown and says why.
  void measuredFileOrTraceFillsMeasured() {
    MainWindow w;
    QVERIFY(w.openScenario(QStringLiteral(MOEPERF_SOURCE_DIR "/examples/layouts/qwen3-235b-h100-megatron-folded.json")));
    QTemporaryDir dir;
    const QString trace = dir.filePath(QStringLiteral("rank0.json"));
    moeperf::test::KinetoFixture::write(trace.toStdString(), moeperf::test::KinetoFixture::build());
    QVERIFY2(w.loadMeasurements(trace), qPrintable(w.hardwareLog()));
    QVERIFY(w.hardwareLog().contains(QStringLiteral("rank0.json (kineto, 24 kernels)")));
    const TimelineModel* m = w.opModel();
    auto measured = [&](const std::string& name) {
      for (int row = 0; row < m->rowCount(); ++row)
        if (m->index(row, TimelineModel::ColName).data().toString() == QString::fromStdString(name))
          return m->index(row, TimelineModel::ColMeasured).data(TimelineModel::SortRole).toDouble();
      return -2.0;
    };
    // The GEMM ops' measured times (per call) add up to the trace's 1.22 ms of GEMM kernels per step.
    double gemm = 0;
    std::string first_gemm;
    for (const OpSummary& o : w.report()->ops)
      if (o.category == Category::gemm) {
        const double v = measured(o.name);
        QVERIFY2(v > 0, o.name.c_str());
        gemm += v * static_cast<double>(o.count);
        if (first_gemm.empty()) first_gemm = o.name;
      }
    QVERIFY2(std::abs(gemm - 1220e-6) < 1e-9, qPrintable(QString::number(gemm)));
    const double kept = measured(first_gemm);
    // A truncated trace: not loaded, the message in the status bar, the measured times kept.
    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    {
      QFile f(bad);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(moeperf::test::KinetoFixture::build().dump().substr(0, 500)));
    }
    QVERIFY(!w.loadMeasurements(bad));
    QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("malformed JSON")), qPrintable(w.statusBar()->currentMessage()));
    QCOMPARE(measured(first_gemm), kept);
    // The executor's measurements: by op name, the rest blank.
    const QString ex = dir.filePath(QStringLiteral("m.json"));
    {
      QFile f(ex);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(R"({"kind": "measurements", "ops": {")" + first_gemm + R"(": {"median_s": 0.00123}}})"));
    }
    QVERIFY(w.loadMeasurements(ex));
    QCOMPARE(measured(first_gemm), 0.00123);
    // A file of published parts names no op of a step.
    QVERIFY(!w.loadMeasurements(QStringLiteral(MOEPERF_SOURCE_DIR "/calibration/published/gemm.json")));
    QVERIFY(w.statusBar()->currentMessage().contains(QStringLiteral("fit it with moeperf calibrate")));
    QCOMPARE(measured(first_gemm), 0.00123);
  }
  void clickSelectsRow() {
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    QVERIFY(w.openScenario(kDir + QStringLiteral("gb300-optimized.json")));
    TimelineView* v = w.timelineView();
    const auto r = w.report();
    const int op = wide_gemm(*r, *v);
    QVERIFY(op >= 0);
    const OpTiming& t = r->sim->classes[static_cast<size_t>(r->busiest_class)].ops[static_cast<size_t>(op)];
    const int lane = compute_lane(*v, r->busiest_class);
    const QPoint at(v->xForTime((t.start + t.end).value() / 2), v->laneRect(lane).center().y());
    const auto hit = v->hitTest(at);
    QVERIFY(hit && hit->span.op == op);
    const QString tip = v->toolTipFor(*hit);  // what hovering shows
    const Op& o = r->graph->classes[static_cast<size_t>(r->busiest_class)].ops[static_cast<size_t>(op)];
    QVERIFY2(tip.contains(QString::fromStdString(o.name)) && tip.contains(format_seconds((t.end - t.start).value())) &&
                 tip.contains(format_flops(o.flops.value())) && tip.contains(QStringLiteral("TFLOP/s")) &&
                 tip.contains(format_bytes(op_bytes(o))),
             qPrintable(tip));
    QTest::mouseClick(v, Qt::LeftButton, {}, at);
    const QModelIndexList rows = w.opTable()->selectionModel()->selectedRows();
    QCOMPARE(rows.size(), 1);
    QCOMPARE(rows[0].data(TimelineModel::OpIndexRole).toInt(), op);
  }
};

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  int rc = 0;
  {
    TimelineShotTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    MainWindowTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    StudyViewsTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  return rc;
}

#include "gui_widgets_test.moc"
