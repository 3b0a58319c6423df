"""Speculative decoding benchmarks (`python -m inference.bench --workload edit|verify`). GPU or CPU.

edit: fixed code-edit chat prompts (type hints, renamed variables, docstrings, a bug fix) on
functions of the standard library (the running Python's own source: present on every machine),
plus "new code" prompts with nothing to copy; each prompt greedy with speculation off (the runner's
default kernels), then on (plain steps and verify steps on the speculation's kernels), then on with a
drafter that never drafts (plain decode on those same kernels: the output speculation must reproduce
token for token), in the same process. Reports per workload the tokens, the effective tok/s (tokens
after the first / host time to the last one) of each, the speedup over off, whether the outputs are
identical, and the drafter's stats. Use a real model (`--model`): acceptance on random weights means
nothing.

verify: the device time of the fast path's verify step of k tokens (k = 2, 4, 8: the last token + k-1
drafted, one graph each) against a one-token decode step on the same kernels and on the runner's default
ones, replayed back to back, on a random-weight shape, for both GEMV families of the speculation (the
k-column Triton twins, the tensor-core GEMVs).
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


NEVER = None  # a DraftConfig that never drafts (built on first use)


def run_one(engine, prompt, mode: str, max_tokens: int) -> dict:
    """mode: "off" (plain decode), "on" (speculation), "plain" (the speculative loop with a drafter that
    never drafts: plain decode on the kernels a speculating run uses)."""
    from ..engine import FinishEvent
    from ..sampling import SamplingParams
    from .drafter import DraftConfig

    ids = []
    saved = engine.draft_config
    if mode == "plain":
        engine.draft_config = DraftConfig(min_match=1 << 20, max_match=1 << 20)  # no tail is that long
    try:
        events = list(engine.generate(prompt, SamplingParams(max_tokens=max_tokens, speculate=mode != "off")))
    finally:
        engine.draft_config = saved
    for ev in events:
        if isinstance(ev, FinishEvent):
            s = ev.stats
            # the seconds the run's rate implies for all its tokens after the first (off: decode_tok_s is the device
            # timer's rate over the tokens it timed, which may end before the last: decode_ms alone would be short)
            secs = (s.generated_tokens - 1) / s.decode_tok_s if s.decode_tok_s else 0.0
            return {"ids": ids, "tokens": s.generated_tokens, "s": secs, "drafted": s.drafted, "accepted": s.accepted,
                    "verify_steps": s.verify_steps}
        ids.extend(ev.token_ids)
    raise RuntimeError("generate ended without a FinishEvent")


def workload(engine, prompts, max_tokens: int, repeats: int) -> dict:
    """Each prompt off, on, then plain on the speculation's kernels, `repeats` times each (after one warm-up
    of each); sums over the prompts."""
    from ..prompts import Prompt

    rows, same = [], True
    for name, text in prompts:
        p = Prompt.chat(text)
        best = {}
        for mode in ("off", "on", "plain"):
            run_one(engine, p, mode, max_tokens)
            runs = [run_one(engine, p, mode, max_tokens) for _ in range(repeats)]
            best[mode] = min(runs, key=lambda r: r["s"])
        identical = best["plain"]["ids"] == best["on"]["ids"]
        same &= identical
        rows.append({"name": name, "off": best["off"], "on": best["on"], "plain": best["plain"],
                     "identical": identical, "same_as_off": best["off"]["ids"] == best["on"]["ids"]})
    def total(key):
        toks = sum(r[key]["tokens"] - 1 for r in rows)
        secs = sum(r[key]["s"] for r in rows)
        return toks / secs if secs else 0.0
    on = [r["on"] for r in rows]
    steps = sum(r["verify_steps"] for r in on)
    return {"rows": rows, "off_tok_s": total("off"), "on_tok_s": total("on"), "plain_tok_s": total("plain"),
            "identical": same,
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
    print("off: plain decode, default kernels; on: speculation (Triton kernels); plain: plain decode on the Triton "
          "kernels; identical: on == plain token for token (== off: the same text as the default kernels'); tok/s: "
          "tokens after the first over the span from the first to the last (off: the engine's device timer, which gives "
          "plain decode its higher figure; on, plain: the host's clock)")
    print("| prompt | tokens | off tok/s | on tok/s | plain tok/s | on/off | accepted/verify | identical | == off |")
    print("|---|---:|---:|---:|---:|---:|---:|:-:|:-:|")
    def rate(run):  # the rate the totals add up (GenerationStats.decode_ms: off's is the device timer's)
        return (run["tokens"] - 1) / run["s"] if run["s"] else 0.0

    for name, r in result.items():
        for row in r["rows"]:
            on, off, plain = row["on"], row["off"], row["plain"]
            apv = on["accepted"] / on["verify_steps"] if on["verify_steps"] else 0.0
            print(f"| {row['name']} | {on['tokens']} | {rate(off):.0f} | {rate(on):.0f} | "
                  f"{rate(plain):.0f} | {rate(on) / rate(off) if rate(off) else 0.0:.2f}x | {apv:.2f} | "
                  f"{'yes' if row['identical'] else 'NO'} | {'yes' if row['same_as_off'] else 'no'} |")
        print(f"| **{name} (all)** | | **{r['off_tok_s']:.0f}** | **{r['on_tok_s']:.0f}** | {r['plain_tok_s']:.0f} | "
              f"**{r['on_tok_s'] / r['off_tok_s']:.2f}x** | {r['accepted_per_verify']:.2f} | "
              f"{'yes' if r['identical'] else 'NO'} | |")
    return result


def verify_cost(engine, context: int, iters: int = 50, widths=(2, 4, 8, 16),
                families=("triton", "mma", "cols", "overlap")) -> dict:
    import torch

    with torch.inference_mode():
        return _verify_cost(engine, context, iters, widths, families)


def _verify_cost(engine, context: int, iters: int, widths, families) -> dict:
    """Per GEMV family of the speculation (plan.verify_gemv's: "triton" = the k-column Triton twins, "mma" = the
    tensor-core GEMVs, "cols" = the CUDA column GEMVs, "overlap" = the streamed GEMVs; those this model and GPU
    run): device time per replay of the one-token step graph on the kernels a speculating run decodes with and
    of the verify graph of each width; and a one-token step on the runner's default kernels (plain decode
    without speculation), us."""
    from dataclasses import replace

    import torch

    from ..sampling import SamplingParams

    runner = engine.runner
    base, modes = runner.tuning, (runner.attention_mode, runner.gemv_mode)
    prompt = list(range(100, 100 + context))

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

    out = {"context": context}
    for family in families:
        runner.use_tuning(base.with_gemv_family(family), *modes)
        if runner.speculative_kernels[1] != family:  # not for this model or GPU
            continue
        runner.start(prompt, SamplingParams(max_tokens=4 * iters + 64, ignore_eos=True, speculate=True))
        v = runner._verifier()
        pos = runner.host_pos
        runner._select_attention(pos)
        step_us = timed(runner.step_graph().replay)
        runner.pos.fill_(pos)
        r = out[family] = {"step_us": step_us, "kernels": f"{runner.attention_kind}/{runner.gemv_kind}"}
        for kc in widths:
            draft = list(range(200, 200 + kc - 1))
            graph = v.graph_at(kc, pos)
            v.load(draft)
            us = timed(graph.replay)
            runner.pos.fill_(pos)  # every replay advanced it
            t = time.perf_counter()
            for _ in range(iters):
                runner.pos.fill_(pos)
                v.run(draft, pos)
            call_us = (time.perf_counter() - t) * 1e6 / iters
            runner.pos.fill_(pos)
            r[kc] = {"verify_us": us, "ratio": us / step_us, "verify_call_us": call_us}
    runner.use_tuning(base, *modes)
    runner.start(prompt, SamplingParams(max_tokens=4 * iters + 64, ignore_eos=True, speculate=False))
    runner._select_attention(runner.host_pos)
    out["default_step_us"] = timed(runner.step_graph().replay)
    out["default_kernels"] = f"{runner.attention_kind}/{runner.gemv_kind}"
    return out


def verify_main(args, engine) -> dict:
    r = verify_cost(engine, args.context, families=tuple(f for f in args.families.split(",") if f))
    weights = "random weights" if engine.info["random_weights"] else "real weights"
    print(f"\n{engine.info['model']} ({weights}), {engine.info['dtype']}, context {args.context}: one-token step on the "
          f"default kernels {r['default_kernels']} {r['default_step_us']:.1f} us")
    print("| speculation's GEMVs | one-token step us (kernels) | tokens per verify step | verify graph us "
          "| vs its one-token step | vs default step | verify call (host wait) us |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for family in ("triton", "mma", "cols", "overlap"):
        f = r.get(family)
        for key, x in (f or {}).items():
            if isinstance(x, dict):
                print(f"| {family} | {f['step_us']:.1f} ({f['kernels']}) | {key} | {x['verify_us']:.1f} | "
                      f"{x['ratio']:.2f}x | {x['verify_us'] / r['default_step_us']:.2f}x | {x['verify_call_us']:.1f} |")
    return r
