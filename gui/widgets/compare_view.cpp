#include "gui/widgets/compare_view.h"

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>

#include "gui/models/timeline_model.h"
#include "gui/widgets/timeline_view.h"

namespace moeperf::gui {

QString compare_label(const StepReport* r, const QString& empty) {
  if (!r) return empty;
  return QStringLiteral("%1 · %2 GPUs · step %3 · exposed communication %4%")
      .arg(QString::fromStdString(r->name))
      .arg(r->gpus)
      .arg(format_step(*r))
      .arg(100 * r->exposed_comm_fraction, 0, 'f', 1);
}

CompareView::CompareView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  for (int i = 0; i < 2; ++i) {
    labels_[i] = new QLabel();
    labels_[i]->setStyleSheet(QStringLiteral("QLabel { font-weight: bold; padding: 4px; background: #eef2f7; }"));
    views_[i] = new TimelineView();
    layout->addWidget(labels_[i]);
    layout->addWidget(views_[i], 1);
  }
  views_[1]->shareGeometry(views_[0]);
  setReports(nullptr, nullptr);
}

void CompareView::setReports(std::shared_ptr<const StepReport> upper, std::shared_ptr<const StepReport> lower) {
  upper_ = std::move(upper);
  lower_ = std::move(lower);
  views_[0]->setReport(upper_);
  views_[1]->setReport(lower_);
  labels_[0]->setText(compare_label(upper_.get(), tr("No scenario (File > Open scenario)")));
  labels_[1]->setText(compare_label(lower_.get(), tr("No second scenario (File > Open second scenario)")));
  const double t1 = std::max(upper_ ? upper_->step_time.value() : 0.0, lower_ ? lower_->step_time.value() : 0.0);
  setRange(0, t1 > 0 ? t1 : 1.0);
}

void CompareView::setRange(double t0, double t1) { views_[0]->setRange(t0, t1); }

QString CompareView::upperLabel() const { return labels_[0]->text(); }
QString CompareView::lowerLabel() const { return labels_[1]->text(); }

}  // namespace moeperf::gui
