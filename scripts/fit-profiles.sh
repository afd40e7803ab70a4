#!/bin/sh
# Refits the shipped calibration profiles from the published measurements of parts, in a chain:
# Hopper from the defaults, Blackwell from Hopper, Blackwell Ultra from Blackwell (a parameter no
# record of a generation moves keeps the previous generation's value, and its profile says so),
# then Hopper once more with the software-fixed parameters its records cannot set carried from
# Blackwell (--carry).
# The build embeds calibration/profiles/*.json; ctest's profiles_current checks they are current.
#   scripts/fit-profiles.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, calibration/profiles)
set -eu
cd "$(dirname "$0")/.."
bin=${1:-build}/bin/moeperf
out=${2:-calibration/profiles}
mkdir -p "$out"
data="calibration/published/gemm.json calibration/published/attention.json calibration/published/memory.json calibration/published/collectives.json calibration/published/ep.json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
"$bin" calibrate $data --generation hopper --out "$tmp/hopper.json" > /dev/null
# shellcheck disable=SC2086
"$bin" calibrate $data --generation blackwell --start "$tmp/hopper.json" --out "$out/blackwell.json" > /dev/null
# shellcheck disable=SC2086
"$bin" calibrate $data --generation blackwell-ultra --start "$out/blackwell.json" --out "$out/blackwell-ultra.json" > /dev/null
# Hopper again, with what its records cannot set but the software fixes on any GPU carried from
# Blackwell's fit: the HBM passes of HybridEP's torch-API copies (no Hopper record has torch-API
# rows over NVLink; its RDMA rows are the NIC's). The Blackwell fit above started from the first
# Hopper fit, which differs from this one in the carried parameters alone.
# shellcheck disable=SC2086
"$bin" calibrate $data --generation hopper --carry "$out/blackwell.json:ep_api_copy_passes" --out "$out/hopper.json" > /dev/null
echo "profiles written to $out: hopper.json blackwell.json blackwell-ultra.json"
