#include "gui/models/compare_diff.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "model/study/study.h"
#include "model/workload/step.h"

namespace moeperf::gui {

CompareDiff compare_diff(const StepReport& upper, const StepReport& lower, int top_ops) {
  CompareDiff d;
  if (upper.scenario && lower.scenario) d.fields = differing_fields(*upper.scenario, *lower.scenario);
  d.rows.push_back({"step", "step", upper.step_time.value(), lower.step_time.value()});
  // The terms in the upper's order, then any only the lower has.
  const auto ut = step_terms(upper), lt = step_terms(lower);
  std::vector<std::string> names;
  std::map<std::string, std::pair<double, double>> terms;
  for (const auto& [k, v] : ut) names.push_back(k), terms[k].first += v;
  for (const auto& [k, v] : lt) {
    if (!terms.count(k)) names.push_back(k);
    terms[k].second += v;
  }
  for (const std::string& k : names)
    if (terms[k].first != 0 || terms[k].second != 0) d.rows.push_back({"step terms", k, terms[k].first, terms[k].second});
  for (int c = 0; c < kCategoryCount; ++c) {
    const double a = upper.breakdown[static_cast<size_t>(c)].value(), b = lower.breakdown[static_cast<size_t>(c)].value();
    if (a != 0 || b != 0) d.rows.push_back({"kernel seconds", to_string(static_cast<Category>(c)), a, b});
  }
  std::map<std::string, std::pair<double, double>> ops;
  for (const OpSummary& o : upper.ops) ops[o.name].first += o.seconds.value();
  for (const OpSummary& o : lower.ops) ops[o.name].second += o.seconds.value();
  std::vector<DiffRow> moved;
  for (const auto& [name, v] : ops)
    if (v.first != v.second) moved.push_back({"ops", name, v.first, v.second});
  // Largest move first; ties by name, so the order does not depend on the map's.
  std::stable_sort(moved.begin(), moved.end(), [](const DiffRow& a, const DiffRow& b) {
    return std::abs(a.delta()) > std::abs(b.delta());
  });
  if (static_cast<int>(moved.size()) > top_ops) moved.resize(static_cast<size_t>(std::max(0, top_ops)));
  d.rows.insert(d.rows.end(), moved.begin(), moved.end());
  return d;
}

}  // namespace moeperf::gui
