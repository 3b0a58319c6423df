"""The greedy decode step with the Triton GEMVs or the chained CUDA ones (kernels.stream_gemv) at
several shared-memory ring budgets (GPU only):

    PYTHONPATH=.:scripts python scripts/probe_step_mix.py [--shapes a,b] [--context 512] [--budgets 150,120]

Each variant: the step's CUDA graph captured with those kernels, replayed back to back (us per
step, median of 3 rounds, variants alternating). Prints a table last.
"""
import argparse
import statistics
import tempfile

import torch

from _probe_engine import greedy_graph, random_engine, replay_us
from kernels import stream_gemv as sg


def use(runner, variant: str) -> None:
    if variant == "triton":
        runner.use_gemv("triton")
        return
    runner.use_gemv("cuda")
    sg.SMEM_BUDGET = int(variant) * 1024  # the plan is made at capture time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen2.5-coder-1.5b,qwen3-1.7b,qwen2.5-coder-3b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--budgets", default="150,120,200")
    args = ap.parse_args()
    variants = ["triton"] + args.budgets.split(",")
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
    print("\n| shape | GEMVs (CUDA: ring budget KB) | us/step | tok/s |")
    print("|---|---|---:|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} | {1e6 / med:.0f} |")


if __name__ == "__main__":
    main()
