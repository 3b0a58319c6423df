"""The greedy decode step with each GEMV mode of FastRunner.use_gemv (triton; overlap: kernels.stream_gemv
for o_proj, and QKV and gate/up up to hidden 1536, loading weights before their input is ready; cuda:
stream_gemv chains for all four), the chains optionally at other shared-memory ring budgets ("cuda
KB"); after a variant, "/0": the Triton down_proj and gate/up without their lookahead (kernels._util
residual_lookahead / gate_up_lookahead), "/n": down_proj without its L2 prefetch of the next weights
(runner.DOWN_L2_PREFETCH) (GPU only):

    PYTHONPATH=.:scripts python scripts/probe_step_mix.py [--shapes a,b] [--context 512] \
        [--variants "triton,overlap,cuda 150,triton/0,overlap/n"]

Each variant: the step's CUDA graph captured with those kernels, replayed back to back (us per
step, median of 3 rounds, variants alternating). Prints a table last.
"""
import argparse
import statistics
import tempfile

import torch

from _probe_engine import greedy_graph, random_engine, replay_us
from inference.fast import runner as fast_runner
from kernels import _util, gate_up_silu, gemv_residual, stream_gemv as sg


BUDGET = sg.SMEM_BUDGET
DOWN_L2_PREFETCH = fast_runner.DOWN_L2_PREFETCH


def use(runner, variant: str) -> None:
    """variant: a use_gemv mode, optionally followed by a ring budget in KB, then optionally "/" and flags."""
    variant, _, flags = variant.partition("/")  # the rules are read when the graph is captured
    gemv_residual.residual_lookahead = (lambda k, cfg: False) if "0" in flags else _util.residual_lookahead
    no_ahead = {"AHEAD": False, "RED": 1}
    gate_up_silu.gate_up_lookahead = (lambda cfg: no_ahead) if "0" in flags else _util.gate_up_lookahead
    fast_runner.DOWN_L2_PREFETCH = 0 if "n" in flags else DOWN_L2_PREFETCH
    mode, _, kb = variant.partition(" ")
    sg.SMEM_BUDGET = int(kb) * 1024 if kb else BUDGET  # the plan is made at capture time
    runner.use_gemv(mode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen2.5-coder-1.5b,qwen3-1.7b,qwen2.5-coder-3b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--variants", default="triton,overlap,cuda")
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
    print("\n| shape | GEMVs (use_gemv mode, ring budget KB) | us/step | tok/s |")
    print("|---|---|---:|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} | {1e6 / med:.0f} |")


if __name__ == "__main__":
    main()
