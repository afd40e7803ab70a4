// Loads and predicts scenarios off the GUI thread. Only the latest request's result is delivered:
// a request that is overtaken by a newer one is dropped when it finishes (hotspot's rule), so a
// slow 1,024-GPU prediction never overwrites a scenario opened after it.
//
//   ScenarioJob job;
//   connect(&job, &ScenarioJob::finished, [&] { show(job.result()); });
//   job.start("examples/deepseek-v3/gb300-optimized.json");
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <atomic>

#include "gui/models/scenario_loader.h"

namespace moeperf::gui {

class ScenarioJob : public QObject {
  Q_OBJECT
 public:
  explicit ScenarioJob(QObject* parent = nullptr);
  ~ScenarioJob() override;  // waits for running loads: they post to this object

  void start(const QString& path, const QStringList& sets = {});
  const LoadResult& result() const { return result_; }
  QString path() const { return path_; }
  bool busy() const { return pending_ != done_; }
  // Whether a result carries what the host costs the step (with_host_cost, a second simulation;
  // on by default): off for a job whose reports show no summary. Set before start().
  void setHostCost(bool on) { host_cost_ = on; }
  // Drops the requests still running: their results are never delivered (and one not started yet
  // never runs).
  void cancelPending() {
    done_ = ++pending_;
    latest_ = pending_;
    pool_.clear();
  }

 signals:
  void finished();  // result() and path() hold the latest request's outcome

 private:
  QThreadPool pool_;
  quint64 pending_ = 0, done_ = 0;  // generations, touched on the GUI thread only
  // pending_ as the workers read it: a request overtaken before it starts, or between its
  // prediction, its host's cost and its studies, stops there (each keystroke in the dock is a request).
  std::atomic<quint64> latest_{0};
  LoadResult result_;
  QString path_;
  bool host_cost_ = true;
};

}  // namespace moeperf::gui
