#include "gui/widgets/timeline_view.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "gui/models/palette.h"
#include "gui/models/timeline_model.h"

namespace moeperf::gui {

namespace {

// A ruler label with as many decimals as the tick step needs, in the unit the step reads best in.
QString ruler_label(double t, double step) {
  double scale = 1;
  const char* unit = " s";
  if (step < 1e-3) scale = 1e6, unit = " µs";
  else if (step < 0.1) scale = 1e3, unit = " ms";
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step * scale) + 1e-9)));
  return QString::number(t * scale, 'f', decimals) + QString::fromUtf8(unit);
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(400, 200);
  setAutoFillBackground(false);
}

void TimelineView::setReport(std::shared_ptr<const StepReport> report) {
  report_ = std::move(report);
  data_ = report_ ? build_timeline(*report_) : TimelineData{};
  geom_->t0 = 0;
  geom_->t1 = data_.step_time > 0 ? data_.step_time : 1.0;
  geom_->width = std::max(1, width() - kLabelWidth - 10);
  selected_class_ = selected_op_ = -1;
  marks_ = report_ ? measured_overlay(*report_, measured_) : std::vector<MeasuredMark>{};
  update();
}

void TimelineView::shareGeometry(TimelineView* other) {
  if (!other || other == this) return;
  geom_ = other->geom_;
  connect(this, &TimelineView::rangeChanged, other, qOverload<>(&QWidget::update));
  connect(other, &TimelineView::rangeChanged, this, qOverload<>(&QWidget::update));
  update();
}

void TimelineView::setMeasured(QHash<QString, double> median_s) {
  measured_ = std::move(median_s);
  marks_ = report_ ? measured_overlay(*report_, measured_) : std::vector<MeasuredMark>{};
  update();
}

void TimelineView::setSelectedOp(int rank_class, int op) {
  selected_class_ = rank_class;
  selected_op_ = op;
  update();
}

void TimelineView::setRange(double t0, double t1) {
  if (!(t1 > t0)) return;
  geom_->t0 = t0;
  geom_->t1 = t1;
  update();
  emit rangeChanged();
}

int TimelineView::laneHeight() const {
  const int n = std::max<int>(1, static_cast<int>(data_.lanes.size()));
  return std::clamp((height() - kRulerHeight - kLegendHeight) / n, 3, kMaxLaneHeight);
}

QRect TimelineView::laneRect(int lane) const {
  const int h = laneHeight();
  return QRect(kLabelWidth, kRulerHeight + lane * h, static_cast<int>(geom_->width), h);
}

int TimelineView::xForTime(double t) const { return kLabelWidth + static_cast<int>(std::floor(geom_->time_to_x(t))); }

std::vector<Span> TimelineView::visibleSpans(const Lane& lane) const {
  // Spans are sorted by start; ops on one queue do not overlap, so ends are sorted too.
  auto first = std::lower_bound(lane.spans.begin(), lane.spans.end(), geom_->t0,
                                [](const Span& s, double t) { return s.end < t; });
  auto last = std::upper_bound(first, lane.spans.end(), geom_->t1, [](double t, const Span& s) { return t < s.start; });
  return merge_lod(std::vector<Span>(first, last), *geom_, 1.0);
}

void TimelineView::paintRuler(QPainter& p) {
  p.fillRect(QRect(0, 0, width(), kRulerHeight), QColor(245, 245, 245));
  const double range = geom_->t1 - geom_->t0;
  // A 1-2-5 tick step giving about one tick per 120 px.
  const double raw = range / std::max(1.0, geom_->width / 120.0);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) { step = m * mag; break; }
  p.setPen(QColor(90, 90, 90));
  const double first = std::ceil(geom_->t0 / step) * step;
  const int bottom = kRulerHeight + laneHeight() * static_cast<int>(data_.lanes.size());
  for (double t = first; t <= geom_->t1 + step * 1e-9; t += step) {
    const int x = xForTime(t);
    p.setPen(QColor(90, 90, 90));
    p.drawLine(x, kRulerHeight - 8, x, kRulerHeight);
    p.drawText(QRect(x - 60, 2, 120, kRulerHeight - 10), Qt::AlignCenter, ruler_label(std::abs(t) < step * 1e-6 ? 0.0 : t, step));
    p.setPen(QColor(225, 225, 225));
    p.drawLine(x, kRulerHeight, x, bottom);
  }
}

std::vector<std::pair<QColor, QString>> TimelineView::legendItems() const {
  std::vector<std::pair<QColor, QString>> items;
  std::array<bool, kCategoryCount> used{};
  for (const Lane& l : data_.lanes)
    for (const Span& s : l.spans) used[static_cast<size_t>(s.category)] = true;
  for (int c = 0; c < kCategoryCount; ++c)
    if (used[static_cast<size_t>(c)])
      items.emplace_back(category_color(static_cast<Category>(c)),
                         QString::fromUtf8(to_string(static_cast<Category>(c))) +
                             (is_communication(static_cast<Category>(c)) ? " (overlapped)" : ""));
  items.emplace_back(exposed_comm_color(), QStringLiteral("exposed communication"));
  if (!marks_.empty()) items.emplace_back(measured_color(), QStringLiteral("measured (moeperf run)"));
  return items;
}

int TimelineView::legendItemsWidth() const {
  const QFontMetrics fm(font());
  int w = 0;
  for (const auto& item : legendItems()) w += 18 + fm.horizontalAdvance(item.second) + 16;
  return w;
}

QString TimelineView::summaryText() const {
  if (!report_) return {};
  return QStringLiteral("%1 · %2 GPUs · step %3 · exposed communication %4 (%5%)")
      .arg(QString::fromStdString(report_->name))
      .arg(report_->gpus)
      .arg(format_step(*report_), format_seconds(report_->exposed_comm.value()))
      .arg(100 * report_->exposed_comm_fraction, 0, 'f', 1);
}

void TimelineView::paintLegend(QPainter& p) {
  const QFontMetrics fm(font());
  const int top = height() - kLegendHeight + 4;
  p.setPen(Qt::black);
  // Row 1: what is shown; elided only when the window is narrower than the text.
  const QString s = summaryText();
  if (!s.isEmpty())
    p.drawText(QRect(8, top, width() - 16, kLegendRow), Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(s, Qt::ElideMiddle, width() - 16));
  // Row 2: the swatches.
  const int y = top + kLegendRow + 4;
  int x = 8;
  for (const auto& [color, text] : legendItems()) {
    p.fillRect(QRect(x, y, 14, 14), color);
    p.setPen(Qt::black);
    p.drawText(QPoint(x + 18, y + 12), text);
    x += 18 + fm.horizontalAdvance(text) + 16;
  }
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (data_.lanes.empty()) {
    p.setPen(Qt::gray);
    p.drawText(rect(), Qt::AlignCenter, tr("Open a scenario (File > Open scenario)"));
    return;
  }
  const int h = laneHeight();
  const int pad = h >= 8 ? 2 : 0;
  for (size_t i = 1; i < data_.lanes.size(); i += 2) {
    const QRect r = laneRect(static_cast<int>(i));
    p.fillRect(QRect(0, r.top(), width(), r.height()), QColor(248, 248, 251));
  }
  paintRuler(p);  // ticks and grid lines over the lane backgrounds, under the spans
  for (size_t i = 0; i < data_.lanes.size(); ++i) {
    const Lane& lane = data_.lanes[i];
    const QRect r = laneRect(static_cast<int>(i));
    if (h >= 10) {
      p.setPen(Qt::black);
      p.drawText(QRect(6, r.top(), kLabelWidth - 10, r.height()), Qt::AlignVCenter | Qt::AlignLeft | Qt::TextWordWrap,
                 QString::fromStdString(lane.label));
    }
    p.save();
    p.setClipRect(r);
    for (const Span& s : visibleSpans(lane)) {
      const int x0 = xForTime(s.start);
      const int x1 = std::max(x0 + 1, xForTime(s.end));
      p.fillRect(QRect(x0, r.top() + pad, x1 - x0, r.height() - 2 * pad), span_color(s.category, s.exposed));
      if (lane.rank_class == selected_class_ && s.op == selected_op_) {
        p.setPen(QPen(Qt::black, 2));
        p.drawRect(QRect(x0, r.top() + pad, x1 - x0, r.height() - 2 * pad));
      }
    }
    // Measured medians: a thin bar from the op's start for its measured time along the lane's
    // bottom, and a tick across the lane where the measurement ends.
    for (const MeasuredMark& m : marks_) {
      if (m.rank_class != lane.rank_class || m.queue != lane.queue) continue;
      if (m.measured_end < geom_->t0 || m.start > geom_->t1) continue;
      const int x0 = xForTime(m.start), x1 = std::max(x0 + 1, xForTime(m.measured_end));
      const int bar = std::max(1, std::min(3, r.height() / 6));
      p.fillRect(QRect(x0, r.bottom() - pad - bar + 1, x1 - x0, bar), measured_color());
      p.fillRect(QRect(x1 - 1, r.top() + pad, 2, r.height() - 2 * pad), measured_color());
    }
    p.restore();
  }
  paintLegend(p);
}

void TimelineView::resizeEvent(QResizeEvent*) {
  // Keep the visible time range: a wider window shows the same time in more detail.
  geom_->width = std::max(1, width() - kLabelWidth - 10);
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  const double x = e->position().x() - kLabelWidth;
  geom_->zoom_at(x, std::pow(1.25, e->angleDelta().y() / 120.0));
  update();
  emit rangeChanged();
  e->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  press_ = e->position().toPoint();
  last_ = *press_;
  dragged_ = false;
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  if (!press_) return;
  const QPoint pos = e->position().toPoint();
  if ((pos - *press_).manhattanLength() > 3) dragged_ = true;
  if (dragged_) {
    geom_->pan(pos.x() - last_.x());
    last_ = pos;
    update();
    emit rangeChanged();
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  if (press_ && !dragged_)
    if (auto hit = hitTest(e->position().toPoint())) {
      const int c = data_.lanes[static_cast<size_t>(hit->lane)].rank_class;
      setSelectedOp(c, hit->span.op);
      emit opClicked(c, hit->span.op);
    }
  press_.reset();
}

std::optional<TimelineView::Hit> TimelineView::hitTest(QPoint pos) const {
  if (pos.x() < kLabelWidth) return std::nullopt;
  for (size_t i = 0; i < data_.lanes.size(); ++i) {
    if (!laneRect(static_cast<int>(i)).contains(pos)) continue;
    for (const Span& s : visibleSpans(data_.lanes[i])) {
      const int x0 = xForTime(s.start), x1 = std::max(x0 + 1, xForTime(s.end));
      if (pos.x() >= x0 && pos.x() < x1 + 1) return Hit{static_cast<int>(i), s};
    }
  }
  return std::nullopt;
}

QString TimelineView::toolTipFor(const Hit& hit) const {
  if (!report_ || hit.lane < 0 || hit.span.op < 0) return {};
  const Lane& lane = data_.lanes[static_cast<size_t>(hit.lane)];
  const auto c = static_cast<size_t>(lane.rank_class);
  const Op& op = report_->graph->classes[c].ops[static_cast<size_t>(hit.span.op)];
  const OpTiming& t = report_->sim->classes[c].ops[static_cast<size_t>(hit.span.op)];
  const double d = (t.end - t.start).value();
  QString text = QStringLiteral("<b>%1</b> (%2, %3)<br>duration %4<br>bytes %5<br>FLOPs %6<br>achieved %7")
                     .arg(QString::fromStdString(op.name).toHtmlEscaped(), QString::fromUtf8(to_string(op.category)),
                          QString::fromStdString(lane.label).toHtmlEscaped(), format_seconds(d),
                          format_bytes(op_bytes(op)), format_flops(op.flops.value()), format_rate(op, d));
  if (hit.span.exposed) text += QStringLiteral("<br><span style='color:#d62728'>exposed (no compute running)</span>");
  if (hit.span.count > 1) text += QStringLiteral("<br>%1 ops merged at this zoom").arg(hit.span.count);
  return text;
}

bool TimelineView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const auto hit = hitTest(he->pos());
    if (!hit || !report_ || hit->span.op < 0) {
      QToolTip::hideText();
      e->ignore();
      return true;
    }
    QToolTip::showText(he->globalPos(), toolTipFor(*hit), this);
    return true;
  }
  return QWidget::event(e);
}

}  // namespace moeperf::gui
