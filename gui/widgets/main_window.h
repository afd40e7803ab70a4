// The desktop window: File > Open scenario, the timeline (with the busiest class's op table), the
// breakdown, the ablation waterfall, the scaling sweep and the topology in tabs, a status line. A
// scenario that fails validation leaves the one shown and puts moeperf's message (file: JSON
// path: what was expected) in a banner.
#pragma once

#include <QMainWindow>
#include <memory>

#include "gui/models/scenario_job.h"
#include "gui/models/timeline_model.h"

class QLabel;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;

namespace moeperf::gui {

class BreakdownView;
class ScalingView;
class TimelineView;
class TopologyView;
class WaterfallView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Loads and predicts; on bad input keeps the current report and shows the message. True if loaded.
  bool openScenario(const QString& path, const QStringList& sets = {});
  // The same off the GUI thread (File > Open): the latest request wins, older results are dropped.
  void requestScenario(const QString& path, const QStringList& sets = {});
  ScenarioJob* job() const { return job_; }

  std::shared_ptr<const StepReport> report() const { return report_; }
  QString scenarioPath() const { return path_; }
  QString errorText() const;  // the banner's message, empty when hidden
  TimelineView* timelineView() const { return timeline_; }
  BreakdownView* breakdownView() const { return breakdown_; }
  WaterfallView* waterfallView() const { return waterfall_; }
  ScalingView* scalingView() const { return scaling_; }
  TopologyView* topologyView() const { return topology_; }
  QTableView* opTable() const { return table_; }
  QTabWidget* tabs() const { return tabs_; }

 private:
  void openDialog();
  bool apply(const LoadResult& r, const QString& path);
  void selectOp(int rank_class, int op);

  std::shared_ptr<const StepReport> report_;
  QString path_;
  TimelineModel* model_;
  QSortFilterProxyModel* proxy_;
  TimelineView* timeline_;
  BreakdownView* breakdown_;
  WaterfallView* waterfall_;
  ScalingView* scaling_;
  TopologyView* topology_;
  QTableView* table_;
  QTabWidget* tabs_;
  QLabel* error_;
  ScenarioJob* job_;
};

}  // namespace moeperf::gui
