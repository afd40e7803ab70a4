// Cells of the GUI's result tables (Sweep, Plan, Compare): a number sorted by its value
// (Qt::UserRole) and right-aligned, shown with fixed decimals or as a given text; a text sorted by
// a key of its own (so rows without figures sort after the others).
#pragma once

#include <QStandardItem>
#include <QString>

namespace moeperf::gui {

inline QStandardItem* number_item(double v, const QString& text) {
  auto* it = new QStandardItem(text);
  it->setData(v, Qt::UserRole);
  it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return it;
}

inline QStandardItem* number_item(double v, int decimals) { return number_item(v, QString::number(v, 'f', decimals)); }

inline QStandardItem* text_item(const QString& t, double sort_key) {
  auto* it = new QStandardItem(t);
  it->setData(sort_key, Qt::UserRole);
  return it;
}

}  // namespace moeperf::gui
