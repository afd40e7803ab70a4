#include "gui/widgets/main_window.h"

#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "gui/models/scenario_loader.h"
#include "gui/widgets/breakdown_view.h"
#include "gui/widgets/scaling_view.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/topology_view.h"
#include "gui/widgets/waterfall_view.h"

namespace moeperf::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
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
  tabs_->addTab(scaling_, tr("Scaling"));
  topology_ = new TopologyView();
  tabs_->addTab(topology_, tr("Topology"));

  error_ = new QLabel();
  error_->setWordWrap(true);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->setStyleSheet(QStringLiteral("QLabel { background: #fde2e2; color: #8a1111; padding: 6px; }"));
  error_->hide();

  auto* central = new QWidget();
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(error_);
  layout->addWidget(tabs_);
  setCentralWidget(central);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open scenario…"), QKeySequence::Open, this, &MainWindow::openDialog);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  connect(timeline_, &TimelineView::opClicked, this, &MainWindow::selectOp);
  job_ = new ScenarioJob(this);
  connect(job_, &ScenarioJob::finished, this, [this] { apply(job_->result(), job_->path()); });
  statusBar()->showMessage(tr("No scenario"));
  resize(1400, 900);
}

void MainWindow::openDialog() {
  const QString f = QFileDialog::getOpenFileName(this, tr("Open scenario"), path_, tr("Scenarios (*.json)"));
  if (!f.isEmpty()) requestScenario(f);
}

void MainWindow::requestScenario(const QString& path, const QStringList& sets) {
  statusBar()->showMessage(tr("Loading %1 …").arg(path));
  job_->start(path, sets);
}

bool MainWindow::openScenario(const QString& path, const QStringList& sets) {
  std::vector<std::string> s;
  for (const QString& x : sets) s.push_back(x.toStdString());
  return apply(with_studies(load_and_predict(path.toStdString(), s)), path);
}

bool MainWindow::apply(const LoadResult& r, const QString& path) {
  if (!r.report) {
    error_->setText(QString::fromStdString(r.error));
    error_->show();
    statusBar()->showMessage(tr("Not loaded: %1 (showing the previous scenario)").arg(path));
    return false;
  }
  error_->clear();
  error_->hide();
  report_ = r.report;
  path_ = path;
  model_->setReport(report_);
  timeline_->setReport(report_);
  breakdown_->setReport(report_);
  waterfall_->setStudies(r.studies);
  scaling_->setStudies(r.studies);
  topology_->setReport(report_);
  setWindowTitle(QStringLiteral("moeperf — %1").arg(QString::fromStdString(report_->name)));
  statusBar()->showMessage(QStringLiteral("%1 · %2 GPUs · step %3 · %4 TFLOPS/GPU · exposed communication %5%")
                               .arg(path)
                               .arg(report_->gpus)
                               .arg(format_seconds(report_->step_time.value()))
                               .arg(report_->model_tflops_per_gpu, 0, 'f', 1)
                               .arg(100 * report_->exposed_comm_fraction, 0, 'f', 1));
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
