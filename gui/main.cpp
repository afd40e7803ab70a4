// moeperf-gui: the desktop app. Exit codes as the CLI: 0 ok, 1 the work failed, 2 bad input.
//   moeperf-gui [SCENARIO] [--set PATH=VALUE ...]
//   moeperf-gui --screenshot OUT.png [--view timeline|breakdown|waterfall|scaling|topology|compare] [--range T0:T1]
//               [--compare OTHER_SCENARIO]  (compare: SCENARIO above, OTHER_SCENARIO below, one time axis)
//               [--scale-gpus 128,256,512,1024] [--grow fsdp|dp|ep] [--set ...] [--figures OUT.json] SCENARIO  (headless)
#include <QApplication>
#include <QCommandLineParser>
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>

#include "gui/widgets/main_window.h"
#include "gui/widgets/screenshot.h"

int main(int argc, char** argv) {
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  // A screenshot needs no display: default to the offscreen platform unless one is chosen.
  if (args.contains(QStringLiteral("--screenshot")) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("moeperf-gui"));

  QCommandLineParser p;
  p.setApplicationDescription(QStringLiteral("moeperf desktop app: step timeline, breakdown, waterfall, scaling and topology of a scenario"));
  p.addHelpOption();
  const QCommandLineOption shot(QStringLiteral("screenshot"), QStringLiteral("Render a view to OUT.png and exit."),
                                QStringLiteral("OUT.png"));
  const QCommandLineOption view(QStringLiteral("view"), QStringLiteral("timeline (default), breakdown, waterfall, scaling, topology or compare."),
                                QStringLiteral("view"), QStringLiteral("timeline"));
  const QCommandLineOption set(QStringLiteral("set"), QStringLiteral("Override a scenario value, as the CLI."),
                               QStringLiteral("PATH=VALUE"));
  const QCommandLineOption range(QStringLiteral("range"), QStringLiteral("Timeline seconds shown, T0:T1."),
                                 QStringLiteral("T0:T1"));
  const QCommandLineOption gpus(QStringLiteral("scale-gpus"),
                                QStringLiteral("Scaling view: GPU counts, comma separated (default 128,256,512,1024)."),
                                QStringLiteral("N,N,..."));
  const QCommandLineOption grow(QStringLiteral("grow"), QStringLiteral("Scaling view: axis grown, fsdp (default), dp or ep."),
                                QStringLiteral("axis"), QStringLiteral("fsdp"));
  const QCommandLineOption compare(QStringLiteral("compare"),
                                   QStringLiteral("Compare view: the second scenario, drawn below SCENARIO on the same time axis."),
                                   QStringLiteral("OTHER_SCENARIO"));
  const QCommandLineOption figures(QStringLiteral("figures"),
                                   QStringLiteral("With --screenshot: also write the figures the view shows as JSON."),
                                   QStringLiteral("OUT.json"));
  p.addOptions({shot, view, set, range, gpus, grow, compare, figures});
  p.addPositionalArgument(QStringLiteral("scenario"), QStringLiteral("Scenario JSON"));
  if (!p.parse(args)) {
    std::fprintf(stderr, "moeperf-gui: %s\n", qPrintable(p.errorText()));
    return 2;
  }
  if (p.isSet(QStringLiteral("help"))) p.showHelp(0);
  const QStringList pos = p.positionalArguments();

  if (p.isSet(shot)) {
    const QString v = p.value(view);
    using moeperf::gui::View;
    const std::pair<const char*, View> views[] = {{"timeline", View::timeline},
                                                   {"breakdown", View::breakdown},
                                                   {"waterfall", View::waterfall},
                                                   {"scaling", View::scaling},
                                                   {"topology", View::topology},
                                                   {"compare", View::compare}};
    const auto* it = std::find_if(std::begin(views), std::end(views),
                                  [&](const auto& x) { return v == QLatin1String(x.first); });
    if (pos.size() != 1 || it == std::end(views) || (it->second == View::compare) != p.isSet(compare)) {
      std::fprintf(stderr,
                   "moeperf-gui: --screenshot OUT.png [--view timeline|breakdown|waterfall|scaling|topology] SCENARIO\n"
                   "             --screenshot OUT.png --view compare --compare OTHER_SCENARIO SCENARIO\n");
      return 2;
    }
    moeperf::gui::ShotOptions opt;
    opt.view = it->second;
    opt.other_path = p.value(compare);
    const QString g = p.value(grow);
    if (g != QLatin1String("fsdp") && g != QLatin1String("dp") && g != QLatin1String("ep")) {
      std::fprintf(stderr, "moeperf-gui: --grow: expected fsdp, dp or ep, got %s\n", qPrintable(g));
      return 2;
    }
    opt.grow = g == QLatin1String("dp") ? moeperf::GrowAxis::dp : g == QLatin1String("ep") ? moeperf::GrowAxis::ep
                                                                                          : moeperf::GrowAxis::fsdp;
    if (p.isSet(gpus)) {
      opt.scale_gpus.clear();
      for (const QString& n : p.value(gpus).split(QLatin1Char(','))) {
        bool ok = false;
        const qlonglong count = n.toLongLong(&ok);
        if (!ok || count <= 0) {
          std::fprintf(stderr, "moeperf-gui: --scale-gpus: expected positive GPU counts like 128,256, got %s\n",
                       qPrintable(p.value(gpus)));
          return 2;
        }
        opt.scale_gpus.push_back(count);
      }
    }
    if (p.isSet(range)) {
      const QStringList r = p.value(range).split(QLatin1Char(':'));
      bool ok0 = false, ok1 = false;
      if (r.size() == 2) opt.t0 = r[0].toDouble(&ok0), opt.t1 = r[1].toDouble(&ok1);
      if (!ok0 || !ok1 || !(opt.t1 > opt.t0)) {
        std::fprintf(stderr, "moeperf-gui: --range: expected T0:T1 in seconds with T0 < T1, got %s\n",
                     qPrintable(p.value(range)));
        return 2;
      }
    }
    QString error;
    const int rc = moeperf::gui::screenshot(pos[0], p.values(set), opt, p.value(shot), &error, p.value(figures));
    if (rc != 0) std::fprintf(stderr, "moeperf-gui: %s\n", qPrintable(error));
    return rc;
  }

  moeperf::gui::MainWindow w;
  w.show();
  // Off the GUI thread, as File > Open: the window is up at once and says it is loading while the
  // prediction, the host's cost (a second simulation) and the studies run; a bad file shows its
  // message in the window's banner.
  if (!pos.isEmpty()) w.requestScenario(pos[0], p.values(set));
  return app.exec();
}
