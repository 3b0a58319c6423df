"""How many tokens each drafter setting would bring per verify step on the edit workload (CPU, real model).

The greedy output of a prompt does not depend on speculation, so the drafter can be replayed over it
offline: the default model decodes each prompt of `inference.bench --workload edit` once (plain greedy,
CPU reference), then for each DraftConfig the decode loop's drafting is simulated over prompt + output
(plain tokens until the tail matches, a draft, its accepted prefix against the known output, the
drafter's feedback and back-off; no cost check). Reported per setting: verify steps, plain steps,
tokens per forward, and the speedup a verify step costing `c` plain steps would give
(tokens / (plain + c * verify)), for the given costs.

    python -m lab.probe_drafter [--device cuda] [--tokens 192] [--new-code] [--save runs.json | --load runs.json]
        [--costs 1.25,2,3] [--configs "7,2,4;7,1,4;7,2,8;7,3,8;15,2,4;15,2,8"]
        [--bucket-costs 1.14,1.25,1.62,2.28] [--gaps h200|none] [--lags 8,4,2] [--replay ";max_match=4"]
(--save keeps the prompts' ids and greedy outputs, --load replays settings over them without a model; --new-code
decodes the bench's new-code prompts too, named new0, new1, ...: the --replay table gives their speedup apart, the
other tables use the edit prompts only.)
--lags and --replay run the decode loop itself (inference.speculative.decode.speculative_tokens, chaining on) over
the outputs with a runner that answers from them on a virtual clock: a plain step takes 1, a verify step of 2 / 4 /
8 / 16 columns --bucket-costs (the verify bench's ratios; the runner's width is the widest bucket given), and the
device idles between launches as measured on the H200 (GAPS; lab.probe_spec_timeline) unless --gaps none.
--lags: no cost check, N plain steps in flight throughout, for each N. --replay: the loop as the engine runs it
(--loop-lag in flight, DraftConfig.lag near drafts, the cost check timing the virtual clock) for each DraftConfig
variant (one H100, the edit workload measured 2.42x with the eighth session's drafter and 2.63x with the ninth's,
where this replay gives 2.34x and 2.49x: bench-results/h100-2026-11-26-session9/).

Configs are max_draft,min_match,max_match (the drafting alone: no loop, no cost check).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from inference.speculative import DraftConfig, PromptLookupDrafter


def simulate(prompt_ids: list[int], output: list[int], cfg: DraftConfig) -> dict:
    """The decode loop's drafting over a known greedy output: counts of plain and verify steps."""
    d = PromptLookupDrafter(prompt_ids, cfg)
    done, plain, verify, accepted, drafted = 0, 0, 0, 0, 0
    # output[0] comes from prefill (no step); then every token comes from a plain step or a verify step
    d.append(output[0])
    done = 1
    while done < len(output):
        draft = d.propose(limit=len(output) - done - 1) if d.ready() else []
        if draft:
            n = 0
            while n < len(draft) and draft[n] == output[done + n]:
                n += 1
            out = output[done:done + n + 1]
            verify += 1
            drafted += len(draft)
            accepted += n
            d.extend(out)
            d.feedback(len(draft), n)
            done += len(out)
        else:
            plain += 1
            d.append(output[done])
            done += 1
    return {"plain": plain, "verify": verify, "accepted": accepted, "drafted": drafted, "tokens": len(output) - 1}


# Idle device time between launches, in one-token steps, by (launch before, launch after): the H200's host with the
# default model (lab.probe_spec_timeline, bench-results/h200-2026-11-26-session8/loop8/timeline.log, step 405 us);
# "jitter": added to a plain step launched with under two steps queued (plain decode through the decode loop with 2
# in flight vs 8: 2,509 vs 2,618 tok/s).
GAPS = {
    "h200": {("plain", "verify"): 0.21, ("verify", "verify"): 0.13, ("verify", "plain"): 0.11,
             ("plain", "plain"): 0.013, ("chained", "verify"): 0.12, ("chained", "plain"): 0.11,
             ("chained", "chained"): 0.003, ("verify", "chained"): 0.003, "jitter": 0.04},
    "none": {},
}


class ReplayRunner:
    """A runner whose steps and verify steps answer from a known greedy output (output[0] is the prefill's), on a
    virtual clock: the device runs a plain step in 1, a verify step of b columns in bucket_costs[b]; a launch
    starts when the device is free or, if it idles, gaps[(kind before, kind)] after the host launched it (a
    chained step queues behind the one in flight); reading a result moves the host's clock to its end. The decode
    loop's own clock (its cost check) is the host's: `clock()`."""
    can_chain = True

    def __init__(self, output: list[int], bucket_costs: dict[int, float], gaps: dict | None = None):
        self.out, self.pos, self.costs, self.gaps = output, 1, bucket_costs, gaps or {}
        self.max_draft = max(bucket_costs) - 1
        self.host = self.device = 0.0  # host time, device free at
        self.last = "prefill"

    def clock(self) -> float:
        return self.host

    def _launch(self, kind: str, cost: float, queued: bool = False) -> float:
        gap = self.gaps.get((self.last, kind), 0.0)
        self.last = kind
        start = self.device if queued else max(self.device, self.host + gap)
        self.device = start + cost
        return self.device

    def step(self) -> tuple[int, float]:
        tok = self.out[self.pos] if self.pos < len(self.out) else 0
        self.pos += 1
        jitter = self.gaps.get("jitter", 0.0) if self.device - self.host < 2.0 else 0.0
        return tok, self._launch("plain", 1.0 + jitter)

    def read(self, handle: tuple[int, float]) -> int:
        tok, end = handle
        self.host = max(self.host, end)
        return tok

    def verify_async(self, draft: list[int], ahead_of: int = 0):
        start, n = self.pos, 0
        while n < len(draft) and start + n < len(self.out) and draft[n] == self.out[start + n]:
            n += 1
        res = self.out[start:start + n + 1] or [0]
        self.pos = start + n + 1
        cost = self.costs[min(b for b in self.costs if b >= len(draft) + 1)]
        end = self._launch("chained" if ahead_of else "verify", cost, queued=bool(ahead_of))

        def result():
            self.host = max(self.host, end)
            return list(res)
        return result


def simulate_loop(prompt_ids: list[int], output: list[int], cfg: DraftConfig, lag: int,
                  bucket_costs: dict[int, float], gaps: dict | None = None) -> tuple[float, int]:
    """(time in one-token steps, plain steps) of the decode loop over a known greedy output, `lag` plain steps in
    flight (the engine's), the cost check (cfg.cost_aware) on the virtual clock."""
    from inference.speculative.decode import SpecStats, speculative_tokens

    runner, stats = ReplayRunner(output, bucket_costs, gaps), SpecStats()
    got = list(speculative_tokens(runner, (output[0], 0.0), PromptLookupDrafter(prompt_ids, cfg), len(output),
                                  runner.read, stats, lambda: False, lag, clock=runner.clock))
    assert got == output, "the replayed loop must give the output back"
    return max(runner.host, runner.device), stats.plain_steps


def decode(args) -> tuple[list, str]:
    """(name, prompt ids, greedy output ids) per edit prompt (and new-code prompt: --new-code), and the model's name."""
    from inference.engine import Engine, FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams
    from inference.speculative.bench import NEW_CODE, edit_prompts

    engine = Engine.from_pretrained(args.model, device=args.device)
    runs = []
    prompts = edit_prompts() + ([(f"new{i}", t) for i, t in enumerate(NEW_CODE)] if args.new_code else [])
    for name, text in prompts:
        t = time.perf_counter()
        prompt = Prompt.chat(text)
        ids = engine.prompt_ids(prompt)
        out = [tok for ev in engine.generate(prompt, SamplingParams(max_tokens=args.tokens, speculate=False))
               if not isinstance(ev, FinishEvent) for tok in ev.token_ids]
        runs.append((name, ids, out))
        print(f"{name}: {len(out)} tokens, {time.perf_counter() - t:.1f} s")
    return runs, engine.info["model"]


def is_new(name: str) -> bool:
    """Whether a run is one of the new-code prompts (decode's names new0, new1, ...)."""
    return name.startswith("new") and name[3:].isdigit()


def configs_table(runs, configs: str, costs: list[float]) -> None:
    """The drafting alone per max_draft,min_match,max_match: verify and plain steps, speedup at each cost."""
    print("| max_draft, min_match, max_match | verify steps | plain steps | accepted / verify | tokens / forward | "
          + " | ".join(f"speedup @ verify = {c:g} steps" for c in costs) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(costs))
    for spec in filter(None, configs.split(";")):
        k, lo, hi = (int(x) for x in spec.split(","))
        cfg = DraftConfig(max_draft=k, min_match=lo, max_match=hi)
        tot = {"plain": 0, "verify": 0, "accepted": 0, "drafted": 0, "tokens": 0}
        for _, ids, out in runs:
            for key, v in simulate(ids, out, cfg).items():
                tot[key] += v
        fwd = tot["plain"] + tot["verify"]
        speed = [tot["tokens"] / (tot["plain"] + c * tot["verify"]) for c in costs]
        apv = tot["accepted"] / tot["verify"] if tot["verify"] else 0.0
        print(f"| {k}, {lo}, {hi} | {tot['verify']} | {tot['plain']} | {apv:.2f} | {tot['tokens'] / fwd:.2f} | "
              + " | ".join(f"{s:.2f}x" for s in speed) + " |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="default")
    p.add_argument("--device", default="cpu")
    p.add_argument("--save", default=None, help="write the prompts' ids and greedy outputs here (JSON)")
    p.add_argument("--load", default=None, help="read them from here instead of decoding")
    p.add_argument("--tokens", type=int, default=192)
    p.add_argument("--new-code", action="store_true", help="decode the new-code prompts too (replayed apart)")
    p.add_argument("--costs", default="1.25,2,3", help="verify-step costs in plain steps, for the speedup columns")
    p.add_argument("--configs", default="7,2,4;7,1,4;7,2,8;7,3,8;15,2,4;15,2,8")
    p.add_argument("--lags", default="", help="plain steps in flight for the decode-loop replay (e.g. 8,4,2)")
    p.add_argument("--replay", default=None,
                   help='DraftConfig variants for the decode loop as the engine runs it, ";"-separated field=value lists '
                        '("" = the defaults), e.g. ";max_match=4;max_backoff=64"')
    p.add_argument("--loop-lag", type=int, default=8, help="the engine's plain steps in flight (inference.engine.LAG)")
    p.add_argument("--bucket-costs", default="1.14,1.25,1.62,2.28",
                   help="verify steps of 2, 4, 8 (, 16) columns in plain steps (H200, default model: the verify bench, "
                        "fifteenth session: 455 / 501 / 649 / 914 us against a 401 us step)")
    p.add_argument("--gaps", default="h200", choices=sorted(GAPS), help="idle time between launches (GAPS)")
    args = p.parse_args(argv)

    if args.load:
        with open(args.load) as f:
            saved = json.load(f)
        every, model = [tuple(r) for r in saved["runs"]], saved["model"]
    else:
        every, model = decode(args)
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"model": model, "runs": every}, f)
    runs = [r for r in every if not is_new(r[0])]
    new = [r for r in every if is_new(r[0])]
    costs = [float(c) for c in args.costs.split(",")]
    print(f"\n{model}, greedy outputs, {len(runs)} edit prompts" + (f" and {len(new)} new-code ones" if new else "")
          + f", up to {args.tokens} tokens")
    if args.configs:
        configs_table(runs, args.configs, costs)

    buckets = dict(zip((2, 4, 8, 16), (float(c) for c in args.bucket_costs.split(","))))
    gaps = GAPS[args.gaps]

    def replay(cfg: DraftConfig, lag: int, over: list | None = None) -> tuple[float, int, list[float]]:
        over = runs if over is None else over
        sims = [simulate_loop(ids, out, cfg, lag, buckets, gaps) for _, ids, out in over]
        n = [len(out) - 1 for _, _, out in over]
        return sum(n) / sum(t for t, _ in sims), sum(p for _, p in sims), [k / t for k, (t, _) in zip(n, sims)]

    where = f"verify steps of {' / '.join(map(str, buckets))} columns = {args.bucket_costs} plain steps, gaps {args.gaps}"
    if args.lags:
        print(f"\nthe decode loop (no cost check) with N plain steps in flight throughout, {where}")
        print("| plain steps in flight | speedup | plain steps | per prompt |")
        print("|---:|---:|---:|---|")
        for lag in (int(x) for x in args.lags.split(",")):
            speed, plain, per = replay(replace(DraftConfig(), cost_aware=False, lag=lag), lag)
            print(f"| {lag} | {speed:.2f}x | {plain} | " + " ".join(f"{x:.2f}" for x in per) + " |")
    if args.replay is not None:
        print(f"\nthe decode loop as the engine runs it ({args.loop_lag} plain steps in flight, DraftConfig.lag near "
              f"drafts, the cost check on the virtual clock), {where}")
        apart = " | new code | per new-code prompt" if new else ""
        print(f"| DraftConfig | speedup | plain steps | per prompt{apart} |")
        print("|---|---:|---:|---|" + ("---:|---|" if new else ""))
        try:
            variants = [(spec, DraftConfig.parse(spec)) for spec in args.replay.split(";")]
        except ValueError as e:
            raise SystemExit(f"--replay: {e}")
        for spec, cfg in variants:
            speed, plain, per = replay(cfg, args.loop_lag)
            row = f"| {spec or 'defaults'} | {speed:.3f}x | {plain} | " + " ".join(f"{x:.2f}" for x in per) + " |"
            if new:
                speed, _, per = replay(cfg, args.loop_lag, new)
                row += f" {speed:.3f}x | " + " ".join(f"{x:.2f}" for x in per) + " |"
            print(row)


if __name__ == "__main__":
    main()
