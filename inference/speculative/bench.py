"""Speculative decoding benchmarks (`python -m inference.bench --workload edit|verify`). GPU or CPU.

edit: fixed code-edit chat prompts (type hints, renamed variables, docstrings, a bug fix) on
functions of the standard library (the running Python's own source: present on every machine),
plus "new code" prompts with nothing to copy; each prompt greedy with speculation off, then on,
in the same process. Reports per workload the tokens, the effective tok/s (tokens after the first
/ host time to the last one), the speedup, whether the outputs are identical, and the drafter's
stats. Use a real model (`--model`): acceptance on random weights means nothing.

verify: the device time of the fast path's verify step (the last token + 8 drafted, one graph)
against a one-token decode step, both replayed back to back, on a random-weight shape.
"""

from __future__ import annotations

import inspect
import sys
import time

EDITS = [  # (instruction, module, function, (old, new) to plant a bug or None)
    ("Rewrite this function with type hints on every argument and the return value.", "colorsys", "rgb_to_hsv", None),
    ("Rewrite this function with type hints on every argument and the return value.", "textwrap", "dedent", None),
    ("Rename the variables of this function to longer, descriptive names.", "colorsys", "hls_to_rgb", None),
    ("Rename the variables of this function to longer, descriptive names.", "statistics", "median", None),
    ("Add a docstring to this function, then repeat the code unchanged.", "shlex", "quote", None),
    ("Add a docstring to this function, then repeat the code unchanged.", "string", "capwords", None),
    ("This function has a bug. Fix it and show the corrected function.", "calendar", "isleap", ("!= 0", "== 0")),
    ("This function has a bug. Fix it and show the corrected function.", "colorsys", "rgb_to_yiq", ("0.30*r", "0.30*g")),
]
NEW_CODE = [  # nothing in the prompt to copy: speculation should stay out of the way
    "Write a Python function that returns the n-th prime number.",
    "Write a Python class for a stack with push, pop and peek.",
    "Explain in three sentences what a hash map is.",
]


def edit_prompts() -> list[tuple[str, str]]:
    """(name, user message) for each edit task, from this Python's standard library."""
    import importlib

    out = []
    for instruction, module, func, bug in EDITS:
        src = inspect.getsource(getattr(importlib.import_module(module), func))
        if bug is not None and bug[0] in src:
            src = src.replace(bug[0], bug[1], 1)
        out.append((f"{module}.{func}", f"{instruction}\n\n```python\n{src}```"))
    return out


def run_one(engine, prompt, speculate: bool, max_tokens: int) -> dict:
    from ..engine import FinishEvent
    from ..sampling import SamplingParams

    ids = []
    for ev in engine.generate(prompt, SamplingParams(max_tokens=max_tokens, speculate=speculate)):
        if isinstance(ev, FinishEvent):
            s = ev.stats
            return {"ids": ids, "tokens": s.generated_tokens, "s": s.decode_ms / 1000 if s.decode_ms else 0.0,
                    "effective_tok_s": s.effective_tok_s, "drafted": s.drafted, "accepted": s.accepted,
                    "verify_steps": s.verify_steps}
        ids.extend(ev.token_ids)
    raise RuntimeError("generate ended without a FinishEvent")


def workload(engine, prompts, max_tokens: int, repeats: int) -> dict:
    """Each prompt off then on, `repeats` times (after one warm-up of each); sums over the prompts."""
    from ..prompts import Prompt

    rows, same = [], True
    for name, text in prompts:
        p = Prompt.chat(text)
        run_one(engine, p, False, max_tokens)
        run_one(engine, p, True, max_tokens)
        best = {}
        for spec in (False, True):
            runs = [run_one(engine, p, spec, max_tokens) for _ in range(repeats)]
            best[spec] = min(runs, key=lambda r: r["s"])
        same &= best[False]["ids"] == best[True]["ids"]
        rows.append({"name": name, "off": best[False], "on": best[True],
                     "identical": best[False]["ids"] == best[True]["ids"]})
    def total(key):
        toks = sum(r[key]["tokens"] - 1 for r in rows)
        secs = sum(r[key]["s"] for r in rows)
        return toks / secs if secs else 0.0
    on = [r["on"] for r in rows]
    steps = sum(r["verify_steps"] for r in on)
    return {"rows": rows, "off_tok_s": total("off"), "on_tok_s": total("on"), "identical": same,
            "drafted": sum(r["drafted"] for r in on), "accepted": sum(r["accepted"] for r in on),
            "verify_steps": steps, "accepted_per_verify": sum(r["accepted"] for r in on) / steps if steps else 0.0}


def edit_main(args, engine) -> dict:
    result = {}
    for name, prompts in (("edit", edit_prompts()), ("new code", [(f"new{i}", t) for i, t in enumerate(NEW_CODE)])):
        t = time.perf_counter()
        result[name] = workload(engine, prompts, args.tokens, args.repeats)
        print(f"{name}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    print(f"\n{engine.info['model']} ({'random weights' if engine.info['random_weights'] else 'real weights'}), "
          f"{engine.info['runner']} on {engine.info['device']} {engine.info['dtype']}, greedy, max {args.tokens} tokens, "
          f"Python {sys.version.split()[0]} sources")
    print("| prompt | tokens | off tok/s | on tok/s | speedup | accepted/verify | identical |")
    print("|---|---:|---:|---:|---:|---:|:-:|")
    for name, r in result.items():
        for row in r["rows"]:
            on, off = row["on"], row["off"]
            apv = on["accepted"] / on["verify_steps"] if on["verify_steps"] else 0.0
            print(f"| {row['name']} | {on['tokens']} | {off['effective_tok_s']:.0f} | {on['effective_tok_s']:.0f} | "
                  f"{on['effective_tok_s'] / off['effective_tok_s']:.2f}x | {apv:.2f} | {'yes' if row['identical'] else 'NO'} |")
        print(f"| **{name} (all)** | | **{r['off_tok_s']:.0f}** | **{r['on_tok_s']:.0f}** | "
              f"**{r['on_tok_s'] / r['off_tok_s']:.2f}x** | {r['accepted_per_verify']:.2f} | "
              f"{'yes' if r['identical'] else 'NO'} |")
    return result


def verify_cost(engine, context: int, iters: int = 50) -> dict:
    import torch

    with torch.inference_mode():
        return _verify_cost(engine, context, iters)


def _verify_cost(engine, context: int, iters: int) -> dict:
    """Device time per replay of the one-token step graph and of the verify graph (width 9), us."""
    import torch

    from ..sampling import SamplingParams
    from .fast_verify import WIDTH

    runner = engine.runner
    prompt = list(range(100, 100 + context))
    runner.start(prompt, SamplingParams(max_tokens=4 * iters + 64, ignore_eos=True))
    v = runner._verifier()
    draft = list(range(200, 200 + WIDTH - 1))

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1000 / iters

    runner._select_attention(runner.host_pos)
    step_graph = runner.step_graph()
    step_us = timed(step_graph.replay)
    graph = v.graph(v.span(runner.host_pos))
    v._load(draft)
    verify_us = timed(graph.replay)
    t = time.perf_counter()
    for _ in range(iters):
        v.run(draft, runner.host_pos)
    call_us = (time.perf_counter() - t) * 1e6 / iters
    return {"context": context, "step_us": step_us, "verify_us": verify_us, "ratio": verify_us / step_us,
            "verify_call_us": call_us, "width": WIDTH}


def verify_main(args, engine) -> dict:
    r = verify_cost(engine, args.context)
    print(f"\n{args.shape} (random weights), {engine.info['dtype']}, context {args.context}: "
          f"one-token step {r['step_us']:.1f} us, verify of {r['width']} tokens (1 + {r['width'] - 1} drafted) "
          f"{r['verify_us']:.1f} us = {r['ratio']:.2f}x; verify call with the host wait {r['verify_call_us']:.1f} us")
    return r
