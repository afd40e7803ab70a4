#include "gui/widgets/plan_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QSignalBlocker>
#include <QPushButton>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "gui/models/table_items.h"
#include "model/error.h"
#include "model/io/units_parse.h"
#include "model/limits.h"

namespace moeperf::gui {

PlanView::PlanView(QWidget* parent)
    : QWidget(parent), controls_(QStringLiteral("Plan"), tr("Plan the scenario shown on N GPUs: its best layouts, as moeperf plan")) {
  job_ = new PlanJob(this);
  gpus_ = new QSpinBox();
  gpus_->setObjectName(QStringLiteral("planGpus"));
  gpus_->setRange(1, static_cast<int>(limits::kGpus));
  gpus_->setValue(256);
  gpus_->setToolTip(tr("--gpus: the GPU count to plan for (the global batch: the scenario's sequences per GPU times it)"));
  top_ = new QSpinBox();
  top_->setObjectName(QStringLiteral("planTop"));
  top_->setRange(1, 100);
  top_->setValue(10);
  top_->setToolTip(tr("--top: layouts shown"));
  objective_ = new QComboBox();
  objective_->setObjectName(QStringLiteral("planObjective"));
  objective_->addItems({QStringLiteral("tokens_per_s"), QStringLiteral("time_to_train"), QStringLiteral("cost")});
  objective_->setToolTip(tr("--objective: tokens/s, days to train the token budget, or $ per million tokens (a price in the system file)"));
  tokens_ = new QLineEdit(QStringLiteral("15T"));
  tokens_->setObjectName(QStringLiteral("planTokens"));
  tokens_->setMaximumWidth(80);
  tokens_->setToolTip(tr("--tokens: the token budget of time_to_train (15T, 300B, 2.5e12)"));
  tokens_->setEnabled(false);
  schedules_ = new QLineEdit(QStringLiteral("1f1b,interleaved"));
  schedules_->setObjectName(QStringLiteral("planSchedules"));
  schedules_->setMinimumWidth(220);
  schedules_->setToolTip(tr("--schedules: pipeline schedules searched for pp > 1 (1f1b, interleaved, zbh1, dualpipe, dualpipev, or all)"));
  vpps_ = new QLineEdit(QStringLiteral("2"));
  vpps_->setObjectName(QStringLiteral("planVpps"));
  vpps_->setMaximumWidth(80);
  vpps_->setToolTip(tr("--vpp: virtual stages per GPU tried under the interleaved schedule (2,4)"));
  passes_ = new QSpinBox();
  passes_->setObjectName(QStringLiteral("planMaxPasses"));
  passes_->setRange(1, 1 << 15);
  passes_->setValue(2048);
  passes_->setToolTip(tr("--max-passes: layouts with more micro-batch x layer passes per step are left out (slow to simulate)"));
  balance_ = new QCheckBox(tr("balanced layouts"));
  balance_->setObjectName(QStringLiteral("planBalance"));
  balance_->setToolTip(tr("--balance: each pipelined layout with its stages balanced too, beside its even split"));

  // Two rows: what to plan for, then how wide the search is.
  auto* form = new QHBoxLayout();
  form->addWidget(new QLabel(tr("GPUs")));
  form->addWidget(gpus_);
  form->addWidget(new QLabel(tr("show")));
  form->addWidget(top_);
  form->addWidget(new QLabel(tr("by")));
  form->addWidget(objective_);
  form->addWidget(tokens_);
  form->addStretch(1);
  form->addWidget(controls_.run);
  form->addWidget(controls_.cancel);
  auto* search = new QHBoxLayout();
  search->addWidget(new QLabel(tr("schedules")));
  search->addWidget(schedules_, 3);
  search->addWidget(new QLabel(tr("vpp")));
  search->addWidget(vpps_, 1);
  search->addWidget(new QLabel(tr("max passes")));
  search->addWidget(passes_);
  search->addWidget(balance_);
  search->addStretch(1);

  model_ = new QStandardItemModel(this);
  table_ = new QTableView();
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setDefaultSectionSize(20);
  table_->verticalHeader()->hide();  // the rank is the first column
  table_->setToolTip(tr("Double-click a row to open that layout in the timeline"));
  auto* l = new QVBoxLayout(this);
  l->addLayout(form);
  l->addLayout(search);
  l->addWidget(controls_.bar);
  l->addWidget(controls_.status);
  l->addWidget(table_, 1);

  connect(gpus_, &QSpinBox::valueChanged, this, [this] { gpus_set_ = true; });
  connect(objective_, &QComboBox::currentTextChanged, this,
          [this](const QString& o) { tokens_->setEnabled(o == QStringLiteral("time_to_train")); });
  connect(controls_.run, &QPushButton::clicked, this, [this] { run(); });
  connect(controls_.cancel, &QPushButton::clicked, this, &PlanView::cancel);
  connect(job_, &PlanJob::progress, this, &PlanView::onProgress);
  connect(job_, &PlanJob::finished, this, &PlanView::onFinished);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& idx) {
    if (idx.row() >= 0 && job_->result()) emit openPoint(job_->path(), pointSets(idx.row()));
  });
}

void PlanView::setGpus(int gpus) {
  gpus_->setValue(gpus);
  gpus_set_ = true;
}
void PlanView::suggestGpus(int gpus) {
  if (gpus_set_) return;
  const QSignalBlocker quiet(gpus_);
  gpus_->setValue(gpus);
}
void PlanView::setTop(int top) { top_->setValue(top); }
void PlanView::setObjective(const QString& objective, const QString& tokens) {
  objective_->setCurrentText(objective);
  if (!tokens.isEmpty()) tokens_->setText(tokens);
}
void PlanView::setSchedules(const QString& text) { schedules_->setText(text); }
void PlanView::setBalance(bool on) { balance_->setChecked(on); }
void PlanView::setVpps(const QString& text) { vpps_->setText(text); }

void PlanView::run(int threads) {
  if (!source_ || job_->busy()) return;
  const auto [path, sets] = source_();
  if (path.isEmpty()) {
    controls_.say(tr("No scenario: File > Open first"));
    return;
  }
  io::PlanOptions o;
  try {
    o.gpus = gpus_->value();
    o.top = top_->value();
    o.objective = objective_->currentText().toStdString();
    if (o.objective == "time_to_train") o.train_tokens = io::parse_token_count("--tokens", tokens_->text().trimmed().toStdString());
    o.schedules = io::parse_schedules(schedules_->text().trimmed().toStdString());
    o.vpps = io::parse_vpps(vpps_->text().trimmed().toStdString());
    o.max_layer_passes = passes_->value();
    o.balance = balance_->isChecked();
  } catch (const InputError& e) {
    controls_.say(QString::fromStdString(e.what()));
    return;
  }
  model_->clear();
  controls_.begin(tr("Planning %1 on %2 GPUs …").arg(path, QString::number(o.gpus)), 0);
  job_->start(path, sets, std::move(o), threads);
}

void PlanView::cancel() {
  if (!job_->busy()) return;
  job_->cancel();
  controls_.say(tr("Cancelling (the layouts being simulated finish, then the best found is predicted) …"));
}

void PlanView::onProgress(int done, int total) {
  controls_.progress(done, total);
}

QString PlanView::statusText() const { return controls_.text(); }

QStringList PlanView::pointSets(int row) const {
  QStringList out = job_->sets();
  const auto& r = job_->result();
  if (!r || row < 0 || row >= static_cast<int>(r->best.size())) return out;
  for (const std::string& s : r->best[static_cast<size_t>(row)].sets) out << QString::fromStdString(s);
  return out;
}

void PlanView::onFinished(bool cancelled) {
  model_->clear();
  const auto& r = job_->result();
  controls_.end(r.has_value());
  if (!r) {
    controls_.say(job_->error());
    return;
  }
  const QString objective = QString::fromStdString(job_->options().objective);  // the run's, not the box's now
  QStringList head{tr("#"), tr("layout"), tr("step s"), tr("band s"), tr("tokens/s/GPU"), tr("TFLOPS/GPU"), tr("MFU %"),
                   tr("exposed comm %"), tr("memory GB")};
  if (objective == QStringLiteral("time_to_train")) head << tr("days");
  if (objective == QStringLiteral("cost")) head << tr("$ per M tokens");
  model_->setHorizontalHeaderLabels(head);
  int rank = 0;
  for (const io::PlanEntry& e : r->best) {
    const StepReport& x = e.report;
    auto* layout = new QStandardItem(QString::fromStdString(e.layout));
    QString sets;
    for (const std::string& s : e.sets) sets += QStringLiteral("--set '%1' ").arg(QString::fromStdString(s));
    layout->setToolTip(sets.trimmed());
    QList<QStandardItem*> cells{number_item(++rank, 0), layout, number_item(x.step_time.value(), 3),
                                new QStandardItem(QStringLiteral("%1 - %2").arg(x.step_low(), 0, 'f', 3).arg(x.step_high(), 0, 'f', 3)),
                                number_item(x.tokens_per_s_per_gpu, 0), number_item(x.model_tflops_per_gpu, 1),
                                number_item(100 * x.mfu, 1), number_item(100 * x.exposed_comm_fraction, 1),
                                number_item(x.memory.hbm_total.value() / 1e9, 1)};
    if (objective == QStringLiteral("time_to_train")) cells << number_item(e.objective, 1);
    if (objective == QStringLiteral("cost")) cells << number_item(e.objective, 2);
    model_->appendRow(cells);
  }
  table_->resizeColumnsToContents();
  QString loss;
  if (r->best.size() > 1) {
    loss = tr(" · the runner-up loses %1 s per step:")
               .arg(r->best[1].report.step_time.value() - r->best[0].report.step_time.value(), 0, 'f', 3);
    int n = 0;
    for (const auto& [k, v] : r->runner_up_loss)
      if (std::abs(v) >= 0.0005 && n++ < 4)
        loss += QStringLiteral("%1 %2 %3 s").arg(n > 1 ? QStringLiteral(",") : QString()).arg(QString::fromStdString(k)).arg(v, 0, 'f', 3);
  }
  if (r->own && !r->best.empty()) {
    const double gain = r->own->step_time.value() / r->best.front().report.step_time.value() - 1;
    loss += tr(" · the scenario's own layout: step %1 s, %2").arg(r->own->step_time.value(), 0, 'f', 3)
                .arg(gain > 1e-9 ? tr("the best is %1 % faster").arg(100 * gain, 0, 'f', 1) : tr("no layout found is faster"));
  }
  controls_.say(tr("%1%2 layouts searched in %3 s (global batch %4): %5 invalid, %6 with over %L7 micro-batch x layer "
                      "passes left out, %8 do not fit, %9 pruned by bounds, %10 predicted%11%12 · double-click a row to open it in the timeline")
                       .arg(cancelled ? tr("Cancelled after %1 of %2 layouts; the best of them, the first predicted whole · ")
                                            .arg(job_->searched())
                                            .arg(r->candidates)
                                      : QString())
                       .arg(job_->searched())
                       .arg(job_->seconds(), 0, 'f', 1)
                       .arg(r->global_batch)
                       .arg(r->invalid)
                       .arg(r->too_fine)
                       .arg(static_cast<qlonglong>(job_->options().max_layer_passes))
                       .arg(r->no_fit)
                       .arg(r->bounded + r->compute_bounded + r->comm_bounded + r->schedule_bounded)
                       .arg(r->predicted)
                       .arg((r->failed ? tr(", %1 failed").arg(r->failed) : QString()) +
                            (r->balanced_is_even ? tr(", %1 balanced splits that were the even one").arg(r->balanced_is_even) : QString()))
                       .arg(loss));
}

}  // namespace moeperf::gui
