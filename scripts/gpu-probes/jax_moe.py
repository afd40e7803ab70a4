#!/usr/bin/env python3
"""What JAX/XLA runs for a MoE layer's expert GEMMs and its ragged all-to-all, on one GPU.

The maxtext-xla-2026-09 stack (stacks/maxtext-xla-2026-09.json) prices two mechanisms from XLA's
source: `jax.lax.ragged_dot` lowered to a masked dense dot over every group (`expert_gemm:
masked_dense`: group count times the FLOPs), and the one-shot ragged all-to-all kernel (one block of
128 threads per peer and update, 8-byte copies: `oneshot_copy_latency_s`). This probe measures both
where one GPU allows (issue 20, point 5):

1. ragged_dot at DeepSeek-V3's expert shapes at EP 8 (32 local experts, 24,576 x 8 / 8 rows, K 7168,
   N 2048 and the FC2 shape K 2048, N 7168), groups even and skewed: time, effective TFLOP/s on the
   useful FLOPs, the FLOPs XLA's cost analysis says it runs (their ratio to the useful FLOPs is the
   evidence: about 1 for a grouped GEMM, about the group count for the masked dense lowering), and
   keywords of the optimized HLO; beside it a dense dot of the same useful FLOPs.
2. ragged_all_to_all on a one-device mesh (the group is the device itself): time per call by size,
   and the optimized HLO's kernel names. One rank copies to itself, so this is the kernel's copy
   rate over local HBM (an upper bound of its NVLink rate), not an NVLink figure.

Writes argv[1] (default jax_moe.json). Every part is guarded: a failure is recorded with its
message and the rest still runs.

    python3 scripts/gpu-probes/jax_moe.py OUT.json
"""
import json
import os
import statistics
import sys
import time
import traceback


def timeit(fn, args, runs=10, warm=3):
    import jax
    for _ in range(warm):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def cost_flops(compiled):
    try:
        ca = compiled.cost_analysis()
        if isinstance(ca, (list, tuple)):
            ca = ca[0] if ca else {}
        f = ca.get("flops")
        return float(f) if f is not None else None
    except Exception:  # noqa: BLE001 - the cost analysis is optional evidence
        return None


def hlo_keywords(compiled):
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001
        return None
    words = ["ragged-dot", "ragged_dot", "ragged-all-to-all", "ragged_all_to_all", "custom-call", "cublas",
             "grouped", "dot(", "fusion", "while", "all-to-all", "one_shot", "rendezvous"]
    return {w: text.count(w) for w in words}


def ragged_dot_part(jax, jnp):
    results = []
    experts, rows, top_k, ep = 32, 24576, 8, 8
    total = rows * top_k // ep
    shapes = [("fc1", 7168, 2048), ("fc2", 2048, 7168)]
    key = jax.random.PRNGKey(0)
    for name, k, n in shapes:
        k1, k2, key = jax.random.split(key, 3)
        lhs = jax.random.normal(k1, (total, k), jnp.bfloat16)
        rhs = jax.random.normal(k2, (experts, k, n), jnp.bfloat16)
        useful = 2.0 * total * k * n
        even = [total // experts] * experts
        # Skewed: expert e gets a share ~ 1 / (e + 1) (Zipf), rounded, remainder to expert 0.
        raw = [1.0 / (e + 1) for e in range(experts)]
        skew = [int(total * r / sum(raw)) for r in raw]
        skew[0] += total - sum(skew)
        for dist, sizes in (("even", even), ("zipf", skew)):
            rec = {"part": "ragged_dot", "shape": name, "groups": experts, "rows": total, "k": k, "n": n,
                   "distribution": dist, "useful_flops": useful}
            try:
                gs = jnp.array(sizes, jnp.int32)
                f = jax.jit(lambda a, b, g: jax.lax.ragged_dot(a, b, g))
                compiled = f.lower(lhs, rhs, gs).compile()
                med, best = timeit(compiled, (lhs, rhs, gs))
                xla_flops = cost_flops(compiled)
                rec.update({"time_s": med, "time_s_min": best, "tflops_useful": useful / med / 1e12,
                            "xla_cost_flops": xla_flops,
                            "xla_flops_over_useful": (xla_flops / useful) if xla_flops else None,
                            "hlo": hlo_keywords(compiled)})
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {e}"[:2000]
            results.append(rec)
            print("jax_moe: " + json.dumps({x: rec.get(x) for x in ("shape", "distribution", "time_s", "tflops_useful",
                                                                   "xla_flops_over_useful", "error")}))
        rec = {"part": "dense_dot", "shape": name, "m": total, "k": k, "n": n, "useful_flops": useful}
        try:
            w = rhs[0]
            f = jax.jit(lambda a, b: a @ b)
            compiled = f.lower(lhs, w).compile()
            med, best = timeit(compiled, (lhs, w))
            rec.update({"time_s": med, "time_s_min": best, "tflops_useful": useful / med / 1e12,
                        "xla_cost_flops": cost_flops(compiled)})
        except Exception as e:  # noqa: BLE001
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        results.append(rec)
        print("jax_moe: " + json.dumps({x: rec.get(x) for x in ("part", "shape", "time_s", "tflops_useful", "error")}))
    return results


def ragged_a2a_part(jax, jnp):
    results = []
    try:
        from jax.sharding import Mesh, PartitionSpec as P
        try:
            shard_map = jax.shard_map
        except AttributeError:
            from jax.experimental.shard_map import shard_map
        mesh = Mesh(jax.devices()[:1], ("ep",))
    except Exception as e:  # noqa: BLE001
        return [{"part": "ragged_all_to_all", "error": f"{type(e).__name__}: {e}"[:2000]}]
    hidden = 7168
    for rows in (4096, 32768, 196608):
        rec = {"part": "ragged_all_to_all", "ranks": 1, "rows": rows, "hidden": hidden, "bytes": rows * hidden * 2}
        try:
            x = jnp.ones((rows, hidden), jnp.bfloat16)

            def body(a):
                out = jnp.zeros_like(a)
                z = jnp.zeros((1,), jnp.int32)
                n = jnp.full((1,), a.shape[0], jnp.int32)
                return jax.lax.ragged_all_to_all(a, out, z, n, z, n, axis_name="ep")

            try:
                f = shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)
            except TypeError:
                f = shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(), check_rep=False)
            fj = jax.jit(f)
            compiled = fj.lower(x).compile()
            med, best = timeit(compiled, (x,))
            rec.update({"time_s": med, "time_s_min": best, "gb_per_s": rows * hidden * 2 / med / 1e9,
                        "hlo": hlo_keywords(compiled)})
        except Exception as e:  # noqa: BLE001
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
        results.append(rec)
        print("jax_moe: " + json.dumps({x: rec.get(x) for x in ("part", "rows", "time_s", "gb_per_s", "error")}))
    return results


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "jax_moe.json"
    doc = {"kind": "jax-probe", "probe": "scripts/gpu-probes/jax_moe.py",
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "git_revision": os.environ.get("MOEPERF_GIT_REVISION", "unknown"),
           "xla_flags": os.environ.get("XLA_FLAGS", ""), "parts": []}
    try:
        import jax
        import jax.numpy as jnp
        doc["machine"] = {"jax": jax.__version__, "devices": [str(d) for d in jax.devices()],
                          "device_kind": jax.devices()[0].device_kind}
    except Exception as e:  # noqa: BLE001
        doc["error"] = f"jax import failed: {type(e).__name__}: {e}"
        traceback.print_exc()
    else:
        for part in (ragged_dot_part, ragged_a2a_part):
            try:
                doc["parts"] += part(jax, jnp)
            except Exception as e:  # noqa: BLE001
                doc["parts"].append({"part": part.__name__, "error": f"{type(e).__name__}: {e}"[:2000]})
            tmp = out_path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
            os.replace(tmp, out_path)
    if "error" in doc:
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        return 1
    print(f"jax_moe: wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
