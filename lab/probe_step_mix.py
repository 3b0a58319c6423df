"""The greedy decode step with each GEMV mode of FastRunner.use_gemv (triton; overlap: kernels.stream_gemv
for o_proj, and QKV and gate/up up to hidden 1536, loading weights before their input is ready); after a
variant, "/0": the Triton down_proj and gate/up without their lookahead (the tuning row's lookahead), "/n":
down_proj without its L2 prefetch of the next weights (down_l2_prefetch), set through FastRunner.use_tuning
(GPU only):

    python -m lab.probe_step_mix [--shapes a,b] [--context 512] [--variants "triton,overlap,triton/0,overlap/n"]

Each variant: the step's CUDA graph captured with those kernels, replayed back to back (us per
step, median of 3 rounds, variants alternating). Prints a table last.
"""
import argparse
import statistics
import tempfile
from dataclasses import replace

import torch

from lab.engine import greedy_graph, random_engine, replay_us
from kernels.tuning import for_device


def use(runner, variant: str) -> None:
    """variant: a use_gemv mode, optionally followed by "/" and flags (0: no lookahead, n: no L2 prefetch)."""
    mode, _, flags = variant.partition("/")
    row = for_device(runner.device)
    if "0" in flags:
        row = replace(row, lookahead=False)
    if "n" in flags:
        row = replace(row, down_l2_prefetch=0)
    runner.use_tuning(row, gemv=mode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen2.5-coder-1.5b,qwen3-1.7b,qwen2.5-coder-3b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--variants", default="triton,overlap")
    args = ap.parse_args()
    variants = args.variants.split(",")
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            engine = random_engine(shape, args.context + args.replays + 128, tmp)
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
    print("\n| shape | GEMVs (use_gemv mode / flags) | us/step | tok/s |")
    print("|---|---|---:|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} | {1e6 / med:.0f} |")


if __name__ == "__main__":
    main()
