"""Where a decode step's time goes, kernel by kernel (GPU only):

    python -m lab.profile_step [shape] [--context 512] [--weights fp8,bf16] [--no-floor] [--tp N [--ranks]]

1. Timeline, per weight format: the greedy step's CUDA graph (the engine's runner, random weights) replayed under
   torch.profiler; for every kernel of a step: its duration, and its exclusive time = its end minus
   the previous kernel's end (what it adds to the step; with PDL kernels overlap, so durations add
   up to more than the step). Medians over layers and replays, per kernel kind. --tp N: rank 0's share of a
   tensor-parallel step alone on this GPU (its shard, no reductions); --tp N --ranks: the tensor-parallel engine
   on N GPUs, rank 0's kernels while every rank replays its step (reductions included).
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

from lab.engine import RankAlone, greedy_graph, random_engine, replay_us
from inference.bench import random_prompt
from inference.engine import Engine
from inference.sampling import SamplingParams
from kernels._util import pdl_launch_kwargs

KINDS = [("rmsnorm_gemv", "qkv"), ("attn", "attention"), ("gemv_residual", "o/down"),
         ("gate_up", "gate_up"), ("lm_head", "lm_head")]  # kernel name part -> label (greedy fused step)
SLOTS = ("qkv", "attention", "o_proj", "gate_up", "down")  # a layer's launches


def kind(name: str) -> str:
    return next((k for pat, k in KINDS if pat in name), name[:30])


def labels(events: list[dict]) -> list[str]:
    """Each kernel's part of the step, by name and order: a residual GEMV after the attention is o_proj, after
    gate/up down_proj; a normalizing GEMV not followed by the attention is the LM head (a tensor-parallel step's
    logits); reductions and the step's tail keep their names."""
    kinds = [kind(e["name"]) for e in events]
    out, last = [], None
    for i, k in enumerate(kinds):
        if k == "o/down":
            k = "o_proj" if last == "attention" else "down"
        elif k == "qkv" and (i + 1 == len(kinds) or kinds[i + 1] != "attention"):
            k = "lm_head"
        if k in SLOTS:
            last = k
        out.append(k)
    return out


def timeline(shape: str, context: int, replays: int = 20, weights: str | None = None, tp: int = 1,
             ranks: bool = False, reduce: str = "auto"):
    """tp > 1: rank 0's share of the step, alone on this GPU (RankAlone), or with `ranks` the tensor-parallel
    engine itself on tp GPUs (its `reduce`), rank 0's kernels profiled while every rank replays its step."""
    tmp = tempfile.TemporaryDirectory()
    max_context = context + 4 * replays + 64
    if ranks:
        engine = Engine.from_pretrained(f"synthetic:{shape}", device="cuda", max_context=max_context, tp=tp,
                                        tp_reduce=reduce, cache_dir=tmp.name)
        engine.runner.start(random_prompt(context, engine.cfg.vocab_size),
                            SamplingParams(max_tokens=10_000, temperature=0.0))
        plain_us = 1e3 * engine.runner.time_steps(context, replays)

        def run():
            engine.runner.time_steps(context, replays)
        who = f"{engine.info['runner']}, tp {tp}, {engine.info['tp_reduce']} reduction, rank 0's kernels"
    else:
        engine = RankAlone(shape, tp, max_context, tmp.name) if tp > 1 else \
            random_engine(shape, max_context, tmp.name, weights=weights)
        g = greedy_graph(engine, context)
        plain_us = replay_us(g, replays)

        def run():
            for _ in range(replays):
                g.replay()
        who = engine.info["runner"]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    if ranks:
        engine.close()
    trace = Path(tmp.name) / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    events.sort(key=lambda e: e["ts"])
    labs = labels(events)
    layers = engine.cfg.num_layers
    attn = [i for i, k in enumerate(labs) if k == "attention"]
    first = attn[2 * layers] - 1  # the third step's first QKV: the first two are the profiler's warm-up
    steps = (len(attn) - 2 * layers) / layers
    dur, excl, lead = defaultdict(list), defaultdict(list), defaultdict(list)
    prev_end = events[first - 1]["ts"] + events[first - 1]["dur"]
    for e, k in zip(events[first:], labs[first:]):
        end = e["ts"] + e["dur"]
        dur[k].append(e["dur"])
        excl[k].append(end - prev_end)
        lead[k].append(e["ts"] - prev_end)
        prev_end = end
    span = events[-1]["ts"] + events[-1]["dur"] - events[first]["ts"]
    print(f"\n[{shape}, {engine.info['weights']} weights ({who}), ctx {context}] step: {plain_us:.1f} us replayed "
          f"plainly, {span / steps:.1f} us under the profiler ({steps:g} steps, {len(events) - first} kernels)")
    print(f"  {'kernel':10s} {'n/step':>6s} {'dur us':>8s} {'excl us':>8s} {'start-prev end':>15s} {'excl/step':>10s}")
    total = 0.0
    for k in dur:
        per = sum(excl[k]) / steps
        total += per
        print(f"  {k[:30]:10s} {len(dur[k]) / steps:6.0f} {statistics.median(dur[k]):8.2f} "
              f"{statistics.median(excl[k]):8.2f} {statistics.median(lead[k]):15.2f} {per:10.1f}")
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
    ap.add_argument("--tp", type=int, default=1, help="> 1: rank 0's share of a tensor-parallel step, alone on "
                    "this GPU (lab.engine.RankAlone; bf16 only)")
    ap.add_argument("--ranks", action="store_true", help="with --tp: the tensor-parallel engine on tp GPUs, rank "
                    "0's kernels profiled")
    ap.add_argument("--reduce", default="auto", help="with --ranks: the reduction (inference.parallel.reduce)")
    args = ap.parse_args()
    if args.tp > 1 and args.weights != "bf16":
        ap.error("--tp runs bf16 weights only")
    if args.ranks and args.tp < 2:
        ap.error("--ranks needs --tp 2 or more")
    if not args.no_floor:
        boundary_floor()
    for w in args.weights.split(","):
        timeline(args.shape, args.context, weights=None if w == "bf16" else w, tp=args.tp, ranks=args.ranks,
                 reduce=args.reduce)
