// The system graph by tiers (from the bottom: CPUs, NVLink switch chips, GPUs, NICs, leaf, spine,
// core), links colored by the step's mean utilization of their resource (nvlink, nic, fabric,
// host). Painting only: vertices, links and utilization come from gui/models/topology_data.h.
#pragma once

#include <QWidget>
#include <memory>

#include "gui/models/topology_data.h"

namespace moeperf::gui {

class TopologyView : public QWidget {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);

  void setReport(std::shared_ptr<const StepReport> report);  // its topology and utilization
  void setData(TopologyData data, QString title = {});
  const TopologyData& data() const { return data_; }

  QRectF nodeRect(int node) const;  // widget pixels of TopologyData::nodes[node]
  static QColor kindColor(VertexKind k);
  static QColor utilizationColor(double u);  // 0 green .. 1 red

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  static constexpr int kLabelWidth = 170, kTitleHeight = 56, kLegendHeight = 56;
  double rowY(int tier) const;
  double plotWidth() const { return width() - kLabelWidth - 20.0; }

  TopologyData data_;
  QString title_;
  bool empty_ = true;
};

}  // namespace moeperf::gui
