// The Plan tab: `moeperf plan` of the scenario shown (with the panel's edits) in the window. The GPU
// count, layouts shown, objective (with a token budget for time to train), pipeline schedules and
// balanced layouts; Run and Cancel, a progress bar; the best layouts in a table, best first, with
// the figures `plan` prints, and what the search did and what the runner-up loses in the status.
// Double-clicking a row asks the window to open that layout (openPoint: the scenario's overrides,
// then the layout's --set list) in the timeline.
#pragma once

#include <QWidget>
#include <functional>
#include <utility>

#include "gui/models/plan_job.h"
#include "gui/widgets/run_controls.h"

class QCheckBox;
class QComboBox;
class QLineEdit;
class QSpinBox;
class QStandardItemModel;
class QTableView;

namespace moeperf::gui {

class PlanView : public QWidget {
  Q_OBJECT
 public:
  explicit PlanView(QWidget* parent = nullptr);
  // Where the scenario comes from at each Run: its file and --set overrides.
  void setSource(std::function<std::pair<QString, QStringList>()> source) { source_ = std::move(source); }
  // The form's fields, as the plan's options (tests and scripts set them as a user types them).
  void setGpus(int gpus);
  // The scenario's GPU count, taken unless the user has set one.
  void suggestGpus(int gpus);
  void setTop(int top);
  void setObjective(const QString& objective, const QString& tokens = {});  // tokens_per_s, time_to_train, cost
  void setSchedules(const QString& text);  // "1f1b,interleaved", "all", ...
  void setVpps(const QString& text);       // "2,4": virtual stages per GPU tried when interleaved
  void setBalance(bool on);
  void run(int threads = 0);  // as the Run button (threads 0: every core)
  void cancel();
  PlanJob* job() const { return job_; }
  QStandardItemModel* rowsModel() const { return model_; }
  QTableView* table() const { return table_; }
  QString statusText() const;
  // The --set list that opens a row's layout (the source's overrides, then the layout's).
  QStringList pointSets(int row) const;

 signals:
  void openPoint(const QString& path, const QStringList& sets);

 private:
  void onProgress(int done, int total);
  void onFinished(bool cancelled);

  std::function<std::pair<QString, QStringList>()> source_;
  PlanJob* job_;
  QSpinBox* gpus_;
  QSpinBox* top_;
  QComboBox* objective_;
  QLineEdit* tokens_;
  QLineEdit* schedules_;
  QLineEdit* vpps_;
  QSpinBox* passes_;
  QCheckBox* balance_;
  RunControls controls_;
  QStandardItemModel* model_;
  QTableView* table_;
  bool gpus_set_ = false;  // the user (or setGpus) chose the count: suggestions leave it
};

}  // namespace moeperf::gui
