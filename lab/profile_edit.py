"""Where a speculating run's time goes on the device (GPU only): the edit workload's prompts run greedy with
speculation on and off under torch.profiler, and per run the span from its first to its last kernel, the time
the GPU ran a kernel (the union of kernel intervals), and its idle gaps (the device waiting for the host:
between a verify step's result and the next launch, a graph's launch latency), counted by size:

    python -m lab.profile_edit --model FILE [--tokens 192] [--prompts 8]

Not a benchmark (the profiler slows launches down a little): `inference.bench --workload edit` is.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from inference.engine import Engine, FinishEvent
from inference.prompts import Prompt
from inference.sampling import SamplingParams
from inference.speculative.bench import edit_prompts

GAPS_US = (5, 20, 50, 100, 1000)  # idle-gap bins (upper bounds, us)


def busy_and_gaps(events: list[dict]) -> tuple[float, float, list[float]]:
    """(span us, busy us, idle gaps us) of kernel events {"ts", "dur"} (us): busy is the union of the
    intervals, a gap the time between the end of everything before and the next start."""
    evs = sorted(events, key=lambda e: e["ts"])
    span = max(e["ts"] + e["dur"] for e in evs) - evs[0]["ts"]
    busy, gaps, end = 0.0, [], evs[0]["ts"]
    for e in evs:
        s, f = e["ts"], e["ts"] + e["dur"]
        if s > end:
            gaps.append(s - end)
        busy += max(0.0, f - max(s, end))
        end = max(end, f)
    return span, busy, gaps


def profile_run(engine, prompt: str, tokens: int, speculate: bool, tmp: str) -> dict:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        events = list(engine.generate(prompt, SamplingParams(max_tokens=tokens, speculate=speculate)))
        torch.cuda.synchronize()
    trace = Path(tmp) / "trace.json"
    prof.export_chrome_trace(str(trace))
    kern = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]
    stats = next(ev.stats for ev in events if isinstance(ev, FinishEvent))
    span, busy, gaps = busy_and_gaps(kern)
    return {"tokens": stats.generated_tokens, "verify_steps": stats.verify_steps, "accepted": stats.accepted,
            "span": span, "busy": busy, "gaps": gaps}


def gap_row(gaps: list[float]) -> str:
    cells, lo = [], 0
    for hi in GAPS_US:
        sel = [g for g in gaps if lo < g <= hi]
        cells.append(f"{len(sel)} / {sum(sel):.0f}")
        lo = hi
    big = [g for g in gaps if g > GAPS_US[-1]]
    cells.append(f"{len(big)} / {sum(big):.0f}")
    return " | ".join(cells)


@torch.inference_mode()
def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m lab.profile_edit", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a real model (GGUF file or folder)")
    p.add_argument("--tokens", type=int, default=192)
    p.add_argument("--prompts", type=int, default=8)
    args = p.parse_args(argv)
    engine = Engine.from_pretrained(args.model, device="cuda", dtype="bfloat16")
    tmp = tempfile.TemporaryDirectory()
    prompts = edit_prompts()[:args.prompts]
    print(f"{Path(args.model).name}, {torch.cuda.get_device_name()}, max {args.tokens} tokens; span: first to last "
          "kernel (prefill included), busy: union of kernels, gaps: count / us idle, by size")
    bins = " | ".join(f"gaps <= {g} us" for g in GAPS_US) + f" | gaps > {GAPS_US[-1]} us"
    print(f"| prompt | speculate | tokens | verify steps | span us | busy us | idle % | {bins} |")
    print("|---|---|---:|---:|---:|---:|---:|" + "---:|" * (len(GAPS_US) + 1))
    for name, text in prompts:
        prompt = Prompt.chat(text)
        for spec in (False, True):
            profile_run(engine, prompt, 8, spec, tmp.name)  # warm: graphs captured outside the profile
            r = profile_run(engine, prompt, args.tokens, spec, tmp.name)
            idle = 100 * (1 - r["busy"] / r["span"])
            print(f"| {name} | {'on' if spec else 'off'} | {r['tokens']} | {r['verify_steps']} | {r['span']:.0f} | "
                  f"{r['busy']:.0f} | {idle:.1f} | {gap_row(r['gaps'])} |")


if __name__ == "__main__":
    main()
