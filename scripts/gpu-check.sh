#!/usr/bin/env bash
# GPU check of the MoE kernels on one H200 (or any sm_90 GPU): fresh build for sm_90a only, the
# gpu-labelled tests, then bench_kernels and bench_expert_gemm, everything under an 8-minute budget.
#
#   scripts/gpu-check.sh OUTDIR
#
# Writes into OUTDIR: gpu.csv (nvidia-smi name, driver, max SM / memory clocks), date.txt,
# build.log, ctest.log, bench.log, kernels.json, expert_gemm.log, expert_gemm.json. Exits non-zero
# if the build, a test or a bench correctness gate failed. Without a GPU (no nvidia-smi, or it
# lists no GPU) it still builds the same targets, so a CPU-only machine checks that they compile,
# then says there is no GPU and exits 0 without running anything.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: $0 OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
build="${MOEPERF_GPU_BUILD_DIR:-$root/build-gpu-check}"
deadline=$((SECONDS + 480))   # 8 minutes for the whole check
left() { local l=$((deadline - SECONDS)); [ "$l" -gt 5 ] && echo "$l" || echo 5; }

date -u +%Y-%m-%dT%H:%M:%SZ >"$out/date.txt"
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  have_gpu=1
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.csv"
fi

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
echo "== configure + build ($build) =="
timeout "$(left)" cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DMOEPERF_WITH_GUI=OFF -DMOEPERF_WITH_CUDA=ON >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log"; echo "gpu-check: configure failed"; exit 1; }
targets=(test_kernels_gpu test_kernels_moe_gpu test_expert_gemm_gpu bench_kernels bench_expert_gemm)
# The CUDA backend's test when the executor is built, the NCCL communicator's when CUDA, MPI and
# NCCL were found (configure's summary lines say so).
grep -q "executor: ON" "$out/build.log" && targets+=(test_backend_cuda_gpu)
grep -q "NCCL: ON" "$out/build.log" && targets+=(test_comm_nccl_gpu)
timeout "$(left)" cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}" >>"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log"; echo "gpu-check: build failed (or ran out of time)"; exit 1; }

if [ "$have_gpu" = 0 ]; then
  echo "gpu-check: no GPU here (nvidia-smi absent or lists none): built, nothing run"
  exit 0
fi
cat "$out/gpu.csv"

status=0
echo "== gpu tests =="
(cd "$build" && timeout "$(left)" ctest -L gpu --output-on-failure --timeout 300) >"$out/ctest.log" 2>&1 || status=1
tail -25 "$out/ctest.log"
echo "== bench_kernels =="
timeout "$(left)" "$build/bin/bench_kernels" "$out/kernels.json" 2>&1 | tee "$out/bench.log" || status=1
echo "== bench_expert_gemm =="
timeout "$(left)" "$build/bin/bench_expert_gemm" "$out/expert_gemm.json" 2>&1 | tee "$out/expert_gemm.log" || status=1
[ "$status" = 0 ] && echo "gpu-check: passed" || echo "gpu-check: FAILED (see $out/ctest.log, $out/bench.log, $out/expert_gemm.log)"
exit "$status"
