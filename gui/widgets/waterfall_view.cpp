#include "gui/widgets/waterfall_view.h"

#include <QBarCategoryAxis>
#include <algorithm>

#include "gui/models/palette.h"
#include "gui/widgets/chart_frame.h"
#include <QBarSet>
#include <QChart>
#include <QLegend>
#include <QStackedBarSeries>
#include <QValueAxis>

namespace moeperf::gui {

QColor WaterfallView::barColor() { return series_color(); }
QColor WaterfallView::noFitColor() { return no_fit_color(); }

WaterfallView::WaterfallView(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setChart(new QChart());
  chart()->setTitle(tr("Open a scenario (File > Open scenario)"));
}

void WaterfallView::setStudies(std::shared_ptr<const Studies> st) {
  studies_ = std::move(st);
  auto* chart = new QChart();
  if (studies_ && !studies_->waterfall.empty()) {
    const auto& bars = studies_->waterfall;
    // Two sets stacked, each bar in exactly one of them (0 in the other): fits / does not fit.
    auto* fits = new QBarSet(tr("model TFLOPS/GPU"));
    auto* nofit = new QBarSet(tr("does not fit memory"));
    fits->setColor(barColor());
    fits->setBorderColor(barColor());
    nofit->setColor(noFitColor());
    nofit->setBorderColor(noFitColor());
    QStringList names;
    double top = 0;
    for (const WaterfallBar& b : bars) {
      fits->append(b.fits ? b.tflops_per_gpu : 0.0);
      nofit->append(b.fits ? 0.0 : b.tflops_per_gpu);
      names << QStringLiteral("%1<br>step %2 s").arg(QString::fromStdString(b.name).toHtmlEscaped()).arg(b.step_time_s, 0, 'f', 3);
      top = std::max(top, b.tflops_per_gpu);
    }
    auto* series = new QStackedBarSeries();
    series->append(fits);
    bool any_nofit = false;
    for (const WaterfallBar& b : bars) any_nofit |= !b.fits;
    if (any_nofit) series->append(nofit);
    else delete nofit;
    series->setBarWidth(0.6);
    series->setLabelsVisible(true);
    series->setLabelsFormat(QStringLiteral("@value"));
    series->setLabelsPrecision(4);
    series->setLabelsPosition(QAbstractBarSeries::LabelsInsideEnd);
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis();
    x->append(names);
    chart->addAxis(x, Qt::AlignBottom);
    series->attachAxis(x);
    auto* y = new QValueAxis();
    y->setTitleText(tr("model TFLOPS per GPU"));
    y->setLabelFormat(QStringLiteral("%.0f"));
    y->setRange(0, top * 1.1);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(y);
    y->applyNiceNumbers();
    const double gain = bars.front().tflops_per_gpu > 0 ? bars.back().tflops_per_gpu / bars.front().tflops_per_gpu : 0.0;
    set_headline(chart, QStringLiteral("%1<br>%5 (compare --ablate): %2 → %3 TFLOPS/GPU (%4x)")
                         .arg(QString::fromStdString(studies_->name).toHtmlEscaped())
                         .arg(bars.front().tflops_per_gpu, 0, 'f', 0)
                         .arg(bars.back().tflops_per_gpu, 0, 'f', 0)
                         .arg(gain, 0, 'f', 2)
                         .arg(QString::fromStdString(studies_->waterfall_kind).toHtmlEscaped()));
    chart->legend()->setAlignment(Qt::AlignBottom);
  } else if (studies_) {
    chart->setTitle(tr("No waterfall: %1").arg(QString::fromStdString(studies_->waterfall_error)));
  } else {
    chart->setTitle(tr("Open a scenario (File > Open scenario)"));
  }
  replace_chart(this, chart);
}

}  // namespace moeperf::gui
