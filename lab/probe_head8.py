"""Lab probe: the greedy LM head launch (final norm + LM head + argmax + feed) per weight format, GPU only.

    python -m lab.probe_head8 [--shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b] [--configs]
                              [--formats bf16,e4m3,int8,cuda] [--cuda "R,WK,NW,U;R,WK,NW,U"]

For each shape's vocabulary x hidden: kernels.lm_head_argmax on the bf16 head (the tuning row's config),
kernels.fp8_lm_head_argmax on an e4m3 head (scale + offset per 32, 1.25 bytes a weight) and on an int8 head
(inference.quant.Int8Weight: a float16 scale per 32, 1.0625 bytes), and kernels.fp8_cuda_gemv's
fp8_cuda_lm_head_argmax on the int8 head (CUDA C logits, then the Triton argmax launch: the FP8 engine's
head beside the CUDA FP8 GEMVs), each timed as the step runs it (24
launches back to back in one CUDA graph over rotating weight copies so L2 never holds them, PDL on:
lab.bench_kernels.in_graph_us), with bytes read / time as a share of the copy bandwidth. --configs also
times the 8-bit heads at other launch configs (Triton: BLOCK_N, BLOCK_K, num_warps; CUDA: kernels.fp8_cuda_gemv
Config R, WK, NW, U; --cuda names them instead). --formats picks the rows: bf16, e4m3 and int8 (Triton), cuda
(the int8 head in CUDA C). Not a test; the end-to-end
number is inference.bench --weights fp8,bf16.
"""

from __future__ import annotations

import argparse
import sys

import torch

from inference.quant import quantize_fp8, quantize_int8
from inference.synth import SHAPES
from kernels._fp8 import fp8_config
from kernels.fp8_cuda_gemv import Config, config_for, fp8_cuda_lm_head_argmax
from kernels.fp8_lm_head_argmax import fp8_lm_head_argmax
from kernels.lm_head_argmax import argmax_scratch, lm_head_argmax
from kernels.lm_head_mma_cols import mma_scratch
from lab.bench_kernels import copies, copy_bandwidth, in_graph_us

CONFIGS = [(16, 512, 4), (8, 512, 4), (32, 256, 4), (16, 1024, 8), (32, 512, 8), (8, 1024, 4)]
CUDA_CONFIGS = [Config(R=2, NW=8, U=4), Config(R=4, NW=8, U=2), Config(R=1, NW=16, U=4), Config(R=2, NW=16, U=2),
                Config(R=4, NW=16, U=2), Config(R=2, NW=32, U=4)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b")
    p.add_argument("--configs", action="store_true", help="other launch configs for the 8-bit heads")
    p.add_argument("--formats", default="bf16,e4m3,int8,cuda")
    p.add_argument("--cuda", default=None, help='CUDA configs "R,WK,NW,U;..." (default: the rule, with --configs more)')
    args = p.parse_args(argv)
    formats_on = set(args.formats.split(","))
    cuda_configs = [Config(*map(int, c.split(","))) for c in args.cuda.split(";")] if args.cuda else None
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw:.0f} GB/s")
    rows = []
    for name in args.shapes.split(","):
        n, k = SHAPES[name].vocab_size, SHAPES[name].hidden_size
        x, nw = torch.randn(k, device="cuda"), torch.ones(k, device="cuda", dtype=torch.bfloat16)
        embed = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        logits, scratch = torch.empty(n, device="cuda"), argmax_scratch("cuda")
        token, pos = torch.zeros(1, dtype=torch.int64, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")

        def dense():
            return torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02

        mscratch = mma_scratch("cuda")
        formats = [("bf16", lambda: dense(), 2 * n * k),
                   ("e4m3", lambda: quantize_fp8(dense()), n * k + 8 * n * (k // 32)),
                   ("int8", lambda: quantize_int8(dense()), n * k + 2 * n * (k // 32))]
        for fmt, make, nbytes in formats:
            if fmt not in formats_on and not (fmt == "int8" and "cuda" in formats_on):
                continue
            ws = copies(make, nbytes)
            configs = []
            if fmt == "bf16":
                configs = [None]
            elif fmt in formats_on:
                rule = fp8_config("gemv", n, k)
                rule = (rule["BLOCK_N"], rule["BLOCK_K"], rule["num_warps"])
                configs = [rule] + ([c for c in CONFIGS if c != rule] if args.configs else [])
            if fmt == "int8" and "cuda" in formats_on:
                head = config_for("head", n, k)
                more = cuda_configs if cuda_configs else CUDA_CONFIGS if args.configs else []
                configs += [head] + [c for c in more if c != head]
            for c in configs:
                if c is None:
                    def launch(w):
                        lm_head_argmax(x, w, logits, token, pos, embed, scratch, norm_w=nw, pdl=True)
                    label = fmt
                elif isinstance(c, Config):
                    def launch(w, cfg=c):
                        fp8_cuda_lm_head_argmax(x, w.q, w.scale, w.offset, logits, token, pos, embed, mscratch,
                                                norm_w=nw, pdl=True, config=cfg)
                    label = f"{fmt} cuda R={c.R} WK={c.WK} NW={c.NW} U={c.U}"
                else:
                    cfg = {"BLOCK_N": c[0], "BLOCK_K": c[1], "num_warps": c[2]}

                    def launch(w, cfg=cfg):
                        fp8_lm_head_argmax(x, w.q, w.scale, w.offset, logits, token, pos, embed, scratch, norm_w=nw,
                                           pdl=True, config=cfg)
                    label = f"{fmt} BN={c[0]} BK={c[1]} w{c[2]}"
                us = in_graph_us(launch, ws)
                share = 100 * nbytes / us / 1e3 / bw
                rows.append((name, label, us, nbytes, share))
                print(f"  {name} [{n}, {k}] {label}: {us:7.2f} us {nbytes / 1e6:6.1f} MB {share:3.0f}% of copy bw",
                      flush=True)
            del ws
            torch.cuda.empty_cache()
    print("\n| shape | head | us | MB | copy bw |\n|---|---|---:|---:|---:|")
    for name, label, us, nbytes, share in rows:
        print(f"| {name} | {label} | {us:.1f} | {nbytes / 1e6:.1f} | {share:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
