// A plan (model/io/plan.h, the engine of `moeperf plan`) run off the GUI thread: the scenario file
// with its --set overrides loaded there, the candidates on a few threads, progress posted to the
// GUI thread as candidates finish. Cancel stops handing out candidates (those running finish); the
// best of those searched are then ranked and only the first predicted whole, so a cancelled plan
// still shows what it found. The entries are the CLI's for the same arguments.
//
//   PlanJob job;
//   connect(&job, &PlanJob::finished, view, [&](bool cancelled) { ... job.result() ... });
//   job.start(path, {"model=../models/qwen3-30b-a3b/config.json"}, {.gpus = 4, .top = 5});
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QThreadPool>
#include <memory>
#include <optional>

#include "model/io/plan.h"

namespace moeperf::gui {

class PlanJob : public QObject {
  Q_OBJECT
 public:
  explicit PlanJob(QObject* parent = nullptr);
  ~PlanJob() override;  // cancels and waits

  // `options.progress` and `merge` are the job's own; threads 0: every core.
  void start(const QString& scenario, const QStringList& sets, io::PlanOptions options, int threads = 0);
  void cancel();
  bool busy() const { return busy_; }
  // After finished(): the plan, or the message of what stopped it (a bad file, an objective the
  // system cannot price, no layout that fits; or, cancelled, none predicted yet).
  const std::optional<io::PlanResult>& result() const { return result_; }
  const QString& error() const { return error_; }
  double seconds() const { return seconds_; }
  // The options of the latest start() (its objective names the table's last column).
  const io::PlanOptions& options() const { return options_; }
  // How many candidates were searched (checked, pruned or simulated) of how many, after finished().
  size_t searched() const;
  // The scenario's file and overrides the plan ran on.
  const QString& path() const { return path_; }
  const QStringList& sets() const { return sets_; }

 signals:
  void progress(int done, int total);
  void finished(bool cancelled);

 private:
  struct Run;  // one start()'s state, shared with its worker
  QThreadPool pool_;
  std::shared_ptr<Run> run_;
  std::optional<io::PlanResult> result_;
  io::PlanOptions options_;
  QString error_, path_;
  QStringList sets_;
  double seconds_ = 0;
  bool busy_ = false;
};

}  // namespace moeperf::gui
