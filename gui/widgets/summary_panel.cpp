#include "gui/widgets/summary_panel.h"

#include <QHBoxLayout>
#include <QLabel>

#include "gui/models/summary.h"

namespace moeperf::gui {

SummaryPanel::SummaryPanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("summaryPanel"));
  text_ = new QLabel();
  text_->setWordWrap(true);
  text_->setTextFormat(Qt::RichText);
  text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  text_->setStyleSheet(QStringLiteral("QLabel { background: #f3f5f8; padding: 6px; }"));
  auto* l = new QHBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(text_);
  setReport(nullptr);
}

void SummaryPanel::setReport(const StepReport* r) {
  values_.clear();
  notes_.clear();
  if (!r) {
    text_->setText(tr("No scenario: File > Open"));
    return;
  }
  QStringList cells;
  for (const SummaryItem& i : summary_items(*r)) {
    values_[i.key] = i.value;
    cells << QStringLiteral("<span style='color:#555'>%1</span> <b%2>%3</b>")
                 .arg(i.label.toHtmlEscaped(), i.warn ? QStringLiteral(" style='color:#b00020'") : QString(), i.value.toHtmlEscaped());
  }
  notes_ = summary_notes(*r);
  QString html = cells.join(QStringLiteral(" &nbsp;·&nbsp; "));
  for (const QString& n : notes_)
    html += QStringLiteral("<br><span style='color:#555; font-size:small'>%1</span>").arg(n.toHtmlEscaped());
  text_->setText(html);
}

QString SummaryPanel::value(const QString& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? QString() : it->second;
}

}  // namespace moeperf::gui
