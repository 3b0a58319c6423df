"""What the engine's per-token bookkeeping costs the device (GPU only): the greedy step graph replayed
back to back with nothing between two replays, a timing event after each, an event without timing after
each, or a timing event after every 16th (kernels/PERF.md thirteenth session).

    python -m lab.probe_token_events [SHAPES] [--steps 400]

us per step, median of 3 rounds (variants alternating); a table last.
"""
import argparse
import statistics
import tempfile

import torch

from lab.engine import greedy_graph, random_engine


def replay(graph, steps: int, every: int, timing: bool) -> float:
    """us per step over `steps` replays; an event (timing or not) after every `every`-th (0: none)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    events = []
    a.record()
    for i in range(steps):
        graph.replay()
        if every and i % every == 0:
            ev = torch.cuda.Event(enable_timing=timing)
            ev.record()
            events.append(ev)
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="?", default="qwen2.5-coder-1.5b,qwen2.5-coder-3b")
    ap.add_argument("--steps", type=int, default=400)
    args = ap.parse_args()
    variants = {"none": (0, False), "timing event each": (1, True), "plain event each": (1, False),
                "timing event every 16th": (16, True)}
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            engine = random_engine(shape, 512 + args.steps + 64, tmp)
            graph = greedy_graph(engine, 512)
            times = {v: [] for v in variants}
            for _ in range(3):
                for v, (every, timing) in variants.items():
                    engine.runner.pos.fill_(512)  # every variant decodes the same positions
                    times[v].append(replay(graph, args.steps, every, timing))
            for v in variants:
                med = statistics.median(times[v])
                rows.append((shape, v, med))
                print(f"{shape} [{v}]: {med:.1f} us/step {[round(t, 1) for t in times[v]]}", flush=True)
            del engine, graph
            torch.cuda.empty_cache()
    print("\n| shape | between two replays | us/step |\n|---|---|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} |")


if __name__ == "__main__":
    main()
