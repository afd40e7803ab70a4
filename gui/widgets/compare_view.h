// The Compare tab: two scenarios' timelines one above the other on ONE time axis (the views share
// a TimelineGeometry, so a zoom or pan in either moves both), each headed by its scenario name and
// step time. The range starts at [0, the longer step]. Under them, the difference (compare_diff):
// the fields that differ, and a table of the step, its terms, the kernel seconds per category and
// the ops that moved most, upper and lower side by side with lower - upper and lower / upper.
//
//   CompareView v;
//   v.setReports(optimized, baseline);   // upper, lower
#pragma once

#include <QWidget>
#include <memory>

#include "model/study/predict.h"

class QLabel;
class QStandardItemModel;
class QTableView;

namespace moeperf::gui {

class TimelineView;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  explicit CompareView(QWidget* parent = nullptr);

  void setReports(std::shared_ptr<const StepReport> upper, std::shared_ptr<const StepReport> lower);
  void setUpper(std::shared_ptr<const StepReport> r) { setReports(std::move(r), lower_); }
  void setLower(std::shared_ptr<const StepReport> r) { setReports(upper_, std::move(r)); }
  void setRange(double t0, double t1);  // both views (the geometry is shared)

  TimelineView* upper() const { return views_[0]; }
  TimelineView* lower() const { return views_[1]; }
  QString upperLabel() const;
  QString lowerLabel() const;
  QStandardItemModel* diffModel() const { return diff_; }
  QString fieldsText() const;

 private:
  std::shared_ptr<const StepReport> upper_, lower_;
  TimelineView* views_[2];
  QLabel* labels_[2];
  QLabel* fields_;
  QStandardItemModel* diff_;
  QTableView* table_;
};

// "NAME · step 12.3 ms" (or a hint when no scenario is there).
QString compare_label(const StepReport* r, const QString& empty);

}  // namespace moeperf::gui
