// File > Export's writers for the report shown: the Chrome trace (io::write_chrome_trace) and the
// op table CSV (io::write_report_csv). Each writes through a temporary and a rename (QSaveFile), so
// a failure leaves no partial file; false with the reason in *error otherwise.
//
//   QString e;
//   if (!export_chrome_trace(*report, "step.trace.json", &e)) show(e);
#pragma once

#include <QByteArray>
#include <QString>

#include "model/study/predict.h"

namespace moeperf::gui {

bool write_file_atomically(const QString& path, const QByteArray& bytes, QString* error);
bool export_chrome_trace(const StepReport& r, const QString& path, QString* error);
bool export_report_csv(const StepReport& r, const QString& path, QString* error);

}  // namespace moeperf::gui
