"""Why the engine's decode is slower per token than the same graph replayed back to back (GPU only): the
greedy step replayed from position 512 for 511 steps (the bench's span) back to back, then issued the way
the engine issues it (at most LAG steps ahead of the token read back from the pinned ring), with variants
of the host's loop, and the engine itself (Engine.generate's decode_tok_s). Measured (kernels/PERF.md fourteenth
session): all within 1 us of each other; the engine costs the device nothing per token.

    python -m lab.probe_pacing [SHAPES] [--lags 8,32]

us per step, median of 3 rounds; a table last.
"""
import argparse
import statistics
import tempfile
import time
from collections import deque

import torch

from lab.engine import random_engine
from inference.bench import random_prompt
from inference.engine import FinishEvent
from inference.prompts import Prompt
from inference.sampling import SamplingParams

TOKENS = 512


def paced(runner, prompt, params, lag: int, yield_cpu: bool) -> float:
    """us per step of steps 2..TOKENS-1, issued at most `lag` ahead of the ring slot read back (lag 0:
    all issued at once, nothing read)."""
    runner.start(prompt, params)
    torch.cuda.synchronize()
    slots = deque([runner.step()])
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(TOKENS - 2):
        while lag and len(slots) >= lag:
            view = slots.popleft().numpy()
            while view[0] < 0:
                if yield_cpu:
                    time.sleep(0)
        slots.append(runner.step())
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / (TOKENS - 2)


def engine_us(engine, prompt, params) -> float:
    """us per token of Engine.generate's decode (its device-timed span)."""
    for ev in engine.generate(prompt, params):
        if isinstance(ev, FinishEvent):
            return 1e6 / ev.stats.decode_tok_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="?", default="qwen2.5-coder-1.5b")
    ap.add_argument("--lags", default="8,32")
    args = ap.parse_args()
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            engine = random_engine(shape, 2048, tmp)
            prompt_ids = random_prompt(512, engine.cfg.vocab_size)
            params = SamplingParams(max_tokens=TOKENS, ignore_eos=True, temperature=0.0)
            variants = {"back to back": lambda: paced(engine.runner, prompt_ids, params, 0, True)}
            for lag in map(int, args.lags.split(",")):
                variants[f"lag {lag}, sleep(0) polls"] = lambda lag=lag: paced(engine.runner, prompt_ids, params,
                                                                                 lag, True)
                variants[f"lag {lag}, spin"] = lambda lag=lag: paced(engine.runner, prompt_ids, params, lag, False)
            variants["Engine.generate"] = lambda: engine_us(engine, Prompt.from_ids(prompt_ids), params)
            engine_us(engine, Prompt.from_ids(prompt_ids), params)  # captures the graphs
            times = {v: [] for v in variants}
            for _ in range(3):
                for v, fn in variants.items():
                    times[v].append(fn())
            for v in variants:
                med = statistics.median(times[v])
                rows.append((shape, v, med))
                print(f"{shape} [{v}]: {med:.1f} us/step {[round(t, 1) for t in times[v]]}", flush=True)
            engine = None
            torch.cuda.empty_cache()
    print("\n| shape | host loop | us/step |\n|---|---|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} |")


if __name__ == "__main__":
    main()
