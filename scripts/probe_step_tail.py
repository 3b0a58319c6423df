"""What the end of a decode step costs (GPU only), us per token at context 512, median of 3:

    PYTHONPATH=. python scripts/probe_step_tail.py [shape]

- engine: the engine's decode loop (as inference.bench), greedy with the fused tail
  (lm_head_argmax, fused=True) or LM head + torch argmax + feed_token (fused=False);
- replay: the step's CUDA graph replayed back to back (no engine), replay+copy: the same plus the
  8-byte device-to-host copy + event per step that the engine did before the host ring;
- sampled: temperature 0.8 / top-p 0.95, and top-k 50 + repetition penalty 1.1.
Figures are in kernels/PERF.md ("Third session").
"""
import os, statistics, sys, tempfile
import torch
from inference.bench import decode_rate, random_prompt
from _probe_engine import random_engine
from inference.sampling import SamplingParams

shape = sys.argv[1] if len(sys.argv) > 1 else "qwen2.5-coder-1.5b"
tag = os.environ.get("TAG", "")
tmp = tempfile.TemporaryDirectory()
engine = random_engine(shape, 2048, tmp.name)
runner = engine.runner

def raw(fused, n=512, copy=False):
    runner.fused_greedy = fused
    runner.start(random_prompt(512, engine.cfg.vocab_size), SamplingParams(max_tokens=n + 8, temperature=0.0))
    g = runner._graph()
    host = torch.zeros(n, dtype=torch.int64, pin_memory=True)
    for _ in range(8): g.replay()
    torch.cuda.synchronize()
    runner.start(random_prompt(512, engine.cfg.vocab_size), SamplingParams(max_tokens=n + 8, temperature=0.0))
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for i in range(n):
        g.replay()
        if copy:
            host[i:i+1].copy_(runner.token, non_blocking=True)
            torch.cuda.Event(enable_timing=True).record()
    b.record(); b.synchronize()
    return a.elapsed_time(b) * 1000 / n

def sampled_rate():
    from inference.engine import FinishEvent
    from inference.prompts import Prompt
    prompt = Prompt.from_ids(random_prompt(512, engine.cfg.vocab_size))
    rates = []
    for p in (dict(temperature=0.8, top_p=0.95), dict(temperature=0.8, top_k=50, repetition_penalty=1.1)):
        for ev in engine.generate(prompt, SamplingParams(max_tokens=256, ignore_eos=True, seed=1, **p)):
            if isinstance(ev, FinishEvent):
                rates.append(1e6 / ev.stats.decode_tok_s)
    return rates

res = {}
for rep in range(3):
    a, b = sampled_rate()
    res.setdefault(("sampled t0.8 top_p", False), []).append(a)
    res.setdefault(("sampled top_k+penalty", False), []).append(b)
    for fused in (False, True):
        runner.fused_greedy = fused
        r = decode_rate(engine, 512, 256, 1)
        res.setdefault(("engine", fused), []).append(1e6 / r["tok_s"])
        res.setdefault(("replay", fused), []).append(raw(fused))
        res.setdefault(("replay+copy", fused), []).append(raw(fused, copy=True))
print(f"\n[{shape} {tag}] us per token, median of 3 (ctx 512)")
for (what, fused), v in sorted(res.items()):
    print(f"  {what:12s} fused={fused!s:5s} {statistics.median(v):8.1f}  {[round(x,1) for x in v]}")
