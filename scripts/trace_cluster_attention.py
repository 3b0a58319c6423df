"""Where kernels.cluster_attention's time goes inside the decode step (GPU only; a timing probe):

    PYTHONPATH=.:scripts python scripts/trace_cluster_attention.py [shape] [--context 512]

Compiles the kernel with TRACE=1 (kernels.cluster_attention.PROBE_DEFINES): thread 0 of CTA 0 and of
kv head 0's owner CTA (the split holding pos) write %globaltimer stamps at the kernel's phase
boundaries into the workspace. Replays the engine's greedy step graph once and prints, median over
layers, ns from the kernel's start (0) and from the PDL wait's return (1) to each stamp.
"""
import argparse
import statistics
import tempfile

import torch

from _probe_engine import greedy_graph, random_engine
from kernels import cluster_attention as cluster

STAMPS = ["start", "PDL wait returned", "q, k, v loaded + RoPE", "new row + q fragments", "tile loop done",
          "partial in smem", "partials pushed", "peers' partials received", "merged + stored"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", default="qwen2.5-coder-1.5b")
    ap.add_argument("--context", type=int, default=512)
    args = ap.parse_args()
    cluster.PROBE_DEFINES["TRACE"] = 1
    with tempfile.TemporaryDirectory() as tmp:
        engine = random_engine(args.shape, args.context + 64, tmp)
        runner = engine.runner
        graph = greedy_graph(engine, args.context, warmup=2)
        ws = runner.ws
        ws.tickets.zero_()
        ws.acc.zero_()
        graph.replay()
        torch.cuda.synchronize()
        stamps = ws.acc.view(torch.int64).flatten()[:runner.cfg.num_layers * 20].view(-1, 2, 10).cpu()
        ws.tickets.zero_()
    print(f"[{args.shape}, ctx {args.context}, gemv {runner.gemv_kind}] ns, median over "
          f"{stamps.shape[0]} layers: from start | from the PDL wait's return")
    for who, name in ((0, "CTA 0 (a full 64-row split)"), (1, "owner CTA (the split holding pos)")):
        print(f"  {name}")
        s = stamps[:, who]
        for k, label in enumerate(STAMPS):
            a = statistics.median((s[:, k] - s[:, 0]).tolist())
            b = statistics.median((s[:, k] - s[:, 1]).tolist())
            print(f"    {k} {label:26s} {a:8.0f} {b:8.0f}")


if __name__ == "__main__":
    main()
