// The `compare --ablate` waterfall as a bar chart (Qt Charts): one bar per step, from everything
// off to the scenario, its height the step's model TFLOPS/GPU, labeled with the value and the step
// time; steps that do not fit memory in their own color. Painting only: the values come from
// gui/models/study_data.h.
#pragma once

#include <QChartView>
#include <memory>

#include "gui/models/study_data.h"

namespace moeperf::gui {

class WaterfallView : public QChartView {
  Q_OBJECT
 public:
  explicit WaterfallView(QWidget* parent = nullptr);
  void setStudies(std::shared_ptr<const Studies> studies);
  const Studies* studies() const { return studies_.get(); }

  static QColor barColor();      // a step that fits memory
  static QColor noFitColor();    // a step that does not

 private:
  std::shared_ptr<const Studies> studies_;
};

}  // namespace moeperf::gui
