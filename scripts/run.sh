#!/usr/bin/env bash
# The main job in one command: install what is missing, build, and run the default study.
# Until the cost model lands, the default study is the topology of a GB200 NVL72 rack and of a
# 1,024-GPU GB300 NVL72 cluster. Extra arguments replace the default: scripts/run.sh topo FILE ...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
MOEPERF_TARGETS=moeperf "$root/scripts/build.sh" >/dev/null
bin="${MOEPERF_BUILD_DIR:-$root/build}/bin/moeperf"
cd "$root"
if [ $# -gt 0 ]; then exec "$bin" "$@"; fi
"$bin" topo topologies/gb200-nvl72.json
echo
"$bin" topo topologies/gb300-nvl72.json --gpus 1024
