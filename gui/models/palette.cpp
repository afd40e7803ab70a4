#include "gui/models/palette.h"

#include <array>

namespace moeperf::gui {

QColor category_color(Category c) {
  // Compute in blues/greens, communication in purples/oranges/teals; red is kept for exposed.
  static const std::array<QColor, kCategoryCount> colors = {
      QColor(0x1f, 0x77, 0xb4),  // gemm
      QColor(0x2c, 0xa0, 0x2c),  // attention
      QColor(0x8c, 0xa2, 0xb8),  // memory
      QColor(0x94, 0x67, 0xbd),  // ep_comm
      QColor(0xff, 0x9f, 0x40),  // fsdp_comm
      QColor(0xe3, 0x77, 0xc2),  // dp_comm
      QColor(0x17, 0xbe, 0xcf),  // tp_comm
      QColor(0xbc, 0xbd, 0x22),  // pp_comm
      QColor(0x8c, 0x56, 0x4b),  // offload
      QColor(0x7f, 0x7f, 0x7f),  // sync
      QColor(0x98, 0xdf, 0x8a),  // optimizer
  };
  return colors[static_cast<size_t>(c)];
}

QColor exposed_comm_color() { return QColor(0xd6, 0x27, 0x28); }

QColor span_color(Category c, bool exposed) { return exposed ? exposed_comm_color() : category_color(c); }

QColor measured_color() { return QColor(0, 0, 0); }
QColor series_color() { return QColor(0x1f, 0x77, 0xb4); }
QColor no_fit_color() { return QColor(0xd6, 0x27, 0x28); }

}  // namespace moeperf::gui
