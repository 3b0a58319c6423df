"""Where a speculative verify step's time goes, kernel by kernel, against the one-token step (GPU only):

    python -m lab.profile_verify [--model FILE_OR_DIR | --shape qwen2.5-coder-1.5b] [--context 512]
        [--families triton,mma,cols,overlap] [--widths 2,4,8] [--groups 1,2,4,8]

Per GEMV family of the speculation (inference.speculative.fast_verify): the one-token step graph a speculating
run decodes with and the verify graph of each width, each replayed plainly (us per replay) and under
torch.profiler: per kernel (o_proj and down_proj, the same kernel, told apart by their order in a layer) its
launches per step and median duration. --groups: the Triton family's verify step at each columns-per-program
(FastVerifier.use_group), us per replay. Not a benchmark: `inference.bench --workload verify` is.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import torch

from inference.engine import Engine
from inference.sampling import SamplingParams
from lab.engine import random_engine, replay_us


def kernel_table(graph: torch.cuda.CUDAGraph, replays: int, tmp: str) -> dict[str, tuple[float, float]]:
    """{kernel label: (launches per replay, median us)} of `graph` under torch.profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    trace = Path(tmp) / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = sorted((e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"),
                    key=lambda e: e["ts"])
    seen: dict[str, int] = defaultdict(int)
    durs: dict[str, list[float]] = defaultdict(list)
    for e in events:
        name = e["name"][:48]
        if "gemv_residual" in name and not name.startswith("stream"):  # o_proj then down_proj in every layer
            # (the streamed family's o_proj is a kernel of its own)
            name = f"{name} #{seen[name] % 2 + 1}"
            seen[e["name"][:48]] += 1
        durs[name].append(e["dur"])
    return {k: (len(v) / replays, statistics.median(v)) for k, v in durs.items()}


@torch.inference_mode()
def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m lab.profile_verify", description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="a real model (GGUF file or folder); default: --shape, random")
    p.add_argument("--shape", default="qwen2.5-coder-1.5b")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--families", default="triton,mma,cols,overlap")
    p.add_argument("--widths", default="2,4,8")
    p.add_argument("--groups", default="", help="the Triton family's columns per program to time, e.g. 1,2,4,8")
    p.add_argument("--replays", type=int, default=20)
    args = p.parse_args(argv)
    widths = [int(w) for w in args.widths.split(",") if w]
    tmp = tempfile.TemporaryDirectory()
    ctx = args.context + 64 * args.replays + 256
    if args.model:
        engine = Engine.from_pretrained(args.model, device="cuda", dtype="bfloat16", max_context=ctx)
        name = Path(args.model).name
    else:
        engine = random_engine(args.shape, ctx, tmp.name)
        name = f"{args.shape} (random weights)"
    runner = engine.runner
    base, modes = runner.tuning, (runner.attention_mode, runner.gemv_mode)
    prompt = [100 + i % 1000 for i in range(args.context)]
    print(f"{name}, {torch.cuda.get_device_name()}, context {args.context}, tuning {base.name}")
    for family in [f for f in args.families.split(",") if f]:
        runner.use_tuning(base.with_gemv_family(family), *modes)
        if runner.speculative_kernels[1] != family:
            print(f"\n{family} family: not on this model or GPU")
            continue
        runner.start(prompt, SamplingParams(max_tokens=8 * args.replays + 64, ignore_eos=True, speculate=True))
        v = runner.verify_step()
        pos = runner.host_pos
        graphs = {1: runner.step_graph()}
        for kc in widths:
            v.load(list(range(200, 200 + kc - 1)))
            graphs[kc] = v.graph_at(kc, pos)
        times, tables = {}, {}
        for kc, g in graphs.items():
            runner.pos.fill_(pos)
            times[kc] = replay_us(g, args.replays)
            runner.pos.fill_(pos)
            tables[kc] = kernel_table(g, args.replays, tmp.name)
            runner.pos.fill_(pos)
        print(f"\n{family} family (one-token step {runner.attention_kind}/{runner.gemv_kind}): us per replay "
              + ", ".join(f"{'step' if kc == 1 else f'verify {kc}'} {t:.1f}" for kc, t in times.items()))
        labels = list(dict.fromkeys(k for t in tables.values() for k in t))
        print("| kernel | " + " | ".join("step" if kc == 1 else f"verify {kc}" for kc in graphs) + " |")
        print("|---|" + "---:|" * len(graphs))
        for lab in labels:
            cells = []
            for kc in graphs:
                n, us = tables[kc].get(lab, (0, 0.0))
                cells.append(f"{n:.0f} x {us:.2f}" if n else "")
            print(f"| {lab} | " + " | ".join(cells) + " |")
        if family == "triton" and args.groups:
            row = []
            for grp in [int(g) for g in args.groups.split(",") if g]:
                v.use_group(grp)
                for kc in widths:
                    if kc % min(grp, kc):
                        continue
                    v.load(list(range(200, 200 + kc - 1)))
                    g = v.graph(kc)
                    runner.pos.fill_(pos)
                    row.append(f"group {grp} verify {kc} {replay_us(g, args.replays):.1f}")
            runner.pos.fill_(pos)
            print("triton columns per program: " + ", ".join(row))
            v.use_group(base.verify_group)
    runner.use_tuning(base, *modes)


if __name__ == "__main__":
    main()
