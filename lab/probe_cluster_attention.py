"""Variants of the CUDA cluster attention against the Triton kernel (GPU only):

    python -m lab.probe_cluster_attention [--contexts 600,1000] [--step-shapes a,b]

1. Alone: 28 launches chained with PDL in one CUDA graph (one cache per layer), us per launch,
   for the Qwen2.5-1.5B (12/2), Qwen3-1.7B (16/8) and Qwen2.5-3B (16/2) head layouts.
2. In the decode step (engine over random weights, greedy graph, ctx 512): us per step.
Variants: cluster size, min rows per split, number of splits.
"""
import argparse
import statistics
import tempfile

import torch

from lab.engine import greedy_graph, random_engine, replay_us
from kernels import cluster_attention as ca
from kernels.decode_attention import AttentionWorkspace, decode_attention, default_num_splits, rope_tables

LAYERS = 28


def variants(hkv):
    s16 = ca.default_splits(hkv, 16, "cuda")
    return {
        "cuda c16": dict(cluster=16, splits=s16),
        "cuda c16 S=16": dict(cluster=16, splits=16),
        "cuda c8 min128": dict(cluster=8, splits=ca.default_splits(hkv, 8, "cuda"), min_chunk=128),
        "cuda c8 min64": dict(cluster=8, splits=ca.default_splits(hkv, 8, "cuda")),
    }


def time_graph(fn, reps=50):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return statistics.median(replay_us(g, reps) for _ in range(3))


def alone(hq, hkv, ctx):
    d, t_max = 128, 2048
    gen = torch.Generator().manual_seed(0)
    qkv = (torch.randn((hq + 2 * hkv) * d, generator=gen) * 2).cuda()
    caches = [(torch.randn(hkv, t_max, d, generator=gen).bfloat16().cuda(),
               torch.randn(hkv, t_max, d, generator=gen).bfloat16().cuda()) for _ in range(LAYERS)]
    cos, sin = rope_tables(t_max, d, device="cuda")
    pos = torch.tensor([ctx], dtype=torch.int32, device="cuda")
    out = torch.empty(hq * d, device="cuda")
    rows = {}
    ws = AttentionWorkspace(hq, d, default_num_splits(hkv, "cuda"), "cuda")
    rows["triton"] = time_graph(lambda: [decode_attention(qkv, pos, k, v, cos, sin, out, ws, d ** -0.5, pdl=True)
                                         for k, v in caches]) / LAYERS
    for name, v in variants(hkv).items():
        w = ca.ClusterWorkspace(hq, hkv, d, v["splits"], v["cluster"], "cuda", min_chunk=v.get("min_chunk", 64))
        rows[name] = time_graph(lambda: [ca.cluster_attention(qkv, pos, k, vv, cos, sin, out, w, d ** -0.5, pdl=True)
                                         for k, vv in caches]) / LAYERS
    return rows


def in_step(shape, ctx, replays=200):
    tmp = tempfile.TemporaryDirectory()
    engine = random_engine(shape, ctx + 4 * replays + 64, tmp.name)
    r, cfg = engine.runner, engine.cfg
    rows = {}

    def run(name, setup):
        setup()
        r.graphs = {}
        rows[name] = statistics.median(replay_us(greedy_graph(engine, ctx), replays) for _ in range(3))

    run("triton", lambda: r.use_attention("triton"))
    for name, v in variants(cfg.num_kv_heads).items():

        def setup(v=v):
            r.use_attention("cuda", workspace=ca.ClusterWorkspace(
                cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, v["splits"], v["cluster"], r.device,
                min_chunk=v.get("min_chunk", 64)))
        run(name, setup)
    run("triton (again)", lambda: r.use_attention("triton"))
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--contexts", default="600,1000")
    p.add_argument("--step-shapes", default="qwen2.5-coder-1.5b,qwen2.5-coder-3b")
    args = p.parse_args()
    for hq, hkv in [(12, 2), (16, 8), (16, 2)]:
        for ctx in [int(c) for c in args.contexts.split(",")]:
            rows = alone(hq, hkv, ctx)
            print(f"alone {hq}/{hkv} ctx {ctx}: " + ", ".join(f"{k} {v:.2f}" for k, v in rows.items()), flush=True)
    for shape in [s for s in args.step_shapes.split(",") if s]:
        rows = in_step(shape, 512)
        print(f"step {shape} ctx 512 us: " + ", ".join(f"{k} {v:.1f}" for k, v in rows.items()), flush=True)


if __name__ == "__main__":
    main()
