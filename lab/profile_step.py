"""Where a decode step's time goes, kernel by kernel (GPU only):

    python -m lab.profile_step [shape] [--context 512] [--weights fp8,bf16] [--no-floor]

1. Timeline, per weight format: the greedy step's CUDA graph (the engine's runner, random weights) replayed under
   torch.profiler; for every kernel of a step: its duration, and its exclusive time = its end minus
   the previous kernel's end (what it adds to the step; with PDL kernels overlap, so durations add
   up to more than the step). Medians over layers and replays, per kernel kind.
2. Boundary floor: 140 dependent tiny phases in one CUDA graph (each program reads one float the
   previous phase wrote and its own 16, writes 16) at 1 to 512 programs per phase: as kernel
   launches with and without PDL, and as one launch whose phases wait on counters.
"""
import argparse
import json
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
import triton
import triton.language as tl

from lab.engine import greedy_graph, random_engine, replay_us
from kernels._util import pdl_launch_kwargs

KINDS = [("rmsnorm_gemv", "qkv"), ("attn", "attention"), ("gemv_residual", "o/down"),
         ("gate_up", "gate_up"), ("lm_head", "lm_head")]  # kernel name part -> label (greedy fused step)


def kind(name: str) -> str:
    return next((k for pat, k in KINDS if pat in name), name[:30])


def timeline(shape: str, context: int, replays: int = 20, weights: str | None = None):
    tmp = tempfile.TemporaryDirectory()
    engine = random_engine(shape, context + 4 * replays + 64, tmp.name, weights=weights)
    g = greedy_graph(engine, context)
    plain_us = replay_us(g, replays)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            g.replay()
        torch.cuda.synchronize()
    trace = Path(tmp.name) / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    events.sort(key=lambda e: e["ts"])
    per_step = len(events) // replays  # 5 a layer + the LM head's, for the greedy fused step
    steps = [events[i:i + per_step] for i in range(0, len(events) - per_step + 1, per_step)]
    dur, excl, lead = defaultdict(list), defaultdict(list), defaultdict(list)
    step_us = []
    for st in steps[2:]:  # skip the first two (profiler warm-up)
        step_us.append(st[-1]["ts"] + st[-1]["dur"] - st[0]["ts"])
        prev_end = None
        for i, e in enumerate(st):
            k = kind(e["name"])
            if k == "o/down":
                k = "o_proj" if i % 5 == 2 else "down"
            end = e["ts"] + e["dur"]
            dur[k].append(e["dur"])
            if prev_end is not None:
                excl[k].append(end - prev_end)
                lead[k].append(e["ts"] - prev_end)
            prev_end = end
    print(f"\n[{shape}, {engine.info['weights']} weights ({engine.info['runner']}), ctx {context}] step: {plain_us:.1f} us replayed plainly, "
          f"{statistics.median(step_us):.1f} us first-start to last-end under the profiler "
          f"({len(steps) - 2} steps, {len(events)} kernels)")
    print(f"  {'kernel':10s} {'n/step':>6s} {'dur us':>8s} {'excl us':>8s} {'start-prev end':>15s} {'excl/step':>10s}")
    total = 0.0
    for k in dur:
        n = len(dur[k]) // (len(steps) - 2)
        e = statistics.median(excl[k]) if excl[k] else float("nan")
        per = sum(excl[k]) / (len(steps) - 2) if excl[k] else 0.0
        total += per
        print(f"  {k:10s} {n:6d} {statistics.median(dur[k]):8.2f} {e:8.2f} "
              f"{statistics.median(lead[k]) if lead[k] else float('nan'):15.2f} {per:10.1f}")
    print(f"  sum of exclusive times per step: {total:.1f} us")


@triton.jit
def _tick(src, dst, USE_PDL: tl.constexpr):
    """One dependent phase: read one float of the previous output and this program's 16, write 16."""
    pid = tl.program_id(0)
    offs = pid * 16 + tl.arange(0, 16)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    v = tl.load(src + offs) + tl.load(src)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(dst + offs, v + 1.0)


@triton.jit
def _flag_chain(buf, cnt, G):
    """All phases in one launch: a program's phase is its ticket // G (tickets are drawn in launch
    order, so every program a phase waits for is already running); phase p spins until phase p-1's
    counter reaches G, then does a tick and bumps its own counter (release)."""
    t = tl.atomic_add(cnt, 1, sem="relaxed", scope="gpu")  # cnt[0]: the ticket dispenser
    phase = t // G
    slot = t % G
    offs = slot * 16 + tl.arange(0, 16)
    if phase > 0:
        done = tl.atomic_add(cnt + phase, 0, sem="acquire", scope="gpu")
        while done < G:
            done = tl.atomic_add(cnt + phase, 0, sem="acquire", scope="gpu")
    src = buf + (phase % 2) * 65536
    dst = buf + ((phase + 1) % 2) * 65536
    v = tl.load(src + offs, cache_modifier=".cg") + tl.load(src, cache_modifier=".cg")
    tl.store(dst + offs, v + 1.0)
    tl.debug_barrier()
    tl.atomic_add(cnt + phase + 1, 1, sem="release", scope="gpu")


def boundary_floor(chain: int = 140):
    """us per dependent phase: kernels chained by launches (with / without PDL) vs one launch whose
    phases wait on counters."""
    print(f"\n[boundary floor] us per phase, {chain} dependent phases in one graph")
    bufs = [torch.zeros(65536, device="cuda") for _ in range(2)]
    rows = []
    for grid in (1, 132, 264, 512):
        for pdl in (False, True):
            def run():
                for i in range(chain):
                    _tick[(grid,)](bufs[i % 2], bufs[(i + 1) % 2], USE_PDL=pdl, **pdl_launch_kwargs(pdl, bufs[0].device))
            rows.append((f"launches, pdl={pdl}", grid, run))
        buf = torch.zeros(2 * 65536, device="cuda")
        cnt = torch.zeros(chain + 2, dtype=torch.int32, device="cuda")

        def one(grid=grid, buf=buf, cnt=cnt):
            cnt.zero_()
            _flag_chain[(grid * chain,)](buf, cnt, grid, num_warps=1)
        rows.append(("one launch, counters", grid, one))
    for name, grid, fn in rows:
        fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        us = triton.testing.do_bench(g.replay, warmup=20, rep=200, return_mode="median") * 1e3 / chain
        print(f"  {name:22s} grid={grid:4d}  {us:6.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", default="qwen2.5-coder-1.5b")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--weights", default="bf16", help="comma-separated weight formats, one timeline each (bf16, fp8)")
    ap.add_argument("--no-floor", action="store_true", help="the timeline only")
    args = ap.parse_args()
    if not args.no_floor:
        boundary_floor()
    for w in args.weights.split(","):
        timeline(args.shape, args.context, weights=None if w == "bf16" else w)
