#include "gui/models/plan_job.h"

#include <QMetaObject>
#include <QThread>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "model/error.h"
#include "model/io/load.h"

namespace moeperf::gui {

struct PlanJob::Run {
  std::atomic<bool> cancelled{false};
  std::optional<io::PlanResult> result;
  std::string error;
  double seconds = 0;
};

PlanJob::PlanJob(QObject* parent) : QObject(parent) { pool_.setMaxThreadCount(1); }

PlanJob::~PlanJob() {
  cancel();
  pool_.waitForDone();
}

void PlanJob::start(const QString& scenario, const QStringList& sets, io::PlanOptions options, int threads) {
  cancel();
  auto run = std::make_shared<Run>();
  run_ = run;
  path_ = scenario, sets_ = sets;
  options_ = options;
  options_.progress = nullptr, options_.merge = nullptr, options_.cancel = nullptr;
  result_.reset();
  error_.clear();
  busy_ = true;
  std::vector<std::string> set_list;
  for (const QString& s : sets) set_list.push_back(s.toStdString());
  const int t = threads > 0 ? threads : std::max(1, QThread::idealThreadCount());
  const std::string file = scenario.toStdString();
  pool_.start([this, run, file, set_list, options, t]() mutable {
    const auto t0 = std::chrono::steady_clock::now();
    options.shard = 0, options.shards = 1, options.merge = nullptr;
    options.cancel = &run->cancelled;
    options.progress = [this, run](size_t done, size_t total) {
      QMetaObject::invokeMethod(this, [this, run, done, total] {
        if (run == run_) emit progress(static_cast<int>(done), static_cast<int>(total));
      }, Qt::QueuedConnection);
    };
    // The candidates on t threads; once cancelled the rest are not started (plan() then ranks
    // and predicts the best of those that ran).
    auto on_threads = [run, t](std::vector<std::function<void()>>& jobs) {
      std::atomic<size_t> next{0};
      std::vector<std::thread> pool;
      for (int w = 0; w < t; ++w)
        pool.emplace_back([&] {
          for (size_t i = next++; i < jobs.size() && !run->cancelled; i = next++) jobs[i]();
        });
      for (auto& th : pool) th.join();
    };
    try {
      std::vector<io::Override> ov;
      for (const auto& s : set_list) ov.push_back(io::parse_override(s, io::kEditOrigin));
      const Scenario s = io::load_scenario(file, ov);
      run->result = io::plan(s, file, options, on_threads);
    } catch (const InputError& e) {
      // Cancelled before a layout was simulated, plan() finds none: say so, not "none fits".
      run->error = run->cancelled ? "Cancelled before any layout was predicted" : e.what();
    } catch (const std::exception& e) {
      run->error = std::string("plan failed: ") + e.what();
    }
    run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QMetaObject::invokeMethod(this, [this, run] {
      if (run != run_) return;  // a newer start() replaced this run
      result_ = run->result;
      error_ = QString::fromStdString(run->error);
      seconds_ = run->seconds;
      busy_ = false;
      emit finished(run->cancelled);
    }, Qt::QueuedConnection);
  });
}

size_t PlanJob::searched() const {
  if (!result_) return 0;
  const io::PlanResult& r = *result_;
  return r.invalid + r.too_fine + r.no_fit + r.bounded + r.compute_bounded + r.comm_bounded + r.schedule_bounded + r.predicted +
         r.failed + r.balanced_is_even;
}

void PlanJob::cancel() {
  if (run_) run_->cancelled = true;
}

}  // namespace moeperf::gui
