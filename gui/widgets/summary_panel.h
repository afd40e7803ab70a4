// The headline figures of the scenario shown (gui/models/summary.h), in a strip above the views.
#pragma once

#include <QStringList>
#include <QWidget>
#include <map>

#include "model/study/predict.h"

class QLabel;

namespace moeperf::gui {

class SummaryPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SummaryPanel(QWidget* parent = nullptr);
  void setReport(const StepReport* r);  // null: empty
  // The value shown for a key of summary_items ("step", "memory", ...), empty when none.
  QString value(const QString& key) const;
  // The lines under the figures: the band's terms, the profile and stack, the prediction's notes.
  const QStringList& notes() const { return notes_; }

 private:
  QLabel* text_;
  std::map<QString, QString> values_;
  QStringList notes_;
};

}  // namespace moeperf::gui
