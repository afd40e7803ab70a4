// A sweep (model/io/sweep.h, the engine of `moeperf sweep`) run off the GUI thread: the points on
// a pool of threads, progress and the end posted to the GUI thread, cancel stops handing out points
// (those running finish). The rows are the CLI's rows for the same arguments.
//
//   SweepJob job;
//   connect(&job, &SweepJob::progress, bar, [&](int done, int total) { ... });
//   job.start(SweepJob::spec(path, sets, {"parallelism.ep=4,8,16"}, {"parallelism.fsdp=gpus/(ep*tp*pp*dp)"}));
#pragma once

#include <QObject>
#include <QStringList>
#include <QThreadPool>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "model/io/sweep.h"

namespace moeperf::gui {

class SweepJob : public QObject {
  Q_OBJECT
 public:
  explicit SweepJob(QObject* parent = nullptr);
  ~SweepJob() override;  // cancels and waits for the running points

  // The spec of `moeperf SCENARIO --set S... --vary V... --derive D...`; throws InputError (the
  // CLI's message) for a bad --vary or --derive text, or what would fail every point alike
  // (io::check_sweep: a misspelt path, a malformed file).
  static io::SweepSpec spec(const QString& scenario, const QStringList& sets, const QStringList& vary,
                            const QStringList& derive);
  void start(io::SweepSpec sp, int threads = 0);  // threads 0: every core
  void cancel();
  bool busy() const { return running_ > 0; }
  const io::SweepSpec& sweep() const { return spec_; }
  int total() const { return static_cast<int>(rows_.size()); }
  // The rows finished so far, in point order.
  std::vector<io::SweepRow> rows() const;

 signals:
  void progress(int done, int total);
  void finished(bool cancelled);

 private:
  struct Run;  // one start()'s state, shared with its workers
  QThreadPool pool_;
  io::SweepSpec spec_;
  std::shared_ptr<Run> run_;
  std::vector<std::optional<io::SweepRow>> rows_;
  int running_ = 0;  // workers of the current run still going (GUI thread)
};

}  // namespace moeperf::gui
