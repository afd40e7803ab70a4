#include "gui/models/sweep_job.h"

#include <QMetaObject>
#include <QRunnable>
#include <QThread>

namespace moeperf::gui {

struct SweepJob::Run {
  io::SweepSpec spec;
  std::atomic<size_t> next{0};
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::vector<std::optional<io::SweepRow>> rows;
  size_t done = 0;
};

SweepJob::SweepJob(QObject* parent) : QObject(parent) {}

SweepJob::~SweepJob() {
  cancel();
  pool_.waitForDone();
}

io::SweepSpec SweepJob::spec(const QString& scenario, const QStringList& sets, const QStringList& vary, const QStringList& derive) {
  io::SweepSpec sp;
  sp.scenario = scenario.toStdString();
  for (const QString& s : sets) sp.sets.push_back(io::parse_override(s.toStdString(), io::kEditOrigin));
  for (const QString& v : vary)
    if (!v.trimmed().isEmpty()) sp.axes.push_back(io::parse_vary(v.trimmed().toStdString()));
  for (const QString& d : derive)
    if (!d.trimmed().isEmpty()) sp.derive.push_back(io::parse_derive(d.trimmed().toStdString()));
  io::check_sweep(sp);
  return sp;
}

void SweepJob::start(io::SweepSpec sp, int threads) {
  cancel();
  spec_ = sp;
  auto run = std::make_shared<Run>();
  run->spec = std::move(sp);
  const size_t n = io::sweep_size(run->spec);
  run->rows.resize(n);
  rows_.assign(n, std::nullopt);
  run_ = run;
  const int t = std::max(1, std::min<int>(threads > 0 ? threads : QThread::idealThreadCount(), static_cast<int>(std::max<size_t>(n, 1))));
  pool_.setMaxThreadCount(t);
  running_ = t;
  for (int w = 0; w < t; ++w)
    pool_.start([this, run] {
      for (size_t i = run->next++; i < run->rows.size() && !run->cancelled; i = run->next++) {
        io::SweepRow r = io::run_point(run->spec, i);
        std::lock_guard<std::mutex> lk(run->mu);
        run->rows[i] = std::move(r);
        ++run->done;
        const int done = static_cast<int>(run->done), total = static_cast<int>(run->rows.size());
        QMetaObject::invokeMethod(this, [this, run, done, total] {
          if (run != run_) return;  // a newer start() replaced this run
          emit progress(done, total);
        }, Qt::QueuedConnection);
      }
      QMetaObject::invokeMethod(this, [this, run] {
        if (run != run_) return;
        if (--running_ > 0) return;
        {
          std::lock_guard<std::mutex> lk(run->mu);
          rows_ = run->rows;
        }
        emit finished(run->cancelled);
      }, Qt::QueuedConnection);
    });
}

void SweepJob::cancel() {
  if (run_) run_->cancelled = true;
}

std::vector<io::SweepRow> SweepJob::rows() const {
  std::vector<io::SweepRow> out;
  if (run_) {
    std::lock_guard<std::mutex> lk(run_->mu);
    for (const auto& r : run_->rows)
      if (r) out.push_back(*r);
  }
  return out;
}

}  // namespace moeperf::gui
