"""Lab probe: the Triton decode attention per launch by split count, one column (a decode step) and k columns
(kernels.decode_attention_cols, a verify step), GPU only:

    python -m lab.probe_attention_splits [--heads 9,3,64] [--contexts 512,4096] [--splits 88,44,22,11]
        [--min-chunks 64,128,256,512]

For each context and split count S: us per launch of decode_attention (one token) and of
decode_attention_cols at 2, 4, 8 columns (the window rows computed in the launch), 24 launches back to back in one CUDA
graph, PDL on. A verify step's attention must use its plain steps' S (the order of the sums), so S is a choice
for both. Not a test.
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
    args = p.parse_args()
    hq, hkv, d = (int(v) for v in args.heads.split(","))
    base = default_num_splits(hkv, "cuda")
    splits = [int(s) for s in args.splits.split(",") if s] or [base, base // 2, base // 4, base // 8]
    t_max = 8192
    k_cache = torch.randn(hkv, t_max, d, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    cos, sin = rope_tables(t_max, d, device="cuda")
    print(f"\nheads {hq}/{hkv}, head_dim {d}, {torch.cuda.get_device_name()}: us per launch (default S = {base})")
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


if __name__ == "__main__":
    main()
