// The step timeline: one row per (rank class, hardware queue), a time ruler, ops as colored spans
// (level-of-detail merged below a pixel), exposed communication in its own color. Wheel zooms
// around the cursor, drag pans, hover shows the op, click emits opClicked; a hardware run's
// measured medians are drawn over their ops (setMeasured). Painting only: the
// lanes come from gui/models/timeline_data.h, the time<->pixel mapping from TimelineGeometry.
#pragma once

#include <QColor>
#include <QHash>
#include <QString>
#include <QWidget>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gui/models/timeline_data.h"
#include "gui/models/timeline_geometry.h"
#include "gui/models/timeline_model.h"

namespace moeperf::gui {

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);

  void setReport(std::shared_ptr<const StepReport> report);
  void setSelectedOp(int rank_class, int op);
  void setRange(double t0, double t1);  // seconds shown across the plot
  // Makes this view use `other`'s TimelineGeometry: a zoom or pan in either moves both (the
  // Compare tab's shared time axis). Both views should have the same plot width.
  void shareGeometry(TimelineView* other);
  // Measured median seconds per op name (a hardware run): each measured op gets a marker over its
  // predicted span (measured_overlay); empty clears them. Kept across setReport.
  void setMeasured(QHash<QString, double> median_s);
  const std::vector<MeasuredMark>& measuredMarks() const { return marks_; }

  const TimelineData& timeline() const { return data_; }
  const TimelineGeometry& timeGeometry() const { return *geom_; }
  // Layout, for tests and hit testing: the plot starts at plotLeft(); lane i occupies laneRect(i).
  int plotLeft() const { return kLabelWidth; }
  // The legend below the lanes: the step's summary on its own row (never cut at a usual window
  // width), then the color swatches. Both widths, for tests: they fit when <= width() - 16.
  static constexpr int legendHeight() { return kLegendHeight; }
  QString summaryText() const;
  int legendItemsWidth() const;
  QRect laneRect(int lane) const;
  int xForTime(double t) const;

  struct Hit {
    int lane = -1;
    Span span;
  };
  std::optional<Hit> hitTest(QPoint pos) const;
  QString toolTipFor(const Hit& hit) const;  // op name, duration, bytes, FLOPs, achieved rate

 signals:
  void opClicked(int rank_class, int op);
  void rangeChanged();  // zoom, pan or setRange changed the (possibly shared) geometry

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  bool event(QEvent*) override;

 private:
  static constexpr int kLabelWidth = 190, kRulerHeight = 30, kLegendRow = 22, kLegendHeight = 2 * kLegendRow + 6,
                       kMaxLaneHeight = 220;
  int laneHeight() const;
  void paintRuler(class QPainter& p);
  void paintLegend(class QPainter& p);
  std::vector<std::pair<QColor, QString>> legendItems() const;
  std::vector<Span> visibleSpans(const Lane& lane) const;

  std::shared_ptr<const StepReport> report_;
  TimelineData data_;
  std::shared_ptr<TimelineGeometry> geom_ = std::make_shared<TimelineGeometry>();
  QHash<QString, double> measured_;
  std::vector<MeasuredMark> marks_;
  int selected_class_ = -1, selected_op_ = -1;
  std::optional<QPoint> press_;
  QPoint last_;
  bool dragged_ = false;
};

}  // namespace moeperf::gui
