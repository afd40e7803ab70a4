#!/usr/bin/env bash
# The README's screenshots, rendered headless from the current model, each with the figures it
# shows (moeperf-gui --figures) beside it as JSON.
#   scripts/screenshots.sh            regenerate docs/screenshots/*.png and *.json
#   scripts/screenshots.sh --check    render into a temporary folder and compare the figures (and the
#                                     image sizes) with the committed ones; exit 1 naming each that
#                                     differs, so the README cannot show a stale model (ctest runs it)
# MOEPERF_GUI names the binary (default: build/bin/moeperf-gui).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gui="${MOEPERF_GUI:-$root/build/bin/moeperf-gui}"
[ -x "$gui" ] || { echo "screenshots.sh: no $gui (build the GUI first: scripts/build.sh)" >&2; exit 2; }
committed="$root/docs/screenshots"
check=0
if [ "${1:-}" = "--check" ]; then check=1; out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; else out="$committed"; fi
mkdir -p "$out"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
ex="$root/examples/deepseek-v3"
shot() {  # NAME ARGS...
  local name="$1"; shift
  QT_QPA_PLATFORM=offscreen "$gui" --screenshot "$out/$name.png" --figures "$out/$name.json" "$@" 2> >(grep -v propagateSizeHints >&2)
}
shot timeline "$ex/gb300-optimized.json"
shot breakdown --view breakdown "$ex/gb300-optimized.json"
shot waterfall --view waterfall "$ex/gb300-optimized.json"
shot scaling --view scaling "$ex/gb300-scaling.json"
shot topology --view topology "$ex/gb300-optimized.json"
shot compare --view compare --compare "$ex/gb300-baseline.json" "$ex/gb300-optimized.json"
if [ "$check" = 0 ]; then
  echo "screenshots.sh: wrote $(ls "$out"/*.png | wc -l) screenshots and their figures to ${out#"$root"/}"
  exit 0
fi
stale=0
for f in "$out"/*.json; do
  name="$(basename "$f")"
  if ! cmp -s "$f" "$committed/$name"; then
    echo "screenshots.sh: docs/screenshots/$name differs from what the current model shows:" >&2
    diff "$committed/$name" "$f" >&2 || true
    stale=1
  fi
done
if [ "$stale" = 1 ]; then echo "screenshots.sh: stale screenshots; regenerate with scripts/screenshots.sh" >&2; exit 1; fi
echo "screenshots.sh: the $(ls "$out"/*.json | wc -l) committed screenshots show the current model's figures"
