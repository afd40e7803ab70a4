#!/usr/bin/env bash
# Configures and builds moeperf into build/ (or $MOEPERF_BUILD_DIR). Extra arguments go to CMake's
# configure step; MOEPERF_TARGETS="moeperf ..." builds only those targets.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MOEPERF_BUILD_DIR:-$root/build}"
gen=()
if command -v ninja >/dev/null 2>&1 && [ ! -f "$build/Makefile" ]; then gen=(-G Ninja); fi
mkdir -p "$build"
log="$build/configure.log"
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >"$log" 2>&1 || {
  cat "$log" >&2; exit 1; }
grep -E "^-- (moeperf configuration|  )" "$log" || true
targets=()
for t in ${MOEPERF_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
