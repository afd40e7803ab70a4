// The controls of a tab that runs a long job off the GUI thread (Sweep, Plan): Run and Cancel
// buttons, a progress bar and a selectable status line, and the states they go through (idle;
// running, Run off and Cancel on; done, the bar full). The tab places the widgets in its layouts
// (which parent them) and connects the buttons; the object names are run<Name> and cancel<Name>.
//
//   RunControls rc(QStringLiteral("Plan"), tr("Plan the scenario shown ..."));
//   form->addWidget(rc.run); form->addWidget(rc.cancel); l->addWidget(rc.bar); l->addWidget(rc.status);
//   rc.begin(tr("Planning ..."), 0);  ... rc.progress(done, total); ... rc.end();
#pragma once

#include <QString>

class QLabel;
class QProgressBar;
class QPushButton;

namespace moeperf::gui {

class RunControls {
 public:
  RunControls(const QString& name, const QString& idle_text);
  // A job started: the bar at 0 of `total` (0 while the total is not known yet), the status `text`,
  // Run off and Cancel on.
  void begin(const QString& text, int total);
  void progress(int done, int total);
  // The job ended: Run on, Cancel off; `full` fills the bar (a job that produced its result).
  void end(bool full);
  void say(const QString& text);
  QString text() const;

  QPushButton* run;
  QPushButton* cancel;
  QProgressBar* bar;
  QLabel* status;
};

}  // namespace moeperf::gui
