"""Lab probe: the Triton decode attention per launch by split count, one column (a decode step) and k columns
(kernels.decode_attention_cols, a verify step), GPU only:

    python -m lab.probe_attention_splits [--heads 9,3,64] [--contexts 512,4096] [--splits 88,44,22,11]
        [--min-chunks 64,128,256,512] [--programs 11,6,4,2 --columns 8,16] [--configs w4s3,w4s1,w2s1]

For each context and split count S: us per launch of decode_attention (one token) and of
decode_attention_cols at 2, 4, 8 columns (the window rows computed in the launch), 24 launches back to back in one CUDA
graph, PDL on. A verify step's attention must use its plain steps' S (the order of the sums), so S is a choice
for both. --programs: a verify step's launch at the default S with P programs per kv head and column taking the
splits in turn (decode_attention_cols' few_splits; the same bits for any P), at each of --columns; --configs: the
same at the config's P with other warps / pipeline stages (wNsM: AttentionConfig num_warps N, num_stages M; one
column with a program per split first). Not a test.
"""
from __future__ import annotations

import argparse

import torch

from dataclasses import replace

from kernels.decode_attention import (AttentionWorkspace, attention_config, decode_attention, decode_attention_with,
                                      default_num_splits, rope_tables)
from kernels.decode_attention_cols import decode_attention_cols
from lab.bench_kernels import graph_us


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--heads", default="9,3,64", help="query heads, kv heads, head_dim (default: the 135M model)")
    p.add_argument("--contexts", default="512,4096")
    p.add_argument("--splits", default="", help="split counts (default: the GPU's default, /2, /4, /8)")
    p.add_argument("--min-chunks", default="", help="also: one column at these rows-per-split minimums "
                   "(AttentionConfig.min_chunk), default S")
    p.add_argument("--programs", default="", help="also: verify launches with these split programs per kv head "
                   "and column (0: a program per split)")
    p.add_argument("--columns", default="8,16", help="the column counts of --programs")
    p.add_argument("--configs", default="", help="with --programs: launch configs wNsM (num_warps, num_stages)")
    p.add_argument("--only-programs", action="store_true", help="skip the split and min-chunk tables")
    args = p.parse_args()
    hq, hkv, d = (int(v) for v in args.heads.split(","))
    base = default_num_splits(hkv, "cuda")
    splits = [int(s) for s in args.splits.split(",") if s] or [base, base // 2, base // 4, base // 8]
    t_max = 8192
    k_cache = torch.randn(hkv, t_max, d, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    cos, sin = rope_tables(t_max, d, device="cuda")
    print(f"\nheads {hq}/{hkv}, head_dim {d}, {torch.cuda.get_device_name()}: us per launch (default S = {base})")
    if args.programs:
        programs(args, hq, hkv, d, base, k_cache, v_cache, cos, sin)
    if args.only_programs:
        return
    print("| context | S | 1 column | 2 columns | 4 columns | 8 columns |")
    print("|---:|---:|---:|---:|---:|---:|")
    for ctx in (int(c) for c in args.contexts.split(",")):
        pos = torch.tensor([ctx], dtype=torch.int32, device="cuda")
        for s in splits:
            ws = AttentionWorkspace(hq, d, s, "cuda", columns=8)
            cells = []
            for kc in (1, 2, 4, 8):
                qkv = torch.randn(kc, (hq + 2 * hkv) * d, device="cuda")
                out = torch.zeros(kc, hq * d, device="cuda")
                if kc == 1:
                    ws1 = AttentionWorkspace(hq, d, s, "cuda")
                    fn = lambda: decode_attention(qkv.view(-1), pos, k_cache, v_cache, cos, sin, out.view(-1), ws1,
                                                  d ** -0.5, pdl=True)
                else:
                    fn = lambda: decode_attention_cols(qkv, pos, k_cache, v_cache, cos, sin, out, ws, d ** -0.5,
                                                       pdl=True)
                cells.append(graph_us(lambda: [fn() for _ in range(24)], 24))
            print(f"| {ctx} | {s} | " + " | ".join(f"{c:.2f}" for c in cells) + " |", flush=True)
    if args.min_chunks:
        print(f"\none column by AttentionConfig.min_chunk (S = {base}), us per launch")
        print("| context | " + " | ".join(f"min_chunk {m}" for m in args.min_chunks.split(",")) + " |")
        print("|---:|" + "---:|" * len(args.min_chunks.split(",")))
        for ctx in (int(c) for c in args.contexts.split(",")):
            pos = torch.tensor([ctx], dtype=torch.int32, device="cuda")
            qkv, out = torch.randn((hq + 2 * hkv) * d, device="cuda"), torch.zeros(hq * d, device="cuda")
            ws1 = AttentionWorkspace(hq, d, base, "cuda")
            cells = []
            for m in (int(v) for v in args.min_chunks.split(",")):
                cfg = replace(attention_config(d, k_cache.dtype), min_chunk=m)
                cells.append(graph_us(lambda: [decode_attention_with(cfg, qkv, pos, k_cache, v_cache, cos, sin, out,
                                                                     ws1, d ** -0.5, pdl=True) for _ in range(24)], 24))
            print(f"| {ctx} | " + " | ".join(f"{c:.2f}" for c in cells) + " |", flush=True)


def programs(args, hq, hkv, d, base, k_cache, v_cache, cos, sin):
    """us per verify launch at the default S by split programs P (rows) and column count (columns); one column
    (the plain step's launch, a program per split) first."""
    cols = [int(c) for c in args.columns.split(",")]
    base_cfg = attention_config(d, k_cache.dtype)
    variants = [("", base_cfg)] + [(v, replace(base_cfg, num_warps=int(v[1:v.index("s")]), num_stages=int(v[v.index("s") + 1:])))
                                   for v in args.configs.split(",") if v]
    print(f"\nverify launches by split programs per kv head and column (S = {base}), us per launch")
    print("| context | config | P | 1 column (P = 0) | " + " | ".join(f"{c} columns" for c in cols) + " |")
    print("|---:|---|---:|---:|" + "---:|" * len(cols))
    for ctx, (tag, cfg) in ((int(c), v) for c in args.contexts.split(",") for v in variants):
        pos = torch.tensor([ctx], dtype=torch.int32, device="cuda")
        ws = AttentionWorkspace(hq, d, base, "cuda", columns=max(cols))
        qkv1, out1 = torch.randn((hq + 2 * hkv) * d, device="cuda"), torch.zeros(hq * d, device="cuda")
        ws1 = AttentionWorkspace(hq, d, base, "cuda")
        one = graph_us(lambda: [decode_attention_with(cfg, qkv1, pos, k_cache, v_cache, cos, sin, out1, ws1,
                                                      d ** -0.5, pdl=True) for _ in range(24)], 24)
        for prog in (int(v) for v in args.programs.split(",")) if not tag else (cfg.verify_split_programs,):
            cells = []
            for kc in cols:
                qkv = torch.randn(kc * (hq + 2 * hkv) * d, device="cuda")
                out = torch.zeros(kc * hq * d, device="cuda")
                fn = lambda: decode_attention_with(cfg, qkv, pos, k_cache, v_cache, cos, sin, out, ws, d ** -0.5,
                                                   pdl=True, columns=kc, split_programs=prog)
                cells.append(graph_us(lambda: [fn() for _ in range(24)], 24))
            print(f"| {ctx} | {tag or 'default'} | {prog} | {one:.2f} | " + " | ".join(f"{c:.2f}" for c in cells) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
