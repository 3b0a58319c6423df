"""Lab probe: the verify step's GEMVs on tensor cores (kernels.gemv_mma_cols, lm_head_mma_cols) per launch,
against the one-column Triton decode kernels, GPU only.

    python -m lab.probe_cols_kernels [--shape qwen2.5-coder-1.5b] [--sweep]

For each GEMV of a decode layer (QKV, o_proj, gate/up, down) and the LM head (+ argmax) at a synth shape:
microseconds per launch of the one-column Triton kernel and of the MMA kernel at 1, 2, 4, 8 columns (its
default config, mma_config), 24 launches back to back in one CUDA graph over rotating weight copies so L2
never holds them (lab.bench_kernels.in_graph_us), and the GB/s that makes of the weight bytes. --sweep adds
other launch configs of the MMA kernel at 1 and 8 columns (BLOCK_N, BLOCK_K, warps, stages, split-K): a row printed as
soon as it is measured, so a killed run still tells. Not a test; the end-to-end number is
`inference.bench --workload verify`.
"""

from __future__ import annotations

import argparse

import torch
import triton

from inference.synth import SHAPES
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_mma_cols import gemv_residual_mma, mma_config, rmsnorm_gate_up_silu_mma, rmsnorm_gemv_mma
from kernels.gemv_residual import gemv_residual
from kernels.lm_head_argmax import argmax_scratch, lm_head_argmax
from kernels.lm_head_mma_cols import lm_head_argmax_mma, mma_scratch
from kernels.rmsnorm_gemv import rmsnorm_gemv
from lab.bench_kernels import copies, in_graph_us

WIDTHS = (1, 2, 4, 8)
SWEEP = [(64, 128, 4, 4, 4), (64, 128, 4, 4, 8), (128, 128, 4, 4, 4), (128, 128, 8, 4, 4), (128, 64, 4, 4, 8),
         (128, 128, 8, 3, 8), (256, 64, 8, 4, 8)]  # (BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT_K)


def specs(shape):
    """(name, W rows, W cols, output rows, one-column launch(x, w, o), MMA launch(X, w, O, config))."""
    h, i, v = shape.hidden_size, shape.intermediate_size, shape.vocab_size
    d = shape.head_dim or h // shape.num_heads
    q, kv = shape.num_heads * d, shape.num_kv_heads * d
    bf = dict(device="cuda", dtype=torch.bfloat16)
    norm = torch.rand(h, **bf)
    embed = torch.randn(v, h, **bf)
    tok = torch.zeros(1, dtype=torch.int64, device="cuda")
    pos = torch.zeros(1, dtype=torch.int32, device="cuda")
    s1, s16 = argmax_scratch("cuda"), mma_scratch("cuda")
    draft = torch.zeros(15, dtype=torch.int64, device="cuda")
    klen = torch.zeros(1, dtype=torch.int64, device="cuda")
    x_next = torch.zeros(h, device="cuda")
    return [
        ("qkv", q + 2 * kv, h, q + 2 * kv, lambda x, w, o: rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True),
         lambda x, w, o, c: rmsnorm_gemv_mma(x, w, o, norm, 1e-6, pdl=True, config=c)),
        ("o_proj", h, q, h, lambda a, w, x: gemv_residual(a, w, x, pdl=True),
         lambda a, w, x, c: gemv_residual_mma(a, w, x, pdl=True, config=c)),
        ("gate_up", 2 * i, h, i, lambda x, w, o: rmsnorm_gate_up_silu(x, norm, 1e-6, w, o, pdl=True),
         lambda x, w, o, c: rmsnorm_gate_up_silu_mma(x, norm, 1e-6, w, o, pdl=True, config=c)),
        ("down", h, i, h, lambda a, w, x: gemv_residual(a, w, x, pdl=True),
         lambda a, w, x, c: gemv_residual_mma(a, w, x, pdl=True, config=c)),
        ("lm_head", v, h, v, lambda x, w, o: lm_head_argmax(x, w, o, tok, pos, embed, s1, norm, 1e-6, pdl=True),
         lambda x, w, o, c: lm_head_argmax_mma(x, w, o, tok, pos, embed, s16, norm, 1e-6, draft=draft, klen=klen,
                                               x_next=x_next, pdl=True, config=c)),
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="qwen2.5-coder-1.5b")
    p.add_argument("--sweep", action="store_true", help="also other MMA launch configs at 1 and 8 columns")
    p.add_argument("--only", default="", help="comma-separated launches (default: all)")
    args = p.parse_args()
    shape = SHAPES[args.shape]
    print(f"\n{args.shape}, bf16, {torch.cuda.get_device_name()}: us per launch, cold weights")
    print("| launch | variant | us | GB/s | vs one-column |")
    print("|---|---|---:|---:|---:|")
    for name, n, k, out_n, one, mma in specs(shape):
        if args.only and name not in args.only.split(","):
            continue
        nbytes = n * k * 2
        ws = copies(lambda: torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, nbytes)
        x = torch.randn(k, device="cuda")
        o = torch.zeros(out_n, device="cuda")
        base = in_graph_us(lambda w: one(x, w, o), ws)

        def row(variant, us):
            print(f"| {name} | {variant} | {us:.1f} | {nbytes / us / 1e3:.0f} | {us / base:.2f}x |", flush=True)

        row("one-column Triton", base)
        configs = [None] + ([dict(BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=st, SPLIT_K=sk)
                             for bn, bk, nw, st, sk in SWEEP if name != "lm_head" or sk == 1] if args.sweep else [])
        default = mma_config(out_n if name == "gate_up" else n, k)
        for cfg in configs:
            if cfg == default:
                continue
            for kc in (WIDTHS if cfg is None and not args.sweep else (1, 8)):
                X = torch.randn(kc, k, device="cuda")
                O = torch.zeros(kc, out_n, device="cuda")
                c = default if cfg is None else cfg
                try:
                    us = in_graph_us(lambda w: mma(X, w, O, cfg), ws)
                except triton.runtime.errors.OutOfResources as e:  # a config too large for this GPU: say so, go on
                    print(f"| {name} | MMA n={kc} {tuple(c.values())} | {type(e).__name__}: shared memory | | |")
                    break
                row(f"MMA n={kc} ({c['BLOCK_N']}, {c['BLOCK_K']}, w{c['num_warps']}, s{c['num_stages']}"
                    f"{', split ' + str(c['SPLIT_K']) if c.get('SPLIT_K', 1) > 1 else ''})"
                    + (" default" if cfg is None else ""), us)
        del ws
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
