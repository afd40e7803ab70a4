#include "gui/widgets/scaling_view.h"

#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "gui/models/palette.h"
#include "gui/widgets/chart_frame.h"

namespace moeperf::gui {

QColor ScalingView::throughputColor() { return series_color(); }
QColor ScalingView::noFitColor() { return no_fit_color(); }
QColor ScalingView::efficiencyColor() { return QColor(0x2c, 0xa0, 0x2c); }

std::pair<double, int> ScalingView::roundAxis(double at_least) {
  if (!(at_least > 0) || !std::isfinite(at_least)) return {1.0, 4};
  std::pair<double, int> best{0.0, 0};
  for (int n = 4; n <= 8; ++n) {
    // The smallest step of the form m x 10^k (m in 1, 2, 2.5, 5) with n x step >= at_least.
    const double raw = at_least / n;
    double decade = std::pow(10.0, std::floor(std::log10(raw)));
    double step = 0;
    for (int guard = 0; step == 0 && guard < 2; ++guard, decade *= 10)
      for (double m : {1.0, 2.0, 2.5, 5.0})
        if (m * decade >= raw * (1 - 1e-12) && (m != 2.5 || decade >= 10)) {  // labels print no decimals
          step = m * decade;
          break;
        }
    const double top = step * n;
    if (best.second == 0 || top < best.first * (1 - 1e-12)) best = {top, n};
  }
  return best;
}

ScalingView::ScalingView(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setChart(new QChart());
  chart()->setTitle(tr("Open a scenario (File > Open scenario)"));
}

void ScalingView::setStudies(std::shared_ptr<const Studies> st) {
  studies_ = std::move(st);
  throughput_ = efficiency_ = nullptr;
  fit_ = nofit_ = nullptr;
  auto* chart = new QChart();
  if (studies_ && !studies_->scaling.empty()) {
    const auto& pts = studies_->scaling;
    throughput_ = new QLineSeries();
    throughput_->setName(tr("tokens/s per GPU"));
    throughput_->setPen(QPen(throughputColor(), 2.5));
    efficiency_ = new QLineSeries();
    efficiency_->setName(tr("scaling efficiency (%)"));
    efficiency_->setPen(QPen(efficiencyColor(), 2.0, Qt::DashLine));
    fit_ = new QScatterSeries();
    fit_->setName(tr("fits memory"));
    fit_->setMarkerShape(QScatterSeries::MarkerShapeCircle);
    fit_->setMarkerSize(12);
    fit_->setColor(throughputColor());
    fit_->setBorderColor(throughputColor());
    nofit_ = new QScatterSeries();
    nofit_->setName(tr("does not fit"));
    nofit_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    nofit_->setMarkerSize(16);
    nofit_->setColor(noFitColor());
    nofit_->setBorderColor(noFitColor());
    double top = 0;
    for (const ScalingPoint& p : pts) {
      const double x = static_cast<double>(p.gpus);
      throughput_->append(x, p.tokens_per_s_per_gpu);
      efficiency_->append(x, 100 * p.efficiency);
      (p.fits ? fit_ : nofit_)->append(x, p.tokens_per_s_per_gpu);
      top = std::max(top, p.tokens_per_s_per_gpu);
    }
    efficiency_->setPointsVisible(true);
    for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(throughput_), static_cast<QAbstractSeries*>(efficiency_),
                               static_cast<QAbstractSeries*>(fit_), static_cast<QAbstractSeries*>(nofit_)})
      chart->addSeries(s);

    auto* x = new QLogValueAxis();
    x->setBase(2);
    x->setLabelFormat(QStringLiteral("%d"));
    x->setTitleText(tr("GPUs (%1 grows)").arg(QString::fromUtf8(to_string(studies_->axis))));
    const double lo = static_cast<double>(pts.front().gpus), hi = static_cast<double>(pts.back().gpus);
    x->setRange(lo / 1.3, hi * 1.3);
    x->setMinorTickCount(0);
    chart->addAxis(x, Qt::AlignBottom);
    auto* y = new QValueAxis();
    y->setTitleText(tr("tokens/s per GPU"));
    // Throughput in the upper part (its top near 90 % of the height), efficiency (near 100 %) at
    // about half the height on the right axis, so the two lines never lie on each other. The axis
    // ends on the lowest round top (4 to 8 intervals of 1, 2, 2.5 or 5 x 10^k) at or above 1.1 x the
    // highest point: Qt's applyNiceNumbers could put it at 8,000 for 5,600, the line at 70 %.
    const auto [y_top, y_intervals] = roundAxis(top * 1.1);
    y->setRange(0, y_top);
    y->setTickCount(y_intervals + 1);
    y->setLabelFormat(QStringLiteral("%.0f"));
    chart->addAxis(y, Qt::AlignLeft);
    auto* e = new QValueAxis();
    e->setTitleText(tr("scaling efficiency (%)"));
    // Same tick count as the throughput axis (shared grid lines), on a round step that puts 100 %
    // at or below 56 % of the height (100 / 180).
    const int intervals = std::max(1, y->tickCount() - 1);
    double step = 100;
    for (double c : {20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 75.0, 100.0})
      if (c * intervals >= 180) {
        step = c;
        break;
      }
    e->setRange(0, step * intervals);
    e->setTickCount(y->tickCount());
    e->setLabelFormat(QStringLiteral("%.0f"));
    chart->addAxis(e, Qt::AlignRight);
    for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(throughput_), static_cast<QAbstractSeries*>(fit_),
                               static_cast<QAbstractSeries*>(nofit_)}) {
      s->attachAxis(x);
      s->attachAxis(y);
    }
    efficiency_->attachAxis(x);
    efficiency_->attachAxis(e);
    // Only the marker kinds that occur in the legend.
    if (fit_->count() == 0) chart->legend()->markers(fit_).front()->setVisible(false);
    if (nofit_->count() == 0) chart->legend()->markers(nofit_).front()->setVisible(false);
    chart->legend()->setAlignment(Qt::AlignBottom);
    const std::string lost = lost_text(pts.back());
    set_headline(chart, QStringLiteral("%1<br>scaling at a fixed per-GPU batch: %2 → %3 GPUs, efficiency %4%%5")
                        .arg(QString::fromStdString(studies_->name).toHtmlEscaped())
                        .arg(pts.front().gpus)
                        .arg(pts.back().gpus)
                        .arg(100 * pts.back().efficiency, 0, 'f', 1)
                        .arg(lost.empty() ? QString()
                                          : tr("<br>at %1 GPUs the step lost: %2")
                                                .arg(pts.back().gpus)
                                                .arg(QString::fromStdString(lost).toHtmlEscaped())));
  } else if (studies_) {
    chart->setTitle(tr("No scaling sweep: %1").arg(QString::fromStdString(studies_->scaling_error)));
  } else {
    chart->setTitle(tr("Open a scenario (File > Open scenario)"));
  }
  replace_chart(this, chart);
}

}  // namespace moeperf::gui
