"""How close the greedy LM head launch (kernels.lm_head_argmax) streams to what HBM gives a pure read (GPU
only): the launch alone, 20 per CUDA graph (PDL on), under its launch config and the ones given, against
torch.sum over the same weight (a read-only stream) and a device-to-device copy (read + write).

    python -m lab.probe_lm_head [SHAPES] [--configs 16_256_4_1,32_128_4_3]

GB/s and us per launch, median of 5 replays; a table last.
"""
import argparse
import statistics
from dataclasses import replace

import torch

from lab.engine import replay_us
from inference.synth import SHAPES
from kernels.lm_head_argmax import argmax_scratch, lm_head_argmax
from kernels.tuning import for_device

REPS = 20


def time_graph(fn) -> float:
    """us per call of fn, REPS calls captured in one graph, median of 5 replays."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPS):
            fn()
    return statistics.median(replay_us(graph, 1) for _ in range(5)) / REPS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="?", default="qwen2.5-coder-1.5b,qwen2.5-coder-3b")
    ap.add_argument("--configs", default="16_256_4_1,16_256_4_2,16_256_4_3,32_128_4_1,32_128_4_3,16_512_8_1,"
                                         "16_512_8_3,32_256_8_1,32_256_8_3,8_512_4_1,8_512_4_3,64_128_8_3")
    args = ap.parse_args()
    dev = torch.device("cuda")
    rows = []
    for shape in args.shapes.split(","):
        cfg = SHAPES[shape]
        n, k = cfg.vocab_size, cfg.hidden_size
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        nbytes = w.numel() * 2
        x = torch.randn(k, device=dev)
        norm_w = torch.ones(k, device=dev, dtype=torch.bfloat16)
        logits = torch.empty(n, device=dev)
        token = torch.zeros(1, device=dev, dtype=torch.int64)
        pos = torch.zeros(1, device=dev, dtype=torch.int32)
        scratch = argmax_scratch(dev)
        ring = torch.zeros(256, dtype=torch.int64, pin_memory=True)
        x0 = x.clone()

        def head(tuning=None):
            lm_head_argmax(x, w, logits, token, pos, w, scratch, norm_w=norm_w, ring=ring, pdl=True, tuning=tuning)
            x.copy_(x0)  # the launch wrote the next embedding into x

        dst = torch.empty_like(w)
        variants = {"torch.sum (read only)": lambda: w.sum(dtype=torch.float32),
                    "copy (read + write, 2x bytes)": lambda: dst.copy_(w),
                    "x.copy_ alone (in every head row)": lambda: x.copy_(x0),
                    "lm_head_argmax (rule)": head}
        row = for_device(dev)
        for c in args.configs.split(","):
            cfg_row = replace(row, gemv_overrides=(((n, k), tuple(map(int, c.split("_")))),))
            variants[f"lm_head_argmax {c}"] = lambda r=cfg_row: head(r)
        for v, fn in variants.items():
            us = time_graph(fn)
            moved = 2 * nbytes if v.startswith("copy") else nbytes
            gbs = moved / us / 1e3
            rows.append((shape, v, us, gbs))
            print(f"{shape} [{v}]: {us:.1f} us, {gbs:.0f} GB/s", flush=True)
        w = dst = None
        torch.cuda.empty_cache()
    print("\n| shape | launch | us | GB/s |\n|---|---|---:|---:|")
    for shape, v, us, gbs in rows:
        print(f"| {shape} | {v} | {us:.1f} | {gbs:.0f} |")


if __name__ == "__main__":
    main()
