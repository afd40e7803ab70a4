#!/usr/bin/env bash
# The main job in one command: install what is missing, build, and run the default study: the
# published DeepSeek-V3 reproduction config on 128 GB300 GPUs (predict), the waterfall of NVIDIA's
# optimizations from the baseline to it (compare), and its scaling to 1,024 GPUs (scale).
# Extra arguments replace the default: scripts/run.sh predict FILE ...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
# `run.sh run ...` also needs the executor (moeperf run hands over to moeperf-run).
targets=moeperf
if [ "${1:-}" = run ]; then targets="moeperf moeperf-run"; fi
MOEPERF_TARGETS="$targets" "$root/scripts/build.sh" >/dev/null
bin="${MOEPERF_BUILD_DIR:-$root/build}/bin/moeperf"
cd "$root"
if [ $# -gt 0 ]; then exec "$bin" "$@"; fi
"$bin" predict examples/deepseek-v3/gb300-optimized.json
echo
echo "== waterfall: baseline -> optimized (moeperf compare) =="
"$bin" compare examples/deepseek-v3/gb300-baseline.json examples/deepseek-v3/gb300-optimized.json
echo
echo "== scaling at 6 x 4096 tokens per GPU (moeperf scale --grow fsdp) =="
"$bin" scale examples/deepseek-v3/gb300-scaling.json --gpus 128,256,512,1024 --grow fsdp
