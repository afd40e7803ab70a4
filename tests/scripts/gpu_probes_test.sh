#!/usr/bin/env bash
# The GPU check's pieces that can run without a GPU (ctest gpu_probes): gpu-check.sh parses; the
# .deb unpacker reproduces a package's files and refuses a file that is not one; the two probes run
# end to end against stand-ins for torch and jax (tests/scripts/fake_*) and write what they should:
# every op measured, the summary computed from the records, XLA's FLOPs over the useful ones.
# Without python3 (not a build dependency) only the shell parts run, and the test says so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "gpu_probes: FAIL: $*" >&2; exit 1; }

bash -n "$root/scripts/gpu-check.sh" || fail "scripts/gpu-check.sh does not parse"
bash -n "$root/scripts/gpu-deps.sh" || fail "scripts/gpu-deps.sh does not parse"
if ! command -v python3 >/dev/null 2>&1; then
  echo "gpu_probes: python3 not installed: only the shell scripts were checked"
  exit 0
fi

# 1. unpack_deb.py against dpkg-deb's own package.
mkdir -p "$tmp/pkg/DEBIAN" "$tmp/pkg/usr/share/probe"
printf 'Package: moeperf-probe\nVersion: 1\nArchitecture: all\nMaintainer: test <t@t>\nDescription: test\n' >"$tmp/pkg/DEBIAN/control"
printf 'payload 42\n' >"$tmp/pkg/usr/share/probe/file.txt"
if command -v dpkg-deb >/dev/null 2>&1; then
  dpkg-deb --build "$tmp/pkg" "$tmp/probe.deb" >/dev/null
  python3 "$root/scripts/gpu-probes/unpack_deb.py" "$tmp/out" "$tmp/probe.deb"
  [ "$(cat "$tmp/out/usr/share/probe/file.txt")" = "payload 42" ] || fail "unpack_deb.py lost the package's file"
  [ ! -e "$tmp/out/DEBIAN" ] || fail "unpack_deb.py unpacked the control member"
fi
printf 'not a deb' >"$tmp/bad.deb"
if python3 "$root/scripts/gpu-probes/unpack_deb.py" "$tmp/out2" "$tmp/bad.deb" 2>"$tmp/bad.err"; then
  fail "unpack_deb.py accepted a file that is not a package"
fi
grep -q "not an ar archive" "$tmp/bad.err" || fail "unpack_deb.py's error does not say what is wrong: $(cat "$tmp/bad.err")"

# 2. The probes end to end against the stand-ins.
PYTHONPATH="$root/tests/scripts/fake_torch" python3 "$root/scripts/gpu-probes/torch_host.py" "$tmp/torch_host.json" >"$tmp/th.log"
PYTHONPATH="$root/tests/scripts/fake_jax" python3 "$root/scripts/gpu-probes/jax_moe.py" "$tmp/jax_moe.json" >"$tmp/jm.log"
python3 - "$tmp/torch_host.json" "$tmp/jax_moe.json" <<'PY'
import json, statistics, sys
th = json.load(open(sys.argv[1]))
assert th["kind"] == "host-probe", th["kind"]
ops = {r["op"]: r for r in th["records"]}
eager = ["add", "mul", "silu", "sigmoid", "softmax", "topk", "linear", "layer_norm", "index_select", "index_add",
         "cat", "cast", "zeros", "rms_norm"]
for name in eager + ["empty", "view", "module_linear", "autograd_chain", "graph_replay", "item_round_trip"]:
    assert name in ops, f"torch_host: {name} not measured"
    assert ops[name]["host_s_per_call"] > 0, name
for name in ("device_per_kernel_eager", "device_per_kernel_graph"):
    assert ops[name]["gpu_s_per_kernel"] > 0, name
assert abs(s_gap := th["summary"]["device_gap_saved_by_graph_s"] - (ops["device_per_kernel_eager"]["gpu_s_per_kernel"]
           - ops["device_per_kernel_graph"]["gpu_s_per_kernel"])) <= 1e-15, s_gap
s = th["summary"]
assert s["eager_ops_counted"] == len(eager), s["eager_ops_counted"]
want = statistics.median(ops[n]["host_s_per_call"] for n in eager)
assert abs(s["eager_op_host_s_median"] - want) <= 1e-15, (s["eager_op_host_s_median"], want)
assert abs(s["autograd_fwd_bwd_host_s_per_op"] - ops["autograd_chain"]["host_s_per_call"] / 8) <= 1e-15
assert abs(s["module_call_extra_s"] - (ops["module_linear"]["host_s_per_call"] - ops["linear"]["host_s_per_call"])) <= 1e-15
assert not any(r.get("gpu_bound") for r in th["records"]), "the stand-in's GPU takes 0.3 of the host's time"
jm = json.load(open(sys.argv[2]))
assert jm["kind"] == "jax-probe"
parts = jm["parts"]
rd = [p for p in parts if p["part"] == "ragged_dot"]
assert len(rd) == 4 and len([p for p in parts if p["part"] == "dense_dot"]) == 2, [p["part"] for p in parts]
assert len([p for p in parts if p["part"] == "ragged_all_to_all"]) == 3
for p in rd:
    assert "error" not in p, p
    useful = 2.0 * p["rows"] * p["k"] * p["n"]
    assert p["useful_flops"] == useful and p["rows"] == 24576 and p["groups"] == 32
    assert abs(p["xla_flops_over_useful"] - 1e12 / useful) < 1e-12, p["xla_flops_over_useful"]
print("gpu_probes: probes checked")
PY
echo "gpu_probes: ok"
