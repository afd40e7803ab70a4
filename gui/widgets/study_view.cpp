#include "gui/widgets/study_view.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QScatterSeries>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>
#include <algorithm>

#include "gui/models/table_items.h"
#include "model/error.h"
#include "model/io/units_parse.h"

namespace moeperf::gui {

namespace {

QStringList split_list(const QString& text) {
  QStringList out;
  for (const QString& s : text.split(QLatin1Char(';')))
    if (!s.trimmed().isEmpty()) out << s.trimmed();
  return out;
}

}  // namespace

StudyView::StudyView(QWidget* parent)
    : QWidget(parent), controls_(QStringLiteral("Study"), tr("Sweep the scenario shown: each point a prediction, as moeperf sweep")) {
  job_ = new SweepJob(this);
  vary_ = new QLineEdit(QStringLiteral("parallelism.ep=1,2,4,8,16,32,64"));
  vary_->setObjectName(QStringLiteral("vary"));
  vary_->setToolTip(tr("--vary PATH=V1,V2,... or PATH=A..B*F or PATH=A..B+S; several separated by ';' make a product"));
  derive_ = new QLineEdit(QStringLiteral("parallelism.fsdp=gpus/(ep*tp*pp*dp)"));
  derive_->setObjectName(QStringLiteral("derive"));
  derive_->setToolTip(tr("--derive PATH=EXPRESSION at every point, several separated by ';'"));
  tokens_ = new QLineEdit();
  tokens_->setObjectName(QStringLiteral("sweepTokens"));
  tokens_->setPlaceholderText(QStringLiteral("15T"));
  tokens_->setMaximumWidth(80);
  tokens_->setToolTip(tr("--tokens: a token budget (15T, 300B): each point's time to train, GPU-hours held and cost"));
  chart_kind_ = new QComboBox();
  chart_kind_->setObjectName(QStringLiteral("sweepChart"));
  chart_kind_->addItems({tr("tokens/s/GPU"), tr("time to train vs cost")});
  chart_kind_->setToolTip(tr("The chart: tokens/s/GPU against the varied field, or (with a token budget) the days to train "
                             "against their cost, with the Pareto front"));

  auto* form = new QHBoxLayout();
  form->addWidget(new QLabel(tr("Vary")));
  form->addWidget(vary_, 3);
  form->addWidget(new QLabel(tr("Derive")));
  form->addWidget(derive_, 2);
  form->addWidget(new QLabel(tr("Tokens")));
  form->addWidget(tokens_);
  form->addWidget(chart_kind_);
  form->addWidget(controls_.run);
  form->addWidget(controls_.cancel);

  model_ = new QStandardItemModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  table_ = new QTableView();
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(0, Qt::AscendingOrder);  // point order until a header is clicked
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setDefaultSectionSize(20);
  table_->verticalHeader()->hide();  // the point's index is the first column (row numbers beside it disagreed by one)
  table_->setToolTip(tr("Double-click a row to open that point in the timeline"));
  chart_ = new QChartView();
  chart_->setRenderHint(QPainter::Antialiasing);
  chart_->chart()->setTitle(tr("Tokens/s per GPU of the feasible points"));
  chart_->chart()->legend()->hide();

  chart_->setMinimumHeight(220);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(table_);
  split->addWidget(chart_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  auto* l = new QVBoxLayout(this);
  l->addLayout(form);
  l->addWidget(controls_.bar);
  l->addWidget(controls_.status);
  l->addWidget(split, 1);

  connect(chart_kind_, &QComboBox::currentIndexChanged, this, [this] { drawChart(); });
  connect(controls_.run, &QPushButton::clicked, this, [this] { run(); });
  connect(controls_.cancel, &QPushButton::clicked, this, &StudyView::cancel);
  connect(job_, &SweepJob::progress, this, &StudyView::onProgress);
  connect(job_, &SweepJob::finished, this, &StudyView::onFinished);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& idx) {
    const int row = proxy_->mapToSource(idx).row();
    if (row >= 0) emit openPoint(path_, pointSets(row));
  });
}

void StudyView::setVary(const QString& text) { vary_->setText(text); }
void StudyView::setDerive(const QString& text) { derive_->setText(text); }
void StudyView::setTokens(const QString& text) { tokens_->setText(text); }
void StudyView::setChartKind(int kind) { chart_kind_->setCurrentIndex(kind); }

void StudyView::run(int threads) {
  if (!source_) return;
  std::tie(path_, sets_) = source_();
  if (path_.isEmpty()) {
    controls_.say(tr("No scenario: File > Open first"));
    return;
  }
  io::SweepSpec sp;
  try {
    sp = SweepJob::spec(path_, sets_, split_list(vary_->text()), split_list(derive_->text()));
    if (sp.axes.empty()) throw InputError("sweep: nothing to vary: give PATH=V1,V2,...");
    if (!tokens_->text().trimmed().isEmpty()) sp.train_tokens = io::parse_token_count("--tokens", tokens_->text().trimmed().toStdString());
  } catch (const InputError& e) {
    controls_.say(QString::fromStdString(e.what()));
    return;
  }
  model_->clear();
  rows_.clear();
  const int n = static_cast<int>(io::sweep_size(sp));
  controls_.begin(tr("Running %1 points …").arg(n), n);
  job_->start(std::move(sp), threads);
}

void StudyView::cancel() {
  job_->cancel();
  controls_.say(tr("Cancelling (the points running finish) …"));
}

void StudyView::onProgress(int done, int total) {
  controls_.progress(done, total);
}

QString StudyView::chartXTitle() const {
  return chart_->chart()->axes(Qt::Horizontal).isEmpty() ? QString() : chart_->chart()->axes(Qt::Horizontal).front()->titleText();
}

QString StudyView::statusText() const { return controls_.text(); }

QStringList StudyView::pointSets(int source_row) const {
  QStringList out = sets_;
  const int i = model_->item(source_row, 0) ? model_->item(source_row, 0)->data(Qt::UserRole).toInt() : -1;
  const auto it = std::find_if(rows_.begin(), rows_.end(), [&](const io::SweepRow& r) { return static_cast<int>(r.index) == i; });
  if (it == rows_.end()) return out;
  for (const auto& o : it->point) out << QString::fromStdString(o.path + "=" + o.value);
  for (const auto& o : it->derived) out << QString::fromStdString(o.path + "=" + o.value);
  return out;
}

void StudyView::onFinished(bool cancelled) {
  controls_.end(false);
  rows_ = job_->rows();
  const io::SweepSpec& sp = job_->sweep();
  QStringList head{tr("point")};
  for (const auto& a : sp.axes) head << QString::fromStdString(a.path);
  for (const auto& d : sp.derive) head << QString::fromStdString(d.path) + tr(" (derived)");
  head << tr("status") << tr("step s") << tr("tokens/s/GPU") << tr("TFLOPS/GPU") << tr("MFU %") << tr("exposed comm %")
       << tr("memory GB");
  const bool budget = sp.train_tokens > 0;
  if (budget) head << tr("days to train") << tr("GPU-hours held") << tr("cost $");
  head << tr("reason");
  model_->clear();
  model_->setHorizontalHeaderLabels(head);
  size_t ok = 0, infeasible = 0, failed = 0;
  for (const io::SweepRow& r : rows_) {
    QList<QStandardItem*> cells{text_item(QString::number(r.index), static_cast<double>(r.index))};
    // A point's values as --set takes them; sorted as numbers when they are.
    auto value_cell = [](const std::string& v) { return text_item(QString::fromStdString(v), QString::fromStdString(v).toDouble()); };
    const size_t skip = r.point.size() >= sp.axes.size() ? r.point.size() - sp.axes.size() : 0;  // grid values come first
    for (size_t a = 0; a < sp.axes.size(); ++a) cells << value_cell(skip + a < r.point.size() ? r.point[skip + a].value : std::string());
    for (size_t d = 0; d < sp.derive.size(); ++d) cells << value_cell(d < r.derived.size() ? r.derived[d].value : std::string());
    cells << text_item(QString::fromStdString(r.status), r.status == "ok" ? 0 : r.status == "infeasible" ? 1 : 2);
    if (!r.reason.empty()) cells.back()->setToolTip(QString::fromStdString(r.reason));  // also in the last column
    if (r.predicted) {
      cells << number_item(r.step_time_s, 3) << number_item(r.tokens_per_s_per_gpu, 0) << number_item(r.model_tflops_per_gpu, 1)
            << number_item(100 * r.mfu, 1) << number_item(100 * r.exposed_comm_fraction, 1) << number_item(r.peak_memory_gb, 1);
      if (budget) {
        cells << number_item(r.time_to_train_days, 1) << number_item(r.gpu_hours_held, 0);
        cells << (r.cost_to_train_usd ? number_item(*r.cost_to_train_usd, 0) : text_item(QString(), 1e300));
      }
    } else {
      // No figures: sorted after every feasible row in each column's natural order (step, exposed
      // communication, memory, days and cost ascending; tokens/s, TFLOPS and MFU descending).
      for (double key : {1e300, -1e300, -1e300, -1e300, 1e300, 1e300}) cells << text_item(QString(), key);
      if (budget)
        for (int k = 0; k < 3; ++k) cells << text_item(QString(), 1e300);
    }
    cells << text_item(QString::fromStdString(r.reason), 0);
    model_->appendRow(cells);
    (r.status == "ok" ? ok : r.status == "infeasible" ? infeasible : failed)++;
  }
  drawChart();
  table_->resizeColumnsToContents();
  controls_.say(tr("%1%2 points: %3 ok, %4 infeasible, %5 failed · double-click a row to open it in the timeline")
                       .arg(cancelled ? tr("Cancelled after ") : QString())
                       .arg(rows_.size())
                       .arg(ok)
                       .arg(infeasible)
                       .arg(failed));
}

void StudyView::drawChart() {
  const io::SweepSpec& sp = job_->sweep();
  QChart* c = chart_->chart();
  c->removeAllSeries();  // deletes the series it holds
  series_ = nullptr, cost_points_ = nullptr, pareto_ = nullptr;
  for (QAbstractAxis* ax : c->axes()) {
    c->removeAxis(ax);
    delete ax;
  }
  std::vector<QPointF> pts;
  QString xtitle, ytitle;
  if (chart_kind_->currentIndex() == 1) {
    // Days to train against what they cost: dollars when every feasible point has a price, else
    // the GPU-hours of the NVLink domains held. The front: sorted by days, each point cheaper than
    // every faster one.
    bool priced = true;
    for (const io::SweepRow& r : rows_)
      if (r.status == "ok" && !r.cost_to_train_usd) priced = false;
    for (const io::SweepRow& r : rows_)
      if (r.status == "ok" && r.time_to_train_days > 0)
        pts.emplace_back(r.time_to_train_days, priced ? *r.cost_to_train_usd / 1e6 : r.gpu_hours_held / 1e6);
    std::sort(pts.begin(), pts.end(), [](const QPointF& a, const QPointF& b) {
      return a.x() != b.x() ? a.x() < b.x() : a.y() < b.y();
    });
    cost_points_ = new QScatterSeries();
    cost_points_->setMarkerSize(9);
    cost_points_->setColor(QColor(0x4c, 0x72, 0xb0));
    pareto_ = new QLineSeries();
    pareto_->setPointsVisible(true);
    pareto_->setPen(QPen(QColor(0xc4, 0x4e, 0x52), 2));
    pareto_->setMarkerSize(11);
    double cheapest = 1e300;
    for (const QPointF& p : pts) {
      cost_points_->append(p);
      if (p.y() < cheapest) pareto_->append(p), cheapest = p.y();
    }
    c->setTitle(sp.train_tokens > 0 ? tr("Days to train %1 T tokens against their cost; the Pareto front in red")
                                          .arg(sp.train_tokens / 1e12, 0, 'g', 4)
                                    : tr("Time to train against cost: give a token budget (Tokens) and run"));
    xtitle = tr("days to train");
    ytitle = priced ? tr("cost, M$") : tr("M GPU-hours held");
    c->addSeries(cost_points_);
    c->addSeries(pareto_);
  } else {
    // The chart's x: the GPU count when it varies, else the first varied field.
    size_t xa = 0;
    for (size_t a = 0; a < sp.axes.size(); ++a)
      if (sp.axes[a].path == "gpus") xa = a;
    for (const io::SweepRow& r : rows_) {
      const size_t skip = r.point.size() >= sp.axes.size() ? r.point.size() - sp.axes.size() : 0;
      bool numeric = false;
      const size_t at = skip + xa;
      const double xv = at < r.point.size() ? QString::fromStdString(r.point[at].value).toDouble(&numeric) : 0.0;
      if (r.status == "ok" && numeric) pts.emplace_back(xv, r.tokens_per_s_per_gpu);
    }
    std::sort(pts.begin(), pts.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
    series_ = new QLineSeries();
    series_->setPointsVisible(true);
    for (const QPointF& p : pts) series_->append(p);
    c->setTitle(tr("Tokens/s per GPU of the feasible points"));
    xtitle = sp.axes.empty() ? QString() : QString::fromStdString(sp.axes[xa].path);
    ytitle = tr("tokens/s/GPU");
    c->addSeries(series_);
  }
  auto* x = new QValueAxis();
  x->setTitleText(xtitle);
  auto* y = new QValueAxis();
  y->setTitleText(ytitle);
  // The points' own span (with a margin), so a few percent between layouts shows.
  double lo = 0, hi = 1, ylo = 0, yhi = 1;
  if (!pts.empty()) {
    lo = hi = pts.front().x();
    ylo = yhi = pts.front().y();
    for (const QPointF& p : pts) lo = std::min(lo, p.x()), hi = std::max(hi, p.x()), ylo = std::min(ylo, p.y()), yhi = std::max(yhi, p.y());
    const double m = std::max(0.05 * (yhi - ylo), 0.01 * yhi);
    ylo = std::max(0.0, ylo - m), yhi += m;
    const double mx = chart_kind_->currentIndex() == 1 ? std::max(0.05 * (hi - lo), 0.01 * hi) : std::max(0.03 * (hi - lo), 0.5);
    lo -= mx, hi += mx;
  }
  x->setRange(lo, hi);
  y->setRange(ylo, yhi);
  y->setLabelFormat(chart_kind_->currentIndex() == 1 ? QStringLiteral("%.3g") : QStringLiteral("%.0f"));
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  for (QAbstractSeries* series : c->series()) {
    series->attachAxis(x);
    series->attachAxis(y);
  }
}

}  // namespace moeperf::gui
