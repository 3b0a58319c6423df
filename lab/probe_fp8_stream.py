"""Lab probe: the streamed FP8 GEMVs (kernels.fp8_stream_gemv) per launch with other consumer-warp counts, warps
per row pair, rows per tile, slot widths or CTAs an SM than the plan's (its Config), GPU only.

    python -m lab.probe_fp8_stream [--shapes qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b] [--ops gate_up,down]

Why: per launch the streamed FP8 gate/up costs a fixed ~2 us more than the streamed bf16 one (fit over shapes:
`python -m lab.probe_fp8_cuda --quick`), and on an H200 these kernels follow the SM clock, not DRAM: if the 8
consumer warps of a CTA (2 a scheduler) cannot keep up with the ring, more warps (or rows a warp) should show
it (they do for gate/up, whose plan now takes 12 / 16 warps at K = 1536 / 2048; the plan's comment). For each
weight of each shape: us per launch (24 launches back to back in one CUDA graph over rotating
weight copies, PDL on: lab.bench_kernels.in_graph_us) of the plan's launch and of each variant, bytes / time
as a share of the copy bandwidth, and each variant's largest relative difference from the plan's output (other
partial sums, so not the same bits; ~1e-6 expected). A table last. Not a test; the step's number is `python -m
lab.probe_fp8_step` / `inference.bench --weights fp8,bf16`.
"""
from __future__ import annotations

import argparse

import torch

from inference.quant import quantize_fp8
from inference.synth import SHAPES
from kernels.fp8_stream_gemv import SMEM_BUDGET, Config, fp8_stream_gemv_residual, fp8_stream_rmsnorm_gate_up_silu, plan
from lab.bench_kernels import copies, copy_bandwidth, in_graph_us
from lab.probe_fp8_cuda import weights_of

# (label, overrides of the plan: kernels.fp8_stream_gemv.Config's fields; per_sm: CTAs an SM, each with that share of
# the shared-memory budget)
VARIANTS = {
    "gate_up": [("plan", {}), ("8 warps, a warp a row pair", {"warps": 8, "wks": 1}),
                ("4 warps", {"warps": 4, "wks": 1}), ("12 warps x 3 per pair", {"warps": 12, "wks": 3}),
                ("16 warps x 4 per pair", {"warps": 16, "wks": 4}), ("16 warps x 2 per pair", {"warps": 16, "wks": 2}),
                ("12 warps, 24-row tiles", {"warps": 12, "wks": 1, "mt": 24}),
                ("16 warps, 32-row tiles", {"warps": 16, "wks": 1, "mt": 32}),
                ("2 CTAs an SM", {"per_sm": 2}), ("2 CTAs an SM, 8 warps x 2 per pair", {"per_sm": 2, "warps": 8, "wks": 2}),
                ("2 CTAs an SM, 8-row tiles", {"per_sm": 2, "mt": 8})],
    "down": [("plan", {}), ("4 warps", {"warps": 4}), ("12 warps", {"warps": 12}), ("16 warps", {"warps": 16}),
             ("16 warps x 8 per pair", {"warps": 16, "wks": 8}), ("24 warps x 8 per pair", {"warps": 24, "wks": 8}),
             ("slots of <= 1024 columns", {"kc": 1024}), ("slots of <= 1280 columns", {"kc": 1280}),
             ("slots of <= 1024 columns, 16 warps", {"kc": 1024, "warps": 16}), ("2 CTAs an SM", {"per_sm": 2}),
             ("2 CTAs an SM, slots of <= 1024 columns", {"per_sm": 2, "kc": 1024}),
             # whole rows a slot (three bulk copies a tile, rows being contiguous) in tiles of a few rows
             ("whole rows, 2-row tiles, 8 warps a pair", {"kc": 1 << 16, "mt": 2, "wks": 8}),
             ("whole rows, 4-row tiles, 4 warps a pair", {"kc": 1 << 16, "mt": 4, "wks": 4}),
             ("whole rows, 2-row tiles, 16 warps a pair", {"kc": 1 << 16, "mt": 2, "warps": 16, "wks": 16})],
}


def resolve(over: dict, sms: int) -> tuple[Config, int]:
    """A variant's Config and shared-memory budget on a GPU of `sms` SMs."""
    per_sm = over.get("per_sm", 1)
    fields = {k: v for k, v in over.items() if k != "per_sm"}
    return Config(**fields, grid=per_sm * sms if per_sm > 1 else None), SMEM_BUDGET // per_sm


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b")
    p.add_argument("--ops", default="gate_up,down")
    args = p.parse_args(argv)
    bw = copy_bandwidth()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw:.0f} GB/s, {sms} SMs", flush=True)
    rows = []
    for name in args.shapes.split(","):
        for op in args.ops.split(","):
            n, k = next((n, k) for w, _, n, k in weights_of(SHAPES[name]) if w == op)
            units = n // 2 if op == "gate_up" else n
            nbytes = n * k + 8 * n * (k // 32)
            ws = copies(lambda: quantize_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02), nbytes)
            x = torch.randn(k, device="cuda")
            nw = torch.ones(k, device="cuda", dtype=torch.bfloat16)
            ref = None
            for label, over in VARIANTS[op]:
                out = torch.zeros(units, device="cuda")
                cfg, budget = resolve(over, sms)
                if op == "gate_up":
                    def fn(w, c=cfg, b=budget, out=out):
                        fp8_stream_rmsnorm_gate_up_silu(x, nw, 1e-6, w.q, w.scale, w.offset, out, pdl=True, config=c,
                                                        budget=b)
                else:  # x += W @ a into a zeroed out (the timed launches keep adding: same work)
                    def fn(w, c=cfg, b=budget, out=out):
                        fp8_stream_gemv_residual(x, w.q, w.scale, w.offset, out, pdl=True, config=c, budget=b)
                pl = plan("gate_up" if op == "gate_up" else "residual", units, k, sms, budget, cfg)
                desc = (f"grid {pl['grid']} warps {pl['warps']} wks {pl['wks']} mt {pl['mt']} kc {pl['kc']} "
                        f"slots {pl['stages']}")
                try:
                    fn(ws[0])
                    torch.cuda.synchronize()
                    got = out.clone()
                    ref = got if ref is None else ref
                    diff = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
                    us = in_graph_us(fn, ws)
                except Exception as e:  # a variant that does not compile or launch: say so, go on
                    print(f"  {name} {op} {label} ({desc}): failed: {type(e).__name__}: {e}"[:300], flush=True)
                    continue
                share = 100 * nbytes / us / 1e3 / bw
                print(f"  {name} {op} [{n}, {k}] {label} ({desc}): {us:7.2f} us {nbytes / us / 1e3:6.0f} GB/s "
                      f"({share:.0f}%), rel diff {diff:.1e}", flush=True)
                rows.append((name, op, label, us, share, diff))
            del ws
            torch.cuda.empty_cache()
    print("\n| shape | weight | variant | us | copy bw | rel diff vs plan |\n|---|---|---|---:|---:|---:|")
    for name, op, label, us, share, diff in rows:
        print(f"| {name} | {op} | {label} | {us:.2f} | {share:.0f}% | {diff:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
