#include "gui/models/scenario_job.h"

#include <QMetaObject>

namespace moeperf::gui {

ScenarioJob::ScenarioJob(QObject* parent) : QObject(parent) { pool_.setMaxThreadCount(2); }

ScenarioJob::~ScenarioJob() {
  latest_ = ++pending_;  // the one running stops at its next check; queued ones never start
  pool_.clear();
  pool_.waitForDone();
}

void ScenarioJob::start(const QString& path, const QStringList& sets) {
  const quint64 gen = ++pending_;
  latest_ = gen;
  pool_.clear();  // requests not started yet are overtaken already
  std::vector<std::string> s;
  for (const QString& x : sets) s.push_back(x.toStdString());
  pool_.start([this, gen, path, s = std::move(s)] {
    if (gen != latest_) return;
    LoadResult r = load_and_predict(path.toStdString(), s);
    if (gen != latest_) return;
    if (host_cost_) r = with_host_cost(std::move(r));
    if (gen != latest_) return;
    r = with_studies(std::move(r));
    // Queued to the GUI thread; discarded by Qt if this object is gone (the destructor waits anyway).
    QMetaObject::invokeMethod(
        this,
        [this, gen, path, r = std::move(r)]() mutable {
          if (gen != pending_) return;  // overtaken by a newer request: drop
          done_ = gen;
          result_ = std::move(r);
          path_ = path;
          emit finished();
        },
        Qt::QueuedConnection);
  });
}

}  // namespace moeperf::gui
