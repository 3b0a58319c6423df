"""Sweep of the GEMV launch configs inside a whole decode step (GPU only).

    python -m kernels.sweep_gemv [--shape qwen2.5-coder-1.5b] [--context 512]

Builds the decode step of a model shape from random weights (all layers: fused-norm QKV, decode
attention, o_proj, gate/up + SiLU, down_proj, then the LM head), captures it in one CUDA graph
with PDL and times replays. Then, for each GEMV (qkv, o_proj, gate_up, down, LM head), it varies
that kernel's (BLOCK_N, BLOCK_K, num_warps) alone through the `TUNED` override table and keeps
the best; finally it times the rule, the shipped configs (rule + TUNED) and all bests combined,
alternating three times. The rules in `_util.gemv_config` / `gate_up_config` and the TUNED
entries came from this sweep; rerun it when a kernel changes.

Why in the step and not per kernel: these kernels run 2-20 us, and how a config does depends on
its neighbours (PDL lets the next kernel's programs start while this one's tail still holds SMs).
"""

import argparse
import math
import statistics

import torch
import triton

from kernels import _util
from kernels.bench_kernels import bench, copy_bandwidth
from kernels.decode_attention import AttentionWorkspace, decode_attention, default_num_splits, rope_tables
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_residual import gemv_residual
from kernels.rmsnorm_gemv import rmsnorm_gemv

# hidden, q heads, kv heads, head dim, intermediate, vocab, layers
SHAPES = {
    "qwen2.5-coder-1.5b": (1536, 12, 2, 128, 8960, 151936, 28),
    "qwen2.5-coder-3b": (2048, 16, 2, 128, 11008, 151936, 36),
    "qwen3-1.7b": (2048, 16, 8, 128, 6144, 151936, 28),
}
CANDIDATES = {  # (BLOCK_N, BLOCK_K, num_warps); gate_up's BLOCK_N counts gate rows (as many up rows)
    "qkv": [(2, 1024, 4), (2, 2048, 4), (1, 2048, 4), (4, 2048, 8), (4, 512, 4), (8, 256, 4), (1, 1024, 2)],
    "o_proj": [(2, 1024, 4), (2, 2048, 4), (4, 2048, 8), (4, 512, 4), (8, 256, 4), (1, 1024, 2)],
    "gate_up": [(4, 512, 4), (8, 256, 4), (2, 1024, 4), (8, 512, 8), (16, 256, 8), (2, 512, 4), (32, 128, 8)],
    "down": [(2, 1024, 8), (2, 2048, 8), (4, 2048, 8), (2, 2048, 4), (4, 1024, 8), (8, 512, 8), (4, 1024, 4)],
    "lm_head": [(32, 128, 4), (16, 256, 4), (8, 512, 4), (32, 256, 8), (64, 128, 8), (4, 1024, 4)],
}


class Step:
    """Random weights of one model shape and its decode step (PDL on) as a CUDA-graph-timable callable."""

    def __init__(self, shape: str, ctx: int):
        h, hq, hkv, d, i, v, n_layers = SHAPES[shape]
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
            rmsnorm_gemv(x, lw["qkv"], self.qkv, norm_w=lw["an"], bias=lw["b"], pdl=True)
            decode_attention(self.qkv, self.pos, self.k[i], self.v[i], self.cos, self.sin, self.attn, self.ws,
                             self.scale, pdl=True)
            gemv_residual(self.attn, lw["o"], x, pdl=True)
            rmsnorm_gate_up_silu(x, lw["mn"], 1e-6, lw["gu"], self.h, pdl=True)
            gemv_residual(self.h, lw["dn"], x, pdl=True)
        rmsnorm_gemv(x, self.lm, self.logits, norm_w=self.nw, pdl=True)

    def time_us(self, tuned: dict) -> float:
        """Best of two do_bench medians of the step's graph with exactly these TUNED overrides."""
        shipped = dict(_util.TUNED)
        _util.TUNED.clear()
        _util.TUNED.update(tuned)
        try:
            self()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self()
            return min(bench(g.replay, rep_ms=300) for _ in range(2))
        finally:
            _util.TUNED.clear()
            _util.TUNED.update(shipped)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen2.5-coder-1.5b", choices=sorted(SHAPES))
    ap.add_argument("--context", type=int, default=512)
    args = ap.parse_args()
    assert torch.cuda.is_available(), "sweep_gemv needs a CUDA GPU"
    torch.manual_seed(0)
    bw = copy_bandwidth()
    step = Step(args.shape, args.context)
    print(f"{torch.cuda.get_device_name()}  triton {triton.__version__}  copy bandwidth {bw:.0f} GB/s  "
          f"{args.shape} ctx {args.context}: {step.bytes / 1e9:.2f} GB per step", flush=True)

    def show(name, us):
        print(f"{name:<36}{us:9.1f} us {1e6 / us:7.0f} tok/s {100 * step.bytes / us / 1e3 / bw:5.0f}%", flush=True)
        return us

    show("rule (no TUNED entries)", step.time_us({}))
    best = {}
    for kernel, cands in CANDIDATES.items():
        key = step.keys[kernel]
        timed = sorted((show(f"{kernel} {c}", step.time_us({key: [(*c, 1)]})), c) for c in cands)
        best[key] = [(*timed[0][1], 1)]
        print(f"  best {kernel}: {timed[0][1]}", flush=True)
    runs = {"rule (median of 3)": {}, "shipped: rule + TUNED (median of 3)": dict(_util.TUNED),
            "bests combined (median of 3)": best}
    times = {name: [] for name in runs}
    for _ in range(3):
        for name, tuned in runs.items():
            times[name].append(step.time_us(tuned))
    print(f"\n{'':<36}{'us':>9}{'tok/s':>9}{'MBU':>7}")
    for name, ts in times.items():
        show(name, statistics.median(ts))
    print("bests:", {k: v[0][:3] for k, v in best.items()})


if __name__ == "__main__":
    main()
