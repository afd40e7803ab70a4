#!/bin/sh
# Refits the shipped calibration profiles from the published measurements of parts, in a chain:
# Hopper from the defaults, Blackwell from Hopper, Blackwell Ultra from Blackwell (a parameter no
# record of a generation moves keeps the previous generation's value, and its profile says so).
# The build embeds calibration/profiles/*.json; ctest's profiles_current checks they are current.
#   scripts/fit-profiles.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, calibration/profiles)
set -eu
cd "$(dirname "$0")/.."
bin=${1:-build}/bin/moeperf
out=${2:-calibration/profiles}
mkdir -p "$out"
data="calibration/published/gemm.json calibration/published/attention.json calibration/published/memory.json calibration/published/collectives.json calibration/published/ep.json"
# shellcheck disable=SC2086
"$bin" calibrate $data --generation hopper --out "$out/hopper.json" > /dev/null
# shellcheck disable=SC2086
"$bin" calibrate $data --generation blackwell --start "$out/hopper.json" --out "$out/blackwell.json" > /dev/null
# shellcheck disable=SC2086
"$bin" calibrate $data --generation blackwell-ultra --start "$out/blackwell.json" --out "$out/blackwell-ultra.json" > /dev/null
echo "profiles written to $out: hopper.json blackwell.json blackwell-ultra.json"
