#include "gui/models/hardware_run.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include "model/io/measured_trace.h"

namespace moeperf::gui {

QHash<QString, double> load_measured_medians(const QString& path, QString* error) {
  QHash<QString, double> out;
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    if (error) *error = path + QStringLiteral(": cannot read: ") + f.errorString();
    return out;
  }
  QJsonParseError e{};
  const QJsonDocument d = QJsonDocument::fromJson(f.readAll(), &e);
  const QJsonObject ops = d.object().value(QStringLiteral("ops")).toObject();
  if (e.error != QJsonParseError::NoError ||
      d.object().value(QStringLiteral("kind")).toString() != QLatin1String("measurements") || ops.isEmpty()) {
    if (error) *error = path + QStringLiteral(": expected a measurements JSON (moeperf run --out) with /ops");
    return out;
  }
  for (auto it = ops.begin(); it != ops.end(); ++it) {
    const QJsonValue m = it.value().toObject().value(QStringLiteral("median_s"));
    if (m.isDouble()) out.insert(it.key(), m.toDouble());
  }
  return out;
}

QHash<QString, double> load_measured_file(const QString& path, const StepReport* report, QString* error, QString* what) {
  QHash<QString, double> out;
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    if (error) *error = path + QStringLiteral(": cannot read: ") + f.errorString();
    return out;
  }
  const QByteArray text = f.readAll();
  f.close();
  // The executor's measurements by their kind; anything else is read as a trace (which names
  // what is wrong with it when it is not one).
  const bool sqlite = text.startsWith("SQLite format 3");
  const QJsonObject top = sqlite ? QJsonObject() : QJsonDocument::fromJson(text).object();
  if (top.value(QStringLiteral("kind")).toString() == QLatin1String("measurements")) {
    if (!top.contains(QStringLiteral("ops"))) {
      if (error) *error = path + QStringLiteral(": a measurements file of parts (records) names no op of a step: fit it with moeperf calibrate");
      return out;
    }
    out = load_measured_medians(path, error);
    if (what && !out.isEmpty()) *what = QStringLiteral("%1 ops measured by moeperf run (%2)").arg(out.size()).arg(QFileInfo(path).fileName());
    return out;
  }
  if (!report) {
    if (error) *error = path + QStringLiteral(": a trace is set beside a prediction: open a scenario first");
    return out;
  }
  try {
    const io::MeasuredTrace t = io::read_measured_trace(path.toStdString(), io::builtin_kernel_patterns(), {});
    for (const auto& [op, s] : io::trace_seconds_per_op(*report, t)) out.insert(QString::fromStdString(op), s);
    if (out.isEmpty()) {
      if (error) *error = path + QStringLiteral(": no op class of the trace is one the prediction has");
      return out;
    }
    if (what)
      *what = QStringLiteral("%1 (%2, %3 kernels): %4 ops shown at their class's measured time per step, in proportion to the prediction")
                  .arg(QFileInfo(path).fileName(), QString::fromStdString(t.format))
                  .arg(t.kernels)
                  .arg(out.size());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    out.clear();
  }
  return out;
}

HardwareRun::HardwareRun(QObject* parent) : QObject(parent) {}

HardwareRun::~HardwareRun() {
  if (running()) {
    proc_->disconnect(this);
    proc_->kill();
    proc_->waitForFinished(5000);
  }
}

QString HardwareRun::defaultBinary() { return QCoreApplication::applicationDirPath() + QStringLiteral("/moeperf"); }

void HardwareRun::start(const QString& binary, const QString& scenario, const QStringList& sets,
                        const QStringList& extra) {
  if (running()) {
    proc_->disconnect(this);
    proc_->kill();
    proc_->waitForFinished(5000);
  }
  medians_.clear();
  error_.clear();
  pending_.clear();
  dir_ = std::make_unique<QTemporaryDir>();
  args_ = {QStringLiteral("run"),       scenario,
           QStringLiteral("--backend"), QStringLiteral("cpu"),
           QStringLiteral("--out"),     dir_->filePath(QStringLiteral("measurements.json"))};
  for (const QString& s : sets) args_ << QStringLiteral("--set") << s;
  args_ << extra;
  proc_ = std::make_unique<QProcess>();
  proc_->setProcessChannelMode(QProcess::MergedChannels);
  connect(proc_.get(), &QProcess::readyRead, this, [this] { drain(false); });
  connect(proc_.get(), &QProcess::finished, this, &HardwareRun::done);
  connect(proc_.get(), &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;  // the others end in finished()
    error_ = proc_->program() + QStringLiteral(": ") + proc_->errorString();
    emit finished(false);
  });
  if (!QFileInfo(binary).isExecutable()) {
    error_ = binary + QStringLiteral(": no moeperf CLI there (build the `moeperf` target)");
    emit finished(false);
    return;
  }
  emit line(binary + QLatin1Char(' ') + args_.join(QLatin1Char(' ')));
  proc_->start(binary, args_);
}

void HardwareRun::drain(bool flush) {
  pending_ += proc_->readAll();
  qsizetype nl;
  while ((nl = pending_.indexOf('\n')) >= 0) {
    emit line(QString::fromLocal8Bit(pending_.left(nl)));
    pending_.remove(0, nl + 1);
  }
  if (flush && !pending_.isEmpty()) {
    emit line(QString::fromLocal8Bit(pending_));
    pending_.clear();
  }
}

void HardwareRun::done(int code, QProcess::ExitStatus status) {
  drain(true);
  if (status != QProcess::NormalExit || code != 0) {
    error_ = QStringLiteral("moeperf run failed (exit code %1)").arg(code);
    emit finished(false);
    return;
  }
  medians_ = load_measured_medians(dir_->filePath(QStringLiteral("measurements.json")), &error_);
  emit finished(!medians_.isEmpty());
}

}  // namespace moeperf::gui
