// "Run on hardware": `moeperf run SCENARIO --backend cpu --out TMP.json` as a child process (the
// CLI next to moeperf-gui, so the GUI builds without CUDA), its output as progress lines, then the
// measured median op times from TMP.json. One run at a time; a new start() kills the previous one.
//
//   HardwareRun run;
//   connect(&run, &HardwareRun::line, log, &QPlainTextEdit::appendPlainText);
//   connect(&run, &HardwareRun::finished, [&](bool ok) { if (ok) model.setMeasured(run.medians()); });
//   run.start(HardwareRun::defaultBinary(), "examples/executor/cpu-small.json");
#pragma once

#include <QHash>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <memory>

namespace moeperf {
struct StepReport;
}

namespace moeperf::gui {

// ops.NAME.median_s of a measurements JSON (`moeperf run --out`); empty with *error on failure.
QHash<QString, double> load_measured_medians(const QString& path, QString* error);

// Measured seconds per op name from a file a user hands the window: the executor's measurements
// (`moeperf run --out`: its medians per op), or a profile of a real step (a PyTorch profiler JSON
// or an Nsight Systems SQLite export: each op of a class gets the class's measured time per step
// in proportion to its predicted share, io::trace_seconds_per_op, against `report`). Empty with
// *error (moeperf's message: file, JSON path, what was expected) on failure; *what says what was
// loaded, in words.
QHash<QString, double> load_measured_file(const QString& path, const StepReport* report, QString* error, QString* what);

class HardwareRun : public QObject {
  Q_OBJECT
 public:
  explicit HardwareRun(QObject* parent = nullptr);
  ~HardwareRun() override;  // kills a running child

  static QString defaultBinary();  // QCoreApplication::applicationDirPath() + "/moeperf"
  // sets: the scenario panel's overrides; extra: more `run` options (e.g. --steps 1 --warmup 0).
  void start(const QString& binary, const QString& scenario, const QStringList& sets = {},
             const QStringList& extra = {});
  bool running() const { return proc_ && proc_->state() != QProcess::NotRunning; }
  QStringList arguments() const { return args_; }
  const QHash<QString, double>& medians() const { return medians_; }
  QString error() const { return error_; }

 signals:
  void line(const QString& text);  // one line of the child's output (stdout and stderr merged)
  void finished(bool ok);          // ok: medians() holds the measurements; else error() says why

 private:
  void drain(bool flush);
  void done(int code, QProcess::ExitStatus status);

  std::unique_ptr<QProcess> proc_;
  std::unique_ptr<QTemporaryDir> dir_;
  QStringList args_;
  QByteArray pending_;
  QHash<QString, double> medians_;
  QString error_;
};

}  // namespace moeperf::gui
