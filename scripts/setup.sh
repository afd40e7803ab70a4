#!/usr/bin/env bash
# Installs the Debian packages moeperf needs that are missing; silent when all are present.
# Idempotent. Used by scripts/run.sh and scripts/test.sh; safe to run by hand.
set -euo pipefail

# Required to build and test. Optional parts (CUDA from NVIDIA's repository, Qt 6, MPI) are built
# when present and reported by CMake's configure summary when absent.
PACKAGES=(
  g++ cmake ninja-build pkg-config
  nlohmann-json3-dev   # JSON in model/io
  libcli11-dev         # the CLI
  libboost-graph-dev   # topology graph (header-only parts)
  libgtest-dev         # tests
  libeigen3-dev        # executor: CPU backend GEMMs
  libopenmpi-dev openmpi-bin  # executor: ranks across processes (mpirun)
  qt6-base-dev qt6-charts-dev  # desktop app (moeperf-gui) and its headless tests
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "moeperf setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "moeperf setup: not root and no sudo; please install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
