// gui_models without a window: time<->pixel geometry and LOD merging in closed form, the op table
// through QAbstractItemModelTester, the exposed-communication sweep against the model's figure,
// the scenario form's field <-> override mapping and save, the measured-medians column.
#include <algorithm>
#include <QAbstractItemModelTester>
#include <QGuiApplication>
#include <QTest>
#include <set>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <cmath>
#include <QTemporaryDir>

#include "gui/models/hardware_run.h"
#include "gui/models/scenario_form.h"
#include "gui/models/scenario_loader.h"
#include "model/io/errors.h"
#include "model/io/load.h"
#include "model/io/stacks.h"
#include "model/io/parts.h"
#include "gui/models/study_data.h"
#include "gui/models/summary.h"
#include "model/io/report_io.h"
#include "gui/models/topology_data.h"
#include "gui/models/timeline_data.h"
#include "gui/models/timeline_geometry.h"
#include "gui/models/timeline_model.h"

using namespace moeperf;
using namespace moeperf::gui;

namespace {
const std::string kOptimized = MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb300-optimized.json";
const QString kSmall = QStringLiteral(MOEPERF_SOURCE_DIR "/examples/executor/cpu-small.json");
}

class GeometryTest : public QObject {
  Q_OBJECT
 private slots:
  void roundTrip() {
    const TimelineGeometry g{0.5, 2.5, 1000};
    // x = (t - t0) / (t1 - t0) * width = (1.3 - 0.5) / 2 * 1000
    QCOMPARE(g.time_to_x(1.3), (1.3 - 0.5) / 2.0 * 1000);
    for (double t : {0.5, 0.9, 1.3, 2.5, 3.0}) QVERIFY(qAbs(g.x_to_time(g.time_to_x(t)) - t) < 1e-12);
    for (double x : {0.0, 1.0, 333.3, 1000.0}) QVERIFY(qAbs(g.time_to_x(g.x_to_time(x)) - x) < 1e-9);
  }
  void zoomKeepsTimeUnderCursor() {
    TimelineGeometry g{0, 4, 800};
    const double x = 200, t = g.x_to_time(x);  // 200 / 800 * 4 = 1 s
    g.zoom_at(x, 2.0);
    // Half the range (2 s), t0 = t - x / width * 2 = 1 - 0.5
    QVERIFY(qAbs(g.t1 - g.t0 - 4.0 / 2.0) < 1e-12);
    QVERIFY(qAbs(g.t0 - (1.0 - 200.0 / 800.0 * 2.0)) < 1e-12);
    QVERIFY(qAbs(g.x_to_time(x) - t) < 1e-12);
    g.zoom_at(650, 0.25);  // zoom out 4x at another x: that time stays too
    const double t2 = TimelineGeometry{0.5, 2.5, 800}.x_to_time(650);
    QVERIFY(qAbs(g.x_to_time(650) - t2) < 1e-12);
    QVERIFY(qAbs(g.t1 - g.t0 - 2.0 * 4) < 1e-12);
  }
  void panShiftsByFractionOfRange() {
    TimelineGeometry g{0, 4, 800};
    g.pan(80);  // content moves right 80 px: the range moves left by 80 / 800 * 4 s
    QVERIFY(qAbs(g.t0 - (0 - 80.0 / 800 * 4)) < 1e-12);
    QVERIFY(qAbs(g.t1 - (4 - 80.0 / 800 * 4)) < 1e-12);
    g.pan(-80);
    QVERIFY(qAbs(g.t0) < 1e-12 && qAbs(g.t1 - 4) < 1e-12);
  }
  void lodMergesSubPixelRun() {
    const TimelineGeometry g{0, 1, 1000};  // 1 ms per pixel
    const double px = 1e-3;
    std::vector<Span> in = {{0.100, 0.100 + 0.2 * px, Category::gemm, false, 0, 1},
                            {0.100 + 0.2 * px, 0.100 + 0.4 * px, Category::attention, false, 1, 1},
                            {0.100 + 0.4 * px, 0.100 + 0.6 * px, Category::memory, false, 2, 1},
                            {0.200, 0.200 + 5 * px, Category::ep_comm, true, 3, 1}};
    const auto out = merge_lod(in, g, 1.0);
    QCOMPARE(out.size(), size_t(2));
    QCOMPARE(out[0].count, 3);                       // three 0.2-px spans, one 0.6-px span
    QCOMPARE(out[0].start, in[0].start);
    QCOMPARE(out[0].end, in[2].end);
    QCOMPARE(out[1].start, in[3].start);             // the 5-px span stays as it was
    QCOMPARE(out[1].end, in[3].end);
    QCOMPARE(out[1].count, 1);
    QVERIFY(out[1].exposed && out[1].category == Category::ep_comm);
  }
  void lodKeepsLongestPieceCategory() {
    const TimelineGeometry g{0, 1, 1000};
    const double px = 1e-3;
    std::vector<Span> in = {{0, 0.2 * px, Category::gemm, false, 0, 1},
                            {0.2 * px, 0.5 * px, Category::fsdp_comm, true, 1, 1},  // 0.3 px: the longest
                            {0.5 * px, 0.7 * px, Category::gemm, false, 2, 1}};
    const auto out = merge_lod(in, g, 1.0);
    QCOMPARE(out.size(), size_t(1));
    QVERIFY(out[0].category == Category::fsdp_comm && out[0].exposed);
    QCOMPARE(out[0].op, 1);
    QCOMPARE(out[0].count, 3);
  }
  void lodCountsAnOpsPiecesOnce() {
    const TimelineGeometry g{0, 1, 1000};
    const double px = 1e-3;
    // Op 4 split into overlapped and exposed pieces, then op 5: two ops, three pieces.
    std::vector<Span> in = {{0, 0.1 * px, Category::ep_comm, false, 4, 1},
                            {0.1 * px, 0.3 * px, Category::ep_comm, true, 4, 1},
                            {0.3 * px, 0.4 * px, Category::ep_comm, false, 5, 1}};
    const auto out = merge_lod(in, g, 1.0);
    QCOMPARE(out.size(), size_t(1));
    QCOMPARE(out[0].count, 2);
    QVERIFY(out[0].exposed);  // the 0.2-px exposed piece is the longest
  }
  void lodDoesNotBridgeGaps() {
    const TimelineGeometry g{0, 1, 1000};
    const double px = 1e-3;
    // Two 0.2-px spans 50 px apart stay two spans: merging would paint over the idle time.
    std::vector<Span> in = {{0, 0.2 * px, Category::gemm, false, 0, 1}, {50 * px, 50.2 * px, Category::gemm, false, 1, 1}};
    QCOMPARE(merge_lod(in, g, 1.0).size(), size_t(2));
  }
};

class TimelineModelTest : public QObject {
  Q_OBJECT
 private slots:
  void stepShowsItsBand() {
    // The step time carries the profile's band when there is one, and is bare without.
    StepReport r;
    r.step_time = Seconds(4.166);
    QCOMPARE(format_step(r), QStringLiteral("4.166 s"));
    r.band = r.band_low = r.band_high = 0.05;
    QCOMPARE(format_step(r), QStringLiteral("4.166 s ± 5 %"));
    // The end-to-end term widens the slow side: both sides shown.
    r.band_high = 0.35;
    QCOMPARE(format_step(r), QStringLiteral("4.166 s −5 / +35 %"));
  }
  void notesListEveryStagesMemory() {
    // With pipeline stages, the notes under the figures list each stage's HBM as the CLI does.
    StepReport r;
    r.profile = "hopper";
    QVERIFY(!summary_notes(r).join(QStringLiteral("\n")).contains(QStringLiteral("per pipeline stage")));
    r.memory.hbm_by_stage = {Bytes(112.14e9), Bytes(119.36e9), Bytes(83.5e9)};
    r.memory.pp_stage = 1;
    const QStringList notes = summary_notes(r);
    QVERIFY(notes.contains(QStringLiteral("Memory per pipeline stage (GB): 112.1, 119.4, 83.5; stage 1 the fullest")));
    QCOMPARE(QString::fromStdString(io::stage_memory_text(r.memory)), QStringLiteral("112.1, 119.4, 83.5"));
    r.memory.hbm_by_stage.assign(20, Bytes(1e9));  // past 16 stages the middle is elided, as in the CLI
    QCOMPARE(QString::fromStdString(io::stage_memory_text(r.memory)),
             QStringLiteral("1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 ... (8 more: --format json), 1.0, 1.0, 1.0, 1.0"));
  }
  void notesSayWhatTheHostSpentAndWhatItCosts() {
    // The host's lines of `predict`'s text, under the figures: what it spent issuing (framework
    // ops, graph launches, the libraries' loops beyond them) and, once known, what that cost.
    auto sc = std::make_shared<Scenario>();
    sc->stack.host_op_s = 10e-6;
    sc->stack.graph_launch_s = 5e-6;
    StepReport r;
    r.profile = "blackwell";
    r.scenario = sc;
    r.step_time = Seconds(2.0);
    QVERIFY(!summary_notes(r).join(QStringLiteral("\n")).contains(QStringLiteral("Host")));  // the host spent nothing
    r.host_ops = 1000;
    r.graph_launches = 200;
    r.host_busy = Seconds(0.5);  // 10 ms of ops, 1 ms of launches: 0.489 s of library loops
    QStringList notes = summary_notes(r);
    QVERIFY2(notes.contains(QStringLiteral("Host issuing: 0.500 s (25.0 % of the step, the reported rank's program: 1000 framework "
                                           "ops at 10.0 us, 200 CUDA graph launches at 5.0 us, 0.489 s of libraries' host loops)")),
             qPrintable(notes.join(QStringLiteral("\n"))));
    QVERIFY(!notes.join(QStringLiteral("\n")).contains(QStringLiteral("Host's cost")));  // not simulated again
    r.host_cost = Seconds(0.25);
    notes = summary_notes(r);
    QVERIFY(notes.contains(QStringLiteral(
        "Host's cost: 0.250 s (12.5 % of the step: the step less the same step under a host that issues every op at once)")));
  }
  void loadedPredictionKnowsWhatTheHostCosts() {
    // The app's prediction runs the second simulation as `predict` does (with_host_cost, which the
    // scenario job and the window's own load call): the ladder's first step (Megatron eager, 10 us
    // per framework op) has both host lines, each the CLI's figure.
    const LoadResult plain = load_and_predict(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json");
    QVERIFY2(plain.report, plain.error.c_str());
    QVERIFY(!plain.report->host_cost.has_value());  // the compare job's result: one simulation
    const LoadResult r = with_host_cost(plain);
    QVERIFY(r.report->host_busy.value() > 0);
    QVERIFY(r.report->host_cost.has_value());
    QCOMPARE(r.report->step_time.value(), plain.report->step_time.value());
    const double free_step = host_free_step_time(*r.report->scenario, r.report->scenario->calibration).value();
    QCOMPARE(r.report->host_cost->value(), std::max(0.0, r.report->step_time.value() - free_step));
    const QString joined = summary_notes(*r.report).join(QStringLiteral("\n"));
    QVERIFY(joined.contains(QStringLiteral("Host issuing: ")));
    QVERIFY(joined.contains(QStringLiteral("Host's cost: ")));
  }
  void passesModelTester() {
    const LoadResult r = load_and_predict(kOptimized);
    QVERIFY2(r.report, r.error.c_str());
    TimelineModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setReport(r.report);
    const RankClass& rc = r.report->graph->classes[static_cast<size_t>(r.report->busiest_class)];
    QCOMPARE(m.rowCount(), static_cast<int>(rc.ops.size()));
    QCOMPARE(m.columnCount(), static_cast<int>(TimelineModel::ColumnCount));
    m.setReport(nullptr);
    QCOMPARE(m.rowCount(), 0);
    m.setReport(r.report);
  }
  void sortRoleHoldsNumbers() {
    const LoadResult r = load_and_predict(kOptimized);
    QVERIFY(r.report);
    TimelineModel m;
    m.setReport(r.report);
    const auto c = static_cast<size_t>(r.report->busiest_class);
    const RankClass& rc = r.report->graph->classes[c];
    const SimClass& sc = r.report->sim->classes[c];
    for (int row = 0; row < m.rowCount(); ++row) {
      const auto i = static_cast<size_t>(row);
      const double d = (sc.ops[i].end - sc.ops[i].start).value();
      QCOMPARE(m.index(row, TimelineModel::ColDuration).data(TimelineModel::SortRole).toDouble(), d);
      if (rc.ops[i].category == Category::gemm && d > 0)  // achieved FLOP/s = FLOPs / simulated duration
        QCOMPARE(m.index(row, TimelineModel::ColRate).data(TimelineModel::SortRole).toDouble(), rc.ops[i].flops.value() / d);
    }
  }
  void exposedSweepMatchesPredict() {
    const LoadResult r = load_and_predict(kOptimized);
    QVERIFY(r.report);
    const TimelineData d = build_timeline(*r.report);
    // The same sweep as model/study/predict.cpp over the busiest class: the totals agree.
    QVERIFY(qAbs(d.exposed_seconds(r.report->busiest_class) - r.report->exposed_comm.value()) < 1e-9);
    // Lanes: one per (class, queue) that ran an op; every op appears (comm split into pieces).
    size_t queues = 0;
    for (const SimClass& sc : r.report->sim->classes) {
      std::set<int> q;
      for (const OpTiming& t : sc.ops) q.insert(t.queue);
      queues += q.size();
    }
    QCOMPARE(d.lanes.size(), queues);
  }
  void singleCollectiveLaneIsNamedForWhatItCarries() {
    // The baseline runs without multistream collectives: one lane carries the EP and FSDP ones
    // (on XLA's NCCL path; its one-shot kernel would run on the compute stream).
    std::string base = kOptimized;
    base.replace(base.find("gb300-optimized"), 15, "gb300-baseline");
    const LoadResult r = load_and_predict(base, {"stack.ragged_a2a=nccl"});
    QVERIFY(r.report);
    QStringList labels;
    for (const Lane& l : build_timeline(*r.report).lanes) labels << QString::fromStdString(l.label);
    QVERIFY2(labels.contains(QStringLiteral("all ranks · collectives: ep_comm + fsdp_dp_comm")), qPrintable(labels.join(QLatin1Char('|'))));
    QVERIFY2(!labels.contains(QStringLiteral("all ranks · ep_comm")), qPrintable(labels.join(QLatin1Char('|'))));
  }
};

class StudyDataTest : public QObject {
  Q_OBJECT
 private slots:
  void valuesAreTheModels() {
    // build_studies copies the model's numbers: the stack's ablation (walk(ablation_states(s)))
    // and scale(s, {128, 256, 512, 1024}, fsdp, cal), bar for step and point for point.
    const LoadResult r = with_studies(load_and_predict(kOptimized));
    QVERIFY(r.report && r.studies);
    const Scenario& s = *r.report->scenario;
    const auto states = io::ablation_states(s);
    QCOMPARE(states.size(), size_t{6});  // maxtext-te-2026-09: start and the post's five steps
    const auto steps = walk(states, s.calibration);
    const Studies& st = *r.studies;
    QVERIFY(st.waterfall_error.empty() && st.scaling_error.empty());
    QCOMPARE(st.waterfall.size(), steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      QCOMPARE(st.waterfall[i].name, steps[i].name);
      QCOMPARE(st.waterfall[i].tflops_per_gpu, steps[i].report.model_tflops_per_gpu);
      QCOMPARE(st.waterfall[i].step_time_s, steps[i].report.step_time.value());
      QCOMPARE(st.waterfall[i].fits, steps[i].report.memory.fits);
    }
    // The last step is the scenario itself.
    QCOMPARE(st.waterfall.back().tflops_per_gpu, r.report->model_tflops_per_gpu);
    const auto pts = scale(s, kDefaultScaleGpus, GrowAxis::fsdp, s.calibration);
    QCOMPARE(st.scaling.size(), pts.size());
    for (size_t i = 0; i < pts.size(); ++i) {
      QCOMPARE(st.scaling[i].gpus, pts[i].gpus);
      QCOMPARE(st.scaling[i].tokens_per_s_per_gpu, pts[i].report.tokens_per_s_per_gpu);
      QCOMPARE(st.scaling[i].efficiency, pts[i].efficiency);
      QCOMPARE(st.scaling[i].fits, pts[i].report.memory.fits);
      // The losses shown: the model's, as shares of the point's step, those of 0.1 % or more.
      for (const auto& [name, share] : st.scaling[i].lost_share) {
        // Clang before 16 cannot capture a structured binding; a reference declared from it captures anywhere.
        const auto& loss = name;
        const auto it = std::find_if(pts[i].lost.begin(), pts[i].lost.end(), [&loss](const auto& x) { return x.first == loss; });
        QVERIFY(it != pts[i].lost.end());
        QCOMPARE(share, it->second / pts[i].report.step_time.value());
        QVERIFY(std::abs(share) >= 0.001);
      }
    }
    QCOMPARE(st.scaling.front().efficiency, 1.0);  // the first point over itself
    QVERIFY(st.scaling.front().lost_share.empty());
    // Strong scaling loses to the bubble and the gradient all-reduce, and the text says so.
    ScalingPoint p{8192, 0, 0, 0.78, true, {{"idle", 0.108}, {"dp/fsdp comm", 0.105}, {"optimizer", 0.009}}};
    QCOMPARE(QString::fromStdString(lost_text(p, 2)), QStringLiteral("idle +10.8 %, dp/fsdp comm +10.5 %"));
  }
  void rejectedSweepKeepsTheMessage() {
    // 100 GPUs is not a multiple of the other axes (ep 8): scale() throws, the waterfall stays.
    const LoadResult r = load_and_predict(kOptimized);
    const Studies st = build_studies(*r.report, {100});
    QVERIFY(st.scaling.empty());
    QVERIFY(!st.scaling_error.empty());
    QVERIFY(!st.waterfall.empty());
  }
};

class TopologyDataTest : public QObject {
  Q_OBJECT
 private slots:
  void wholeRackIsDrawnVertexByVertex() {
    // One GB200 NVL72 rack: 72 GPUs, 18 NVLink switch chips, every vertex a node of its kind.
    const LoadResult r = load_and_predict(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb200-optimized.json");
    QVERIFY(r.report);
    const Topology t = Topology::build(r.report->scenario->system, 72);
    const TopologyData d = build_topology_data(t, {});
    QVERIFY(d.whole);
    QCOMPARE(d.drawn(VertexKind::gpu), int64_t{72});
    QCOMPARE(d.drawn(VertexKind::nvswitch), int64_t{18});
    for (int k = 0; k < kVertexKinds; ++k)
      QCOMPARE(d.drawn(static_cast<VertexKind>(k)), t.count(static_cast<VertexKind>(k)));
    QCOMPARE(static_cast<int64_t>(d.nodes.size()), t.vertex_count());
    // Each GPU reaches all 18 switch chips (NVL72's all-to-all through the switch tray).
    int64_t gpu_switch = 0;
    for (const TopoEdge& e : d.edges) gpu_switch += e.kind == LinkKind::nvlink;
    QCOMPARE(gpu_switch, int64_t{72 * 18});
  }
  void largeSystemDrawsOneDomainAndCounts() {
    // 1,024 GB300 GPUs (64 per rack): one domain's 64 GPUs, each fabric tier one box with its count.
    const LoadResult r = load_and_predict(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb300-scaling.json",
                                          {"gpus=1024", "parallelism.fsdp=128", "batch.global_batch=6144"});
    QVERIFY(r.report);
    const Topology& t = *r.report->topology;
    const TopologyData d = build_topology_data(t, step_utilization(*r.report));
    QVERIFY(!d.whole);
    QCOMPARE(d.drawn(VertexKind::gpu), t.gpus_per_domain());
    QCOMPARE(d.drawn(VertexKind::leaf), int64_t{1});
    for (const TopoTier& tier : d.tiers) QCOMPARE(tier.total, t.count(tier.kind));
    // Mean utilization over the step is a fraction; EP all-to-all keeps NVLink busy some of the time.
    for (double u : d.utilization) QVERIFY(u >= 0 && u <= 1);
    QVERIFY(d.utilization[static_cast<size_t>(Resource::nvlink)] > 0);
  }
};

class MeasuredTest : public QObject {
  Q_OBJECT
 private slots:
  void mediansFillTheMeasuredColumn() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("m.json"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"kind": "measurements", "ops": {"moe.expert_fc1": {"median_s": 0.25, "calls": 1}, "x": {"calls": 2}}})");
    f.close();
    QString error;
    const QHash<QString, double> m = load_measured_medians(path, &error);
    QCOMPARE(m.size(), 1);  // "x" has no median
    QCOMPARE(m.value(QStringLiteral("moe.expert_fc1")), 0.25);
    QVERIFY(load_measured_medians(dir.filePath(QStringLiteral("none.json")), &error).isEmpty());
    QVERIFY(error.contains(QStringLiteral("none.json")));

    const LoadResult r = load_and_predict(kSmall.toStdString());
    QVERIFY(r.report);
    TimelineModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setReport(r.report);
    model.setMeasured(m);
    int hits = 0;
    for (int row = 0; row < model.rowCount(); ++row) {
      const QModelIndex c = model.index(row, TimelineModel::ColMeasured);
      if (model.index(row, TimelineModel::ColName).data().toString() == QLatin1String("moe.expert_fc1")) {
        ++hits;
        QCOMPARE(c.data(TimelineModel::SortRole).toDouble(), 0.25);
        QCOMPARE(c.data().toString(), format_seconds(0.25));
      } else {
        QVERIFY(c.data().toString().isEmpty());
      }
    }
    QVERIFY(hits > 0);
    QCOMPARE(model.headerData(TimelineModel::ColMeasured, Qt::Horizontal).toString(), QStringLiteral("Measured"));
  }
  void overlayMapsMediansToTheirSpans() {
    const LoadResult r = load_and_predict(kSmall.toStdString());
    QVERIFY(r.report);
    QVERIFY(measured_overlay(*r.report, {}).empty());
    const QHash<QString, double> m{{QStringLiteral("moe.expert_fc1"), 0.25}, {QStringLiteral("no.such.op"), 1.0}};
    const std::vector<MeasuredMark> marks = measured_overlay(*r.report, m);
    const TimelineData d = build_timeline(*r.report);
    size_t named = 0;
    for (const auto& c : r.report->graph->classes)
      for (const Op& op : c.ops) named += op.name == "moe.expert_fc1";
    QVERIFY(named > 0);
    QCOMPARE(marks.size(), named);  // every op of that name, nothing for the unknown name
    for (const MeasuredMark& mk : marks) {
      const auto c = static_cast<size_t>(mk.rank_class), i = static_cast<size_t>(mk.op);
      QCOMPARE(r.report->graph->classes[c].ops[i].name, std::string("moe.expert_fc1"));
      const OpTiming& t = r.report->sim->classes[c].ops[i];
      QCOMPARE(mk.start, t.start.value());
      QCOMPARE(mk.predicted_end, t.end.value());
      QCOMPARE(mk.measured_end, t.start.value() + 0.25);
      QCOMPARE(mk.queue, t.queue);
      // The op's span is on the lane the mark names.
      bool on_lane = false;
      for (const Lane& l : d.lanes)
        if (l.rank_class == mk.rank_class && l.queue == mk.queue)
          for (const Span& s : l.spans) on_lane |= s.op == mk.op && s.start == mk.start;
      QVERIFY(on_lane);
    }
  }
};

class ScenarioFormTest : public QObject {
  Q_OBJECT
 private slots:
  void fieldsMapToOverridePaths() {
    // Every field's pointer names itself, and the form's dotted paths are load_scenario's.
    const auto& f = ScenarioForm::fields();
    QCOMPARE(f.size(), size_t{25});
    for (size_t i = 0; i < f.size(); ++i)
      QCOMPARE(ScenarioForm::fieldForPointer(ScenarioForm::pointer(f[i].path)), static_cast<int>(i));
    QCOMPARE(ScenarioForm::pointer(QStringLiteral("stack.overlap.fsdp_prefetch")),
             QStringLiteral("/stack/overlap/fsdp_prefetch"));
    QCOMPARE(ScenarioForm::fieldForPointer(QStringLiteral("/parallelism/ep/x")),
             ScenarioForm::fieldForPointer(QStringLiteral("/parallelism/ep")));
    QCOMPARE(ScenarioForm::fieldForPointer(QStringLiteral("/memory")), -1);
    // A stack field the form has no editor for belongs to the stack chooser; one it has, to its own.
    QCOMPARE(ScenarioForm::fieldForPointer(QStringLiteral("/stack/cuda_graphs")),
             ScenarioForm::fieldForPointer(QStringLiteral("/stack")));
    QVERIFY(ScenarioForm::fieldForPointer(QStringLiteral("/stack/dispatcher")) !=
            ScenarioForm::fieldForPointer(QStringLiteral("/stack")));
    for (const char* p : {"model", "system", "calibration", "gpus", "parallelism.tp", "parallelism.ep", "parallelism.fsdp", "parallelism.pp", "parallelism.dp",
                          "parallelism.schedule", "parallelism.layout",
                          "batch.micro_batch", "batch.global_batch", "precision.expert_gemm", "precision.dense_gemm",
                          "routing.distribution", "routing.zipf_exponent", "stack", "stack.grouped_gemm", "stack.grouped_kernel", "stack.dispatcher",
                          "stack.multistream_collectives", "stack.overlap.fsdp_prefetch",
                          "stack.overlap.a2a_with_shared_expert", "stack.overlap.fwd_bwd"})
      QVERIFY2(ScenarioForm::fieldForPointer(ScenarioForm::pointer(QLatin1String(p))) >= 0, p);
    // Every choice the grouped-kernel editor offers loads.
    const std::pair<const char*, GroupedKernel> kernels[] = {{"ptr_array", GroupedKernel::ptr_array},
                                                             {"contiguous", GroupedKernel::contiguous},
                                                             {"multi_stream", GroupedKernel::multi_stream}};
    for (const auto& [k, want] : kernels)
      QVERIFY(io::load_scenario(kSmall.toStdString(), {io::parse_override(std::string("stack.grouped_kernel=\"") + k + "\"")})
                  .stack.grouped_kernel == want);
  }
  void editsBecomeOverrides() {
    ScenarioForm f;
    QVERIFY(f.load(kSmall));
    QCOMPARE(f.value(QStringLiteral("parallelism.ep")), QStringLiteral("4"));  // as in the file
    QCOMPARE(f.value(QStringLiteral("stack.dispatcher")), QStringLiteral("alltoall"));
    QVERIFY(f.value(QStringLiteral("parallelism.tp")).isEmpty());  // absent from the file
    f.setValue(QStringLiteral("parallelism.ep"), QStringLiteral("4"));  // the file's value: no edit
    QVERIFY(f.overrides().isEmpty());
    f.setValue(QStringLiteral("stack.grouped_gemm"), QStringLiteral("false"));
    f.setValue(QStringLiteral("parallelism.ep"), QStringLiteral(" 7 "));
    // In fields() order, trimmed, as `--set PATH=VALUE`.
    QCOMPARE(f.overrides(), (QStringList{QStringLiteral("parallelism.ep=7"), QStringLiteral("stack.grouped_gemm=false")}));
    // gpus = 4 but ep = 7: moeperf names /parallelism (the layout rule); the form puts it beside EP.
    try {
      (void)io::load_scenario(kSmall.toStdString(), {io::parse_override("parallelism.ep=7")});
      QFAIL("ep = 7 on 4 GPUs was accepted");
    } catch (const io::SpecError& e) {
      QCOMPARE(f.fieldForError(QString::fromStdString(e.json_path())),
               ScenarioForm::fieldForPointer(QStringLiteral("/parallelism/ep")));
    }
    QCOMPARE(f.fieldForError(QStringLiteral("/memory")), -1);
    f.setValue(QStringLiteral("parallelism.ep"), QString());  // cleared: back to the file's value
    QCOMPARE(f.overrides(), QStringList{QStringLiteral("stack.grouped_gemm=false")});
    // A path no field shows (a sweep point's or a plan layout's) stays an override, after the
    // form's, in the order made; the form's keep fields() order.
    f.setValue(QStringLiteral("memory.recompute"), QStringLiteral("[\"mlp\"]"));
    f.setValue(QStringLiteral("system.price.usd_per_gpu_hour"), QStringLiteral("3"));
    f.setValue(QStringLiteral("parallelism.ep"), QStringLiteral("2"));
    QCOMPARE(f.overrides(), (QStringList{QStringLiteral("parallelism.ep=2"), QStringLiteral("stack.grouped_gemm=false"),
                                         QStringLiteral("memory.recompute=[\"mlp\"]"),
                                         QStringLiteral("system.price.usd_per_gpu_hour=3")}));
    f.setValue(QStringLiteral("memory.recompute"), QString());
    QCOMPARE(f.overrides().size(), 3);
  }
  void stackIsChosenByName() {
    // A stack named by the file shows its name; one given as an object over a base shows the base;
    // choosing another becomes `--set stack=NAME`, which loads.
    ScenarioForm f;
    QVERIFY(f.load(QString::fromStdString(kOptimized)));
    QCOMPARE(f.value(QStringLiteral("stack")), QStringLiteral("maxtext-te-2026-09"));
    QVERIFY(ScenarioForm::fields()[static_cast<size_t>(ScenarioForm::fieldForPointer(QStringLiteral("/stack")))]
                .choices.contains(QStringLiteral("megatron-core")));
    f.setValue(QStringLiteral("stack"), QStringLiteral("megatron-core"));
    QCOMPARE(f.overrides(), QStringList{QStringLiteral("stack=megatron-core")});
    const Scenario s = io::load_scenario(kOptimized, {io::parse_override("stack=megatron-core")});
    QCOMPARE(QString::fromStdString(s.stack.name), QStringLiteral("megatron-core"));
    ScenarioForm g;
    QVERIFY(g.load(QStringLiteral(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb200-mcore-ladder-01-baseline.json")));
    QCOMPARE(g.value(QStringLiteral("stack")), QStringLiteral("megatron-core"));
    QCOMPARE(g.value(QStringLiteral("stack.dispatcher")), QStringLiteral("alltoall"));
  }
  void calibrationProfileIsChosenByName() {
    // The GB300 example names no profile: the field is empty and the system's own generation
    // prices it. Choosing another shipped profile is `--set calibration=NAME`, which predicts with
    // that profile, and a save keeps the name (no file of that name is beside the scenario).
    ScenarioForm f;
    QVERIFY(f.load(QString::fromStdString(kOptimized)));
    QVERIFY(f.value(QStringLiteral("calibration")).isEmpty());
    const int field = ScenarioForm::fieldForPointer(QStringLiteral("/calibration"));
    QVERIFY(field >= 0);
    QCOMPARE(ScenarioForm::fieldForPointer(QStringLiteral("/calibration/params/hbm_fraction")), field);
    const QStringList choices = ScenarioForm::fields()[static_cast<size_t>(field)].choices;
    for (const char* name : {"hopper", "blackwell", "blackwell-ultra"}) QVERIFY2(choices.contains(QLatin1String(name)), name);
    QCOMPARE(choices.size(), static_cast<qsizetype>(io::builtin_profiles().size()));
    const LoadResult own = load_and_predict(kOptimized, {});
    QVERIFY2(own.report, own.error.c_str());
    QVERIFY(QString::fromStdString(own.report->profile).startsWith(QStringLiteral("blackwell-ultra")));
    f.setValue(QStringLiteral("calibration"), QStringLiteral("hopper"));
    QCOMPARE(f.overrides(), QStringList{QStringLiteral("calibration=hopper")});
    const LoadResult other = load_and_predict(kOptimized, {f.overrides().front().toStdString()});
    QVERIFY2(other.report, other.error.c_str());
    QVERIFY(QString::fromStdString(other.report->profile).startsWith(QStringLiteral("hopper")));
    QVERIFY(other.report->step_time.value() != own.report->step_time.value());
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("what-if.json"));
    QString error;
    QVERIFY2(f.save(out, &error), qPrintable(error));
    QCOMPARE(f.value(QStringLiteral("calibration")), QStringLiteral("hopper"));  // reloaded from the file written
    QVERIFY(f.overrides().isEmpty());
    const Scenario saved = io::load_scenario(out.toStdString());
    QVERIFY2(saved.calibration.profile.rfind("hopper", 0) == 0, saved.calibration.profile.c_str());
  }
  void pipelineLayoutBalancedIsPredictedAndShown() {
    // The ladder's file gives Megatron's layout string; the panel shows it, and "balanced" in its
    // place is an override that predicts the split moeperf chooses (two layers at most per stage).
    const QString ladder = QStringLiteral(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb200-mcore-ladder-13-norm-quantize.json");
    ScenarioForm f;
    QVERIFY(f.load(ladder));
    QCOMPARE(f.value(QStringLiteral("parallelism.layout")), QStringLiteral("Et|(tt|)*30L"));
    QCOMPARE(f.value(QStringLiteral("parallelism.schedule")), QStringLiteral("interleaved"));
    f.setValue(QStringLiteral("parallelism.layout"), QStringLiteral("balanced"));
    QCOMPARE(f.overrides(), QStringList{QStringLiteral("parallelism.layout=balanced")});
    std::vector<std::string> sets;
    for (const QString& o : f.overrides()) sets.push_back(o.toStdString());
    const LoadResult r = load_and_predict(ladder.toStdString(), sets);
    QVERIFY2(r.report, r.error.c_str());
    const Parallelism& p = r.report->scenario->parallelism;
    QVERIFY(p.balance_layout);
    QCOMPARE(p.layout.size(), size_t{32});
    int most = 0;
    for (const VirtualStageLayout& v : p.layout) most = std::max(most, v.layers);
    QCOMPARE(most, 2);
    QVERIFY(!r.report->notes.empty());
    QVERIFY(QString::fromStdString(r.report->notes.front()).startsWith(QStringLiteral("layout balanced by priced stage cost: ")));
    // A layout string that is not Megatron's is moeperf's error, shown beside the field.
    try {
      (void)io::load_scenario(ladder.toStdString(), {io::parse_override("parallelism.layout=Balanced")});
      QFAIL("a layout string with 'B' was accepted");
    } catch (const io::SpecError& e) {
      QCOMPARE(f.fieldForError(QString::fromStdString(e.json_path())),
               ScenarioForm::fieldForPointer(QStringLiteral("/parallelism/layout")));
      QVERIFY(QString::fromStdString(e.what()).contains(QStringLiteral("\"balanced\"")));
    } catch (const std::exception& e) {
      QFAIL(e.what());
    }
  }
  void systemAndModelAreFileReferences() {
    // The panel switches hardware or model by file reference, validated like any other field.
    const QString opt = QStringLiteral(MOEPERF_SOURCE_DIR "/examples/deepseek-v3/gb300-optimized.json");
    ScenarioForm f;
    QVERIFY(f.load(opt));
    QCOMPARE(f.value(QStringLiteral("system")), QStringLiteral("../../topologies/gb300-nvl72.json"));
    f.setValue(QStringLiteral("system"), QStringLiteral("../../topologies/gb200-nvl72.json"));
    QCOMPARE(f.overrides(), QStringList{QStringLiteral("system=../../topologies/gb200-nvl72.json")});
    std::vector<io::Override> ov;
    for (const QString& o : f.overrides()) ov.push_back(io::parse_override(o.toStdString()));
    const Scenario s = io::load_scenario(opt.toStdString(), ov);
    QVERIFY(s.system.gpu().name.find("B200") != std::string::npos);
    f.setValue(QStringLiteral("system"), QStringLiteral("../../topologies/nope.json"));
    try {
      std::vector<io::Override> bad;
      for (const QString& o : f.overrides()) bad.push_back(io::parse_override(o.toStdString()));
      (void)io::load_scenario(opt.toStdString(), bad);
      QFAIL("a missing system file was accepted");
    } catch (const io::SpecError& e) {
      QCOMPARE(f.fieldForError(QString::fromStdString(e.json_path())), 1);  // shown beside "System file"
    }
  }
  void saveRoundTrips() {
    ScenarioForm f;
    QVERIFY(f.load(kSmall));
    f.setValue(QStringLiteral("batch.micro_batch"), QStringLiteral("2"));
    f.setValue(QStringLiteral("stack.dispatcher"), QStringLiteral("allgather"));
    f.setValue(QStringLiteral("routing.distribution"), QStringLiteral("zipf"));
    f.setValue(QStringLiteral("routing.zipf_exponent"), QStringLiteral("1.2"));
    std::vector<io::Override> ov;
    for (const QString& o : f.overrides()) ov.push_back(io::parse_override(o.toStdString()));
    const Scenario want = io::load_scenario(kSmall.toStdString(), ov);
    QTemporaryDir dir;  // another folder: the model and system references must be rewritten
    QVERIFY(dir.isValid());
    const QString out = dir.filePath(QStringLiteral("saved.json"));
    QString error;
    QVERIFY2(f.save(out, &error), qPrintable(error));
    QVERIFY(f.overrides().isEmpty());  // reloaded from OUT
    QCOMPARE(f.path(), out);
    QCOMPARE(f.value(QStringLiteral("batch.micro_batch")), QStringLiteral("2"));
    const Scenario got = io::load_scenario(out.toStdString());
    QCOMPARE(got.batch.micro_batch, int64_t{2});
    QVERIFY(got.stack.dispatcher == Dispatcher::allgather);
    QVERIFY(got.routing.distribution == RoutingDistribution::zipf);
    QCOMPARE(got.routing.zipf_exponent, 1.2);
    // The same prediction as the file with the overrides.
    QCOMPARE(predict(got, got.calibration).step_time.value(), predict(want, want.calibration).step_time.value());
    QVERIFY(QDir(dir.path()).entryList(QDir::Files) == QStringList{QStringLiteral("saved.json")});  // no temporary left
  }
  void saveWritesEditsAsTheLoaderAppliesThem() {
    // Edits into a named stack and into the referenced system file (a plan's or a sweep's point,
    // a price) and of a field the dock does not show: saved elsewhere, the file loads to the same
    // scenario as the original with the overrides (the stack keeps its base; the system file is
    // brought in, its own references rewritten for the new folder), and no temporary is left.
    ScenarioForm f;
    QVERIFY(f.load(QString::fromStdString(kOptimized)));
    f.setValue(QStringLiteral("stack.dispatcher"), QStringLiteral("alltoall"));
    f.setValue(QStringLiteral("system.price.usd_per_gpu_hour"), QStringLiteral("3"));
    f.setValue(QStringLiteral("memory.recompute"), QStringLiteral("[\"mlp\"]"));
    std::vector<io::Override> ov;
    for (const QString& o : f.overrides()) ov.push_back(io::parse_override(o.toStdString()));
    QCOMPARE(ov.size(), size_t{3});
    const Scenario want = io::load_scenario(kOptimized, ov);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString out = dir.filePath(QStringLiteral("saved.json"));
    QString error;
    QVERIFY2(f.save(out, &error), qPrintable(error));
    const Scenario got = io::load_scenario(out.toStdString());
    QCOMPARE(got.stack.name, want.stack.name);
    QVERIFY(got.stack.dispatcher == want.stack.dispatcher);
    QCOMPARE(*got.system.power_price.usd_per_gpu_hour, 3.0);
    QCOMPARE(got.memory.recompute.size(), size_t{1});
    QCOMPARE(predict(got, got.calibration).step_time.value(), predict(want, want.calibration).step_time.value());
    QVERIFY(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden) == QStringList{QStringLiteral("saved.json")});
    // An edit the loader refuses is not saved, and OUT is left as it was.
    f.setValue(QStringLiteral("system.price.usd_per_gpu_hour"), QStringLiteral("-1"));
    QVERIFY(!f.save(out, &error));
    QVERIFY2(error.startsWith(QStringLiteral("not saved: ")), qPrintable(error));
    QCOMPARE(*io::load_scenario(out.toStdString()).system.power_price.usd_per_gpu_hour, 3.0);
  }
  void saveKeepsFileReferencesAndNames() {
    // A scenario beside its own end-to-end file, on a shipped stack by name: saved into another
    // folder, the file reference follows it and the stack's name stays a name.
    QTemporaryDir a, b;
    QVERIFY(a.isValid() && b.isValid());
    QFile src(kSmall);
    QVERIFY(src.open(QIODevice::ReadOnly));
    QJsonObject doc = QJsonDocument::fromJson(src.readAll()).object();
    const QDir home = QFileInfo(kSmall).absoluteDir();
    for (const char* key : {"model", "system"})
      if (doc.value(QLatin1String(key)).isString())
        doc.insert(QLatin1String(key), home.absoluteFilePath(doc.value(QLatin1String(key)).toString()));
    doc.insert(QStringLiteral("stack"), QStringLiteral("megatron-core"));
    doc.insert(QStringLiteral("end_to_end"), QStringLiteral("e2e.json"));
    auto write = [](const QString& path, const QByteArray& text) {
      QFile f(path);
      return f.open(QIODevice::WriteOnly) && f.write(text) == text.size();
    };
    QVERIFY(write(a.filePath(QStringLiteral("scn.json")), QJsonDocument(doc).toJson()));
    QVERIFY(write(a.filePath(QStringLiteral("e2e.json")),
                  R"({"kind": "end_to_end", "cases": [{"name": "x", "stack": "megatron-core", "step_ratio": 1.5}]})"));
    ScenarioForm f;
    QVERIFY(f.load(a.filePath(QStringLiteral("scn.json"))));
    QString error;
    QVERIFY2(f.save(b.filePath(QStringLiteral("saved.json")), &error), qPrintable(error));
    const Scenario got = io::load_scenario(b.filePath(QStringLiteral("saved.json")).toStdString());
    {
      // Absolute references stay absolute.
      QFile saved(b.filePath(QStringLiteral("saved.json")));
      QVERIFY(saved.open(QIODevice::ReadOnly));
      const QJsonObject sd = QJsonDocument::fromJson(saved.readAll()).object();
      for (const char* key : {"model", "system"}) QCOMPARE(sd.value(QLatin1String(key)).toString(), doc.value(QLatin1String(key)).toString());
    }
    QCOMPARE(got.stack.name, std::string("megatron-core"));
    QCOMPARE(got.calibration.end_to_end.size(), size_t{1});
    QCOMPARE(got.calibration.end_to_end.front().step_ratio, 1.5);
    const StepReport r = predict(got, got.calibration);
    QVERIFY(r.end_to_end && r.end_to_end->own_stack);
    QVERIFY(std::abs(r.band_high - std::hypot(r.band, 0.5)) < 1e-12);
  }
};

int main(int argc, char** argv) {
  QGuiApplication app(argc, argv);
  int rc = 0;
  {
    GeometryTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    TimelineModelTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    StudyDataTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    TopologyDataTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    MeasuredTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  {
    ScenarioFormTest t;
    rc |= QTest::qExec(&t, argc, argv);
  }
  return rc;
}

#include "gui_models_test.moc"
