// Step seconds per category as a stacked bar (Qt Charts): kernel time of the busiest rank class by
// category (report.breakdown), beside the step time split into exposed communication and the rest.
#pragma once

#include <QChartView>
#include <memory>

#include "model/study/predict.h"

namespace moeperf::gui {

class BreakdownView : public QChartView {
  Q_OBJECT
 public:
  explicit BreakdownView(QWidget* parent = nullptr);
  void setReport(std::shared_ptr<const StepReport> report);
};

}  // namespace moeperf::gui
