// The ops of the busiest rank class as a table: name, stream, category, start, duration, bytes,
// FLOPs, achieved rate, and the measured median when a hardware run was loaded. A thin adapter over StepReport: DisplayRole gives text, SortRole the
// number (seconds, bytes, FLOPs, bytes/s or FLOP/s) so a QSortFilterProxyModel sorts by value.
//
//   TimelineModel m;
//   m.setReport(report);                 // std::shared_ptr<const StepReport>
//   QModelIndex i = m.index(m.rowForOp(op), TimelineModel::ColDuration);
#pragma once

#include <QAbstractTableModel>
#include <QHash>
#include <memory>
#include <vector>

#include "model/study/predict.h"

namespace moeperf::gui {

class TimelineModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { ColName, ColStream, ColCategory, ColStart, ColDuration, ColBytes, ColFlops, ColRate, ColMeasured, ColumnCount };
  enum Role { SortRole = Qt::UserRole + 1, OpIndexRole };

  explicit TimelineModel(QObject* parent = nullptr);

  void setReport(std::shared_ptr<const StepReport> report);
  // Measured median seconds per op name (a `moeperf run --out` file, load_measured_medians): the
  // Measured column shows them for the ops they name; empty clears it. Kept across setReport.
  void setMeasured(QHash<QString, double> median_s);
  const QHash<QString, double>& measured() const { return measured_; }
  const StepReport* report() const { return report_.get(); }
  int rankClass() const { return report_ ? report_->busiest_class : 0; }
  int rowForOp(int op) const { return op; }  // rows are the class's ops in program order

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  const RankClass* class_() const;
  std::shared_ptr<const StepReport> report_;
  QHash<QString, double> measured_;
};

// Where a hardware run's measured median goes on the timeline: every op (of any rank class) whose
// name has a median, at its predicted start, on its lane (rank class, queue).
struct MeasuredMark {
  int rank_class = 0;
  int op = -1;
  int queue = 0;
  double start = 0, predicted_end = 0;  // seconds, the predicted span
  double measured_end = 0;              // start + measured median
};
std::vector<MeasuredMark> measured_overlay(const StepReport& r, const QHash<QString, double>& median_s);

// Bytes an op moves: message bytes for communication, HBM bytes for compute (as OpSummary counts).
double op_bytes(const Op& op);
// Achieved rate over the simulated duration: bytes/s for communication, FLOP/s for compute.
double op_rate(const Op& op, double seconds);
QString format_seconds(double s);
// The step time with its error band when there is one: "4.166 s ± 5 %", or "4.166 s −5 / +34 %"
// when the end-to-end term widens one side.
QString format_step(const StepReport& r);
QString format_bytes(double b);
QString format_flops(double f);
QString format_rate(const Op& op, double seconds);

}  // namespace moeperf::gui
