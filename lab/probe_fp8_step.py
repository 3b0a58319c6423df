"""The greedy FP8 decode step per GEMV variant, in the step (GPU only):

    python -m lab.probe_fp8_step [--shapes a,b] [--context 512] [--variants "triton,cuda,cuda/e,cuda/n"]

Variants: "triton" (the Triton FP8 GEMVs), "cuda" (kernels.fp8_cuda_gemv, this GPU's tuning row), then flags
after "/" that set a knob on ("a" fp8_attention_early: the CUDA attention releases o_proj at its start; "e"
fp8_o_proj_early: o_proj releases gate/up right after its PDL wait; "r" fp8_qkv_early: QKV releases the attention
right after its PDL wait; the H200 row has all three on) or change the row ("n" no down_proj L2 prefetch,
fp8_down_l2_prefetch = 0; "s" the streamed FP8 GEMVs (kernels.fp8_stream_gemv) for all four weights, "q" / "o" /
"g" / "d" each for QKV / o_proj / gate/up / down, "c" none: CUDA-core kernels only; these replace the row's
fp8_stream), set through FastRunner.use_tuning. Each variant: the step's CUDA graph captured with those kernels,
replayed back to back (us per step, median of 3 rounds, variants alternating), random FP8 weights. Prints a table last.
"""
import argparse
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from inference.engine import Engine
from inference.synth import write_checkpoint
from kernels.tuning import for_device
from lab.engine import greedy_graph, replay_us


def use(runner, variant: str) -> None:
    mode, _, flags = variant.partition("/")
    row = for_device(runner.device)
    if "e" in flags:
        row = replace(row, fp8_o_proj_early=True)
    if "a" in flags:
        row = replace(row, fp8_attention_early=True)
    if "r" in flags:
        row = replace(row, fp8_qkv_early=True)
    if "n" in flags:
        row = replace(row, fp8_down_l2_prefetch=0)
    streamed = tuple(w for f, w in (("q", "qkv"), ("o", "o"), ("g", "gate_up"), ("d", "down")) if f in flags or "s" in flags)
    if streamed or "c" in flags:
        row = replace(row, fp8_stream=streamed)
    runner.use_tuning(row, gemv="overlap" if mode == "cuda" else mode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen2.5-coder-1.5b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--variants", default="triton,cuda,cuda/e,cuda/n")
    args = ap.parse_args()
    variants = args.variants.split(",")
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            path = write_checkpoint(shape, Path(tmp) / "m", device="cuda")
            engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16",
                                            max_context=args.context + args.replays + 128, weights="fp8")
            times = {v: [] for v in variants}
            for _ in range(3):
                for v in variants:
                    use(engine.runner, v)
                    times[v].append(replay_us(greedy_graph(engine, args.context), args.replays))
            for v in variants:
                med = statistics.median(times[v])
                rows.append((shape, v, med))
                print(f"{shape} [{v}]: {med:.1f} us/step {[round(t, 1) for t in times[v]]}", flush=True)
            del engine
            torch.cuda.empty_cache()
    print("\n| shape | FP8 GEMVs / flags | us/step | tok/s |")
    print("|---|---|---:|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} | {1e6 / med:.0f} |")


if __name__ == "__main__":
    main()
