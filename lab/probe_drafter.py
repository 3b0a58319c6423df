"""How many tokens each drafter setting would bring per verify step on the edit workload (CPU, real model).

The greedy output of a prompt does not depend on speculation, so the drafter can be replayed over it
offline: the default model decodes each prompt of `inference.bench --workload edit` once (plain greedy,
CPU reference), then for each DraftConfig the decode loop's drafting is simulated over prompt + output
(plain tokens until the tail matches, a draft, its accepted prefix against the known output, the
drafter's feedback and back-off; no cost check). Reported per setting: verify steps, plain steps,
tokens per forward, and the speedup a verify step costing `c` plain steps would give
(tokens / (plain + c * verify)), for the given costs.

    python -m lab.probe_drafter [--device cuda] [--tokens 192] [--save runs.json | --load runs.json]
        [--costs 1.25,2,3] [--configs "7,2,4;7,1,4;7,2,8;7,3,8;15,2,4;15,2,8"]
        [--lags 8,4,2 --bucket-costs 1.18,1.34,1.77[,2.4]]
(--save keeps the prompts' ids and greedy outputs, --load replays settings over them without a model.)
--lags: the decode loop itself (inference.speculative.decode.speculative_tokens, chaining on) over the outputs with
a runner that answers from them, for each count of plain steps in flight: device time in plain steps, a verify
step of 2 / 4 / 8 (/ 16) columns costing --bucket-costs (the verify bench's ratios), no host time; the runner's
width is the widest bucket given.

Configs are max_draft,min_match,max_match. The GPU's verify step pads a draft to 2, 4 or 8 columns, so at
most 7 drafted tokens there.
"""

from __future__ import annotations

import argparse
import json
import time

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


class ReplayRunner:
    """A runner whose steps and verify steps answer from a known greedy output (output[0] is the prefill's), and
    that adds up device time: 1 per plain step, bucket_costs[b] per verify step of b columns."""
    can_chain = True

    def __init__(self, output: list[int], bucket_costs: dict[int, float]):
        self.out, self.pos, self.time, self.costs = output, 1, 0.0, bucket_costs
        self.max_draft = max(bucket_costs) - 1

    def step(self) -> int:
        tok = self.out[self.pos] if self.pos < len(self.out) else 0
        self.pos += 1
        self.time += 1.0
        return tok

    def verify_async(self, draft: list[int], ahead_of: int = 0):
        start, n = self.pos, 0
        while n < len(draft) and start + n < len(self.out) and draft[n] == self.out[start + n]:
            n += 1
        res = self.out[start:start + n + 1] or [0]
        self.pos = start + n + 1
        self.time += self.costs[min(b for b in self.costs if b >= len(draft) + 1)]
        return lambda: list(res)


def simulate_loop(prompt_ids: list[int], output: list[int], cfg: DraftConfig, lag: int,
                  bucket_costs: dict[int, float]) -> float:
    """Device time (plain steps) of the decode loop over a known greedy output with `lag` plain steps in flight."""
    from inference.speculative.decode import SpecStats, speculative_tokens

    runner = ReplayRunner(output, bucket_costs)
    d = PromptLookupDrafter(prompt_ids, DraftConfig(max_draft=cfg.max_draft, min_match=cfg.min_match,
                                                    max_match=cfg.max_match, cost_aware=False, lag=lag))
    got = list(speculative_tokens(runner, output[0], d, len(output), lambda t: t, SpecStats(), lambda: False, lag))
    assert got == output, "the replayed loop must give the output back"
    return runner.time


def decode(args) -> tuple[list, str]:
    """(name, prompt ids, greedy output ids) per edit prompt, and the model's name."""
    from inference.engine import Engine, FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams
    from inference.speculative.bench import edit_prompts

    engine = Engine.from_pretrained(args.model, device=args.device)
    runs = []
    for name, text in edit_prompts():
        t = time.perf_counter()
        prompt = Prompt.chat(text)
        ids = engine.prompt_ids(prompt)
        out = [tok for ev in engine.generate(prompt, SamplingParams(max_tokens=args.tokens, speculate=False))
               if not isinstance(ev, FinishEvent) for tok in ev.token_ids]
        runs.append((name, ids, out))
        print(f"{name}: {len(out)} tokens, {time.perf_counter() - t:.1f} s")
    return runs, engine.info["model"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="default")
    p.add_argument("--device", default="cpu")
    p.add_argument("--save", default=None, help="write the prompts' ids and greedy outputs here (JSON)")
    p.add_argument("--load", default=None, help="read them from here instead of decoding")
    p.add_argument("--tokens", type=int, default=192)
    p.add_argument("--costs", default="1.25,2,3", help="verify-step costs in plain steps, for the speedup columns")
    p.add_argument("--configs", default="7,2,4;7,1,4;7,2,8;7,3,8;15,2,4;15,2,8")
    p.add_argument("--lags", default="", help="plain steps in flight for the decode-loop replay (e.g. 8,4,2)")
    p.add_argument("--bucket-costs", default="1.18,1.34,1.77", help="verify steps of 2, 4, 8 (, 16) columns in plain steps")
    args = p.parse_args(argv)

    if args.load:
        with open(args.load) as f:
            saved = json.load(f)
        runs, model = [tuple(r) for r in saved["runs"]], saved["model"]
    else:
        runs, model = decode(args)
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"model": model, "runs": runs}, f)
    costs = [float(c) for c in args.costs.split(",")]
    print(f"\n{model}, greedy outputs, {len(runs)} edit prompts, up to {args.tokens} tokens")
    print("| max_draft, min_match, max_match | verify steps | plain steps | accepted / verify | tokens / forward | "
          + " | ".join(f"speedup @ verify = {c:g} steps" for c in costs) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(costs))
    for spec in filter(None, args.configs.split(";")):
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
    if args.lags:
        costs3 = dict(zip((2, 4, 8, 16), (float(c) for c in args.bucket_costs.split(","))))
        print(f"\nthe decode loop (7, 2, 4), verify steps of 2 / 4 / 8 / 16 columns = {args.bucket_costs} plain steps")
        print("| plain steps in flight | speedup (device time) | per prompt |")
        print("|---:|---:|---|")
        for lag in (int(x) for x in args.lags.split(",")):
            times = [simulate_loop(ids, out, DraftConfig(), lag, costs3) for _, ids, out in runs]
            toks = [len(out) - 1 for _, _, out in runs]
            print(f"| {lag} | {sum(toks) / sum(times):.2f}x | " + " ".join(f"{t / x:.2f}" for t, x in zip(toks, times))
                  + " |")


if __name__ == "__main__":
    main()
