// The scenario panel's data: the common scenario fields, each tied to the dotted `--set` path it
// edits. Edits are kept as io::Override strings against the file as written, so loading them goes
// through moeperf's own validation (load_scenario(file, overrides)) and a rejected value comes back
// as a SpecError whose JSON path names the field (fieldForPointer).
//
//   ScenarioForm f;
//   f.load("examples/executor/cpu-small.json");
//   f.setValue("parallelism.ep", "7");       // overrides() == {"parallelism.ep=7"}
//   int i = f.fieldForPointer("/parallelism/ep");
#pragma once

#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <vector>

namespace moeperf::gui {

struct FormField {
  enum class Kind { integer, number, choice, text };  // text: a file reference (model, system), a layout string
  QString path;  // dotted, as `--set PATH=VALUE`
  QString label;
  Kind kind;
  QStringList choices;  // Kind::choice: the values moeperf accepts
};

class ScenarioForm {
 public:
  static const std::vector<FormField>& fields();
  static QString pointer(const QString& dotted);  // "parallelism.ep" -> "/parallelism/ep"

  // Reads the file's current values (QString() where a field is absent); clears the edits.
  bool load(const QString& path, QString* error = nullptr);
  QString path() const { return path_; }
  // The value in the file, or the edit when there is one.
  QString value(const QString& dotted) const;
  QString fileValue(const QString& dotted) const;
  // An edit equal to the file's value (or empty) removes the override.
  void setValue(const QString& dotted, const QString& value);
  void clear() { edits_.clear(); }
  // The edits of paths no field shows ("memory.recompute=[...]", from a sweep point or a plan
  // layout), as overrides() lists them, and their removal.
  QStringList hiddenOverrides() const;
  void clearHidden();
  // "PATH=VALUE" for each edit, in fields() order, then the edits of paths no field shows, in the
  // order made: what load_scenario gets as overrides.
  QStringList overrides() const;
  // The field a SpecError's JSON pointer names (equal, or a field's pointer prefixed to it); -1 if none.
  static int fieldForPointer(const QString& json_pointer);
  // Where to show a rejection: fieldForPointer, else the latest edited field inside the object the
  // pointer names (a layout error at "/parallelism" after editing EP goes beside EP); -1 if none.
  int fieldForError(const QString& json_pointer) const;

  // Keeping the GPU count while the layout changes, as `sweep --derive` does: the free axis
  // ("parallelism.fsdp" or "parallelism.dp"; empty: none) takes gpus over the product of the other
  // layout fields (tp x cp x pp x ep x fsdp x dp; tp x cp x pp x dp with MoE parallel folding).
  void setFreeAxis(const QString& dotted) { free_axis_ = dotted; }
  QString freeAxis() const { return free_axis_; }
  // After an edit of `changed` (gpus or a layout field other than the free axis): sets the free
  // axis and says what changed ("FSDP 16 → 8 keeps 128 GPUs"), or why it could not ("tp x cp x pp
  // x ep x dp = 48 does not divide 128 GPUs"); empty when there was nothing to do.
  QString derive(const QString& changed);

  // Writes the scenario with the edits applied to OUT (a temporary, then a rename); refused, with
  // moeperf's message, when load_scenario rejects the edits. Relative "model", "system" and
  // "calibration" references are rewritten for OUT's folder. Reloads from OUT on success.
  bool save(const QString& out, QString* error);

 private:
  QString path_;
  QJsonObject doc_;
  std::vector<std::pair<QString, QString>> edits_;
  QString free_axis_ = QStringLiteral("parallelism.fsdp");
};

}  // namespace moeperf::gui
