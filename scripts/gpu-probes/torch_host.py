#!/usr/bin/env python3
"""Host (CPU) time of eager PyTorch per op, on a machine with a CUDA GPU.

The megatron-core stack (stacks/megatron-core.json) prices the host that issues a step's kernels:
`host_op_s` per framework op, `host_ops_per_op` framework ops per op of moeperf's graph,
`graph_launch_s` per CUDA graph replay, and the calibration parameter `host_sync_s` for a host wait.
Those are assumptions until measured; this probe measures them on the machine it runs on (issue 20:
the device image has PyTorch but no Megatron or Transformer Engine, so it measures PyTorch's own
ops, the floor under a TE module's host time).

Method. Each op runs on tensors so small that its kernel takes a few microseconds on the GPU, so
the host is the bottleneck: the time the Python thread spends issuing `calls` ops back to back
(perf_counter before and after, no synchronization inside) divided by `calls` is the host time per
op. `calls` stays below CUDA's launch queue depth (about 1,024 pending launches), so the host never
blocks on a full queue; the GPU time of the same loop (CUDA events) is recorded beside it and an op
whose GPU time per call reaches its host time is flagged `gpu_bound` (its figure is then an upper
bound of nothing: do not use it). Every figure is the median of `rounds` rounds.

Writes one JSON file (argv[1], default torch_host.json): the machine (CPU model, GPU, versions),
per op the host and GPU time per call, and a summary: the median over the eager ops with a kernel,
autograd's forward + backward per op, a module call's extra cost, one CUDA graph replay, and the
round trip of a host wait (`.item()` on an idle GPU); and the device's own time per kernel with a
full queue, eager against the same kernels replayed from a CUDA graph (what capturing saves on the
GPU itself: the model's `kernel_launch_s` gap).

    python3 scripts/gpu-probes/torch_host.py OUT.json
"""
import json
import os
import platform
import statistics
import sys
import time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "torch_host.json"
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("torch_host: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    bf = torch.bfloat16
    calls, rounds, warm = 400, 7, 50
    torch.manual_seed(0)
    rows, hidden, experts, topk = 64, 256, 32, 8
    x = torch.randn(rows, hidden, device=dev, dtype=bf)
    y = torch.randn(rows, hidden, device=dev, dtype=bf)
    w = torch.randn(hidden, hidden, device=dev, dtype=bf)
    ln_w = torch.ones(hidden, device=dev, dtype=bf)
    ln_b = torch.zeros(hidden, device=dev, dtype=bf)
    scores = torch.randn(rows, experts, device=dev, dtype=torch.float32)
    idx = torch.randint(0, rows, (rows,), device=dev)
    acc = torch.zeros(rows, hidden, device=dev, dtype=bf)
    lin = torch.nn.Linear(hidden, hidden, bias=False, device=dev, dtype=bf)

    def measure(fn, n=calls):
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        host, gpu = [], []
        for _ in range(rounds):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            stop.record()
            torch.cuda.synchronize()
            host.append((t1 - t0) / n)
            gpu.append(start.elapsed_time(stop) * 1e-3 / n)
        h, g = statistics.median(host), statistics.median(gpu)
        return {"host_s_per_call": h, "gpu_s_per_call": g, "host_s_min": min(host), "host_s_max": max(host),
                "gpu_bound": g >= 0.9 * h}

    # Eager ops of a MoE layer's glue, each one framework op (kernels: one each, but view and empty).
    ops = {
        "add": (lambda: torch.add(x, y), True),
        "mul": (lambda: x * y, True),
        "silu": (lambda: F.silu(x), True),
        "sigmoid": (lambda: torch.sigmoid(scores), True),
        "softmax": (lambda: torch.softmax(scores, dim=-1), True),
        "topk": (lambda: torch.topk(scores, topk, dim=-1), True),
        "linear": (lambda: F.linear(x, w), True),
        "layer_norm": (lambda: F.layer_norm(x, (hidden,), ln_w, ln_b), True),
        "index_select": (lambda: x.index_select(0, idx), True),
        "index_add": (lambda: acc.index_add_(0, idx, x), True),
        "cat": (lambda: torch.cat([x, y], dim=-1), True),
        "cast": (lambda: x.float(), True),
        "zeros": (lambda: torch.zeros(rows, hidden, device=dev, dtype=bf), True),
        "empty": (lambda: torch.empty(rows, hidden, device=dev, dtype=bf), False),
        "view": (lambda: x.view(hidden, rows), False),
    }
    if hasattr(F, "rms_norm"):
        ops["rms_norm"] = (lambda: F.rms_norm(x, (hidden,), ln_w), True)
    records = []
    for name, (fn, kernel) in ops.items():
        r = measure(fn)
        r.update({"op": name, "kernel": kernel, "calls": calls, "rounds": rounds})
        records.append(r)
        print(f"torch_host: {name:14s} host {r['host_s_per_call'] * 1e6:7.2f} us  gpu {r['gpu_s_per_call'] * 1e6:7.2f} us"
              + ("  (GPU-bound: not a host figure)" if r["gpu_bound"] else ""))

    # A module call (nn.Module.__call__: hooks, forward dispatch) against the bare functional op.
    module = measure(lambda: lin(x))
    module.update({"op": "module_linear", "kernel": True, "calls": calls, "rounds": rounds})
    records.append(module)

    # Autograd: a chain of `chain` ops forward, then backward; host time per op of the chain.
    chain = 8
    xg = x.detach().clone().requires_grad_(True)
    wg = w.detach().clone().requires_grad_(True)

    def fwd_bwd():
        h = xg
        for _ in range(chain // 4):
            h = F.linear(h, wg)
            h = F.silu(h)
            h = h * xg
            h = h + xg
        h.sum().backward()
        xg.grad = None
        wg.grad = None

    ab = measure(fwd_bwd, 40)  # each call issues ~3 x chain kernels: stay below the launch queue's depth
    ab.update({"op": "autograd_chain", "kernel": True, "calls": 40, "rounds": rounds, "ops_per_call": chain,
               "note": "forward of `ops_per_call` ops, sum, backward (autograd engine thread), grads cleared"})
    records.append(ab)

    # One CUDA graph replay of a captured run of 16 eager ops.
    graph_ops = 16
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    gx = x.clone()
    with torch.cuda.stream(s):
        for _ in range(3):
            h = gx
            for _ in range(graph_ops // 2):
                h = F.silu(h)
                h = h + gx
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        h = gx
        for _ in range(graph_ops // 2):
            h = F.silu(h)
            h = h + gx
    gr = measure(graph.replay)
    gr.update({"op": "graph_replay", "kernel": True, "calls": calls, "rounds": rounds, "ops_in_graph": graph_ops})
    records.append(gr)

    # The device's own time per kernel when the queue is full (the host issued every launch while
    # the GPU was still busy with a long sleep kernel): a kernel's run plus the gap the GPU leaves
    # before the next one, eager launches against the same kernels replayed from a CUDA graph.
    # Their difference is what capturing saves on the device, apart from the host's time.
    def queued(fn, kernels_per_call, n):
        per = []
        for _ in range(rounds):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            torch.cuda._sleep(100_000_000)  # ~50 ms at 2 GHz: longer than issuing n calls takes
            start.record()
            for _ in range(n):
                fn()
            stop.record()
            torch.cuda.synchronize()
            per.append(start.elapsed_time(stop) * 1e-3 / (n * kernels_per_call))
        return statistics.median(per), min(per)

    def eager_chain():
        h = gx
        for _ in range(graph_ops // 2):
            h = F.silu(h)
            h = h + gx

    eager_k, eager_min = queued(eager_chain, graph_ops, 16)
    graph_k, graph_min = queued(graph.replay, graph_ops, 16)
    records.append({"op": "device_per_kernel_eager", "kernel": True, "calls": 16 * graph_ops, "rounds": rounds,
                    "gpu_s_per_kernel": eager_k, "gpu_s_per_kernel_min": eager_min,
                    "note": "silu/add kernels launched eagerly behind a sleep kernel: run + gap per kernel"})
    records.append({"op": "device_per_kernel_graph", "kernel": True, "calls": 16 * graph_ops, "rounds": rounds,
                    "gpu_s_per_kernel": graph_k, "gpu_s_per_kernel_min": graph_min,
                    "note": "the same kernels replayed from a CUDA graph behind a sleep kernel"})

    # A host wait on an idle GPU: issue one small kernel and read its result back (.item()).
    waits = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            scores.sum().item()
        waits.append((time.perf_counter() - t0) / 50)
    sync_s = statistics.median(waits)
    records.append({"op": "item_round_trip", "kernel": True, "calls": 50, "rounds": rounds, "host_s_per_call": sync_s,
                    "note": "one reduction kernel, then a blocking device-to-host copy of its scalar, GPU idle before"})

    eager = [r["host_s_per_call"] for r in records
             if r["op"] in ops and r["kernel"] and not r["gpu_bound"]]
    functional_linear = next(r for r in records if r["op"] == "linear")["host_s_per_call"]
    summary = {
        "eager_op_host_s_median": statistics.median(eager) if eager else None,
        "eager_op_host_s_range": [min(eager), max(eager)] if eager else None,
        "eager_ops_counted": len(eager),
        "module_call_extra_s": module["host_s_per_call"] - functional_linear,
        "autograd_fwd_bwd_host_s_per_op": ab["host_s_per_call"] / chain,
        "graph_replay_host_s": gr["host_s_per_call"],
        "device_s_per_kernel_eager": eager_k,
        "device_s_per_kernel_graph": graph_k,
        "device_gap_saved_by_graph_s": eager_k - graph_k,
        "host_wait_round_trip_s": sync_s,
    }
    gpu = torch.cuda.get_device_properties(0)
    doc = {
        "kind": "host-probe",
        "probe": "scripts/gpu-probes/torch_host.py",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_revision": os.environ.get("MOEPERF_GIT_REVISION", "unknown"),
        "machine": {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu.name,
                    "sms": gpu.multi_processor_count},
        "method": "host issue time per call of `calls` back-to-back calls (median of rounds); tensors "
                  f"[{rows} x {hidden}] BF16 so each kernel is a few microseconds; gpu_bound marks an op whose GPU "
                  "time per call reached 90 % of its host time (then not a host figure)",
        "summary": summary,
        "records": records,
    }
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out_path)
    print("torch_host: summary " + json.dumps({k: (round(v * 1e6, 2) if isinstance(v, float) else v)
                                               for k, v in summary.items() if not isinstance(v, list)}) + " (us)")
    print(f"torch_host: wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
