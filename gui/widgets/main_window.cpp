#include "gui/widgets/main_window.h"

#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QThreadPool>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSaveFile>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "gui/models/exports.h"
#include "gui/models/scenario_loader.h"
#include "gui/widgets/breakdown_view.h"
#include "gui/widgets/compare_view.h"
#include "gui/widgets/scaling_view.h"
#include "gui/widgets/scenario_panel.h"
#include "gui/widgets/plan_view.h"
#include "gui/widgets/study_view.h"
#include "gui/widgets/summary_panel.h"
#include "gui/widgets/screenshot.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/topology_view.h"
#include "gui/widgets/waterfall_view.h"

namespace moeperf::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  scale_pool_.setMaxThreadCount(1);  // one Scaling sweep at a time; an overtaken one is skipped
  setWindowTitle(tr("moeperf"));
  model_ = new TimelineModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(TimelineModel::SortRole);

  timeline_ = new TimelineView();
  table_ = new QTableView();
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(TimelineModel::ColStart, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setDefaultSectionSize(20);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(timeline_);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);

  breakdown_ = new BreakdownView();
  tabs_ = new QTabWidget();
  tabs_->addTab(split, tr("Timeline"));
  tabs_->addTab(breakdown_, tr("Breakdown"));
  waterfall_ = new WaterfallView();
  tabs_->addTab(waterfall_, tr("Waterfall"));
  scaling_ = new ScalingView();
  {
    // The scaling sweep's GPU counts and grown axis, as `moeperf scale --gpus ... --grow ...`.
    auto* page = new QWidget();
    auto* v = new QVBoxLayout(page);
    auto* row = new QHBoxLayout();
    scale_gpus_ = new QLineEdit(QStringLiteral("128,256,512,1024"));
    scale_gpus_->setObjectName(QStringLiteral("scaleGpus"));
    scale_axis_ = new QComboBox();
    scale_axis_->setObjectName(QStringLiteral("scaleAxis"));
    scale_axis_->addItems({QStringLiteral("fsdp"), QStringLiteral("dp"), QStringLiteral("ep")});
    auto* apply_scale = new QPushButton(tr("Predict"));
    scale_note_ = new QLabel();
    scale_note_->setWordWrap(true);
    row->addWidget(new QLabel(tr("GPU counts")));
    row->addWidget(scale_gpus_, 2);
    row->addWidget(new QLabel(tr("grow")));
    row->addWidget(scale_axis_);
    row->addWidget(apply_scale);
    row->addWidget(scale_note_, 3);
    v->addLayout(row);
    v->addWidget(scaling_, 1);
    tabs_->addTab(page, tr("Scaling"));
    auto go = [this] { rescale(scale_gpus_->text(), scale_axis_->currentText()); };
    connect(apply_scale, &QPushButton::clicked, this, go);
    connect(scale_gpus_, &QLineEdit::returnPressed, this, go);
  }
  topology_ = new TopologyView();
  tabs_->addTab(topology_, tr("Topology"));
  compare_ = new CompareView();
  tabs_->addTab(compare_, tr("Compare"));
  study_ = new StudyView();
  tabs_->addTab(study_, tr("Sweep"));
  plan_ = new PlanView();
  tabs_->addTab(plan_, tr("Plan"));

  error_ = new QLabel();
  error_->setWordWrap(true);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->setStyleSheet(QStringLiteral("QLabel { background: #fde2e2; color: #8a1111; padding: 6px; }"));
  error_->hide();

  auto* central = new QWidget();
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  summary_ = new SummaryPanel();
  layout->addWidget(error_);
  layout->addWidget(summary_);
  layout->addWidget(tabs_);
  setCentralWidget(central);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open scenario…"), QKeySequence::Open, this, &MainWindow::openDialog);
  file->addAction(tr("Open &second scenario…"), this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open second scenario"), path_, tr("Scenarios (*.json)"));
    if (!f.isEmpty()) requestCompareScenario(f);
  });
  file->addAction(tr("&Pin scenario as second"), this, [this] { pinCompareScenario(); });
  file->addAction(tr("&Save scenario"), QKeySequence::Save, this, [this] { saveDialog(false); });
  file->addAction(tr("Save scenario &as…"), QKeySequence::SaveAs, this, [this] { saveDialog(true); });
  QMenu* exp = file->addMenu(tr("&Export"));
  exp->addAction(tr("Current view as &PNG…"), this, [this] { exportDialog(0); });
  exp->addAction(tr("Chrome &trace…"), this, [this] { exportDialog(1); });
  exp->addAction(tr("Op table as &CSV…"), this, [this] { exportDialog(2); });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  connect(timeline_, &TimelineView::opClicked, this, &MainWindow::selectOp);
  job_ = new ScenarioJob(this);
  connect(job_, &ScenarioJob::finished, this, &MainWindow::onJobFinished);
  compare_job_ = new ScenarioJob(this);
  compare_job_->setHostCost(false);  // the pinned scenario shows no summary: no second simulation
  connect(compare_job_, &ScenarioJob::finished, this,
          [this] { applyCompare(compare_job_->result(), compare_job_->path()); });

  panel_ = new ScenarioPanel();
  dock_ = new QDockWidget(tr("Scenario"), this);
  dock_->setObjectName(QStringLiteral("scenarioDock"));
  dock_->setWidget(panel_);
  addDockWidget(Qt::LeftDockWidgetArea, dock_);
  connect(panel_, &ScenarioPanel::edited, this, &MainWindow::onPanelEdited);
  // The Sweep tab sweeps the scenario shown, the panel's edits included; a row opens its point.
  study_->setSource([this] { return std::make_pair(panel_->form().path(), panel_->form().overrides()); });
  connect(study_, &StudyView::openPoint, this, [this](const QString& path, const QStringList& sets) {
    if (!confirmDiscardEdits(sets)) return;  // the row carries the edits made before the sweep ran
    requestScenario(path, sets);
    tabs_->setCurrentIndex(0);
  });
  // The Plan tab plans the scenario shown, the panel's edits included; a row opens its layout.
  plan_->setSource([this] { return std::make_pair(panel_->form().path(), panel_->form().overrides()); });
  connect(plan_, &PlanView::openPoint, this, [this](const QString& path, const QStringList& sets) {
    if (!confirmDiscardEdits(sets)) return;
    requestScenario(path, sets);
    tabs_->setCurrentIndex(0);
  });

  run_ = new HardwareRun(this);
  run_log_ = new QPlainTextEdit();
  run_log_->setReadOnly(true);
  run_log_->setMaximumBlockCount(5000);
  run_log_->setFont(QFont(QStringLiteral("monospace")));
  auto* run_dock = new QDockWidget(tr("Hardware run"), this);
  run_dock->setObjectName(QStringLiteral("hardwareRunDock"));
  run_dock->setWidget(run_log_);
  addDockWidget(Qt::BottomDockWidgetArea, run_dock);
  run_dock->hide();
  connect(run_, &HardwareRun::line, run_log_, &QPlainTextEdit::appendPlainText);
  connect(run_, &HardwareRun::line, this, [run_dock] { run_dock->show(); });
  connect(run_, &HardwareRun::finished, this, [this, run_dock](bool ok) {
    run_dock->show();
    if (!ok) {
      run_log_->appendPlainText(tr("Run failed: %1").arg(run_->error()));
      statusBar()->showMessage(tr("Hardware run failed"));
      return;
    }
    // Measured for the scenario the run was started on: another one (opened, or edited since) keeps
    // its table as it is.
    if (run_for_ != std::make_pair(panel_->form().path(), panel_->form().overrides())) {
      run_log_->appendPlainText(tr("Not loaded into the op table: the scenario shown is no longer the one run (%1%2)")
                                    .arg(run_for_.first, run_for_.second.isEmpty() ? QString() : QStringLiteral(" ") + run_for_.second.join(QLatin1Char(' '))));
      statusBar()->showMessage(tr("Hardware run done, for a scenario no longer shown"));
      return;
    }
    model_->setMeasured(run_->medians());
    timeline_->setMeasured(run_->medians());
    run_log_->appendPlainText(tr("Measured medians of %1 ops loaded into the op table.").arg(run_->medians().size()));
    statusBar()->showMessage(tr("Hardware run done: Measured column filled"));
  });
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(tr("Run on &hardware (CPU backend)"), this, [this] { runOnHardware(); });
  run->addAction(tr("&Load measurements or trace…"), this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Load measurements or a profiler trace"), path_,
                                                   tr("Measurements or traces (*.json *.sqlite);;All files (*)"));
    if (!f.isEmpty()) loadMeasurements(f);
  });
  run_dock_ = run_dock;
  statusBar()->showMessage(tr("No scenario"));
  resize(1400, 900);
}

void MainWindow::setPanelScenario(const QString& path, const QStringList& sets) {
  // The dock reads the file with Qt's JSON reader: a file moeperf loaded that it cannot read (it
  // changed on disk since) leaves the dock off, said, rather than editing the previous file.
  if (!panel_->setScenario(path, sets)) {
    panel_->setEnabled(false);
    statusBar()->showMessage(tr("%1 predicted, but the scenario panel could not read it: editing is off until it is opened again").arg(path));
  }
  loaded_overrides_ = panel_->form().overrides();
}

MainWindow::~MainWindow() {
  ++scale_gen_;  // a sweep not started yet is skipped
  scale_pool_.clear();
  scale_pool_.waitForDone();
}

QStringList MainWindow::unsavedEdits(const QStringList& kept) const {
  QStringList lost;
  if (panel_->form().path().isEmpty()) return lost;
  auto path_of = [](const QString& o) { return o.left(o.indexOf(QLatin1Char('='))); };
  for (const QString& o : panel_->form().overrides()) {
    if (loaded_overrides_.contains(o)) continue;
    bool carried = false;
    for (const QString& k : kept) carried = carried || path_of(k) == path_of(o);
    if (!carried) lost << o;
  }
  return lost;
}

bool MainWindow::confirmDiscardEdits(const QStringList& kept) {
  const QStringList lost = unsavedEdits(kept);
  if (lost.isEmpty()) return true;
  // Save writes the scenario as the dock shows it: with the overrides it was opened with (a Sweep
  // or Plan row's) too, and the question says so.
  const QString also = loaded_overrides_.isEmpty()
                           ? QString()
                           : tr("\n\nSaving also writes the overrides the scenario was opened with:\n%1").arg(loaded_overrides_.join(QStringLiteral("\n")));
  const int answer =
      ask_discard_ ? ask_discard_()
                   : QMessageBox::question(this, tr("Unsaved edits"),
                                           tr("The scenario panel has edits not saved to %1:\n%2%3\n\nSave them to the file first?")
                                               .arg(panel_->form().path(), lost.join(QStringLiteral("\n")), also),
                                           QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
  if (answer == QMessageBox::Discard) return true;
  if (answer != QMessageBox::Save) return false;
  QString e;
  if (saveScenario(panel_->form().path(), &e)) return true;
  QMessageBox::warning(this, tr("Save scenario"), e);
  return false;  // not saved: the edits stay, and so does the scenario
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (confirmDiscardEdits()) e->accept();
  else e->ignore();
}

void MainWindow::openDialog() {
  if (!confirmDiscardEdits()) return;
  const QString f = QFileDialog::getOpenFileName(this, tr("Open scenario"), path_, tr("Scenarios (*.json)"));
  if (!f.isEmpty()) requestScenario(f);
}

void MainWindow::requestScenario(const QString& path, const QStringList& sets) {
  statusBar()->showMessage(tr("Loading %1 …").arg(path));
  edit_overtaken_ = edit_overtaken_ || (editing_ && job_->busy());  // its result will be dropped
  editing_ = false;
  request_sets_ = sets;
  panel_->setEnabled(false);  // the dock edits the scenario being opened, once it is there
  job_->start(path, sets);
}

bool MainWindow::openScenario(const QString& path, const QStringList& sets) {
  std::vector<std::string> s;
  for (const QString& x : sets) s.push_back(x.toStdString());
  if (!apply(with_studies(with_host_cost(load_and_predict(path.toStdString(), s))), path)) return false;
  setPanelScenario(path, sets);
  model_->setMeasured({});  // another scenario: the last hardware run no longer applies
  timeline_->setMeasured({});
  return true;
}

void MainWindow::onPanelEdited() {
  editing_ = true;
  statusBar()->showMessage(tr("Validating …"));
  job_->start(panel_->form().path(), panel_->form().overrides());
}

void MainWindow::onJobFinished() {
  const LoadResult& r = job_->result();
  if (editing_) {
    if (!r.report) {
      const int field = panel_->form().fieldForError(QString::fromStdString(r.error_path));
      panel_->showError(field, QString::fromStdString(r.error));
      if (field < 0) apply(r, job_->path());  // a message no field owns goes to the banner
      statusBar()->showMessage(tr("Edit rejected (showing the last valid scenario)"));
      return;
    }
    panel_->clearErrors();
    apply(r, job_->path());
    return;
  }
  panel_->setEnabled(!panel_->form().path().isEmpty());
  if (!apply(r, job_->path())) {
    // The Open failed; an edit it overtook was never predicted: predict the dock as it stands, so
    // the views and the dock agree again.
    if (std::exchange(edit_overtaken_, false)) onPanelEdited();
    return;
  }
  edit_overtaken_ = false;
  setPanelScenario(job_->path(), request_sets_);
  model_->setMeasured({});
  timeline_->setMeasured({});
}

void MainWindow::requestCompareScenario(const QString& path) {
  statusBar()->showMessage(tr("Loading second scenario %1 …").arg(path));
  compare_job_->start(path);
}

bool MainWindow::openCompareScenario(const QString& path) {
  return applyCompare(load_and_predict(path.toStdString()), path);
}

bool MainWindow::pinCompareScenario() {
  if (!report_) return false;
  compare_job_->cancelPending();  // a second scenario still loading would replace the pinned one
  compare_report_ = report_;
  compare_->setLower(compare_report_);
  tabs_->setCurrentWidget(compare_);
  statusBar()->showMessage(tr("Pinned %1 as the second scenario · step %2: edit in the dock to compare")
                               .arg(QString::fromStdString(report_->name), format_step(*report_)));
  return true;
}

bool MainWindow::applyCompare(const LoadResult& r, const QString& path) {
  if (!r.report) {
    error_->setText(QString::fromStdString(r.error));
    error_->show();
    banner_is_compare_ = true;
    statusBar()->showMessage(tr("Not loaded: %1 (showing the previous second scenario)").arg(path));
    return false;
  }
  if (banner_is_compare_) error_->hide();  // a message of the main scenario stays
  compare_report_ = r.report;
  compare_->setLower(compare_report_);
  tabs_->setCurrentWidget(compare_);
  statusBar()->showMessage(tr("Comparing with %1 · step %2").arg(path, format_step(*r.report)));
  return true;
}

bool MainWindow::saveScenario(const QString& out, QString* error) {
  QString e;
  const std::pair<QString, QStringList> before{panel_->form().path(), panel_->form().overrides()};
  const bool ok = panel_->form().save(out, &e) && panel_->setScenario(out);
  if (ok) {
    path_ = out;
    loaded_overrides_ = panel_->form().overrides();  // none: the file holds them now
    // A hardware run of the scenario as it was is a run of the file as saved.
    if (run_for_ == before) run_for_ = {out, loaded_overrides_};
  }
  if (error) *error = e;
  return ok;
}

void MainWindow::saveDialog(bool ask) {
  if (panel_->form().path().isEmpty()) return;
  QString out = panel_->form().path();
  if (ask) out = QFileDialog::getSaveFileName(this, tr("Save scenario"), out, tr("Scenarios (*.json)"));
  if (out.isEmpty()) return;
  QString e;
  if (saveScenario(out, &e))
    statusBar()->showMessage(tr("Saved %1").arg(out));
  else
    QMessageBox::warning(this, tr("Save scenario"), e);
}

bool MainWindow::apply(const LoadResult& r, const QString& path) {
  if (!r.report) {
    error_->setText(QString::fromStdString(r.error));
    error_->show();
    banner_is_compare_ = false;
    // A window that shows nothing yet (a bad file named at start-up, or opened first) has no
    // previous scenario to fall back on.
    statusBar()->showMessage(report_ ? tr("Not loaded: %1 (showing the previous scenario)").arg(path)
                                     : tr("Not loaded: %1 (no scenario shown: File > Open one)").arg(path));
    return false;
  }
  error_->clear();
  error_->hide();
  report_ = r.report;
  studies_ = r.studies;
  path_ = path;
  model_->setReport(report_);
  timeline_->setReport(report_);
  breakdown_->setReport(report_);
  waterfall_->setStudies(r.studies);
  scaling_->setStudies(r.studies);
  topology_->setReport(report_);
  compare_->setUpper(report_);
  summary_->setReport(report_.get());
  plan_->suggestGpus(static_cast<int>(report_->gpus));
  // The Scaling tab keeps the window's GPU counts and axis for the new scenario.
  ++scale_gen_;
  scale_note_->clear();
  if (scale_gpus_->text() != QLatin1String("128,256,512,1024") || scale_axis_->currentText() != QLatin1String("fsdp"))
    rescale(scale_gpus_->text(), scale_axis_->currentText());
  setWindowTitle(QStringLiteral("moeperf — %1").arg(QString::fromStdString(report_->name)));
  // One multi-argument arg(): a chained .arg(path) would let a "%2" in the path be replaced too.
  statusBar()->showMessage(QStringLiteral("%1 · %2 GPUs · step %3 · %4 TFLOPS/GPU · exposed communication %5% · profile %6 · stack %7")
                               .arg(path, QString::number(report_->gpus), format_step(*report_),
                                    QString::number(report_->model_tflops_per_gpu, 'f', 1),
                                    QString::number(100 * report_->exposed_comm_fraction, 'f', 1),
                                    QString::fromStdString(report_->profile),
                                    QString::fromStdString(report_->stack.empty() ? "built-in defaults" : report_->stack)));
  return true;
}

bool MainWindow::exportPng(const QString& out, QString* error) {
  if (!report_) {
    if (error) *error = tr("no scenario loaded");
    return false;
  }
  ShotOptions opt;
  const View views[] = {View::timeline, View::breakdown, View::waterfall, View::scaling, View::topology, View::compare};
  const int tab = tabs_->currentIndex();
  opt.view = tab >= 0 && tab < 6 ? views[tab] : View::timeline;
  opt.other = compare_report_;
  opt.measured = model_->measured();
  QWidget* shown = tab == 0 ? static_cast<QWidget*>(timeline_) : tabs_->currentWidget();
  if (shown && shown->width() > 100 && shown->height() > 100) opt.size = shown->size();
  if (opt.view == View::timeline) opt.t0 = timeline_->timeGeometry().t0, opt.t1 = timeline_->timeGeometry().t1;
  if (opt.view == View::compare) opt.t0 = compare_->upper()->timeGeometry().t0, opt.t1 = compare_->upper()->timeGeometry().t1;
  QWidget* tab_page = tabs_->currentWidget();
  const QImage img = tab_page == study_ || tab_page == plan_ ? tab_page->grab().toImage() : render_view(report_, opt, studies_);
  QSaveFile f(out);
  if (img.isNull() || !f.open(QIODevice::WriteOnly) || !img.save(&f, "PNG") || !f.commit()) {
    if (error) *error = tr("cannot write %1").arg(out);
    return false;
  }
  return true;
}

bool MainWindow::exportTrace(const QString& out, QString* error) {
  if (!report_) {
    if (error) *error = tr("no scenario loaded");
    return false;
  }
  return export_chrome_trace(*report_, out, error);
}

bool MainWindow::exportCsv(const QString& out, QString* error) {
  if (!report_) {
    if (error) *error = tr("no scenario loaded");
    return false;
  }
  return export_report_csv(*report_, out, error);
}

void MainWindow::exportDialog(int what) {
  if (!report_) return;
  static const char* filters[] = {"PNG images (*.png)", "Chrome traces (*.json)", "CSV (*.csv)"};
  const QString out = QFileDialog::getSaveFileName(this, tr("Export"), QString(), tr(filters[what]));
  if (out.isEmpty()) return;
  QString e;
  const bool ok = what == 0 ? exportPng(out, &e) : what == 1 ? exportTrace(out, &e) : exportCsv(out, &e);
  if (ok)
    statusBar()->showMessage(tr("Exported %1").arg(out));
  else
    QMessageBox::warning(this, tr("Export"), e);
}

void MainWindow::runOnHardware(const QStringList& extra, const QString& binary) {
  if (panel_->form().path().isEmpty()) return;
  run_log_->clear();
  model_->setMeasured({});
  timeline_->setMeasured({});
  statusBar()->showMessage(tr("Running on hardware …"));
  run_for_ = {panel_->form().path(), panel_->form().overrides()};
  run_->start(binary, panel_->form().path(), panel_->form().overrides(), extra);
}

QString MainWindow::hardwareLog() const { return run_log_->toPlainText(); }

bool MainWindow::loadMeasurements(const QString& path) {
  QString error, what;
  const QHash<QString, double> m = load_measured_file(path, report_.get(), &error, &what);
  run_dock_->show();
  if (m.isEmpty()) {
    run_log_->appendPlainText(tr("Not loaded: %1").arg(error));
    statusBar()->showMessage(tr("Measurements not loaded: %1").arg(error));
    return false;
  }
  model_->setMeasured(m);
  timeline_->setMeasured(m);
  run_log_->appendPlainText(tr("Loaded %1").arg(what));
  statusBar()->showMessage(tr("Measured column filled: %1").arg(what));
  return true;
}

QString MainWindow::scalingMessage() const { return scale_note_->text(); }

bool MainWindow::rescale(const QString& gpus, const QString& axis) {
  scale_gpus_->setText(gpus);
  scale_axis_->setCurrentText(axis);
  std::vector<int64_t> counts;
  for (const QString& g : gpus.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const qlonglong n = g.trimmed().toLongLong(&ok);
    if (!ok || n < 1 || n > (qlonglong{1} << 24)) {
      scale_note_->setText(tr("GPU counts: expected whole numbers from 1 like 128,256,512, got \"%1\"").arg(g.trimmed()));
      return false;
    }
    counts.push_back(n);
  }
  if (counts.empty() || !report_ || !studies_) {
    scale_note_->setText(counts.empty() ? tr("GPU counts: give at least one") : tr("No scenario: File > Open first"));
    return false;
  }
  const GrowAxis grow = axis == QLatin1String("dp") ? GrowAxis::dp : axis == QLatin1String("ep") ? GrowAxis::ep : GrowAxis::fsdp;
  const quint64 gen = ++scale_gen_;
  scale_note_->setText(tr("Predicting %1 GPU counts …").arg(counts.size()));
  auto report = report_;
  auto base = studies_;
  scale_pool_.clear();  // a sweep asked for and not started is overtaken already
  scale_pool_.start([this, gen, report, base, counts, grow] {
    if (gen != scale_gen_) return;
    auto st = std::make_shared<Studies>(*base);
    st->axis = grow;
    st->scaling.clear();
    st->scaling_error.clear();
    try {
      st->scaling = scaling_points(scale(*report->scenario, counts, grow, report->scenario->calibration));
    } catch (const std::exception& e) {
      st->scaling_error = e.what();
    }
    QMetaObject::invokeMethod(this, [this, gen, st] {
      if (gen != scale_gen_) return;  // a newer request replaced it
      studies_ = st;
      scaling_->setStudies(st);
      scale_note_->setText(st->scaling_error.empty() ? tr("%1 points, %2 grown").arg(st->scaling.size()).arg(to_string(st->axis))
                                                     : QString::fromStdString(st->scaling_error));
    }, Qt::QueuedConnection);
  });
  return true;
}

QString MainWindow::errorText() const { return error_->isHidden() ? QString() : error_->text(); }

void MainWindow::selectOp(int rank_class, int op) {
  // The table holds the busiest class; ops of other classes only get the outline in the timeline.
  if (rank_class != model_->rankClass() || op < 0 || op >= model_->rowCount()) return;
  const QModelIndex idx = proxy_->mapFromSource(model_->index(model_->rowForOp(op), 0));
  table_->selectionModel()->select(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  table_->scrollTo(idx);
}

}  // namespace moeperf::gui
