#include "gui/widgets/scenario_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QVBoxLayout>

namespace moeperf::gui {

ScenarioPanel::ScenarioPanel(QWidget* parent) : QWidget(parent) {
  auto* inner = new QWidget();
  auto* form = new QFormLayout(inner);
  free_ = new QComboBox();
  free_->setObjectName(QStringLiteral("freeAxis"));
  free_->addItem(tr("FSDP"), QStringLiteral("parallelism.fsdp"));
  free_->addItem(tr("DP"), QStringLiteral("parallelism.dp"));
  free_->addItem(tr("nothing (edit by hand)"), QString());
  free_->setToolTip(tr("When GPUs, TP, EP, PP, FSDP or DP change, this axis takes the GPU count over the others "
                       "(as moeperf sweep --derive 'parallelism.fsdp=gpus/(ep*tp*pp*dp)')"));
  connect(free_, &QComboBox::currentIndexChanged, this, [this] { form_.setFreeAxis(free_->currentData().toString()); });
  form->addRow(tr("Keep the GPU count by setting"), free_);
  note_ = new QLabel();
  note_->setObjectName(QStringLiteral("derivedNote"));
  note_->setWordWrap(true);
  note_->setStyleSheet(QStringLiteral("QLabel { color: #1d4f91; }"));
  form->addRow(note_);
  const auto& fields = ScenarioForm::fields();
  for (size_t i = 0; i < fields.size(); ++i) {
    const FormField& f = fields[i];
    QWidget* editor = nullptr;
    if (f.kind == FormField::Kind::choice) {
      auto* c = new QComboBox();
      c->addItem(QString());  // "as in the file" when the file leaves the field out
      c->addItems(f.choices);
      connect(c, &QComboBox::currentTextChanged, this, [this, i](const QString& t) { onEdit(i, t); });
      editor = c;
    } else {
      auto* e = new QLineEdit();
      connect(e, &QLineEdit::textChanged, this, [this, i](const QString& t) { onEdit(i, t); });
      editor = e;
    }
    editor->setObjectName(f.path);
    editor->setToolTip(QStringLiteral("--set %1=…").arg(f.path));
    auto* err = new QLabel();
    err->setWordWrap(true);
    err->setTextInteractionFlags(Qt::TextSelectableByMouse);
    err->setStyleSheet(QStringLiteral("QLabel { color: #8a1111; }"));
    err->hide();
    auto* cell = new QWidget();
    auto* v = new QVBoxLayout(cell);
    v->setContentsMargins(0, 0, 0, 0);
    v->addWidget(editor);
    v->addWidget(err);
    form->addRow(f.label, cell);
    editors_.push_back(editor);
    errors_.push_back(err);
  }
  // Overrides of fields not shown above (a sweep point's, a plan layout's): listed, and cleared
  // together (a plan's parallelism.vpp would otherwise outlive a schedule chosen above).
  hidden_ = new QLabel();
  hidden_->setObjectName(QStringLiteral("hiddenOverrides"));
  hidden_->setWordWrap(true);
  hidden_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  clear_hidden_ = new QPushButton(tr("Clear"));
  clear_hidden_->setObjectName(QStringLiteral("clearHiddenOverrides"));
  clear_hidden_->setToolTip(tr("Drop these overrides: the file's values hold again"));
  connect(clear_hidden_, &QPushButton::clicked, this, &ScenarioPanel::clearHidden);
  auto* other = new QWidget();
  auto* ol = new QVBoxLayout(other);
  ol->setContentsMargins(0, 0, 0, 0);
  ol->addWidget(hidden_);
  ol->addWidget(clear_hidden_, 0, Qt::AlignLeft);
  form->addRow(tr("Other overrides"), other);
  auto* scroll = new QScrollArea();
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(scroll);
  setEnabled(false);
}

bool ScenarioPanel::setScenario(const QString& path, const QStringList& sets) {
  if (!form_.load(path)) return false;
  for (const QString& s : sets) {
    const qsizetype eq = s.indexOf(QLatin1Char('='));
    if (eq > 0) form_.setValue(s.left(eq), s.mid(eq + 1));
  }
  refresh();
  clearErrors();
  note_->clear();
  setEnabled(true);
  return true;
}

void ScenarioPanel::refresh() {
  refreshing_ = true;
  const auto& fields = ScenarioForm::fields();
  for (size_t i = 0; i < fields.size(); ++i) {
    const QString v = form_.value(fields[i].path);
    if (auto* c = qobject_cast<QComboBox*>(editors_[i])) {
      if (c->findText(v) < 0) c->addItem(v);
      c->setCurrentText(v);
    } else if (auto* e = qobject_cast<QLineEdit*>(editors_[i])) {
      e->setText(v);
    }
  }
  const QStringList hidden = form_.hiddenOverrides();
  hidden_->setText(hidden.isEmpty() ? tr("none") : hidden.join(QStringLiteral("\n")));
  clear_hidden_->setEnabled(!hidden.isEmpty());
  refreshing_ = false;
}

QString ScenarioPanel::hiddenText() const { return hidden_->text(); }

void ScenarioPanel::clearHidden() {
  if (form_.hiddenOverrides().isEmpty()) return;
  form_.clearHidden();
  refresh();
  emit edited();
}

void ScenarioPanel::onEdit(size_t field, const QString& text) {
  if (refreshing_) return;
  const QStringList before = form_.overrides();
  const QString path = ScenarioForm::fields()[field].path;
  form_.setValue(path, text);
  if (form_.overrides() == before) return;
  const QString note = form_.derive(path);
  if (!note.isEmpty()) {
    note_->setText(note);
    refresh();  // the derived axis's editor shows its new value
  }
  emit edited();
}

void ScenarioPanel::setFreeAxis(const QString& dotted) {
  const int i = free_->findData(dotted);
  if (i >= 0) free_->setCurrentIndex(i);
}

QString ScenarioPanel::derivedNote() const { return note_->text(); }

void ScenarioPanel::setFieldText(const QString& dotted, const QString& text) {
  const int i = ScenarioForm::fieldForPointer(ScenarioForm::pointer(dotted));
  if (i < 0) return;
  if (auto* c = qobject_cast<QComboBox*>(editors_[static_cast<size_t>(i)])) {
    if (c->findText(text) < 0) c->addItem(text);
    c->setCurrentText(text);
  } else if (auto* e = qobject_cast<QLineEdit*>(editors_[static_cast<size_t>(i)])) {
    e->setText(text);
  }
}

QString ScenarioPanel::fieldText(const QString& dotted) const {
  const int i = ScenarioForm::fieldForPointer(ScenarioForm::pointer(dotted));
  if (i < 0) return {};
  if (auto* c = qobject_cast<QComboBox*>(editors_[static_cast<size_t>(i)])) return c->currentText();
  if (auto* e = qobject_cast<QLineEdit*>(editors_[static_cast<size_t>(i)])) return e->text();
  return {};
}

QString ScenarioPanel::errorFor(const QString& dotted) const {
  const int i = ScenarioForm::fieldForPointer(ScenarioForm::pointer(dotted));
  if (i < 0 || errors_[static_cast<size_t>(i)]->isHidden()) return {};
  return errors_[static_cast<size_t>(i)]->text();
}

void ScenarioPanel::showError(int field, const QString& message) {
  clearErrors();
  if (field < 0 || static_cast<size_t>(field) >= errors_.size()) return;
  errors_[static_cast<size_t>(field)]->setText(message);
  errors_[static_cast<size_t>(field)]->show();
}

void ScenarioPanel::clearErrors() {
  for (QLabel* e : errors_) {
    e->clear();
    e->hide();
  }
}

}  // namespace moeperf::gui
