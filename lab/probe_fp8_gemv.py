"""Lab probe: the FP8 GEMV kernels' launch configs at the model shapes, GPU only.

    python -m lab.probe_fp8_gemv [--shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b] [--quick]

For every weight of each shape (QKV, o_proj, gate/up, down, LM head) and every candidate config:
time per launch as the step runs them (24 launches back to back in one CUDA graph over rotating weight
copies so L2 never holds them, PDL on: lab.bench_kernels.in_graph_us), bytes read / time and that
as a share of the copy bandwidth, and the rule's own config (kernels._fp8.fp8_config). Prints the best per
weight last. Not a test; the end-to-end number is inference.bench --weights fp8,bf16.
"""

from __future__ import annotations

import argparse
import sys

import torch

from inference.quant import quantize_fp8  # noqa: E402
from inference.synth import SHAPES  # noqa: E402
from kernels._fp8 import fp8_config  # noqa: E402
from lab.bench_kernels import copies, copy_bandwidth, in_graph_us  # noqa: E402
from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu  # noqa: E402
from kernels.fp8_gemv_residual import fp8_gemv_residual  # noqa: E402
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv  # noqa: E402

CANDIDATES = {  # (BLOCK_N, BLOCK_K in e4m3 elements, num_warps)
    "gemv": [(4, 1024, 4), (2, 1024, 4), (4, 512, 4), (8, 512, 4), (4, 2048, 8), (8, 1024, 8), (16, 512, 8)],
    "residual": [(4, 1024, 4), (4, 2048, 8), (2, 2048, 8), (8, 1024, 8), (4, 4096, 8), (2, 1024, 4), (8, 512, 4)],
    "gate_up": [(16, 512, 8), (8, 512, 4), (8, 1024, 8), (16, 256, 8), (4, 1024, 4), (32, 256, 8)],
    "head": [(32, 256, 4), (16, 512, 4), (32, 512, 8), (64, 128, 4), (8, 1024, 4), (16, 1024, 8)],
}


def weights_of(shape):
    """(name, kind, N, K) of each GEMV of a synth shape."""
    h, i = shape.hidden_size, shape.intermediate_size
    d = shape.head_dim or h // shape.num_heads
    q, kv = shape.num_heads * d, shape.num_kv_heads * d
    return [("qkv", "gemv", q + 2 * kv, h), ("o", "residual", h, q), ("gate_up", "gate_up", 2 * i, h),
            ("down", "residual", h, i), ("lm_head", "head", shape.vocab_size, h)]


def launcher(kind, n, k, cfg):
    x = torch.randn(k, device="cuda")
    nw = torch.ones(k, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(n // 2 if kind == "gate_up" else n, device="cuda")
    if kind == "gate_up":
        return lambda w: fp8_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out, pdl=True, config=cfg)
    if kind == "residual":
        return lambda w: fp8_gemv_residual(x, w.q, w.scale, w.offset, out, pdl=True, config=cfg)
    return lambda w: fp8_rmsnorm_gemv(x, w.q, w.scale, w.offset, out, norm_w=nw, pdl=True, config=cfg)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b")
    p.add_argument("--quick", action="store_true", help="the first 3 candidates per kind only")
    args = p.parse_args(argv)
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw:.0f} GB/s")
    seen = set()
    for name in args.shapes.split(","):
        for wname, kind, n, k in weights_of(SHAPES[name]):
            key = ("gemv" if kind == "head" else kind, n // 2 if kind == "gate_up" else n, k)
            if key in seen:
                continue
            seen.add(key)
            nbytes = n * k + 8 * n * (k // 32)  # e4m3 + float32 scale and offset per 32
            ws = copies(lambda: quantize_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02), nbytes)
            rule = fp8_config("gemv" if kind == "head" else kind, n // 2 if kind == "gate_up" else n, k)
            rule = (rule["BLOCK_N"], rule["BLOCK_K"], rule["num_warps"])
            results = []
            for bn, bk, nw in [rule] + [c for c in CANDIDATES[kind][:3 if args.quick else None] if c != rule]:
                if bk > 4 * k:
                    continue
                cfg = {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": nw}
                us = in_graph_us(launcher(kind, n, k, cfg), ws)
                results.append((us, bn, bk, nw))
                print(f"  {name} {wname} [{n}, {k}] BN={bn} BK={bk} w{nw}{' (rule)' if (bn, bk, nw) == rule else ''}: "
                      f"{us:7.2f} us {nbytes / us / 1e3:6.0f} GB/s ({100 * nbytes / us / 1e3 / bw:.0f}%)", flush=True)
            us, bn, bk, nw = min(results)
            print(f"best {name} {wname} [{n}, {k}]: BN={bn} BK={bk} w{nw} {us:.2f} us "
                  f"({100 * nbytes / us / 1e3 / bw:.0f}% of copy bw); rule {results[0][0]:.2f} us", flush=True)
            del ws
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
