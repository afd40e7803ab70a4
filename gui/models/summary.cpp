#include "gui/models/summary.h"

#include "model/io/report_io.h"

namespace moeperf::gui {

std::vector<SummaryItem> summary_items(const StepReport& r) {
  const double step = r.step_time.value();
  std::vector<SummaryItem> out;
  out.push_back({QStringLiteral("step"), QStringLiteral("Step"),
                 QStringLiteral("%1 s (%2 – %3)").arg(step, 0, 'f', 3).arg(r.step_low(), 0, 'f', 3).arg(r.step_high(), 0, 'f', 3),
                 false});
  out.push_back({QStringLiteral("tokens_per_s_per_gpu"), QStringLiteral("Tokens/s/GPU"), QString::number(r.tokens_per_s_per_gpu, 'f', 0), false});
  out.push_back({QStringLiteral("tflops"), QStringLiteral("TFLOPS/GPU"), QString::number(r.model_tflops_per_gpu, 'f', 1), false});
  out.push_back({QStringLiteral("mfu"), QStringLiteral("MFU (BF16)"), QStringLiteral("%1 %").arg(100 * r.mfu, 0, 'f', 1), false});
  out.push_back({QStringLiteral("exposed_comm"), QStringLiteral("Exposed comm"),
                 QStringLiteral("%1 %").arg(100 * r.exposed_comm_fraction, 0, 'f', 1), false});
  const double used = r.memory.hbm_total.value() / 1e9, cap = r.memory.hbm_capacity.value() / 1e9;
  if (r.memory.fits) {
    out.push_back({QStringLiteral("memory"), QStringLiteral("Memory"),
                   QStringLiteral("fits: %1 of %2 GB").arg(used, 0, 'f', 1).arg(cap, 0, 'f', 1), false});
  } else {
    const double short_hbm = r.memory.hbm_shortfall.value() / 1e9, short_host = r.memory.host_shortfall.value() / 1e9;
    QString v = !r.memory.fits_hbm ? QStringLiteral("short by %1 GB of HBM (%2 of %3 GB)").arg(short_hbm, 0, 'f', 1).arg(used, 0, 'f', 1).arg(cap, 0, 'f', 1)
                                   : QStringLiteral("short by %1 GB of host memory").arg(short_host, 0, 'f', 1);
    out.push_back({QStringLiteral("memory"), QStringLiteral("Memory"), v, true});
  }
  out.push_back({QStringLiteral("cluster"), QStringLiteral("Cluster tokens/s"), QString::number(r.cluster_tokens_per_s, 'f', 0), false});
  out.push_back({QStringLiteral("gpus"), QStringLiteral("GPUs"),
                 QStringLiteral("%1 of %2 bought (%3 domain%4)")
                     .arg(r.gpus)
                     .arg(r.gpus_bought)
                     .arg(r.domains_used)
                     .arg(r.domains_used == 1 ? QString() : QStringLiteral("s")),
                 false});
  return out;
}

QStringList summary_notes(const StepReport& r) {
  QStringList out;
  for (const auto& [term, text] : io::band_terms_text(r))
    out << QStringLiteral("Band, %1: %2").arg(QString::fromStdString(term), QString::fromStdString(text));
  out << QStringLiteral("Priced by profile %1, stack %2")
             .arg(QString::fromStdString(r.profile),
                  r.stack.empty() ? QStringLiteral("built-in defaults") : QString::fromStdString(r.stack));
  for (const auto& [label, text] : io::host_lines_text(r)) {
    QString l = QString::fromStdString(label);
    l[0] = l[0].toUpper();
    out << QStringLiteral("%1: %2").arg(l, QString::fromStdString(text).simplified());
  }
  if (const std::string st = io::stage_memory_text(r.memory); !st.empty())
    out << QStringLiteral("Memory per pipeline stage (GB): %1; stage %2 the fullest")
               .arg(QString::fromStdString(st))
               .arg(r.memory.pp_stage);
  for (const std::string& n : r.notes) out << QStringLiteral("Note: ") + QString::fromStdString(n);
  return out;
}

}  // namespace moeperf::gui
