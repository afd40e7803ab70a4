#!/usr/bin/env bash
# Installs the Debian packages moeperf needs that are missing; silent when all are present.
# Idempotent. Used by scripts/run.sh and scripts/test.sh; safe to run by hand.
set -euo pipefail

# Everything the product and its tests need on a fresh Debian 12 (checked on a debootstrap minbase
# root: see README "Build times"). CUDA is not a Debian package: it is built when NVIDIA's toolkit is
# in /usr/local/cuda, and the configure summary says why when it is not. scripts/test.sh (hence CI)
# configures with MOEPERF_WITH_GUI=ON and MOEPERF_WITH_MPI=ON, so a package missing here fails it.
PACKAGES=(
  g++ cmake ninja-build pkg-config
  nlohmann-json3-dev   # JSON in model/io
  libcli11-dev         # the CLI
  libboost-graph-dev   # topology graph (header-only parts)
  libgtest-dev         # tests
  libeigen3-dev        # executor: CPU backend GEMMs
  libopenmpi-dev openmpi-bin  # executor: ranks across processes (mpirun)
  qt6-base-dev qt6-charts-dev  # desktop app (moeperf-gui) and its headless tests
  libqt6opengl6-dev    # Qt6Charts' CMake package needs Qt6OpenGL; only a Recommends of qt6-base-dev
  fonts-dejavu-core    # text in headless renders (offscreen platform): no font, no labels
  libsqlite3-dev       # calibrate --trace, compare-trace: Nsight Systems SQLite exports
)
# Only for the tests (scripts/test.sh passes --test): the Clang sanitizer build and its libFuzzer
# targets (fuzz/); python3 runs the GPU check's Python probes against stand-ins (ctest
# gpu_probes).
if [ "${1:-}" = "--test" ]; then
  PACKAGES+=(clang libclang-rt-14-dev python3)
fi

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
