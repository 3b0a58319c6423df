"""How fast one SM can stream weights (GPU only): kernels.stream_gemv QKV-shaped launches on 8 to 132
CTAs, 28 launches over distinct weights in one CUDA graph; prints us per launch, GB/s and GB/s per SM.

    PYTHONPATH=. python scripts/probe_sm_bandwidth.py
"""
import torch
from kernels import stream_gemv as sg
dev = torch.device("cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count
for (n, k, budget) in ((2048, 1536, 200 * 1024), (4096, 1536, 200 * 1024)):
    ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(28)]
    x = torch.randn(k, device=dev); out = torch.empty(n, device=dev)
    for grid in (8, 16, 32, 64, 132):
        sg._sms = lambda d, g=grid: g
        def run():
            for w in ws:
                sg.stream_chain([sg.Op("rmsnorm_gemv", w, x, out)], pdl=True, budget=budget)
        run(); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run()
        g.replay(); torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(20): g.replay()
        b.record(); b.synchronize()
        us = a.elapsed_time(b) * 1e3 / 20 / 28
        gbs = n * k * 2 / us / 1e3
        print(f"{n}x{k} grid {grid:3d}: {us:6.2f} us/launch  {gbs:7.0f} GB/s  {gbs / grid:6.1f} GB/s per SM")
