"""How much the greedy step's time moves from one load of the same weights to the next (GPU only): one synthetic
checkpoint, loaded into a fresh engine several times in one process, each time after holding a different amount of
device memory (meant to move the weights; the caching allocator gave the same addresses back from the second load on,
so only the first load differs in address); each engine's step graph at ctx 512 replayed back to back (us per step,
median of 3 rounds). Run it in several processes to compare the spread within one process with the spread between
processes (kernels/PERF.md fourteenth session: 1008.5-1011.9 us, three processes x four loads, one machine).

    python -m lab.probe_variance [SHAPE] [--loads 4]
"""
import argparse
import statistics
import tempfile
from pathlib import Path

import torch

from lab.engine import greedy_graph, replay_us
from inference.engine import Engine
from inference.synth import write_checkpoint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", default="qwen2.5-coder-1.5b")
    ap.add_argument("--loads", type=int, default=4)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = write_checkpoint(args.shape, Path(tmp) / "m", device="cuda")
        for i in range(args.loads):
            held = torch.empty(i * (96 << 20), dtype=torch.uint8, device="cuda")  # shifts what is allocated next
            engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=740)
            graph = greedy_graph(engine, 512)
            times = [replay_us(graph, 100) for _ in range(3)]
            embed = engine.runner.w.embed.data_ptr()
            rows.append((i, held.numel() >> 20, statistics.median(times), embed))
            print(f"load {i} (holding {held.numel() >> 20} MB, embed at {embed:#x}): "
                  f"{statistics.median(times):.1f} us/step {[round(t, 1) for t in times]}", flush=True)
            del engine, graph, held
            torch.cuda.empty_cache()
    print(f"\n| {args.shape}: load | MB held before | us/step |\n|---:|---:|---:|")
    for i, mb, us, _ in rows:
        print(f"| {i} | {mb} | {us:.1f} |")


if __name__ == "__main__":
    main()
