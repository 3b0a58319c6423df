"""Where the edit workload's time goes on the device (GPU only): busy in plain steps and verify steps, idle between
launches, by what came before and after the idle time.

The default model (or --model) runs each edit prompt of `inference.bench --workload edit` greedy through
Engine.generate, speculation on (and --off: off), with the engine's runner behind a recording proxy: a timing event
on the stream before and after each launch (runner.start's prefill, step(), verify_async()). An event recorded
before a launch completes when the stream reaches it, so for consecutive launches i-1, i: idle = before_i -
after_{i-1} (0 when launch i was queued before i-1 ended), busy = after_i - before_i. Reported in total over
the prompts: busy per launch kind (plain, verify of 2 / 4 / 8 columns, chained verify), idle per transition
(kind before -> kind after), and the speedup the same launches would give with no idle time. The events cost the
device a little (lab.probe_token_events); compare runs of this probe with each other, not with the bench.

    python -m lab.probe_spec_timeline [--model PATH] [--tokens 192] [--off]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch


class RecordingRunner:
    """The engine's runner with a timing event before and after each launch (the rest passes through)."""

    def __init__(self, runner):
        self._runner = runner
        self.launches: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    def __getattr__(self, name):
        return getattr(self._runner, name)

    def _record(self, kind: str, launch):
        before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        before.record()
        out = launch()
        after.record()
        if out is not None:  # a chained verify step that would not fit launches nothing
            self.launches.append((kind, before, after))
        return out

    def start(self, prompt_ids, params):
        self.launches = []
        return self._record("prefill", lambda: self._runner.start(prompt_ids, params))

    def step(self):
        return self._record("plain", self._runner.step)

    def verify_async(self, draft, ahead_of: int = 0):
        kind = "chained" if ahead_of else f"verify{self._runner.verify_step().bucket(len(draft))}"
        return self._record(kind, lambda: self._runner.verify_async(draft, ahead_of=ahead_of))

    def timeline(self) -> list[tuple[str, float, float]]:
        """(kind, idle before it in us, busy in us) per launch after the prefill, in launch order."""
        torch.cuda.synchronize()
        out = []
        for (_, _, prev_after), (kind, before, after) in zip(self.launches, self.launches[1:]):
            out.append((kind, prev_after.elapsed_time(before) * 1000, before.elapsed_time(after) * 1000))
        return out


def family(kind: str) -> str:
    return "verify" if kind.startswith("verify") else kind


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="default")
    p.add_argument("--tokens", type=int, default=192)
    p.add_argument("--off", action="store_true", help="also run the prompts with speculation off")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (the timeline is CUDA timing events)")

    from inference.engine import Engine
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams
    from inference.speculative.bench import edit_prompts

    engine = Engine.from_pretrained(args.model, device="cuda")
    rec = RecordingRunner(engine.runner)
    engine.runner = rec
    prompts = [Prompt.chat(text) for _, text in edit_prompts()]
    modes = [("on", True)] + ([("off", False)] if args.off else [])
    for mode, spec in modes:
        list(engine.generate(prompts[0], SamplingParams(max_tokens=args.tokens, speculate=spec)))  # warm-up
        busy, idle = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
        tokens, host_ms = 0, 0.0
        for prompt in prompts:
            events = list(engine.generate(prompt, SamplingParams(max_tokens=args.tokens, speculate=spec)))
            tokens += events[-1].stats.generated_tokens - 1
            host_ms += events[-1].stats.decode_ms or 0.0
            prev = "prefill"
            for kind, gap, dur in rec.timeline():
                busy[kind][0] += 1
                busy[kind][1] += dur
                key = f"{family(prev)} -> {family(kind)}"
                idle[key][0] += 1
                idle[key][1] += gap
                prev = kind
        total_busy = sum(v[1] for v in busy.values())
        total_idle = sum(v[1] for v in idle.values())
        plain_us = busy["plain"][1] / max(1, busy["plain"][0])
        print(f"\n{engine.info['model']}, speculation {mode}, {len(prompts)} edit prompts, {tokens} tokens after "
              f"the first; device busy {total_busy / 1000:.2f} ms, idle {total_idle / 1000:.2f} ms "
              f"({100 * total_idle / (total_busy + total_idle):.1f}%); host: {host_ms:.2f} ms from the first token to "
              f"the last, {1000 * tokens / host_ms if host_ms else 0:.0f} tok/s")
        print("| launch | count | busy us | us each | plain steps each |")
        print("|---|---:|---:|---:|---:|")
        for kind in sorted(busy):
            n, us = busy[kind]
            print(f"| {kind} | {n} | {us:.0f} | {us / n:.1f} | {us / n / plain_us:.2f} |")
        print("| idle between | count | idle us | us each |")
        print("|---|---:|---:|---:|")
        for key in sorted(idle, key=lambda k: -idle[k][1]):
            n, us = idle[key]
            print(f"| {key} | {n} | {us:.0f} | {us / n:.1f} |")
        if mode == "on":
            print(f"tokens per plain-step time: {tokens * plain_us / (total_busy + total_idle):.2f}x with the idle "
                  f"time, {tokens * plain_us / total_busy:.2f}x without (speedup over plain steps at "
                  f"{plain_us:.1f} us)")


if __name__ == "__main__":
    main()
