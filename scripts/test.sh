#!/usr/bin/env bash
# Every test in one command: install what is missing, build with warnings as errors, run all
# tests (GPU tests skip with a reason where there is no GPU) and the benchmarks' correctness gates.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MOEPERF_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
# The desktop app and MPI are part of the product: required here, so a missing package fails loudly.
# CUDA stays AUTO (not a Debian package); the configure summary says why it was left out.
"$root/scripts/build.sh" -DMOEPERF_WERROR=ON -DMOEPERF_WITH_GUI=ON -DMOEPERF_WITH_MPI=ON
cd "$build"
ctest --output-on-failure --timeout 600 -j "$(nproc)"
echo
echo "== benchmarks =="
"$build/bin/bench_topology"
echo
"$build/bin/bench_step"
if [[ -x "$build/bin/bench_gui" ]]; then   # built only when Qt 6 was found
  echo
  QT_QPA_PLATFORM=offscreen "$build/bin/bench_gui"
fi
