// What the result charts (breakdown, waterfall, scaling) share: a headline title (1.4x the
// theme's size, bold) and handing a freshly built chart to its view (the view does not delete the
// chart it held, so it is deleted here, after the swap).
#pragma once

#include <QChart>
#include <QChartView>
#include <QFont>
#include <QString>

namespace moeperf::gui {

inline void set_headline(QChart* chart, const QString& text) {
  chart->setTitle(text);
  QFont f = chart->titleFont();
  f.setPointSizeF(f.pointSizeF() * 1.4);
  f.setBold(true);
  chart->setTitleFont(f);
}

inline void replace_chart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  delete old;
}

}  // namespace moeperf::gui
