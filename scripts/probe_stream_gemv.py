"""Where the chained CUDA GEMVs (kernels.stream_gemv) lose time, outside the decode step (GPU only):

    PYTHONPATH=. python scripts/probe_stream_gemv.py [--layers 28]

Qwen2.5-Coder-1.5B layers without attention, `layers` of them back to back in one CUDA graph over
distinct weights (never in L2): the Triton GEMVs (4 launches per layer), the CUDA chain (o_proj +
gate/up + down + next QKV in one launch), and the chain with parts switched off to see their cost
(no dot products, no grid barriers: wrong results, timing only), at several ring budgets; then
each op alone as a one-op launch, and gate/up alone with narrower ring slots (smaller bulk copies).
us per layer (or launch) and GB/s of weights; a table last.
"""
import argparse

import torch

from kernels import stream_gemv as sg
from kernels.bench_kernels import graph_us
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_residual import gemv_residual
from kernels.rmsnorm_gemv import rmsnorm_gemv

H, I, QKV = 1536, 8960, 2048
BF = torch.bfloat16


EVENTS = {0: "phase start (wait / grid barrier passed)", 1: "activation in shared memory", 3: "stage landed",
          4: "stage done", 5: "outputs written"}


def trace_layers(layers, attn, x, h, qkv, sync):
    """CTA 0's timeline inside each chain launch (kernels.stream_gemv TRACE stamps), one middle layer."""
    sg.PROBE_DEFINES.update({"NO_COMPUTE": 0, "NO_BARRIER": 0, "TRACE": 1})
    sg.SMEM_BUDGET = 150 * 1024
    tr = torch.zeros(len(layers), 240, dtype=torch.int64, device="cuda")

    def run():
        for i, L in enumerate(layers):
            sg.stream_chain([sg.Op("residual", L["o"], attn, x), sg.Op("gate_up", L["gu"], x, h, L["nw"]),
                             sg.Op("residual", L["down"], h, x),
                             sg.Op("rmsnorm_gemv", L["qkv"], x, qkv, L["nw"], L["bias"])], sync, 1e-6, pdl=True,
                            trace=tr[i])
    run()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run()
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    sg.PROBE_DEFINES["TRACE"] = 0
    t = tr.cpu().view(len(layers), 120, 2)
    mid = len(layers) // 2
    t0 = t[mid, 0, 0].item()
    prev_end = max(v for v in t[mid - 1, :, 0].tolist() if v)
    print(f"\n[trace] CTA 0, layer {mid}: ns since its start (previous launch's last stamp: {prev_end - t0} ns)")
    last = t0
    for n in range(120):
        ts, code = t[mid, n].tolist()
        if ts == 0:
            break
        label = "kernel start" if code == 900 else f"phase {code // 100}: {EVENTS.get(code % 100, code)}"
        print(f"  {ts - t0:8d} (+{ts - last:6d})  {label}")
        last = ts
    sg.PROBE_DEFINES["TRACE"] = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=28)
    args = ap.parse_args()
    n = args.layers
    f32 = dict(device="cuda", dtype=torch.float32)
    x, attn, h, qkv = torch.randn(H, **f32), torch.randn(H, **f32), torch.zeros(I, **f32), torch.zeros(QKV, **f32)
    sync = torch.zeros(2, dtype=torch.int32, device="cuda")

    def rnd(*shape):
        return torch.randn(*shape, device="cuda").mul_(0.02).to(BF)
    layers = [dict(qkv=rnd(QKV, H), o=rnd(H, H), gu=rnd(2 * I, H), down=rnd(H, I), nw=rnd(H), bias=rnd(QKV))
              for _ in range(n)]
    nbytes = sum(layers[0][k].numel() * 2 for k in ("qkv", "o", "gu", "down"))

    def triton_layers():
        for L in layers:
            gemv_residual(attn, L["o"], x, pdl=True)
            rmsnorm_gate_up_silu(x, L["nw"], 1e-6, L["gu"], h, pdl=True)
            gemv_residual(h, L["down"], x, pdl=True)
            rmsnorm_gemv(x, L["qkv"], qkv, norm_w=L["nw"], bias=L["bias"], pdl=True)

    def chain_layers():
        for L in layers:
            sg.stream_chain([sg.Op("residual", L["o"], attn, x), sg.Op("gate_up", L["gu"], x, h, L["nw"]),
                             sg.Op("residual", L["down"], h, x),
                             sg.Op("rmsnorm_gemv", L["qkv"], x, qkv, L["nw"], L["bias"])], sync, 1e-6, pdl=True)

    def one_op(op):
        def run():
            for L in layers:
                sg.stream_chain([op(L)], pdl=True)
        return run

    ops = {"o": lambda L: sg.Op("residual", L["o"], attn, x),
           "gate_up": lambda L: sg.Op("gate_up", L["gu"], x, h, L["nw"]),
           "down": lambda L: sg.Op("residual", L["down"], h, x),
           "qkv": lambda L: sg.Op("rmsnorm_gemv", L["qkv"], x, qkv, L["nw"], L["bias"])}

    def triton_gate_up():
        for L in layers:
            rmsnorm_gate_up_silu(x, L["nw"], 1e-6, L["gu"], h, pdl=True)

    cases = [("triton layer", triton_layers, {}, 150, nbytes),
             ("triton gate_up alone", triton_gate_up, {}, 150, layers[0]["gu"].numel() * 2)]
    for budget in (150, 200, 100):
        cases.append((f"chain {budget}K", chain_layers, {}, budget, nbytes))
    cases += [("chain 150K no-compute", chain_layers, {"NO_COMPUTE": 1}, 150, nbytes),
              ("chain 150K no-barrier", chain_layers, {"NO_BARRIER": 1}, 150, nbytes),
              ("chain 150K neither", chain_layers, {"NO_COMPUTE": 1, "NO_BARRIER": 1}, 150, nbytes)]
    for name, op in ops.items():
        cases.append((f"{name} alone 150K", one_op(op), {}, 150, op(layers[0]).w.numel() * 2))
        cases.append((f"{name} alone 150K no-compute", one_op(op), {"NO_COMPUTE": 1}, 150, op(layers[0]).w.numel() * 2))
    # slot width = bytes per bulk copy (one row's K chunk): gate/up alone with narrower slots
    for kc in (384, 768):
        for probe, label in (({}, ""), ({"NO_COMPUTE": 1}, " no-compute")):
            cases.append((f"gate_up alone, {kc}-col slots{label}", one_op(ops["gate_up"]), {**probe, "MAX_KC": kc},
                          150, layers[0]["gu"].numel() * 2))
    rows = []
    default_kc = sg.MAX_KC
    for name, fn, probe, budget, nb in cases:
        probe = dict(probe)
        sg.MAX_KC = probe.pop("MAX_KC", default_kc)
        sg.PROBE_DEFINES.update({"NO_COMPUTE": 0, "NO_BARRIER": 0, **probe})
        sg.SMEM_BUDGET = budget * 1024
        us = graph_us(fn, n)
        rows.append((name, us, nb / us / 1e3))
        print(f"{name:30s} {us:8.2f} us  {nb / us / 1e3:7.0f} GB/s", flush=True)
    sg.MAX_KC = default_kc
    trace_layers(layers, attn, x, h, qkv, sync)
    print("\n| variant | us per layer / launch | GB/s |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.2f} | {r[2]:.0f} |")


if __name__ == "__main__":
    main()
