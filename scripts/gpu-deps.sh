#!/usr/bin/env bash
# Fetches the build's header-only and test dependencies as Debian packages into .gpu-deps/, for a
# GPU machine that has CUDA, CMake and a compiler but no apt and no network (the device machines of
# issue 20: their image holds no Boost, Eigen, nlohmann-json, CLI11 or GoogleTest). Carry the folder
# there (the device tool's `carry: [".gpu-deps"]`, about 12 MB); scripts/gpu-check.sh unpacks every
# .deb it finds there into its build folder and points CMake at it.
#
#   scripts/gpu-deps.sh            (here, on the Debian 12 machine with apt; run once)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.gpu-deps"
mkdir -p "$dest"
cd "$dest"
rm -f ./*.deb  # one version of each: the check unpacks every .deb it finds
# The packages scripts/setup.sh installs that configure needs (Boost.Graph's headers, Eigen,
# nlohmann-json, CLI11, GoogleTest); Qt, MPI and SQLite stay out: the check builds without them.
pkgs=(libboost1.74-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev googletest)
apt-get download "${pkgs[@]}" >"$dest/download.log" 2>&1 || {
  echo "gpu-deps: apt-get download failed:" >&2; grep -v '^W: Download is performed unsandboxed' "$dest/download.log" >&2; exit 1; }
for p in "${pkgs[@]}"; do
  [ -n "$(find "$dest" -maxdepth 1 -name "${p}_*.deb")" ] || { echo "gpu-deps: $p was not downloaded into $dest" >&2; exit 1; }
done
n=$(find "$dest" -maxdepth 1 -name '*.deb' | wc -l)
echo "gpu-deps: $n packages ($(du -sh "$dest" | cut -f1)) in $dest; carry .gpu-deps to the GPU machine"
