#include "gui/widgets/breakdown_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QHorizontalStackedBarSeries>
#include <QLegend>
#include <QValueAxis>

#include "gui/models/palette.h"
#include "gui/widgets/chart_frame.h"
#include "gui/models/timeline_model.h"

namespace moeperf::gui {

BreakdownView::BreakdownView(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setChart(new QChart());
  chart()->setTitle(tr("Open a scenario (File > Open scenario)"));
}

void BreakdownView::setReport(std::shared_ptr<const StepReport> r) {
  auto* chart = new QChart();
  if (r) {
    // Bar 0: the step (exposed communication vs the rest); bar 1: kernel seconds per category,
    // summed over the streams of the busiest class (overlapping kernels count once each).
    auto* series = new QHorizontalStackedBarSeries();
    const double step = r->step_time.value(), exposed = r->exposed_comm.value();
    auto* busy = new QBarSet(tr("step: compute or overlapped"));
    busy->append({step - exposed, 0.0});
    busy->setColor(QColor(0xc7, 0xc7, 0xc7));
    series->append(busy);
    auto* exp = new QBarSet(tr("step: exposed communication"));
    exp->append({exposed, 0.0});
    exp->setColor(exposed_comm_color());
    series->append(exp);
    for (int c = 0; c < kCategoryCount; ++c) {
      const double s = r->breakdown[static_cast<size_t>(c)].value();
      if (s <= 0) continue;
      auto* set = new QBarSet(QString::fromUtf8(to_string(static_cast<Category>(c))));
      set->append({0.0, s});
      set->setColor(category_color(static_cast<Category>(c)));
      series->append(set);
    }
    series->setBarWidth(0.6);
    series->setLabelsVisible(true);
    series->setLabelsFormat(QStringLiteral("@value"));
    series->setLabelsPrecision(3);
    chart->addSeries(series);
    auto* y = new QBarCategoryAxis();
    y->append({tr("step time (s)"), tr("kernel time by category (s)")});
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(y);
    auto* x = new QValueAxis();
    x->setTitleText(tr("seconds (busiest rank class)"));
    x->setLabelFormat(QStringLiteral("%.2f"));
    chart->addAxis(x, Qt::AlignBottom);
    series->attachAxis(x);
    x->applyNiceNumbers();
    set_headline(chart, QStringLiteral("%1 — %2 GPUs — step %3, exposed communication %4 (%5%)")
                        .arg(QString::fromStdString(r->name))
                        .arg(r->gpus)
                        .arg(format_seconds(step), format_seconds(exposed))
                        .arg(100 * r->exposed_comm_fraction, 0, 'f', 1));
    chart->legend()->setAlignment(Qt::AlignBottom);
  } else {
    chart->setTitle(tr("Open a scenario (File > Open scenario)"));
  }
  replace_chart(this, chart);
}

}  // namespace moeperf::gui
