"""Why the speculative loop's host-clock decode rate beat the device's step rate with 8 plain steps in flight (GPU
only): what the steps launched before the first token is read cost the host, and per count of steps in flight the
first token's wait and the host's span from the first token to the last against the device's time for those steps.

The default model (or --model) runs each edit prompt of `inference.bench --workload edit` greedy through the
speculative decode loop with a drafter that never drafts (plain steps only), `lag` steps in flight, the way
Engine.generate runs it (runner.start, then inference.speculative.decode.speculative_tokens), the first token read
as a device tensor (.item(), as Engine.generate did before the ninth session) or from a pinned copy (_on_host). Per
lag and way: the host's
seconds from runner.start's return to the first token read (first wait), from the first token to the last (span),
and the device's time for the same steps (steps x the step graph replayed back to back). Then the host's cost of
each of the 8 step launches right after runner.start (the device busy with the prefill, then with the steps).

    python -m lab.probe_first_token [--model PATH] [--tokens 192] [--lags 8,4,2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="default")
    p.add_argument("--tokens", type=int, default=192)
    p.add_argument("--lags", default="8,4,2")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU")

    from inference.engine import Engine, _on_host, _read_token
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams
    from inference.speculative import DraftConfig, PromptLookupDrafter, SpecStats, speculative_tokens
    from inference.speculative.bench import edit_prompts
    from lab.engine import replay_us

    engine = Engine.from_pretrained(args.model, device="cuda")
    runner = engine.runner
    # no tail is that long: plain steps only, `lag` of them in flight from the start (not DraftConfig.lag)
    never = DraftConfig(min_match=1 << 20, max_match=1 << 20, start_near=False)
    params = SamplingParams(max_tokens=args.tokens, speculate=True)
    prompts = [engine.prompt_ids(Prompt.chat(text)) for _, text in edit_prompts()]

    def run(ids: list[int], lag: int, pinned: bool = True) -> tuple[float, float, int]:
        """(first wait s, span s, tokens after the first) of one prompt."""
        first = runner.start(ids, params)
        first = _on_host(first) if pinned else first
        t0 = time.perf_counter()
        stamps = []
        for _ in speculative_tokens(runner, first, PromptLookupDrafter(ids, never), args.tokens, _read_token,
                                    SpecStats(), lambda: False, lag):
            stamps.append(time.perf_counter())
        torch.cuda.synchronize()  # the overshoot steps, before the next prompt
        return stamps[0] - t0, stamps[-1] - stamps[0], len(stamps) - 1

    run(prompts[0], 8)  # warm-up: graphs captured
    runner.start(prompts[0], params)
    graph = runner.step_graph()
    torch.cuda.synchronize()
    step_us = replay_us(graph, 50)

    print(f"\n{engine.info['model']} on {torch.cuda.get_device_name()}, {len(prompts)} edit prompts, plain steps "
          f"through the speculative loop; step graph replayed back to back: {step_us:.1f} us")
    print("| steps in flight | first token read | first wait ms (mean) | span ms (sum) | tokens | host tok/s "
          "| device ms for the steps | span - device ms |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for lag, pinned in ((int(x), p) for x in args.lags.split(",") for p in (False, True)):
        runs = [run(ids, lag, pinned) for ids in prompts]
        wait = statistics.mean(r[0] for r in runs) * 1000
        span = sum(r[1] for r in runs) * 1000
        toks = sum(r[2] for r in runs)
        dev = toks * step_us / 1000
        print(f"| {lag} | {'pinned copy' if pinned else '.item()'} | {wait:.2f} | {span:.2f} | {toks} | {1000 * toks / span:.0f} | {dev:.2f} | {span - dev:+.2f} |")

    launches = []
    for ids in prompts:
        runner.start(ids, params)
        t = time.perf_counter()
        for _ in range(8):
            runner.step()
            now = time.perf_counter()
            launches.append((now - t) * 1e6)
            t = now
        torch.cuda.synchronize()
    per = [statistics.median(launches[i::8]) for i in range(8)]
    print("\nhost us per step launch right after runner.start (median over the prompts), launches 1..8: "
          + " ".join(f"{x:.0f}" for x in per))


if __name__ == "__main__":
    main()
