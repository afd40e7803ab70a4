#!/usr/bin/env bash
# Every test in one command: install what is missing, build with warnings as errors, run all
# tests (GPU tests skip with a reason where there is no GPU) and the benchmarks' correctness gates.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MOEPERF_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" --test
# Each phase says how long it took (the CI run aims at 30 minutes on two cores: where they go).
phase_start=$SECONDS
phase_done() { echo "== $1: $((SECONDS - phase_start)) s =="; phase_start=$SECONDS; }
# The desktop app and MPI are part of the product: required here, so a missing package fails loudly.
# CUDA stays AUTO (not a Debian package); the configure summary says why it was left out.
"$root/scripts/build.sh" -DMOEPERF_WERROR=ON -DMOEPERF_WITH_GUI=ON -DMOEPERF_WITH_MPI=ON
phase_done "build"
cd "$build"
ctest --output-on-failure --timeout 600 -j "$(nproc)"
phase_done "tests"

# The same model, loaders, CLI and executor (CPU backend, loopback) under AddressSanitizer and
# UndefinedBehaviorSanitizer, built with Clang in a second build folder: any memory error or
# undefined behaviour a test reaches fails the run. The same build instruments the loaders for
# libFuzzer (fuzzer-no-link) and links one fuzzer per loader entry point (fuzz/); after the tests
# each fuzzer runs MOEPERF_FUZZ_SECONDS (default 30) seeded with every data file, and a finding
# fails the run (scripts/fuzz.sh). CUDA, MPI and the GUI stay out (their runtimes are not built
# for the sanitizers). MOEPERF_SANITIZE=0 skips all of it; MOEPERF_FUZZ_SECONDS=0 only the fuzzing.
if [ "${MOEPERF_SANITIZE:-1}" != 0 ]; then
  echo
  echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (Clang; no CUDA, MPI or GUI) =="
  san="${MOEPERF_SANITIZE_BUILD_DIR:-$root/build-asan}"
  # A folder configured with another compiler (GCC, before the fuzzers) is configured afresh.
  if [ -f "$san/CMakeCache.txt" ] && ! grep -q "^CMAKE_CXX_COMPILER:.*clang" "$san/CMakeCache.txt"; then rm -rf "$san"; fi
  flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer"
  # Line tables only (-gline-tables-only, not -g): the sanitizers' reports name function, file and
  # line from them, and the build compiles about an eighth faster (cli/plan.cpp: 27 s with -g, 24 s).
  # A unity build (CMake batches of 8 files per compile): about half the compile time, since the
  # headers are read once a batch. The first build above is not one, so a file that compiles only
  # beside others (a missing include) still fails CI; file-local names must not collide within a
  # target (one Opts per cli/ file's anonymous namespace would).
  CC=clang CXX=clang++ MOEPERF_BUILD_DIR="$san" "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
    -DMOEPERF_WERROR=ON -DMOEPERF_WITH_CUDA=OFF -DMOEPERF_WITH_MPI=OFF -DMOEPERF_WITH_GUI=OFF -DMOEPERF_BUILD_BENCH=OFF \
    -DMOEPERF_FUZZ=ON "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
  phase_done "sanitizer build"
  # Tests that repeat whole predictions of large scenarios (the 2,048-GPU DualPipe run four times,
  # the 13 ladder steps, the 16 accuracy cases with their fits, the README's outputs), plan searches
  # run pruned and unpruned over every schedule (the other CliPlan and PlanBounds tests walk the same
  # search), and Monte Carlo checks of the routing statistics (5,000 simulated steps in the test's
  # own loop; every prediction calls the functions they check) take 35-160 s each under the
  # sanitizers and reach no code the others do not: they run in the first pass only. Without
  # them the pass takes about a third less on two cores.
  (cd "$san" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure --timeout 900 -j "$(nproc)" \
      -E '^(Cli\.PredictReportsThePipelineBubble|Stacks\.LadderFilesAreTheAblationStates|calibration_current|readme_current|studies_readme_current|CliPlan\.(TheFlopBoundHoldsWhenAttentionIsPricedFasterThanGemms|SchedulesAreSearchedAsAsked|BestLayoutsArePredictionsAndTheSearchAddsUp)|Routing\.(TileRowsMatchBruteForce|GroupLimitedMaxMatchesBruteForce))$')
  phase_done "tests under the sanitizers"
  if [ "${MOEPERF_FUZZ_SECONDS:-30}" != 0 ]; then
    echo
    echo "== fuzzers: every loader entry point, ${MOEPERF_FUZZ_SECONDS:-30} s each =="
    MOEPERF_FUZZ_SECONDS="${MOEPERF_FUZZ_SECONDS:-30}" "$root/scripts/fuzz.sh" "$san"
    phase_done "fuzzers"
  fi
fi

echo
echo "== benchmarks =="
"$build/bin/bench_topology"
echo
"$build/bin/bench_step"
echo
"$build/bin/bench_sweep"
if [[ -x "$build/bin/bench_gui" ]]; then   # built only when Qt 6 was found
  echo
  QT_QPA_PLATFORM=offscreen "$build/bin/bench_gui"
fi
phase_done "benchmarks"
