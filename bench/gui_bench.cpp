// Opening and drawing the 1,024-GPU example in the GUI, offscreen: load + predict + lanes + one
// 1600x900 timeline render, against a 2 s limit. Gate first: the render must show GEMMs.
//   QT_QPA_PLATFORM=offscreen build/bin/bench_gui
#include <QApplication>
#include <chrono>
#include <cstdio>

#include "gui/models/palette.h"
#include "gui/models/scenario_loader.h"
#include "gui/widgets/timeline_view.h"

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  using namespace moeperf::gui;
  using clock = std::chrono::steady_clock;
  const std::string file = MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb300-scaling.json";
  const std::vector<std::string> sets = {"gpus=1024", "parallelism.fsdp=128", "batch.global_batch=6144"};
  constexpr double kLimit = 2.0;

  const auto t0 = clock::now();
  const LoadResult r = load_and_predict(file, sets);
  if (!r.report) {
    std::fprintf(stderr, "gui_bench: %s\n", r.error.c_str());
    return 2;
  }
  const auto t1 = clock::now();
  TimelineView view;
  view.resize(1600, 900);
  view.setReport(r.report);
  QImage img(1600, 900, QImage::Format_RGB32);
  img.fill(Qt::white);
  view.render(&img);
  const auto t2 = clock::now();

  int64_t gemm_px = 0;
  const QRgb gemm = category_color(moeperf::Category::gemm).rgb();
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) gemm_px += img.pixel(x, y) == gemm;
  size_t spans = 0;
  for (const Lane& l : view.timeline().lanes) spans += l.spans.size();
  const double open_s = std::chrono::duration<double>(t1 - t0).count();
  const double render_s = std::chrono::duration<double>(t2 - t1).count();
  const bool ok = gemm_px > 196;  // more than the legend's 14x14 swatch
  std::printf("gui_bench 1024 GPUs (%lld GPUs, %zu lanes, %zu spans): open+predict %.3f s + lanes+render %.3f s = %.3f s"
              " / limit %.1f s  %s%s\n",
              static_cast<long long>(r.report->gpus), view.timeline().lanes.size(), spans, open_s, render_s,
              open_s + render_s, kLimit, ok ? "" : "WRONG (no GEMM pixels) ",
              ok && open_s + render_s <= kLimit ? "PASS" : "FAIL");
  return ok && open_s + render_s <= kLimit ? 0 : 1;
}
