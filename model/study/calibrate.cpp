#include "model/study/calibrate.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "model/error.h"

namespace moeperf {

double predicted_seconds(const Sample& s, const Calibration& c) {
  const double launch = c[Param::kernel_launch_s];
  if (s.flops > 0) return s.flops / (s.peak_flops * c[Param::gemm_peak_fraction]) + launch;
  return s.bytes / (s.bandwidth * c[Param::hbm_fraction]) + launch;
}

FitReport fit_compute_params(const std::vector<Sample>& samples, const Calibration& start) {
  std::vector<const Sample*> train, held;
  for (size_t i = 0; i < samples.size(); ++i) (i % 4 == 3 ? held : train).push_back(&samples[i]);
  int n_gemm = 0, n_mem = 0;
  for (const Sample* s : train) (s->flops > 0 ? n_gemm : n_mem) += 1;
  if (n_gemm < 2 || n_mem < 2)
    throw InputError("calibration needs at least 2 GEMM and 2 memory-bound ops to fit, got " + std::to_string(n_gemm) +
                     " and " + std::to_string(n_mem) + " (after holding back every fourth op)");
  // Relative least squares: divide each row by its measured time so short ops weigh as much as long ones.
  Eigen::MatrixXd a(static_cast<Eigen::Index>(train.size()), 3);
  Eigen::VectorXd b(static_cast<Eigen::Index>(train.size()));
  for (size_t i = 0; i < train.size(); ++i) {
    const Sample& s = *train[i];
    const auto r = static_cast<Eigen::Index>(i);
    a(r, 0) = s.flops > 0 ? s.flops / s.peak_flops / s.seconds : 0.0;
    a(r, 1) = s.flops > 0 ? 0.0 : s.bytes / s.bandwidth / s.seconds;
    a(r, 2) = 1.0 / s.seconds;
    b(r) = 1.0;
  }
  const Eigen::Vector3d x = a.colPivHouseholderQr().solve(b);
  FitReport f;
  f.fitted = start;
  auto clamp_set = [&](Param p, double v) {
    const ParamDef& d = param_def(p);
    const double c = std::clamp(v, d.min, d.max);
    if (c != v) f.notes.push_back(std::string(d.name) + " fitted to " + std::to_string(v) + ", clamped to its range");
    f.fitted.set(p, c);
  };
  clamp_set(Param::gemm_peak_fraction, x(0) > 0 ? 1.0 / x(0) : param_def(Param::gemm_peak_fraction).max);
  clamp_set(Param::hbm_fraction, x(1) > 0 ? 1.0 / x(1) : param_def(Param::hbm_fraction).max);
  clamp_set(Param::kernel_launch_s, x(2));
  auto rms = [](const std::vector<const Sample*>& v, const Calibration& c) {
    if (v.empty()) return 0.0;
    double e = 0;
    for (const Sample* s : v) {
      const double r = predicted_seconds(*s, c) / s->seconds - 1.0;
      e += r * r;
    }
    return std::sqrt(e / static_cast<double>(v.size()));
  };
  f.train = static_cast<int>(train.size());
  f.held_back = static_cast<int>(held.size());
  f.rms_rel_error_before_train = rms(train, start);
  f.rms_rel_error_after_train = rms(train, f.fitted);
  f.rms_rel_error_before_held = rms(held, start);
  f.rms_rel_error_after_held = rms(held, f.fitted);
  return f;
}

}  // namespace moeperf
