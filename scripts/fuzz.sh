#!/usr/bin/env bash
# Runs every libFuzzer target of the loaders (fuzz/) for MOEPERF_FUZZ_SECONDS each (default 60),
# as many at once as there are cores, seeded with every JSON file under examples/, topologies/,
# calibration/ and stacks/ (and fuzz/seeds/<target>/, fuzz/corpus/<target>/). A finding (crash,
# sanitizer report, an exception other than an input error, a timeout, memory past the limit)
# fails the run and prints the input; commit it under fuzz/corpus/<target>/ with its fix, and
# tests/fuzz/replay_test.cpp replays it in every build from then on.
#
#   scripts/fuzz.sh BUILD_DIR [TARGET ...]        (BUILD_DIR configured with MOEPERF_FUZZ=ON)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:?usage: scripts/fuzz.sh BUILD_DIR [TARGET ...]}" && pwd)"
shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(scenario predict model system stack calibration measurements accuracy grid set sweep)
seconds="${MOEPERF_FUZZ_SECONDS:-60}"
work="$(mktemp -d "${TMPDIR:-/tmp}/moeperf-fuzz-run-XXXXXX")"
trap 'rm -rf "$work"' EXIT

# One seed folder for the JSON targets: every data file, its path flattened into its name.
mkdir -p "$work/seeds"
(cd "$root" && find examples topologies calibration stacks -name '*.json' -print0) |
  while IFS= read -r -d '' f; do cp "$root/$f" "$work/seeds/${f//\//__}"; done

run_one() {
  local t="$1" bin="$build/bin/fuzz_$1"
  [ -x "$bin" ] || { echo "fuzz: $bin missing (configure $build with CXX=clang++ -DMOEPERF_FUZZ=ON)"; return 1; }
  local corpus="$work/corpus-$t" seeds=("$work/seeds")
  mkdir -p "$corpus"
  [ -d "$root/fuzz/seeds/$t" ] && seeds=("$root/fuzz/seeds/$t")   # the `set` target reads lines, not files
  [ -d "$root/fuzz/corpus/$t" ] && seeds+=("$root/fuzz/corpus/$t")
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a loader must not balloon.
  if (cd "$work" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$work/finding-$t-" "$corpus" "${seeds[@]}" >"$work/log-$t" 2>&1); then
    echo "fuzz $t: $(grep -E '^stat::number_of_executed_units' "$work/log-$t" | awk '{print $2}') inputs in ${seconds} s, no finding"
  else
    echo "fuzz $t: FINDING"
    tail -40 "$work/log-$t"
    for f in "$work"/finding-"$t"-*; do
      [ -f "$f" ] || continue
      echo "--- input ($(basename "$f"), $(stat -c %s "$f") bytes), base64:"
      base64 -w 100 "$f" | head -50
      mkdir -p "$root/fuzz/corpus/$t" && cp "$f" "$root/fuzz/corpus/$t/$(sha1sum "$f" | cut -c1-16)"
      echo "--- copied to fuzz/corpus/$t/: fix the loader and commit it"
    done
    return 1
  fi
}

jobs="$(nproc)"
fail=0
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" >"$work/summary-$t" 2>&1 &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || fail=1
    cat "$work/summary-${names[0]}"
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || fail=1
  cat "$work/summary-${names[$i]}"
done
exit "$fail"
