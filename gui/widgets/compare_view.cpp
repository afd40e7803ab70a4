#include "gui/widgets/compare_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "gui/models/compare_diff.h"
#include "gui/models/table_items.h"

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
  auto* lanes = new QWidget();
  auto* lanes_layout = new QVBoxLayout(lanes);
  lanes_layout->setContentsMargins(0, 0, 0, 0);
  lanes_layout->setSpacing(2);
  for (int i = 0; i < 2; ++i) {
    labels_[i] = new QLabel();
    labels_[i]->setStyleSheet(QStringLiteral("QLabel { font-weight: bold; padding: 4px; background: #eef2f7; }"));
    views_[i] = new TimelineView();
    lanes_layout->addWidget(labels_[i]);
    lanes_layout->addWidget(views_[i], 1);
  }
  views_[1]->shareGeometry(views_[0]);
  auto* below = new QWidget();
  auto* below_layout = new QVBoxLayout(below);
  below_layout->setContentsMargins(0, 0, 0, 0);
  below_layout->setSpacing(2);
  fields_ = new QLabel();
  fields_->setWordWrap(true);
  fields_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  fields_->setStyleSheet(QStringLiteral("QLabel { padding: 4px; }"));
  diff_ = new QStandardItemModel(this);
  table_ = new QTableView();
  table_->setObjectName(QStringLiteral("compareDiff"));
  table_->setModel(diff_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(20);
  below_layout->addWidget(fields_);
  below_layout->addWidget(table_, 1);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(lanes);
  split->addWidget(below);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);
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
  // The difference, lower against upper.
  diff_->clear();
  if (!upper_ || !lower_) {
    fields_->setText(tr("Open a second scenario to see what differs"));
    return;
  }
  const CompareDiff d = compare_diff(*upper_, *lower_, 12);
  QStringList f;
  for (const std::string& x : d.fields) f << QString::fromStdString(x);
  fields_->setText(f.isEmpty() ? tr("The two scenarios differ in no field (names and descriptions aside)")
                               : tr("Fields that differ: %1").arg(f.join(QStringLiteral(", "))));
  diff_->setHorizontalHeaderLabels({tr("what"), tr("name"), tr("upper s"), tr("lower s"), tr("lower - upper s"), tr("lower / upper")});
  for (const DiffRow& r : d.rows) {
    QList<QStandardItem*> cells{new QStandardItem(QString::fromStdString(r.group)), new QStandardItem(QString::fromStdString(r.name)),
                                number_item(r.upper, 4), number_item(r.lower, 4),
                                number_item(r.delta(), QString::asprintf("%+.4f", r.delta()))};
    cells << (r.upper > 0 ? number_item(r.lower / r.upper, 3) : new QStandardItem(QStringLiteral("-")));
    // Slower below in red, faster in green (the step's row in bold).
    const double tiny = 1e-9 * std::max(std::abs(r.upper), std::abs(r.lower));
    const QColor c = r.delta() > tiny ? QColor(0xa3, 0x1f, 0x1f) : r.delta() < -tiny ? QColor(0x1d, 0x6b, 0x2a) : QColor(Qt::black);
    cells[4]->setForeground(c);
    if (r.group == "step")
      for (QStandardItem* it : cells) {
        QFont bold = it->font();
        bold.setBold(true);
        it->setFont(bold);
      }
    diff_->appendRow(cells);
  }
  table_->resizeColumnsToContents();
}

void CompareView::setRange(double t0, double t1) { views_[0]->setRange(t0, t1); }

QString CompareView::upperLabel() const { return labels_[0]->text(); }
QString CompareView::lowerLabel() const { return labels_[1]->text(); }
QString CompareView::fieldsText() const { return fields_->text(); }

}  // namespace moeperf::gui
