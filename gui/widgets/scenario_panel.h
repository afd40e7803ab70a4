// The scenario panel (a dock in MainWindow): one editor per ScenarioForm field, an error line
// under each. Above them, "Keep the GPU count by setting" FSDP, DP or nothing: an edit of the GPU
// count or of a layout field then derives that axis (ScenarioForm::derive), and a line says what
// it changed. It only routes input: every edit goes into the form and `edited` asks the window to
// re-validate and predict with the form's overrides; the window hands rejections back with showError.
#pragma once

#include <QWidget>
#include <vector>

#include "gui/models/scenario_form.h"

class QComboBox;
class QLabel;
class QPushButton;

namespace moeperf::gui {

class ScenarioPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ScenarioPanel(QWidget* parent = nullptr);

  // Loads the file's values into the editors; `sets` ("PATH=VALUE") become edits of listed fields.
  bool setScenario(const QString& path, const QStringList& sets = {});
  ScenarioForm& form() { return form_; }
  const ScenarioForm& form() const { return form_; }

  // As typing FIELD's editor would (combo boxes: choosing the text).
  void setFieldText(const QString& dotted, const QString& text);
  QString fieldText(const QString& dotted) const;
  // The message shown under a field (empty when none), and the routing of one rejection to it.
  QString errorFor(const QString& dotted) const;
  void showError(int field, const QString& message);
  void clearErrors();
  // The free axis ("parallelism.fsdp", "parallelism.dp" or empty) and the last derivation's note.
  void setFreeAxis(const QString& dotted);
  QString derivedNote() const;
  // The line listing the overrides of fields the dock does not show, and its Clear button.
  QString hiddenText() const;
  void clearHidden();  // as the button: the overrides go, and the scenario is predicted again

 signals:
  void edited();  // form().overrides() changed

 private:
  void refresh();
  void onEdit(size_t field, const QString& text);

  ScenarioForm form_;
  QComboBox* free_ = nullptr;
  QLabel* note_ = nullptr;
  QLabel* hidden_ = nullptr;
  QPushButton* clear_hidden_ = nullptr;
  std::vector<QWidget*> editors_;
  std::vector<QLabel*> errors_;
  bool refreshing_ = false;
};

}  // namespace moeperf::gui
