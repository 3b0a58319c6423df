"""Lab probe: where a speculative verify step's time goes, kernel by kernel, GPU only.

    python -m lab.probe_cols_kernels [--shape qwen2.5-coder-1.5b] [--context 512]

For each launch of a decode layer (QKV, attention, o_proj, gate/up, down) and the LM head at a synth shape:
microseconds per launch of the one-column decode kernel and of its k-column twin (kernels/*_cols.py) at
KC = 1, 2, 4, 8 (8 also with 4 columns per program), 24 launches back to back in one CUDA graph over rotating
weight copies so L2 never holds them (lab.bench_kernels.in_graph_us). A KC-column launch that costs much more
than the one-column one is not bandwidth-bound: registers, activation re-reads or instructions. The "rows x4"
rows test one cause: each program of the decode configs owns 4 rows (16 for gate/up) and re-reads every
activation column for them (for 4 rows of bf16 that is half the weight bytes again, per column, from L2); with
4x the rows and 4x the warps (the extra warps along the rows: the layout along K, hence the per-row sums, stays
the one-column kernel's; the fused RMSNorm's sum of squares would not) the re-reads drop 4x. Not a test; the
end-to-end number is `inference.bench --workload verify`.
"""

from __future__ import annotations

import argparse
import math

import torch

from dataclasses import replace

from inference.synth import SHAPES
from kernels._util import gate_up_config, gemv_config
from kernels.tuning import for_device
from kernels.decode_attention import AttentionWorkspace, decode_attention, default_num_splits, rope_tables
from kernels.decode_attention_cols import decode_attention_cols
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gate_up_silu_cols import rmsnorm_gate_up_silu_cols
from kernels.gemv_residual import gemv_residual
from kernels.gemv_residual_cols import gemv_residual_cols
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.rmsnorm_gemv_cols import rmsnorm_gemv_cols
from lab.bench_kernels import copies, in_graph_us

WIDTHS = [(1, None), (2, None), (4, None), (8, None), (8, 4)]  # (KC, columns per program)


def gemv_rows(shape) -> list[tuple[str, str, float]]:
    """(launch, variant, us) for the four GEMVs and the LM head."""
    h, i, v = shape.hidden_size, shape.intermediate_size, shape.vocab_size
    d = shape.head_dim or h // shape.num_heads
    q, kv = shape.num_heads * d, shape.num_kv_heads * d
    bf = dict(device="cuda", dtype=torch.bfloat16)
    norm = torch.rand(h, **bf)
    rows = []
    specs = [  # name, W rows, W cols, one-column launch(x, w), k-column launch(X, w, group)
        ("qkv", q + 2 * kv, h, lambda x, w, o: rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True),
         lambda x, w, o, g, t=None: rmsnorm_gemv_cols(x, w, o, norm, 1e-6, pdl=True, group=g, tuning=t)),
        ("o_proj", h, q, lambda a, w, x: gemv_residual(a, w, x, pdl=True),
         lambda a, w, x, g, t=None: gemv_residual_cols(a, w, x, pdl=True, group=g, tuning=t)),
        ("gate_up", 2 * i, h, lambda x, w, o: rmsnorm_gate_up_silu(x, norm, 1e-6, w, o, pdl=True),
         lambda x, w, o, g, t=None: rmsnorm_gate_up_silu_cols(x, norm, 1e-6, w, o, pdl=True, group=g, tuning=t)),
        ("down", h, i, lambda a, w, x: gemv_residual(a, w, x, pdl=True),
         lambda a, w, x, g, t=None: gemv_residual_cols(a, w, x, pdl=True, group=g, tuning=t)),
        ("lm_head", v, h, lambda x, w, o: rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True),
         lambda x, w, o, g, t=None: rmsnorm_gemv_cols(x, w, o, norm, 1e-6, pdl=True, group=g, tuning=t)),
    ]
    row = for_device("cuda")
    for name, n, k, one, cols in specs:
        ws = copies(lambda: torch.randn(n, k, **bf) * 0.02, n * k * 2)
        out_n = n // 2 if name == "gate_up" else n
        x = torch.randn(k, device="cuda")
        o = torch.zeros(out_n, device="cuda")
        rows.append((name, "one-column", in_graph_us(lambda w: one(x, w, o), ws)))
        for kc, g in WIDTHS:
            X = torch.randn(kc, k, device="cuda")
            O = torch.zeros(kc, out_n, device="cuda")
            us = in_graph_us(lambda w: cols(X, w, O, g), ws)
            rows.append((name, f"KC={kc}" + (f" group={g}" if g else ""), us))
        cfg = gate_up_config(n // 2, k, row) if name == "gate_up" else gemv_config(n, k, row)
        wide = (min(cfg["BLOCK_N"] * 4, 64), cfg["BLOCK_K"], min(32, cfg["num_warps"] * 4), cfg.get("num_stages", 3))
        key = (n // 2, k) if name == "gate_up" else (n, k)
        wide_row = replace(row, gemv_overrides=((key, wide),))
        for kc in (4, 8):
            X = torch.randn(kc, k, device="cuda")
            O = torch.zeros(kc, out_n, device="cuda")
            us = in_graph_us(lambda w: cols(X, w, O, None, wide_row), ws)
            rows.append((name, f"KC={kc} rows x4 {wide[:3]}", us))
        del ws
        torch.cuda.empty_cache()
    return rows


def attention_rows(shape, context: int) -> list[tuple[str, str, float]]:
    h = shape.hidden_size
    d = shape.head_dim or h // shape.num_heads
    hq, hkv = shape.num_heads, shape.num_kv_heads
    t_max = context + 64
    kc_ = torch.randn(hkv, t_max, d, device="cuda", dtype=torch.bfloat16)
    vc_ = torch.randn_like(kc_)
    cos, sin = rope_tables(t_max, d, device="cuda")
    splits = default_num_splits(hkv, "cuda")
    pos = torch.tensor([context], dtype=torch.int32, device="cuda")
    scale = 1 / math.sqrt(d)
    qkv = torch.randn((hq + 2 * hkv) * d, device="cuda")
    out = torch.zeros(hq * d, device="cuda")
    ws1 = AttentionWorkspace(hq, d, splits, "cuda")
    rows = [("attention", "one-column",
             in_graph_us(lambda _: decode_attention(qkv, pos, kc_, vc_, cos, sin, out, ws1, scale, pdl=True), [0]))]
    ws = AttentionWorkspace(hq, d, splits, "cuda", columns=8)
    for kc in (1, 2, 4, 8):
        Q = torch.randn(kc, (hq + 2 * hkv) * d, device="cuda")
        O = torch.zeros(kc, hq * d, device="cuda")
        us = in_graph_us(lambda _: decode_attention_cols(Q, pos, kc_, vc_, cos, sin, O, ws, scale, pdl=True), [0])
        rows.append(("attention", f"KC={kc} (+ kv rows)", us))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="qwen2.5-coder-1.5b")
    p.add_argument("--context", type=int, default=512)
    args = p.parse_args()
    shape = SHAPES[args.shape]
    rows = attention_rows(shape, args.context) + gemv_rows(shape)
    print(f"\n{args.shape}, bf16, context {args.context}, {torch.cuda.get_device_name()}: us per launch, cold weights")
    print("| launch | variant | us | vs one-column |")
    print("|---|---|---:|---:|")
    base = {}
    for name, variant, us in rows:
        base.setdefault(name, us)
        print(f"| {name} | {variant} | {us:.1f} | {us / base[name]:.2f}x |")


if __name__ == "__main__":
    main()
