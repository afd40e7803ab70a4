#include "gui/models/timeline_model.h"

#include <algorithm>
#include <cmath>

namespace moeperf::gui {

double op_bytes(const Op& op) { return op.collective == Collective::none ? op.hbm_bytes.value() : op.bytes.value(); }

double op_rate(const Op& op, double seconds) {
  if (seconds <= 0) return 0;
  return is_communication(op.category) ? op_bytes(op) / seconds : op.flops.value() / seconds;
}

QString format_seconds(double s) {
  if (s >= 1) return QString::number(s, 'f', 3) + " s";
  if (s >= 1e-3) return QString::number(s * 1e3, 'f', 3) + " ms";
  return QString::number(s * 1e6, 'f', 1) + " µs";
}

QString format_step(const StepReport& r) {
  QString s = format_seconds(r.step_time.value());
  if (std::abs(r.band_high - r.band_low) >= 0.005)
    s += QStringLiteral(" −%1 / +%2 %").arg(100 * r.band_low, 0, 'f', 0).arg(100 * r.band_high, 0, 'f', 0);
  else if (r.band_high > 0)
    s += QStringLiteral(" ± %1 %").arg(100 * r.band_high, 0, 'f', 0);
  return s;
}

QString format_bytes(double b) {
  if (b >= 1e9) return QString::number(b / 1e9, 'f', 2) + " GB";
  if (b >= 1e6) return QString::number(b / 1e6, 'f', 2) + " MB";
  if (b >= 1e3) return QString::number(b / 1e3, 'f', 1) + " kB";
  return QString::number(b, 'f', 0) + " B";
}

QString format_flops(double f) {
  if (f >= 1e12) return QString::number(f / 1e12, 'f', 2) + " TFLOP";
  if (f >= 1e9) return QString::number(f / 1e9, 'f', 2) + " GFLOP";
  return QString::number(f, 'g', 3) + " FLOP";
}

QString format_rate(const Op& op, double seconds) {
  const double r = op_rate(op, seconds);
  if (is_communication(op.category)) return QString::number(r / 1e9, 'f', 1) + " GB/s";
  if (op.flops.value() > 0) return QString::number(r / 1e12, 'f', 1) + " TFLOP/s";
  return QString::number(op_bytes(op) / std::max(seconds, 1e-30) / 1e9, 'f', 1) + " GB/s";
}

TimelineModel::TimelineModel(QObject* parent) : QAbstractTableModel(parent) {}

void TimelineModel::setMeasured(QHash<QString, double> median_s) {
  beginResetModel();
  measured_ = std::move(median_s);
  endResetModel();
}

void TimelineModel::setReport(std::shared_ptr<const StepReport> report) {
  beginResetModel();
  report_ = std::move(report);
  endResetModel();
}

const RankClass* TimelineModel::class_() const {
  if (!report_ || !report_->graph || !report_->sim) return nullptr;
  const auto c = static_cast<size_t>(report_->busiest_class);
  if (c >= report_->graph->classes.size() || c >= report_->sim->classes.size()) return nullptr;
  return &report_->graph->classes[c];
}

int TimelineModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid()) return 0;
  const RankClass* rc = class_();
  return rc ? static_cast<int>(rc->ops.size()) : 0;
}

int TimelineModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RankClass* rc = class_();
  if (!rc) return {};
  const auto row = static_cast<size_t>(index.row());
  const Op& op = rc->ops[row];
  const OpTiming& t = report_->sim->classes[static_cast<size_t>(report_->busiest_class)].ops[row];
  const double start = t.start.value(), dur = (t.end - t.start).value();
  const auto measured = measured_.constFind(QString::fromStdString(op.name));
  const bool has_measured = measured != measured_.constEnd();
  if (role == OpIndexRole) return index.row();
  if (role == SortRole) {
    switch (index.column()) {
      case ColName: return QString::fromStdString(op.name);
      case ColStream: return static_cast<int>(op.stream);
      case ColCategory: return static_cast<int>(op.category);
      case ColStart: return start;
      case ColDuration: return dur;
      case ColBytes: return op_bytes(op);
      case ColFlops: return op.flops.value();
      case ColRate: return op_rate(op, dur);
      case ColMeasured: return has_measured ? *measured : -1.0;
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole && index.column() >= ColStart)
    return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  switch (index.column()) {
    case ColName: return QString::fromStdString(op.name);
    case ColStream: return QString::fromUtf8(to_string(op.stream));
    case ColCategory: return QString::fromUtf8(to_string(op.category));
    case ColStart: return format_seconds(start);
    case ColDuration: return format_seconds(dur);
    case ColBytes: return format_bytes(op_bytes(op));
    case ColFlops: return format_flops(op.flops.value());
    case ColRate: return format_rate(op, dur);
    case ColMeasured: return has_measured ? format_seconds(*measured) : QString();
    default: return {};
  }
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section + 1;
  static const char* names[] = {"Op", "Stream", "Category", "Start", "Duration", "Bytes", "FLOPs", "Achieved rate", "Measured"};
  if (section < 0 || section >= ColumnCount) return {};
  return QString::fromUtf8(names[section]);
}

std::vector<MeasuredMark> measured_overlay(const StepReport& r, const QHash<QString, double>& median_s) {
  std::vector<MeasuredMark> out;
  if (median_s.isEmpty() || !r.graph || !r.sim) return out;
  for (size_t c = 0; c < r.graph->classes.size() && c < r.sim->classes.size(); ++c) {
    const auto& ops = r.graph->classes[c].ops;
    const auto& t = r.sim->classes[c].ops;
    for (size_t i = 0; i < ops.size() && i < t.size(); ++i) {
      const auto it = median_s.constFind(QString::fromStdString(ops[i].name));
      if (it == median_s.constEnd()) continue;
      out.push_back({static_cast<int>(c), static_cast<int>(i), t[i].queue, t[i].start.value(), t[i].end.value(),
                     t[i].start.value() + *it});
    }
  }
  return out;
}

}  // namespace moeperf::gui
