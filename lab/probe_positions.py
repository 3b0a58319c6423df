"""How the greedy step's time moves with the position it decodes at, and what the boundary between two
graph replays costs (GPU only): the runner's step graph replayed from several start positions, and graphs
that hold k steps back to back (the second step's first kernel then follows the LM head under PDL instead
of starting a new graph; timing only: in such a graph the first layer's CUDA attention, released at the streamed
QKV's start, may read the position before the previous step's LM head advances it, so the runner does not use them).

    python -m lab.probe_positions [SHAPES] [--positions 512,640,768,896,992]

us per step, median of 3 rounds; a table last.
"""
import argparse
import statistics
import tempfile

import torch

from lab.engine import greedy_graph, random_engine, replay_us


def steps_graph(runner, k: int) -> torch.cuda.CUDAGraph:
    """k greedy steps captured back to back in one graph (kernels already compiled by the runner's graph)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(k):
            runner.launch_step()
    torch.cuda.current_stream().wait_stream(stream)
    return graph


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="?", default="qwen2.5-coder-1.5b,qwen2.5-coder-3b")
    ap.add_argument("--positions", default="512,640,768,896,992")
    ap.add_argument("--span", type=int, default=32, help="steps replayed from each start position")
    args = ap.parse_args()
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            engine = random_engine(shape, 2048, tmp)
            runner = engine.runner
            graphs = {1: greedy_graph(engine, 512)}
            for k in (2, 4):
                graphs[k] = steps_graph(runner, k)
            variants = {f"from {p}, {args.span} steps": (graphs[1], 1, p, args.span)
                        for p in map(int, args.positions.split(","))}
            variants.update({f"512..1023, {k} step(s) per graph": (graphs[k], k, 512, 512) for k in graphs})
            times = {v: [] for v in variants}
            for _ in range(3):
                for v, (graph, k, start, span) in variants.items():
                    runner.pos.fill_(start)
                    times[v].append(replay_us(graph, span // k) / k)
            for v in variants:
                med = statistics.median(times[v])
                rows.append((shape, v, med))
                print(f"{shape} [{v}]: {med:.1f} us/step {[round(t, 1) for t in times[v]]}", flush=True)
            del engine, graphs, runner
            torch.cuda.empty_cache()
    print("\n| shape | replays | us/step |\n|---|---|---:|")
    for shape, v, med in rows:
        print(f"| {shape} | {v} | {med:.1f} |")


if __name__ == "__main__":
    main()
