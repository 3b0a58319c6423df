"""Sweep of the GEMV launch configs inside a whole decode step (GPU only).

    python -m lab.sweep_gemv [--shape qwen2.5-coder-1.5b] [--context 512]

Builds the decode step of a model shape from random weights (all layers: fused-norm QKV, decode
attention, o_proj, gate/up + SiLU, down_proj, then the LM head), captures it in one CUDA graph
with PDL and times replays. Then, for each GEMV (qkv, o_proj, gate_up, down, LM head), it varies
that kernel's (BLOCK_N, BLOCK_K, num_warps) alone through the tuning row's `gemv_overrides` and keeps
the best; finally it times the rule, the shipped configs (rule + overrides) and all bests combined,
alternating three times. The rules in `_util.gemv_config` / `gate_up_config` and the overrides in
kernels/tuning.py came from this sweep; rerun it when a kernel changes.

Why in the step and not per kernel: these kernels run 2-20 us, and how a config does depends on
its neighbours (PDL lets the next kernel's programs start while this one's tail still holds SMs).
"""

import argparse
import statistics

import torch
import triton

from lab.bench_kernels import SHAPES, Step, copy_bandwidth

CANDIDATES = {  # (BLOCK_N, BLOCK_K, num_warps); gate_up's BLOCK_N counts gate rows (as many up rows)
    "qkv": [(2, 1024, 4), (2, 2048, 4), (1, 2048, 4), (4, 2048, 8), (4, 512, 4), (8, 256, 4), (1, 1024, 2)],
    "o_proj": [(2, 1024, 4), (2, 2048, 4), (4, 2048, 8), (4, 512, 4), (8, 256, 4), (1, 1024, 2)],
    "gate_up": [(4, 512, 4), (8, 256, 4), (2, 1024, 4), (8, 512, 8), (16, 256, 8), (2, 512, 4), (32, 128, 8)],
    "down": [(2, 1024, 8), (2, 2048, 8), (4, 2048, 8), (2, 2048, 4), (4, 1024, 8), (8, 512, 8), (4, 1024, 4)],
    "lm_head": [(32, 128, 4), (16, 256, 4), (8, 512, 4), (32, 256, 8), (64, 128, 8), (4, 1024, 4)],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen2.5-coder-1.5b", choices=sorted(SHAPES))
    ap.add_argument("--context", type=int, default=512)
    args = ap.parse_args()
    assert torch.cuda.is_available(), "sweep_gemv needs a CUDA GPU"
    torch.manual_seed(0)
    bw = copy_bandwidth()
    step = Step(args.shape, args.context)
    print(f"{torch.cuda.get_device_name()}  triton {triton.__version__}  copy bandwidth {bw:.0f} GB/s  "
          f"{args.shape} ctx {args.context}: {step.bytes / 1e9:.2f} GB per step", flush=True)

    def show(name, us):
        print(f"{name:<36}{us:9.1f} us {1e6 / us:7.0f} tok/s {100 * step.bytes / us / 1e3 / bw:5.0f}%", flush=True)
        return us

    show("rule (no overrides)", step.time_us({}))
    best = {}
    for kernel, cands in CANDIDATES.items():
        key = step.keys[kernel]
        timed = sorted((show(f"{kernel} {c}", step.time_us({key: [(*c, 1)]})), c) for c in cands)
        best[key] = [(*timed[0][1], 1)]
        print(f"  best {kernel}: {timed[0][1]}", flush=True)
    runs = {"rule (median of 3)": {}, "shipped: rule + overrides (median of 3)": None,
            "bests combined (median of 3)": best}
    times = {name: [] for name in runs}
    for _ in range(3):
        for name, tuned in runs.items():
            times[name].append(step.time_us(tuned))
    print(f"\n{'':<36}{'us':>9}{'tok/s':>9}{'MBU':>7}")
    for name, ts in times.items():
        show(name, statistics.median(ts))
    print("bests:", {k: v[0][:3] for k, v in best.items()})


if __name__ == "__main__":
    main()
