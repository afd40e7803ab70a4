#!/usr/bin/env python3
"""Writes the Megatron-Core DeepSeek-V3 GB200 ladder as scenario files, one per published step
(examples/deepseek-v3/gb200-mcore-ladder-NN-*.json), from the last step's scenario and the
megatron-core stack's ablation: step k's stack is the stack with the "off" values of every later
step applied (the earliest wins where two steps switch one field). compare --ablate walks the same
states; a test checks each file predicts what the ablation's row k does.

Usage (authoring only): scripts/make-ladder.py
"""
import json
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
STACK = json.load(open(os.path.join(ROOT, "stacks/megatron-core.json")))
OUT = os.path.join(ROOT, "examples/deepseek-v3")
SOURCE = ("github.com/NVIDIA/Megatron-LM@eb0783b6d35607ef1953eaca60b37b886b1a25d0:"
          "docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md")
# Published TFLOPS/GPU of the 13 steps (the research notes' mcore_dsv3_gb200_ladder_00..12).
PUBLISHED = [494.46, 529.55, 540.0, 566.07, 610.71, 663.27, 691.49, 762.12, 797.67, 829.93, 943.56, 956.21, 970.01]
TITLES = ["Baseline", "Fuse torch.zeros for scaling factor allocation & Permute kernel Optimization", "Router fusion",
          "Enable DeepEP", "Remove up_proj recompute", "CUDA Graphs", "Tune DeepEP", "CPU-side optimization",
          "PDL for quantization kernels & Fuse MXFP8 swizzle scaling factor", "CUDA Graphs capture shared expert",
          "HybridEP", "CPU-side optimization", "Fuse quantization to normalization (cuDNN 9.14)"]
SLUGS = ["baseline", "zeros-permute", "router-fusion", "deepep", "no-upproj-recompute", "cuda-graphs", "tune-deepep",
         "cpu-1", "pdl-quantize", "graphs-shared-expert", "hybridep", "cpu-2", "norm-quantize"]

# The published recompute modules: "mlp + mla_up_proj" in steps 1-4 (the ablation's step 5 sets
# them, MLA's up-projections mapped to q_proj and kv_proj), "mlp + moe_act" from step 5 on.
FINAL_RECOMPUTE = ["mlp", "moe_act"]


def state(k):
    """Scenario overrides after step k (1-based; step 1 is the baseline, every ablation step off)."""
    steps = STACK["ablation"]  # steps 2..13
    later = steps[k - 1:]      # the ablation steps not yet switched on after step k
    offs = {}
    for st in reversed(later):  # earliest wins
        offs.update(st["off"])
    return offs


def scenario(k):
    offs = state(k)
    stack = {"base": "megatron-core"}
    recompute = FINAL_RECOMPUTE
    for path, v in offs.items():
        if path == "memory.recompute":
            recompute = v
            continue
        assert path.startswith("stack."), path
        parts = path[len("stack."):].split(".")
        cur = stack
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = v
    desc = (f"Megatron-Core's DeepSeek-V3 optimization ladder on 256 GB200 ({SOURCE}), step {k}/13 '{TITLES[k - 1]}' "
            f"({PUBLISHED[k - 1]} TFLOPS/GPU published): PP 8 x VPP 4 x EP 32 (DP 32 folded with EP), layout "
            "Et|(tt|)*30L (the embedding and layer 0 on the first virtual stage, the loss alone on the last), micro-batch 1, "
            "global batch 2048, 4096 tokens, MXFP8 linears and grouped GEMMs, FP8 primary weights (stored in MXFP8, FP32 "
            "master copies in the optimizer: an FP8 weight cannot take Adam's updates itself) and BF16 optimizer states, "
            "sharded by the distributed optimizer (Megatron's --fp8-param-gather, its FP8 primary weights, and "
            "--overlap-param-gather, the megatron-core stack's parameter prefetch, both require "
            "--use-distributed-optimizer in megatron/training/arguments.py), "
            "forced load balancing "
            "(--moe-router-force-load-balancing: Megatron's help text, 'force override routing to balance token "
            "distribution using random logits', so each token's top-k is a uniform random draw: routing uniform, balanced "
            "on average with the random imbalance of uniform sampling, not exactly equal). The stack is "
            "megatron-core with the later steps' mechanisms switched off (stacks/megatron-core.json, its ablation); "
            "written by scripts/make-ladder.py. Recompute modules as published: mlp + mla_up_proj in steps 1-4 (MLA's "
            "up-projections mapped to q_proj and kv_proj, an approximation), mlp + moe_act from step 5 on. An end-to-end "
            "test of moeperf, "
            "never an input of a fit. Run: moeperf predict " + f"examples/deepseek-v3/{name(k)}")
    return {
        "kind": "scenario",
        "name": f"DeepSeek-V3 on 256 GB200, Megatron-Core ladder step {k}/13: {TITLES[k - 1]}",
        "description": desc,
        "model": "../models/deepseek-v3/config.json",
        "system": "../../topologies/gb200-nvl72.json",
        "gpus": 256,
        "parallelism": {"tp": 1, "cp": 1, "pp": 8, "vpp": 4, "ep": 32, "fsdp": 1, "dp": 1, "schedule": "interleaved",
                        "layout": "Et|(tt|)*30L", "distributed_optimizer": True},
        "batch": {"seq_len": 4096, "micro_batch": 1, "global_batch": 2048},
        "precision": {"dense_gemm": "mxfp8", "expert_gemm": "mxfp8", "dispatch": "bf16", "combine": "bf16",
                      "weights": "mxfp8", "grads": "bf16", "optimizer_state": "bf16", "master_weights_fp32": True},
        "memory": {"recompute": recompute},
        "routing": {"distribution": "uniform", "group_limited": False, "seed": 1},
        "stack": stack,
    }


def name(k):
    return f"gb200-mcore-ladder-{k:02d}-{SLUGS[k - 1]}.json"


def main():
    assert len(STACK["ablation"]) == 12, "the ladder has 13 steps: a baseline and 12 switches"
    for k in range(1, 14):
        with open(os.path.join(OUT, name(k)), "w") as f:
            json.dump(scenario(k), f, indent=2)
            f.write("\n")
    cases = []
    for k in range(1, 14):
        cases.append({"scenario": "../deepseek-v3/" + name(k), "metric": "tflops_per_gpu", "published": PUBLISHED[k - 1],
                      "source": f"{SOURCE}, step {k}/13 '{TITLES[k - 1]}'"})
    print(json.dumps(cases, indent=2))


if __name__ == "__main__":
    main()
