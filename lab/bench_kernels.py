"""Micro-benchmark of the decode kernels at the Qwen2.5-Coder-1.5B shapes (GPU only).

    python -m lab.bench_kernels [--layers 28] [--no-cublas]

Prints, per kernel: shape, time per launch measured the way the decode step runs them — 24
launches back to back in one CUDA graph over rotating weight copies (so L2 never holds the
weights), median of do_bench over graph replays — bytes moved / time, and that as a share of the
device-to-device copy bandwidth measured in the same run. (Timing single launches instead
measures Python launch overhead for these few-microsecond kernels.) Then cuBLAS (torch `W @ x`, bf16) on the same GEMV shapes, attention at three context
lengths, and a whole decode step (all layers + LM head) captured in one CUDA graph, with and
without PDL. The short summary table is printed last.

Not a test (see tests/kernels) and not the end-to-end tokens/s benchmark (see inference/bench.py).
"""

import argparse
import math
from dataclasses import replace

import torch
import triton

from kernels.decode_attention import AttentionWorkspace, decode_attention, default_num_splits, rope_tables
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_residual import gemv_residual
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.tuning import for_device

H, HQ, HKV, D, I, V = 1536, 12, 2, 128, 8960, 151936  # Qwen2.5-Coder-1.5B
L2_BYTES = 60 * 2**20
BF = torch.bfloat16


def bench(fn, rep_ms=200) -> float:
    """Median microseconds of fn() (do_bench clears L2 between runs)."""
    return triton.testing.do_bench(fn, warmup=50, rep=rep_ms, return_mode="median") * 1e3


def graph_us(fn, per: int = 1) -> float:
    """Microseconds of fn() captured in one CUDA graph (run once first: compiles outside the capture),
    divided by `per` (the launches fn makes)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return bench(g.replay, rep_ms=100) / per


def in_graph_us(fn, items, launches: int = 24) -> float:
    """Microseconds per launch of fn(item), `launches` back to back in one CUDA graph."""
    def all_launches():
        for i in range(launches):
            fn(items[i % len(items)])
    return graph_us(all_launches, launches)


def copies(make, nbytes: int) -> list:
    """Enough independent copies of a weight set that cycling through them overflows L2 (3x)."""
    return [make() for _ in range(max(2, min(16, math.ceil(3 * L2_BYTES / nbytes))))]


def copy_bandwidth() -> float:
    """GB/s of a 4 GB device-to-device copy, counting bytes read + written."""
    src = torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = bench(lambda: dst.copy_(src))
    return 2 * src.numel() / us / 1e3


def gemv_rows(cublas: bool):
    """(name, shape, bytes, us) for each fused GEMV, plus a cuBLAS row each when asked."""
    x = torch.randn(H, device="cuda")
    xi = torch.randn(I, device="cuda")
    rows = []

    def add(name, shape, nbytes, fn, items):
        rows.append((name, shape, nbytes, in_graph_us(fn, items), ""))

    # QKV with fused input norm + bias
    n = (HQ + 2 * HKV) * D
    nb = n * H * 2
    ws = copies(lambda: (torch.randn(n, H, device="cuda", dtype=BF), torch.randn(H, device="cuda", dtype=BF),
                         torch.randn(n, device="cuda", dtype=BF)), nb)
    out = torch.empty(n, device="cuda")
    for pdl in (False, True):
        add(f"rmsnorm_gemv qkv{' pdl' if pdl else ''}", f"{n}x{H}", nb,
            lambda w, pdl=pdl: rmsnorm_gemv(x, w[0], out, norm_w=w[1], bias=w[2], pdl=pdl), ws)
    # o_proj and down_proj with residual
    for name, nn, kk, a in (("gemv_residual o_proj", H, HQ * D, x), ("gemv_residual down", H, I, xi)):
        nb = nn * kk * 2
        ws = copies(lambda nn=nn, kk=kk: torch.randn(nn, kk, device="cuda", dtype=BF), nb)
        res = torch.zeros(nn, device="cuda")
        act = a[:kk].contiguous() if a.numel() >= kk else torch.randn(kk, device="cuda")
        add(name, f"{nn}x{kk}", nb, lambda w, act=act, res=res: gemv_residual(act, w, res), ws)
    # gate/up + SiLU
    nb = 2 * I * H * 2
    ws = copies(lambda: torch.randn(2 * I, H, device="cuda", dtype=BF), nb)
    nw = torch.randn(H, device="cuda", dtype=BF)
    h = torch.empty(I, device="cuda")
    add("gate_up_silu", f"{2 * I}x{H}", nb, lambda w: rmsnorm_gate_up_silu(x, nw, 1e-6, w, h), ws)
    # LM head with final norm
    nb = V * H * 2
    ws = copies(lambda: torch.randn(V, H, device="cuda", dtype=BF), nb)
    logits = torch.empty(V, device="cuda")
    add("rmsnorm_gemv lm_head", f"{V}x{H}", nb, lambda w: rmsnorm_gemv(x, w, logits, norm_w=nw), ws)

    if cublas:
        xb = torch.randn(max(H, I), device="cuda", dtype=BF)
        for name, nn, kk in (("cublas qkv", (HQ + 2 * HKV) * D, H), ("cublas o_proj", H, HQ * D),
                             ("cublas gate_up", 2 * I, H), ("cublas down", H, I), ("cublas lm_head", V, H)):
            nb = nn * kk * 2
            ws = copies(lambda nn=nn, kk=kk: torch.randn(nn, kk, device="cuda", dtype=BF), nb)
            o = torch.empty(nn, device="cuda", dtype=BF)
            xk = xb[:kk]
            add(name, f"{nn}x{kk}", nb, lambda w, o=o, xk=xk: torch.mv(w, xk, out=o), ws)
    return rows


def attention_rows():
    """decode_attention (one launch: partials + in-launch combine) at the Qwen2.5-Coder-1.5B layout
    (Hq=12, Hkv=2) and the Qwen3-1.7B one (Hq=16, Hkv=8), 12 launches per graph over rotating caches."""
    rows = []
    for name, hq, hkv, ctxs in (("", HQ, HKV, (512, 4096, 16384)), (" q3 16/8", 16, 8, (512, 16384))):
        qkv = torch.randn((hq + 2 * hkv) * D, device="cuda")
        out = torch.empty(hq * D, device="cuda")
        ws = AttentionWorkspace(hq, D, default_num_splits(hkv, "cuda"), "cuda")
        for ctx in ctxs:
            t_max = ctx + 1
            cos, sin = rope_tables(t_max, D, device="cuda")
            nb = 2 * hkv * ctx * D * 2
            caches = copies(lambda: (torch.randn(hkv, t_max, D, device="cuda", dtype=BF),
                                     torch.randn(hkv, t_max, D, device="cuda", dtype=BF)), nb)
            pos = torch.tensor([ctx], dtype=torch.int32, device="cuda")
            for pdl in (False, True):
                us = in_graph_us(lambda kv, cos=cos, sin=sin, pdl=pdl: decode_attention(
                    qkv, pos, kv[0], kv[1], cos, sin, out, ws, 1 / math.sqrt(D), pdl=pdl), caches, launches=12)
                rows.append((f"decode_attention{name}{' pdl' if pdl else ''}", f"ctx {ctx}", nb, us, ""))
            del caches
    return rows


# hidden, q heads, kv heads, head dim, intermediate, vocab, layers
SHAPES = {
    "qwen2.5-coder-1.5b": (1536, 12, 2, 128, 8960, 151936, 28),
    "qwen2.5-coder-3b": (2048, 16, 2, 128, 11008, 151936, 36),
    "qwen3-1.7b": (2048, 16, 8, 128, 6144, 151936, 28),
}


class Step:
    """Random weights of one model shape and its decode step (all layers + LM head, no sampler), as a
    callable to capture in a CUDA graph; `time_us` times that graph with given GEMV launch-config overrides
    (the tuning row's gemv_overrides, replaced)."""

    def __init__(self, shape: str, ctx: int, num_layers: int | None = None, pdl: bool = True):
        h, hq, hkv, d, i, v, n_layers = SHAPES[shape]
        n_layers = num_layers or n_layers
        self.pdl = pdl
        self.tuning = for_device("cuda")
        self.keys = {"qkv": ((hq + 2 * hkv) * d, h), "o_proj": (h, hq * d), "gate_up": (i, h), "down": (h, i),
                     "lm_head": (v, h)}
        qn = (hq + 2 * hkv) * d

        def r(*s, scale=1.0):
            return torch.randn(*s, device="cuda", dtype=torch.bfloat16) * scale

        self.layers = [dict(an=r(h), qkv=r(qn, h, scale=.02), b=r(qn), o=r(h, hq * d, scale=.02), mn=r(h),
                            gu=r(2 * i, h, scale=.02), dn=r(h, i, scale=.02)) for _ in range(n_layers)]
        self.lm, self.nw = r(v, h, scale=.02), r(h)
        t_max = ctx + 64
        self.k = torch.randn(n_layers, hkv, t_max, d, device="cuda", dtype=torch.bfloat16)
        self.v = torch.randn_like(self.k)
        self.cos, self.sin = rope_tables(t_max, d, device="cuda")
        self.pos = torch.tensor([ctx], dtype=torch.int32, device="cuda")
        self.x0, self.x = torch.randn(h, device="cuda"), torch.empty(h, device="cuda")
        self.qkv, self.attn = torch.empty(qn, device="cuda"), torch.empty(hq * d, device="cuda")
        self.h, self.logits = torch.empty(i, device="cuda"), torch.empty(v, device="cuda")
        self.ws = AttentionWorkspace(hq, d, default_num_splits(hkv, "cuda"), "cuda")
        self.scale = 1 / math.sqrt(d)
        self.bytes = (sum(t.numel() * 2 for lw in self.layers for t in lw.values()) + self.lm.numel() * 2
                      + 2 * n_layers * hkv * (ctx + 1) * d * 2)

    def __call__(self):
        x = self.x
        x.copy_(self.x0)
        for i, lw in enumerate(self.layers):
            t = self.tuning
            rmsnorm_gemv(x, lw["qkv"], self.qkv, norm_w=lw["an"], bias=lw["b"], pdl=self.pdl, tuning=t)
            decode_attention(self.qkv, self.pos, self.k[i], self.v[i], self.cos, self.sin, self.attn, self.ws,
                             self.scale, pdl=self.pdl)
            gemv_residual(self.attn, lw["o"], x, pdl=self.pdl, tuning=t)
            rmsnorm_gate_up_silu(x, lw["mn"], 1e-6, lw["gu"], self.h, pdl=self.pdl, tuning=t)
            gemv_residual(self.h, lw["dn"], x, pdl=self.pdl, tuning=t)
        rmsnorm_gemv(x, self.lm, self.logits, norm_w=self.nw, pdl=self.pdl, tuning=self.tuning)

    def time_us(self, tuned: dict | None = None) -> float:
        """Best of two do_bench medians of the step's graph, with exactly these launch-config overrides,
        {(N, K): [(BLOCK_N, BLOCK_K, warps, stages)]} (None: the device's tuning row as shipped)."""
        shipped = self.tuning
        if tuned is not None:
            self.tuning = replace(shipped, gemv_overrides=tuple((key, cfgs[0]) for key, cfgs in tuned.items()))
        try:
            self()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self()
            return min(bench(g.replay, rep_ms=300) for _ in range(2))
        finally:
            self.tuning = shipped


def decode_step_rows(num_layers: int, ctx: int = 512):
    """A whole decode step (all layers + LM head), one CUDA graph, cold weights, PDL off / on."""
    rows = []
    for pdl in (False, True):
        step = Step("qwen2.5-coder-1.5b", ctx, num_layers, pdl=pdl)
        us = step.time_us()
        rows.append((f"decode step graph{' pdl' if pdl else ''}", f"{num_layers}L ctx {ctx}", step.bytes, us,
                     f" -> {1e6 / us:.0f} tok/s"))
        del step
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--no-cublas", action="store_true")
    args = ap.parse_args()
    assert torch.cuda.is_available(), "bench_kernels needs a CUDA GPU"
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    bw = copy_bandwidth()
    print(f"copy bandwidth (read+write): {bw:.0f} GB/s", flush=True)
    rows = gemv_rows(not args.no_cublas)
    rows += attention_rows()
    rows += decode_step_rows(args.layers)
    print()
    print(f"{'kernel':<30}{'shape':>16}{'us':>10}{'GB/s':>9}{'% copy':>8}")
    for name, shape, nb, us, note in rows:
        gbs = nb / us / 1e3
        extra = note if note.startswith(" ->") else ""
        print(f"{name:<30}{shape:>16}{us:>10.2f}{gbs:>9.0f}{100 * gbs / bw:>7.0f}%{extra}")


if __name__ == "__main__":
    main()
