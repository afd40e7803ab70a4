#!/usr/bin/env bash
# GPU check of the MoE kernels, the executor and the software stacks' mechanisms on one H200 or H100
# (any sm_90 GPU), everything within 9 minutes on a 16-core machine, the most important first:
#   1. torch_host.json: eager PyTorch's host time per op, a module call, autograd, a CUDA graph
#      replay and a host wait (scripts/gpu-probes/torch_host.py; before the build, on an idle CPU);
#   2. configure (sm_90a only), build the benchmarks (--parallel $(nproc));
#   3. bench_kernels -> kernels.json, bench_expert_gemm -> expert_gemm.json (BF16 and FP8 ways);
#   4. summary.json: both merged with the GPU (nvidia-smi: name, driver, memory, max and current
#      clocks, power limit), the date and the git revision, ready to be committed as
#      examples/measurements/<gpu>-<date>.json (the path it suggests is in the file);
#   5. build the gpu-labelled tests and moeperf, run the tests (ctest -L gpu); summary.json gets
#      their result;
#   6. jax_moe.json: jax.lax.ragged_dot at DeepSeek-V3's expert shapes against a dense dot, and a
#      one-device ragged all-to-all (scripts/gpu-probes/jax_moe.py);
#   7. moeperf run --suite calibrate --backend cuda -> suite.json (the calibration records), then
#      moeperf calibrate suite.json -> calibrate.log and profile.json (the fit, before/after);
#   8. moeperf run examples/executor/cpu-small.json --backend cuda -> run.json (the executor's gates).
# Every step runs under `timeout` with what is left of the 9 minutes, so a slow step cannot eat
# the budget of the ones after it silently: it fails, says so, and the script goes on where it can.
#
#   scripts/gpu-check.sh OUTDIR
#
# Writes into OUTDIR: date.txt, gpu.csv, torch_host.{json,log}, build.log, bench.log, kernels.json,
# expert_gemm.{log,json}, summary.json, ctest.log, jax_moe.{json,log}, suite.{json,log},
# system.json, calibrate.log, profile.json, run.{json,log}. Exits non-zero if the build, a bench
# correctness gate, a test or the executor's run failed (the Python probes and the suite are
# measurements: their failure is reported, not fatal). Without a GPU (no nvidia-smi, or it lists
# none) it builds the same targets (no time budget then: CPU-only machines are slow), says there
# is no GPU and exits 0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: $0 OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
build="${MOEPERF_GPU_BUILD_DIR:-$root/build-gpu-check}"
jobs="$(nproc)"

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null; then
  have_gpu=1
fi
budget=540                                  # 9 minutes for the whole check on a GPU machine
[ "$have_gpu" = 0 ] && budget=7200          # compile check only: no budget to keep
deadline=$((SECONDS + budget))
left() { local l=$((deadline - SECONDS)); [ "$l" -gt 5 ] && echo "$l" || echo 5; }
# step NAME LOG CMD...: runs CMD under the time left, appending to LOG; says how it went.
step() {
  local name="$1" log="$2" t0=$SECONDS rc=0
  shift 2
  timeout "$(left)" "$@" >>"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then echo "gpu-check: $name: ok ($((SECONDS - t0)) s)"
  elif [ "$rc" = 124 ]; then echo "gpu-check: $name: OUT OF TIME after $((SECONDS - t0)) s (see $log)"
  else echo "gpu-check: $name: FAILED, exit $rc (see $log)"; fi
  return "$rc"
}

date_iso="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "$date_iso" >"$out/date.txt"
gpu_fields=(name driver_version memory.total clocks.max.sm clocks.max.mem clocks.sm clocks.mem power.limit)
if [ "$have_gpu" = 1 ]; then
  q="$(IFS=,; echo "${gpu_fields[*]}")"
  nvidia-smi --query-gpu="$q" --format=csv >"$out/gpu.csv"
  nvidia-smi --query-gpu="$q" --format=csv,noheader,nounits -i 0 >"$out/gpu0.csv"
fi
: >"$out/build.log"

py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
# The revision: git's, or MOEPERF_GIT_REVISION where the copy has no .git (the device tool's copy).
MOEPERF_GIT_REVISION="${MOEPERF_GIT_REVISION:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
export MOEPERF_GIT_REVISION
probe_status=()
if [ "$have_gpu" = 1 ]; then
  echo "== torch_host: eager PyTorch's host time per op (CPU idle: before the build) =="
  : >"$out/torch_host.log"
  step torch_host "$out/torch_host.log" "$py" "$root/scripts/gpu-probes/torch_host.py" "$out/torch_host.json" ||
    probe_status+=("torch_host failed")
  tail -25 "$out/torch_host.log"
fi

echo "== configure ($build, sm_90a) =="
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# Dependencies carried as Debian packages (scripts/gpu-deps.sh): unpacked under the build folder
# (with Python: the machine may have no dpkg), searched before the system's.
deps=()
if ls "$root"/.gpu-deps/*.deb >/dev/null 2>&1; then
  prefix="$build/deps"
  mkdir -p "$prefix"
  "$py" "$root/scripts/gpu-probes/unpack_deb.py" "$prefix" "$root"/.gpu-deps/*.deb || {
    echo "gpu-check: unpacking .gpu-deps failed"; exit 1; }
  deps=(-DCMAKE_PREFIX_PATH="$prefix/usr")
  echo "gpu-check: dependencies from .gpu-deps unpacked into $prefix"
fi
step configure "$out/build.log" cmake -S "$root" -B "$build" "${gen[@]}" "${deps[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DMOEPERF_WITH_GUI=OFF -DMOEPERF_WITH_CUDA=ON || {
  tail -40 "$out/build.log"; echo "gpu-check: configure failed"; exit 1; }

tests=(test_kernels_gpu test_kernels_moe_gpu test_expert_gemm_gpu)
# The CUDA backend's test when the executor is built, the NCCL communicator's when CUDA, MPI and
# NCCL were found (configure's summary lines say so).
grep -q "executor: ON" "$out/build.log" && tests+=(test_backend_cuda_gpu)
grep -q "NCCL: ON" "$out/build.log" && tests+=(test_comm_nccl_gpu)
tools=()
grep -q "executor: ON" "$out/build.log" && tools+=(moeperf moeperf-run)

echo "== build the benchmarks first, then the gpu tests and moeperf (--parallel $jobs) =="
step "build benchmarks" "$out/build.log" cmake --build "$build" --parallel "$jobs" --target bench_kernels bench_expert_gemm || {
  tail -40 "$out/build.log"; echo "gpu-check: build failed (or ran out of time)"; exit 1; }

if [ "$have_gpu" = 0 ]; then
  echo "== build the gpu tests (--parallel $jobs) =="
  step "build tests" "$out/build.log" cmake --build "$build" --parallel "$jobs" --target "${tests[@]}" "${tools[@]}" || {
    tail -40 "$out/build.log"; echo "gpu-check: build failed"; exit 1; }
  echo "gpu-check: no GPU here (nvidia-smi absent or lists none): built everything, ran nothing"
  exit 0
fi
cat "$out/gpu.csv"

status=0
echo "== bench_kernels =="
: >"$out/bench.log"
step bench_kernels "$out/bench.log" "$build/bin/bench_kernels" "$out/kernels.json" || status=1
tail -30 "$out/bench.log"
echo "== bench_expert_gemm =="
: >"$out/expert_gemm.log"
step bench_expert_gemm "$out/expert_gemm.log" "$build/bin/bench_expert_gemm" "$out/expert_gemm.json" || status=1
tail -40 "$out/expert_gemm.log"

# summary.json: plain bash, the bench JSON files pasted in as they are (null when missing).
json_or_null() { if [ -s "$1" ]; then cat "$1"; else echo null; fi; }
IFS=, read -r g_name g_driver g_mem g_maxsm g_maxmem g_sm g_memclk g_power <"$out/gpu0.csv" || true
trim() { local v="$1"; v="${v#"${v%%[![:space:]]*}"}"; echo "${v%"${v##*[![:space:]]}"}"; }
num_or_null() { local v; v="$(trim "$1")"; [[ "$v" =~ ^[0-9]+(\.[0-9]+)?$ ]] && echo "$v" || echo null; }
g_name="$(trim "$g_name")"
slug="$(echo "$g_name" | tr '[:upper:]' '[:lower:]' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/-$//')"
rev="$MOEPERF_GIT_REVISION"
write_summary() {
  local tests_json="$1"
  {
    echo "{"
    echo "  \"kind\": \"gpu-check\","
    echo "  \"date\": \"$date_iso\","
    echo "  \"git_revision\": \"$rev\","
    echo "  \"suggested_path\": \"examples/measurements/${slug:-gpu}-${date_iso%%T*}.json\","
    echo "  \"gpu\": {\"name\": \"$g_name\", \"driver\": \"$(trim "$g_driver")\", \"memory_mib\": $(num_or_null "$g_mem"),"
    echo "          \"max_sm_clock_mhz\": $(num_or_null "$g_maxsm"), \"max_memory_clock_mhz\": $(num_or_null "$g_maxmem"),"
    echo "          \"sm_clock_mhz_at_start\": $(num_or_null "$g_sm"), \"memory_clock_mhz_at_start\": $(num_or_null "$g_memclk"),"
    echo "          \"power_limit_w\": $(num_or_null "$g_power")},"
    echo "  \"gpu_tests\": $tests_json,"
    echo "  \"kernels\": $(json_or_null "$out/kernels.json"),"
    echo "  \"expert_gemm\": $(json_or_null "$out/expert_gemm.json")"
    echo "}"
  } >"$out/summary.json.tmp"
  mv "$out/summary.json.tmp" "$out/summary.json"
}
write_summary '"not run yet"'
echo "gpu-check: wrote $out/summary.json (commit it as $(grep -o 'examples/measurements/[^"]*' "$out/summary.json"))"

echo "== build and run the gpu tests =="
: >"$out/ctest.log"
tests_state='"passed"'
if step "build tests" "$out/build.log" cmake --build "$build" --parallel "$jobs" --target "${tests[@]}" "${tools[@]}"; then
  (cd "$build" && step "ctest -L gpu" "$out/ctest.log" ctest -L gpu --output-on-failure --timeout 300) || {
    status=1; tests_state='"failed or out of time: see ctest.log"'; }
  tail -25 "$out/ctest.log"
else
  status=1
  tests_state='"not built: see build.log"'
fi
write_summary "$tests_state"

echo "== jax_moe: ragged_dot against a dense dot, a one-device ragged all-to-all =="
: >"$out/jax_moe.log"
step jax_moe "$out/jax_moe.log" "$py" "$root/scripts/gpu-probes/jax_moe.py" "$out/jax_moe.json" || probe_status+=("jax_moe failed")
tail -15 "$out/jax_moe.log"

mp="$build/bin/moeperf"
if [ -x "$mp" ] && [ -x "$build/bin/moeperf-run" ]; then
  # The suite gets what is left but a minute for the fit and the executor's run, at most 120 s.
  sb=$(( $(left) - 75 )); [ "$sb" -gt 120 ] && sb=120
  if [ "$sb" -ge 30 ]; then
    echo "== moeperf run --suite calibrate --backend cuda --budget $sb =="
    : >"$out/suite.log"
    if step suite "$out/suite.log" "$mp" run --suite calibrate --backend cuda --budget "$sb" --out "$out/suite.json" \
         --write-system "$out/system.json"; then
      : >"$out/calibrate.log"
      step calibrate "$out/calibrate.log" "$mp" calibrate "$out/suite.json" --out "$out/profile.json" ||
        probe_status+=("calibrate of the suite failed")
      tail -60 "$out/calibrate.log"
    else
      probe_status+=("suite failed")
    fi
    tail -10 "$out/suite.log"
  else
    probe_status+=("suite skipped: ${sb} s left for it")
  fi
  echo "== moeperf run examples/executor/cpu-small.json --backend cuda (the executor's gates) =="
  : >"$out/run.log"
  step "executor run" "$out/run.log" "$mp" run "$root/examples/executor/cpu-small.json" --backend cuda --out "$out/run.json" ||
    status=1
  tail -30 "$out/run.log"
else
  echo "gpu-check: moeperf was not built with the executor (configure said executor: OFF): no suite, no run"
fi

for p in "${probe_status[@]}"; do echo "gpu-check: measurement step: $p"; done
[ "$status" = 0 ] && echo "gpu-check: passed" || echo "gpu-check: FAILED (see $out/ctest.log, $out/bench.log, $out/expert_gemm.log, $out/run.log)"
exit "$status"
