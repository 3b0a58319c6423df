"""Lab probe: the host's side of a verify step (GPU only): what the decode loop pays between reading one verify
step's result and the next one's start on the device, phase by phase, on a random-weight shape:

    python -m lab.probe_verify_host [--model FILE | --shape qwen2.5-coder-1.5b] [--width 8] [--iters 200]

Per iteration, host clock (perf_counter), median us: load (the draft into pinned memory; "+ copy": and the
separate host-to-device copy the graph's first node now makes), replay (cudaGraphLaunch), record (the done event),
wait (synchronize until the step ends), result (the pinned result to a list). And the device's idle time per
verify step when they run back to back as the decode loop runs them (launch, wait, read, launch ...): wall time
per iteration minus the graph's device time replayed back to back. Not a benchmark; the weights' values do not
matter here (the real model only for its shape).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from inference.engine import Engine
from inference.sampling import SamplingParams
from lab.engine import random_engine, replay_us


@torch.inference_mode()
def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m lab.probe_verify_host", description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a model file or folder (default: --shape, random weights)")
    p.add_argument("--shape", default="qwen2.5-coder-1.5b")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--width", type=int, default=8, help="verify step columns (a bucket)")
    p.add_argument("--iters", type=int, default=200)
    args = p.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    ctx = args.context + 8 * args.iters + 256
    engine = (Engine.from_pretrained(args.model, device="cuda", dtype="bfloat16", max_context=ctx) if args.model
              else random_engine(args.shape, ctx, tmp.name))
    runner = engine.runner
    runner.start([100 + i % 1000 for i in range(args.context)],
                 SamplingParams(max_tokens=4 * args.iters + 64, ignore_eos=True, speculate=True))
    v = runner.verify_step()
    pos = runner.host_pos
    draft = list(range(200, 200 + args.width - 1))
    kc = v.bucket(len(draft))
    graph = v.graph_at(kc, pos, 0)
    v.load(draft, 0)
    runner.pos.fill_(pos)
    device_us = replay_us(graph, args.iters)
    phases = {k: [] for k in ("load", "load + copy", "replay", "record", "wait", "result", "iteration")}
    clock = time.perf_counter
    for i in range(args.iters + 10):
        runner.pos.fill_(pos)  # every replay advances it
        torch.cuda.synchronize()
        t0 = clock()
        v.load(draft, 0, copy=False)
        t1 = clock()
        graph.replay()
        t2 = clock()
        v.done[0].record()
        t3 = clock()
        v.done[0].synchronize()
        t4 = clock()
        v.result[0][kc].tolist()
        t5 = clock()
        v.load(draft, 0)  # with the separate copy (the decode loop's before this session)
        t6 = clock()
        if i >= 10:
            for k, d in zip(("load", "replay", "record", "wait", "result", "load + copy"),
                            (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5)):
                phases[k].append(d * 1e6)
    # back to back as the loop runs them (launch, wait for the result, launch ...): the device idles from one
    # step's end until the next one's start. Every slot's graph captured first; pos=None: the graph for any position.
    for slot in range(2):
        v.graph_at(kc, None, slot)
        v.launch(draft, slot)
        v.finish(kc, slot)
    runner.pos.fill_(pos)
    torch.cuda.synchronize()
    t = clock()
    for i in range(args.iters):
        v.launch(draft, i % 2)
        v.finish(kc, i % 2)
    phases["iteration"].append((clock() - t) * 1e6 / args.iters)
    graph = v.graph_at(kc, None, 0)
    runner.pos.fill_(pos)
    device_us = replay_us(graph, args.iters)  # the same graph's device time
    print(f"{args.model or args.shape + ' (random weights)'}, {torch.cuda.get_device_name()}, verify step of {kc} "
          f"columns at context {args.context}: device {device_us:.1f} us per replay (back to back)")
    print("| phase | host us (median) |")
    print("|---|---:|")
    for k, xs in phases.items():
        print(f"| {k} | {statistics.median(xs):.1f} |")
    print(f"| device idle per verify step (iteration - device) | {phases['iteration'][0] - device_us:.1f} |")


if __name__ == "__main__":
    main()
