#include "gui/models/exports.h"

#include <QSaveFile>
#include <sstream>

#include "model/io/report_io.h"
#include "model/io/trace.h"

namespace moeperf::gui {

bool write_file_atomically(const QString& path, const QByteArray& bytes, QString* error) {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
    if (error) *error = path + QStringLiteral(": cannot write: ") + f.errorString();
    return false;
  }
  return true;
}

namespace {
template <class Write>
bool export_with(const StepReport& r, const QString& path, QString* error, Write write) {
  std::ostringstream out;
  write(r, out);
  const std::string s = out.str();
  return write_file_atomically(path, QByteArray(s.data(), static_cast<qsizetype>(s.size())), error);
}
}  // namespace

bool export_chrome_trace(const StepReport& r, const QString& path, QString* error) {
  return export_with(r, path, error, [](const StepReport& x, std::ostream& o) { io::write_chrome_trace(x, o); });
}

bool export_report_csv(const StepReport& r, const QString& path, QString* error) {
  return export_with(r, path, error, [](const StepReport& x, std::ostream& o) { io::write_report_csv(x, o); });
}

}  // namespace moeperf::gui
