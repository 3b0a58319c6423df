"""Lab probe: the CUDA C FP8 GEMVs (kernels.fp8_cuda_gemv) per launch against the Triton FP8 kernels and the
bf16 kernels on the same weights' shapes, GPU only.

    python -m lab.probe_fp8_cuda [--shapes qwen2.5-coder-1.5b] [--quick]

For every layer weight of each shape (QKV, o_proj, gate/up, down): time per launch as the step runs them
(24 launches back to back in one CUDA graph over rotating weight copies so L2 never holds them, PDL on:
lab.bench_kernels.in_graph_us) of the CUDA FP8 kernel with the rule's config (fp8_cuda_gemv.config_for) and
a few other configs, the Triton FP8 kernel (its rule), the bf16 Triton kernel (this GPU's tuning row) and
the bf16 streamed CUDA kernel (kernels.stream_gemv, default budget; QKV, o_proj, gate/up), the streamed FP8
kernel (kernels.fp8_stream_gemv, "fp8 stream"); bytes read /
time and that as a share of the copy bandwidth. A table last. Not a test; the end-to-end number is
inference.bench --weights fp8,bf16.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

from inference.quant import quantize_fp8
from inference.synth import SHAPES
from kernels import stream_gemv
from kernels.fp8_cuda_gemv import (Config, config_for, fp8_cuda_gemv_residual, fp8_cuda_rmsnorm_gate_up_silu,
                                   fp8_cuda_rmsnorm_gemv)
from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu
from kernels.fp8_stream_gemv import Config as StreamConfig
from kernels.fp8_stream_gemv import (fp8_stream_gemv_residual, fp8_stream_rmsnorm_gate_up_silu,
                                     fp8_stream_rmsnorm_gemv)
from kernels.fp8_gemv_residual import fp8_gemv_residual
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_residual import gemv_residual
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.tuning import for_device
from lab.bench_kernels import copies, copy_bandwidth, in_graph_us

CANDIDATES = {  # other CUDA configs tried per kind (the rule's first)
    "gemv": [Config(R=1, WK=1, NW=8), Config(R=2, WK=2, NW=8), Config(R=4, WK=1, NW=4), Config(R=2, WK=1, NW=8)],
    "residual": [Config(R=2, WK=2, NW=8), Config(R=1, WK=4, NW=8), Config(R=2, WK=8, NW=8, U=2),
                 Config(R=4, WK=4, NW=8, U=2),
                 # more CTAs for down's few rows (the rule's 192 leave most H100/H200 SMs one CTA), deeper batches
                 Config(R=1, WK=2, NW=8, cvt=True), Config(R=1, WK=2, NW=4, cvt=True),
                 Config(R=2, WK=2, NW=8, U=8, cvt=True)],
    "gate_up": [Config(R=2, WK=1, NW=8, early=True), Config(R=1, WK=1, NW=4, early=True),
                Config(R=1, WK=2, NW=8, early=True), Config(R=1, WK=1, NW=8),
                Config(R=2, WK=1, NW=8, early=True, cvt=True)],
}


def weights_of(shape):
    """(name, kind, N, K) of each layer GEMV of a synth shape (gate/up: N = 2I), the most bytes first."""
    h, i = shape.hidden_size, shape.intermediate_size
    d = shape.head_dim or h // shape.num_heads
    q, kv = shape.num_heads * d, shape.num_kv_heads * d
    return [("gate_up", "gate_up", 2 * i, h), ("down", "residual", h, i), ("qkv", "gemv", q + 2 * kv, h),
            ("o", "residual", h, q)]


def launchers(kind, n, k, quick=False):
    """{label: fn(weight)} for the kernels compared on an [n, k] weight of `kind` (quick: of the CUDA configs
    only the rule's, with integer and with cvt unpacking)."""
    x = torch.randn(k, device="cuda")
    nw = torch.ones(k, device="cuda", dtype=torch.bfloat16)
    units = n // 2 if kind == "gate_up" else n
    out = torch.zeros(units, device="cuda")
    tuning = for_device("cuda")
    rule = config_for(kind, units, k)
    fns = {}
    for cfg in [rule, replace(rule, cvt=True)] + ([] if quick else [c for c in CANDIDATES[kind] if c != rule]):
        tag = (f"cuda R{cfg.R} WK{cfg.WK} w{cfg.NW} U{cfg.U}{' early' if cfg.early else ''}{' cvt' if cfg.cvt else ''}"
               f"{' (rule)' if cfg == rule else ''}")
        if kind == "gate_up":
            fns[tag] = lambda w, c=cfg: fp8_cuda_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out,
                                                                       pdl=True, config=c)
        elif kind == "residual":
            fns[tag] = lambda w, c=cfg: fp8_cuda_gemv_residual(x, w.q, w.scale, w.offset, out, pdl=True, config=c)
        else:
            fns[tag] = lambda w, c=cfg: fp8_cuda_rmsnorm_gemv(x, w.q, w.scale, w.offset, out, norm_w=nw, pdl=True,
                                                              config=c)
    if kind == "gate_up":
        fns["fp8 stream"] = lambda w: fp8_stream_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out,
                                                                      pdl=True)
        fns["triton fp8"] = lambda w: fp8_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out, pdl=True)
        fns["bf16 triton"] = lambda w: rmsnorm_gate_up_silu(x, nw, 1e-6, w, out, pdl=True, tuning=tuning)
        fns["bf16 stream"] = lambda w: stream_gemv.stream_gate_up_silu(x, nw, 1e-6, w, out, pdl=True)
    elif kind == "residual":
        fns["fp8 stream"] = lambda w: fp8_stream_gemv_residual(x, w.q, w.scale, w.offset, out, pdl=True)
        if not quick:  # other warps per row pair than the plan's
            for wks in (1, 2, 8):
                fns[f"fp8 stream wks{wks}"] = lambda w, v=wks: fp8_stream_gemv_residual(
                    x, w.q, w.scale, w.offset, out, pdl=True, config=StreamConfig(wks=v))
        fns["triton fp8"] = lambda w: fp8_gemv_residual(x, w.q, w.scale, w.offset, out, pdl=True)
        fns["bf16 triton"] = lambda w: gemv_residual(x, w, out, pdl=True, tuning=tuning)
        if k < 4096:
            fns["bf16 stream"] = lambda w: stream_gemv.stream_gemv_residual(x, w, out, pdl=True)
    else:
        fns["fp8 stream"] = lambda w: fp8_stream_rmsnorm_gemv(x, w.q, w.scale, w.offset, out, norm_w=nw, pdl=True)
        fns["triton fp8"] = lambda w: fp8_rmsnorm_gemv(x, w.q, w.scale, w.offset, out, norm_w=nw, pdl=True)
        fns["bf16 triton"] = lambda w: rmsnorm_gemv(x, w, out, norm_w=nw, pdl=True, tuning=tuning)
        fns["bf16 stream"] = lambda w: stream_gemv.stream_rmsnorm_gemv(x, w, out, norm_w=nw, pdl=True)
    return fns


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="qwen2.5-coder-1.5b")
    p.add_argument("--quick", action="store_true", help="the CUDA rule's config only, and with cvt unpacking")
    args = p.parse_args(argv)
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw:.0f} GB/s", flush=True)
    rows = []
    for name in args.shapes.split(","):
        for wname, kind, n, k in weights_of(SHAPES[name]):
            fp8_bytes = n * k + 8 * n * (k // 32)  # e4m3 + float32 scale and offset per 32
            bf16_bytes = 2 * n * k
            fp8_ws = copies(lambda: quantize_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02),
                            fp8_bytes)
            bf16_ws = copies(lambda: torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, bf16_bytes)
            best_cuda = None
            for label, fn in launchers(kind, n, k, args.quick).items():
                bf16 = label.startswith("bf16")
                nbytes = bf16_bytes if bf16 else fp8_bytes
                try:
                    us = in_graph_us(fn, bf16_ws if bf16 else fp8_ws)
                except Exception as e:  # a config that does not compile or launch: say so, go on
                    print(f"  {name} {wname} [{n}, {k}] {label}: failed: {type(e).__name__}: {e}"[:300], flush=True)
                    continue
                share = 100 * nbytes / us / 1e3 / bw
                print(f"  {name} {wname} [{n}, {k}] {label}: {us:7.2f} us {nbytes / us / 1e3:6.0f} GB/s ({share:.0f}%)",
                      flush=True)
                rows.append((name, wname, label, us, share))
                if label.startswith("cuda") and (best_cuda is None or us < best_cuda[0]):
                    best_cuda = (us, label)
            if best_cuda:
                print(f"best cuda {name} {wname}: {best_cuda[1]} {best_cuda[0]:.2f} us", flush=True)
            del fp8_ws, bf16_ws
            torch.cuda.empty_cache()
    print("\n| shape | weight | kernel | us/launch | % copy bw |")
    print("|---|---|---|---:|---:|")
    for name, wname, label, us, share in rows:
        print(f"| {name} | {wname} | {label} | {us:.2f} | {share:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
