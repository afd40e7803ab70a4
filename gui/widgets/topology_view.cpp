#include "gui/widgets/topology_view.h"

#include <QPainter>
#include <algorithm>

namespace moeperf::gui {

namespace {
QString tier_name(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return QStringLiteral("GPUs");
    case VertexKind::cpu: return QStringLiteral("CPUs");
    case VertexKind::nic: return QStringLiteral("NICs");
    case VertexKind::nvswitch: return QStringLiteral("NVLink switch chips");
    case VertexKind::leaf: return QStringLiteral("leaf switches");
    case VertexKind::spine: return QStringLiteral("spine switches");
    case VertexKind::core: return QStringLiteral("core switches");
  }
  return {};
}
}  // namespace

TopologyView::TopologyView(QWidget* parent) : QWidget(parent) {
  setMinimumSize(600, 400);
  setAutoFillBackground(true);
}

QColor TopologyView::kindColor(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return QColor(0x76, 0xb9, 0x00);
    case VertexKind::cpu: return QColor(0x8c, 0xa2, 0xb8);
    case VertexKind::nic: return QColor(0xff, 0x9f, 0x40);
    case VertexKind::nvswitch: return QColor(0x94, 0x67, 0xbd);
    case VertexKind::leaf:
    case VertexKind::spine:
    case VertexKind::core: return QColor(0x44, 0x55, 0x66);
  }
  return Qt::black;
}

QColor TopologyView::utilizationColor(double u) {
  u = std::clamp(u, 0.0, 1.0);
  return QColor::fromHsvF(static_cast<float>((1.0 - u) * 120.0 / 360.0), 0.85f, 0.85f);
}

void TopologyView::setReport(std::shared_ptr<const StepReport> r) {
  if (!r || !r->topology) {
    data_ = {};
    empty_ = true;
    update();
    return;
  }
  setData(build_topology_data(*r->topology, step_utilization(*r)),
          QStringLiteral("%1 — %2 GPUs").arg(QString::fromStdString(r->name)).arg(r->gpus));
}

void TopologyView::setData(TopologyData data, QString title) {
  data_ = std::move(data);
  title_ = std::move(title);
  empty_ = false;
  update();
}

double TopologyView::rowY(int tier) const {
  const int n = std::max<int>(1, static_cast<int>(data_.tiers.size()));
  const double h = height() - kTitleHeight - kLegendHeight;
  return kTitleHeight + h - (tier + 0.5) * h / n;  // tier 0 at the bottom
}

QRectF TopologyView::nodeRect(int node) const {
  const TopoNode& n = data_.nodes[static_cast<size_t>(node)];
  const TopoTier& t = data_.tiers[static_cast<size_t>(n.tier)];
  const int rows = std::max<int>(1, static_cast<int>(data_.tiers.size()));
  const double rowh = (height() - kTitleHeight - kLegendHeight) / static_cast<double>(rows);
  const double h = std::min(26.0, rowh * 0.45);
  if (t.aggregated) {
    const double w = std::min(320.0, plotWidth() * 0.5);
    return {kLabelWidth + (plotWidth() - w) / 2, rowY(n.tier) - h / 2, w, h};
  }
  const double pitch = plotWidth() / static_cast<double>(t.drawn);
  const double w = std::clamp(pitch * 0.7, 2.0, 48.0);
  return {kLabelWidth + (static_cast<double>(n.slot) + 0.5) * pitch - w / 2, rowY(n.tier) - h / 2, w, h};
}

void TopologyView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (empty_) {
    p.drawText(rect(), Qt::AlignCenter, tr("Open a scenario (File > Open scenario)"));
    return;
  }
  p.setRenderHint(QPainter::Antialiasing);
  QFont title = font();
  title.setPointSizeF(title.pointSizeF() * 1.4);
  title.setBold(true);
  p.setFont(title);
  p.setPen(QColor(0x33, 0x33, 0x33));
  const QString sub = data_.whole ? tr("every vertex") : tr("one NVLink domain; fabric tiers as counts");
  p.drawText(QRect(0, 6, width(), kTitleHeight - 6), Qt::AlignHCenter | Qt::AlignTop,
             QStringLiteral("%1\nsystem graph (%2), links colored by mean utilization over the step").arg(title_, sub));
  p.setFont(font());

  // Links under the boxes, from box center to box center, in their resource's utilization color.
  for (const TopoEdge& e : data_.edges) {
    QColor c = utilizationColor(data_.utilization[static_cast<size_t>(e.resource)]);
    c.setAlpha(110);
    p.setPen(QPen(c, 1.0));
    p.drawLine(nodeRect(e.a).center(), nodeRect(e.b).center());
  }
  for (size_t i = 0; i < data_.nodes.size(); ++i) {
    const TopoTier& t = data_.tiers[static_cast<size_t>(data_.nodes[i].tier)];
    const QRectF r = nodeRect(static_cast<int>(i));
    p.setPen(Qt::NoPen);
    p.setBrush(kindColor(t.kind));
    p.drawRect(r);
    if (t.aggregated) {
      p.setPen(Qt::white);
      p.drawText(r, Qt::AlignCenter, QStringLiteral("%1 %2").arg(t.total).arg(tier_name(t.kind)));
    }
  }
  // Tier labels: kind and drawn / total.
  p.setPen(QColor(0x33, 0x33, 0x33));
  for (size_t i = 0; i < data_.tiers.size(); ++i) {
    const TopoTier& t = data_.tiers[i];
    const QString n = t.aggregated || t.drawn == t.total ? QString::number(t.total)
                                                         : QStringLiteral("%1 of %2").arg(t.drawn).arg(t.total);
    p.drawText(QRectF(8, rowY(static_cast<int>(i)) - 20, kLabelWidth - 12, 40), Qt::AlignVCenter | Qt::AlignLeft,
               QStringLiteral("%1\n%2").arg(tier_name(t.kind), n));
  }
  // Legend: the color scale and each resource's mean utilization.
  const int y = height() - kLegendHeight + 14;
  const int x0 = kLabelWidth;
  p.drawText(QRect(8, y - 2, kLabelWidth, 20), Qt::AlignLeft | Qt::AlignVCenter, tr("link utilization"));
  for (int i = 0; i <= 100; ++i) p.fillRect(QRectF(x0 + 2.0 * i, y, 2.0, 14), utilizationColor(i / 100.0));
  p.drawText(QRect(x0, y + 16, 40, 16), Qt::AlignLeft, QStringLiteral("0%"));
  p.drawText(QRect(x0 + 170, y + 16, 40, 16), Qt::AlignRight, QStringLiteral("100%"));
  int x = x0 + 240;
  for (int k = 0; k < kResourceCount; ++k) {
    const double u = data_.utilization[static_cast<size_t>(k)];
    p.fillRect(QRect(x, y, 14, 14), utilizationColor(u));
    const QString s = QStringLiteral("%1 %2%").arg(QString::fromUtf8(to_string(static_cast<Resource>(k)))).arg(100 * u, 0, 'f', 1);
    p.drawText(QRect(x + 20, y - 2, 160, 20), Qt::AlignLeft | Qt::AlignVCenter, s);
    x += 180;
  }
  int lx = x + 20;
  for (VertexKind k : {VertexKind::gpu, VertexKind::cpu, VertexKind::nic, VertexKind::nvswitch, VertexKind::leaf}) {
    p.fillRect(QRect(lx, y, 14, 14), kindColor(k));
    const QString s = k == VertexKind::leaf ? tr("IB switch") : tier_name(k);
    p.drawText(QRect(lx + 20, y - 2, 150, 20), Qt::AlignLeft | Qt::AlignVCenter, s);
    lx += 30 + p.fontMetrics().horizontalAdvance(s);
  }
}

}  // namespace moeperf::gui
