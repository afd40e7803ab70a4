// The Sweep tab: `moeperf sweep` of the scenario shown (with the panel's edits) in the window. The
// --vary and --derive texts (several separated by ';'), Run and Cancel, a progress bar; the rows
// in a sortable table (infeasible ones with the loader's reason or the memory shortfall) and a
// chart of tokens/s/GPU against the GPU count when it varies, else against the first varied field;
// or, with a token budget, the time to train against its cost (the price in the system file, else
// the GPU-hours held), every feasible point and the Pareto front (no other point both faster and
// cheaper). Double-clicking a row asks the window to open that point (openPoint) in the timeline.
#pragma once

#include <QWidget>
#include <functional>
#include <utility>

#include "gui/models/sweep_job.h"
#include "gui/widgets/run_controls.h"

class QChartView;
class QComboBox;
class QScatterSeries;
class QLineEdit;
class QLineSeries;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace moeperf::gui {

class StudyView : public QWidget {
  Q_OBJECT
 public:
  explicit StudyView(QWidget* parent = nullptr);
  // Where the scenario comes from at each Run: its file and --set overrides.
  void setSource(std::function<std::pair<QString, QStringList>()> source) { source_ = std::move(source); }
  void setVary(const QString& text);    // "parallelism.ep=4,8,16; gpus=128..1024*2"
  void setDerive(const QString& text);  // "parallelism.fsdp=gpus/(ep*tp*pp*dp)"
  void setTokens(const QString& text);  // "15T": the time to train (and its cost) per point; "" none
  // 0: tokens/s/GPU against the varied field; 1: time to train against cost (needs a token budget).
  void setChartKind(int kind);
  void run(int threads = 0);            // as the Run button (threads 0: every core)
  void cancel();
  SweepJob* job() const { return job_; }
  QStandardItemModel* rowsModel() const { return model_; }
  QTableView* table() const { return table_; }
  QLineSeries* throughputSeries() const { return series_; }
  QScatterSeries* costSeries() const { return cost_points_; }  // chart kind 1: every feasible point
  QLineSeries* paretoSeries() const { return pareto_; }        // chart kind 1: the front, fastest first
  QString chartXTitle() const;
  QString statusText() const;
  // The --set list that gives a row's point (the source's, the point's values, the derived ones).
  QStringList pointSets(int source_row) const;

 signals:
  void openPoint(const QString& path, const QStringList& sets);

 private:
  void onProgress(int done, int total);
  void onFinished(bool cancelled);
  void drawChart();

  std::function<std::pair<QString, QStringList>()> source_;
  QString path_;
  QStringList sets_;
  SweepJob* job_;
  QLineEdit* vary_;
  QLineEdit* derive_;
  QLineEdit* tokens_;
  QComboBox* chart_kind_;
  RunControls controls_;
  QStandardItemModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QChartView* chart_;
  QLineSeries* series_ = nullptr;
  QScatterSeries* cost_points_ = nullptr;
  QLineSeries* pareto_ = nullptr;
  std::vector<io::SweepRow> rows_;
};

}  // namespace moeperf::gui
