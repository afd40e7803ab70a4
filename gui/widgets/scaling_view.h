// Scaling over GPU counts (Qt Charts): tokens/s per GPU (left axis) and scaling efficiency
// (right axis, % of the first point's per-GPU rate) against the GPU count on a log2 axis. Points
// whose prediction does not fit memory are drawn as red squares under the legend "does not fit";
// the others as circles. Painting only: the values come from gui/models/study_data.h.
#pragma once

#include <QChartView>
#include <memory>
#include <utility>

#include "gui/models/study_data.h"

class QLineSeries;
class QScatterSeries;

namespace moeperf::gui {

class ScalingView : public QChartView {
  Q_OBJECT
 public:
  explicit ScalingView(QWidget* parent = nullptr);
  void setStudies(std::shared_ptr<const Studies> studies);
  const Studies* studies() const { return studies_.get(); }

  // The series, for tests (null until a sweep is shown). x is the GPU count.
  QLineSeries* throughputSeries() const { return throughput_; }   // tokens/s/GPU
  QLineSeries* efficiencySeries() const { return efficiency_; }   // percent
  QScatterSeries* fitSeries() const { return fit_; }              // points that fit (tokens/s/GPU)
  QScatterSeries* noFitSeries() const { return nofit_; }          // points that do not fit

  static QColor throughputColor();
  static QColor noFitColor();
  static QColor efficiencyColor();

  // The throughput axis's end: the lowest intervals x step at or above `at_least`, with 4 to 8
  // intervals and a step of 1, 2, 2.5 or 5 x 10^k (2.5 from 25 up: the labels print no decimals;
  // fewer intervals on a tie); {top, intervals}.
  static std::pair<double, int> roundAxis(double at_least);

 private:
  std::shared_ptr<const Studies> studies_;
  QLineSeries* throughput_ = nullptr;
  QLineSeries* efficiency_ = nullptr;
  QScatterSeries* fit_ = nullptr;
  QScatterSeries* nofit_ = nullptr;
};

}  // namespace moeperf::gui
