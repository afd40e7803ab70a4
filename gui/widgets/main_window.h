// The desktop window: File > Open scenario, the timeline (with the busiest class's op table), the
// breakdown, the ablation waterfall, the scaling sweep, the topology and the side-by-side Compare
// (File > Open second scenario) in tabs, the scenario panel (a dock editing common fields as
// --set overrides), File > Save, a status line. A
// scenario that fails validation leaves the one shown and puts moeperf's message (file: JSON
// path: what was expected) in a banner.
#pragma once

#include <QMainWindow>
#include <QThreadPool>
#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "gui/models/hardware_run.h"
#include "gui/models/scenario_job.h"
#include "gui/models/timeline_model.h"

class QComboBox;
class QDockWidget;
class QLineEdit;
class QLabel;
class QPlainTextEdit;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;

namespace moeperf::gui {

class BreakdownView;
class CompareView;
class ScalingView;
class ScenarioPanel;
class PlanView;
class StudyView;
class SummaryPanel;
class TimelineView;
class TopologyView;
class WaterfallView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;  // waits for a Scaling sweep still running (it posts to this window)

  // Loads and predicts; on bad input keeps the current report and shows the message. True if loaded.
  bool openScenario(const QString& path, const QStringList& sets = {});
  // The same off the GUI thread (File > Open): the latest request wins, older results are dropped.
  void requestScenario(const QString& path, const QStringList& sets = {});
  ScenarioJob* job() const { return job_; }
  // File > Open second scenario: the Compare tab's lower timeline (the current scenario is the
  // upper one), loaded off the GUI thread by compareJob(); bad input shows the message in the
  // banner and keeps the second scenario shown. openCompareScenario does the same synchronously.
  void requestCompareScenario(const QString& path);
  bool openCompareScenario(const QString& path);
  // File > Pin scenario as second: the scenario shown, with the dock's edits, becomes the Compare
  // tab's lower timeline as it is now; later edits move only the upper one (what an edit changes,
  // side by side). False when no scenario is shown.
  bool pinCompareScenario();
  ScenarioJob* compareJob() const { return compare_job_; }
  CompareView* compareView() const { return compare_; }
  std::shared_ptr<const StepReport> compareReport() const { return compare_report_; }
  // The scenario panel's edits re-validate through job(); a rejected edit puts the message under
  // its field and keeps the report shown. saveScenario writes the file with the edits applied.
  ScenarioPanel* scenarioPanel() const { return panel_; }
  bool saveScenario(const QString& out, QString* error = nullptr);
  // File > Export: the current tab as a PNG (the screenshot renderer, at the tab's size and, for
  // the timeline, its zoom), the Chrome trace, the op table CSV. False (and *error) on failure.
  bool exportPng(const QString& out, QString* error = nullptr);
  bool exportTrace(const QString& out, QString* error = nullptr);
  bool exportCsv(const QString& out, QString* error = nullptr);
  // Run > Run on hardware: `moeperf run` of the scenario (with the panel's edits) on the CPU
  // backend; its output goes to the "Hardware run" dock, its medians to the table's Measured column.
  void runOnHardware(const QStringList& extra = {}, const QString& binary = HardwareRun::defaultBinary());
  HardwareRun* hardwareRun() const { return run_; }
  // Run > Load measurements or trace: the executor's measurements (moeperf run --out) or a profile
  // of a real step (PyTorch profiler JSON, Nsight Systems SQLite) over the current prediction, in
  // the table's Measured column and the timeline's markers. A bad file keeps what is shown and puts
  // moeperf's message in the status bar and the "Hardware run" dock. True if loaded.
  bool loadMeasurements(const QString& path);
  TimelineModel* opModel() const { return model_; }
  QString hardwareLog() const;

  std::shared_ptr<const StepReport> report() const { return report_; }
  QString scenarioPath() const { return path_; }
  QString errorText() const;  // the banner's message, empty when hidden
  TimelineView* timelineView() const { return timeline_; }
  BreakdownView* breakdownView() const { return breakdown_; }
  WaterfallView* waterfallView() const { return waterfall_; }
  ScalingView* scalingView() const { return scaling_; }
  TopologyView* topologyView() const { return topology_; }
  SummaryPanel* summaryPanel() const { return summary_; }
  StudyView* studyView() const { return study_; }
  PlanView* planView() const { return plan_; }
  QTableView* opTable() const { return table_; }
  // The Scaling tab's own GPU counts ("128,256,512,1024") and grown axis (fsdp, dp, ep): the sweep
  // is predicted again off the GUI thread; a bad list is said in the tab. False when refused.
  bool rescale(const QString& gpus, const QString& axis);
  QString scalingMessage() const;
  QTabWidget* tabs() const { return tabs_; }
  // The dock's edits not saved to the scenario file: its overrides that the scenario was not opened
  // with (a Sweep or Plan row's) or saved with, less those `kept` carries on (the same override, or
  // one of the same path: a row chosen sets its own value).
  QStringList unsavedEdits(const QStringList& kept = {}) const;
  // Before the dock's unsaved edits would be lost (File > Open, a Sweep or Plan row opened without
  // them, the window closed): asks Save, Discard or Cancel; true to go on. With none, true.
  // `ask` replaces the question box (tests): it returns the QMessageBox::StandardButton chosen.
  bool confirmDiscardEdits(const QStringList& kept = {});
  void setDiscardQuestion(std::function<int()> ask) { ask_discard_ = std::move(ask); }

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void openDialog();
  void saveDialog(bool ask);
  void exportDialog(int what);
  void onJobFinished();
  bool applyCompare(const LoadResult& r, const QString& path);
  void onPanelEdited();
  bool apply(const LoadResult& r, const QString& path);
  // The dock on a scenario just opened (its overrides the unsaved-edits baseline).
  void setPanelScenario(const QString& path, const QStringList& sets);
  void selectOp(int rank_class, int op);

  std::shared_ptr<const StepReport> report_;
  std::shared_ptr<const Studies> studies_;
  QString path_;
  TimelineModel* model_;
  QSortFilterProxyModel* proxy_;
  TimelineView* timeline_;
  BreakdownView* breakdown_;
  WaterfallView* waterfall_;
  ScalingView* scaling_;
  QLineEdit* scale_gpus_;
  QComboBox* scale_axis_;
  QLabel* scale_note_;
  std::atomic<quint64> scale_gen_{0};  // the latest Scaling request (read by its worker)
  QThreadPool scale_pool_;              // Scaling sweeps: waited for before the window goes
  TopologyView* topology_;
  CompareView* compare_;
  SummaryPanel* summary_;
  StudyView* study_;
  PlanView* plan_;
  ScenarioJob* compare_job_;
  std::shared_ptr<const StepReport> compare_report_;
  QTableView* table_;
  QTabWidget* tabs_;
  QLabel* error_;
  ScenarioJob* job_;
  ScenarioPanel* panel_;
  HardwareRun* run_;
  QDockWidget* run_dock_ = nullptr;
  QPlainTextEdit* run_log_;
  QDockWidget* dock_;
  bool editing_ = false;      // the latest job request came from the panel
  bool edit_overtaken_ = false;  // an edit's prediction was dropped for a File > Open still loading
  bool banner_is_compare_ = false;  // the banner's message is the second scenario's
  QStringList loaded_overrides_;
  std::pair<QString, QStringList> run_for_;  // the scenario (file, overrides) Run on hardware ran  // the dock's overrides when its scenario was opened or saved
  std::function<int()> ask_discard_;
  QStringList request_sets_;  // the latest File > Open request's --set values
};

}  // namespace moeperf::gui
