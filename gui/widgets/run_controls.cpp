#include "gui/widgets/run_controls.h"

#include <QLabel>
#include <QObject>
#include <QProgressBar>
#include <QPushButton>
#include <algorithm>

namespace moeperf::gui {

RunControls::RunControls(const QString& name, const QString& idle_text)
    : run(new QPushButton(QObject::tr("Run"))),
      cancel(new QPushButton(QObject::tr("Cancel"))),
      bar(new QProgressBar()),
      status(new QLabel(idle_text)) {
  run->setObjectName(QStringLiteral("run") + name);
  cancel->setObjectName(QStringLiteral("cancel") + name);
  cancel->setEnabled(false);
  bar->setRange(0, 1);
  bar->setValue(0);
  status->setWordWrap(true);
  status->setTextInteractionFlags(Qt::TextSelectableByMouse);
}

void RunControls::begin(const QString& text, int total) {
  bar->setRange(0, std::max(1, total));
  bar->setValue(0);
  status->setText(text);
  run->setEnabled(false);
  cancel->setEnabled(true);
}

void RunControls::progress(int done, int total) {
  bar->setRange(0, std::max(1, total));
  bar->setValue(done);
}

void RunControls::end(bool full) {
  run->setEnabled(true);
  cancel->setEnabled(false);
  if (full) bar->setValue(bar->maximum());
}

void RunControls::say(const QString& text) { status->setText(text); }

QString RunControls::text() const { return status->text(); }

}  // namespace moeperf::gui
