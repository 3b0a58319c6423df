"""Lab probe: the streamed GEMVs (kernels.stream_gemv) over several tokens a launch, GPU only.

    python -m lab.probe_stream_tokens [--tokens 1,2,4,8] [--budget 65536] [--only "down ring"] [--ring-budgets 225280]

For the 1.5B shape's QKV, o_proj, gate/up, down_proj (staged, and its activation fed through the ring at a few
budgets) and the LM head's logits (on CUDA cores and on tensor cores): us per launch of the streamed kernel at 1..8 tokens (every token
its one-token launch's bits), against the Triton column twins a verify step runs today
(kernels/{rmsnorm_gemv,gemv_residual,gate_up_silu}_cols.py at the tuning row's verify_group) and the one-token
Triton kernel; 24 launches back to back in one CUDA graph over rotating weight copies (lab.bench_kernels.in_graph_us),
PDL on ("nan": more tokens than a CTA's shared memory stages). The question: can a verify step's layer GEMVs cost
about a plain step's (issue 25's 1.25x)? Not a test.
"""
from __future__ import annotations

import argparse

import torch

from kernels import stream_gemv as sg
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gate_up_silu_cols import rmsnorm_gate_up_silu_cols
from kernels.gemv_residual import gemv_residual
from kernels.gemv_residual_cols import gemv_residual_cols
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.rmsnorm_gemv_cols import rmsnorm_gemv_cols
from kernels.tuning import for_device
from lab.bench_kernels import copies, in_graph_us

H, I, QKV, V = 1536, 8960, 2048, 151936  # the 1.5B shape: hidden, intermediate, QKV rows (o_proj's K is H), vocab
DOWN_BUDGET = 200 << 10  # kernels.tuning's fused_down_budget: the ring a streamed down_proj gets
RING_BUDGETS = (64 << 10, 100 << 10, 200 << 10)  # down_proj's ring-fed activation ("residual_ring")


def launches(budget: int, ring_budgets=RING_BUDGETS):
    """(name, W rows, K, output rows, streamed(x, w, o), Triton cols(x, w, o), Triton one-token(x, w, o))."""
    norm = torch.rand(H, device="cuda", dtype=torch.bfloat16)
    bias = torch.rand(QKV, device="cuda", dtype=torch.bfloat16)
    group = for_device("cuda").verify_group
    return [
        ("qkv", QKV, H, QKV,
         lambda x, w, o: sg.stream_rmsnorm_gemv(x, w, o, norm, 1e-6, bias, pdl=True, budget=budget),
         lambda x, w, o: rmsnorm_gemv_cols(x, w, o, norm, 1e-6, bias, pdl=True, group=group),
         lambda x, w, o: rmsnorm_gemv(x, w, o, norm, 1e-6, bias, pdl=True)),
        ("o_proj", H, H, H,
         lambda a, w, x: sg.stream_gemv_residual(a, w, x, pdl=True, budget=budget),
         lambda a, w, x: gemv_residual_cols(a, w, x, pdl=True, group=group),
         lambda a, w, x: gemv_residual(a, w, x, pdl=True)),
        ("gate_up", 2 * I, H, I,
         lambda x, w, o: sg.stream_gate_up_silu(x, norm, 1e-6, w, o, pdl=True, budget=budget),
         lambda x, w, o: rmsnorm_gate_up_silu_cols(x, norm, 1e-6, w, o, pdl=True, group=group),
         lambda x, w, o: rmsnorm_gate_up_silu(x, norm, 1e-6, w, o, pdl=True)),
        ("down", H, I, H,
         lambda a, w, x: sg.stream_gemv_residual(a, w, x, pdl=True, budget=DOWN_BUDGET),
         lambda a, w, x: gemv_residual_cols(a, w, x, pdl=True, group=group),
         lambda a, w, x: gemv_residual(a, w, x, pdl=True)),
    ] + [  # down_proj with its activation fed through the ring, at several ring budgets
        (f"down ring {b >> 10} KB", H, I, H,
         lambda a, w, x, b=b: sg.stream_gemv_residual(a, w, x, pdl=True, budget=b, ring=True),
         lambda a, w, x: gemv_residual_cols(a, w, x, pdl=True, group=group),
         lambda a, w, x: gemv_residual(a, w, x, pdl=True)) for b in ring_budgets] + [  # the LM head's logits
        (f"lm_head{' mma' if mma else ''}", V, H, V,
         lambda x, w, o, mma=mma: sg.stream_rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True, mma=mma),
         lambda x, w, o: rmsnorm_gemv_cols(x, w, o, norm, 1e-6, pdl=True, group=group),
         lambda x, w, o: rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True)) for mma in (False, True)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,2,4,8", help="tokens a launch, comma-separated")
    ap.add_argument("--budget", type=int, default=None, help="the streamed kernels' shared-memory budget, bytes "
                    "(default: kernels.stream_gemv.SMEM_BUDGET)")
    ap.add_argument("--only", default="", help="only the GEMVs whose name starts with one of these (comma-separated)")
    ap.add_argument("--ring-budgets", default=",".join(str(b) for b in RING_BUDGETS),
                    help="down_proj's ring-fed budgets, bytes, comma-separated")
    args = ap.parse_args()
    counts = [int(t) for t in args.tokens.split(",")]
    print(f"{torch.cuda.get_device_name()}: us per launch, 1.5B shape, 24 launches a graph over cold weights")
    print("| GEMV | MB | tokens | streamed | Triton cols | Triton one-token | streamed / its 1 token |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rows, k, n, streamed, cols, one in launches(args.budget, [int(b) for b in args.ring_budgets.split(",")]):
        if not name.startswith(tuple(args.only.split(","))):
            continue
        ws = copies(lambda: torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) * 0.05, rows * k * 2)
        base = None
        for t in counts:
            x = torch.randn(t, k, device="cuda")
            outs = [torch.zeros(t, n, device="cuda") for _ in ws]
            items = list(zip(ws, outs))
            try:
                s = in_graph_us(lambda it: streamed(x if t > 1 else x[0], it[0], it[1] if t > 1 else it[1][0]), items)
            except AssertionError:  # more tokens than one CTA's shared memory stages (down_proj past 2)
                s = float("nan")
            c = in_graph_us(lambda it: cols(x, it[0], it[1]), items)
            o = in_graph_us(lambda it: one(x[0], it[0], it[1][0]), items) if t == 1 else float("nan")
            base = s if t == 1 else base
            print(f"| {name} | {rows * k * 2 / 2**20:.1f} | {t} | {s:.2f} | {c:.2f} | {o:.2f} | "
                  f"{s / base if base else float('nan'):.2f} |", flush=True)


if __name__ == "__main__":
    main()
