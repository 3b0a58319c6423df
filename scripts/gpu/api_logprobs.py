"""Decode speed with and without logprobs on the fast path (helper "api", issue 23): greedy,
256 tokens, the same prompt; prints one table row per setting and whether the greedy tokens
match the plain run's. Usage: python scripts/gpu/api_logprobs.py MODEL_PATH"""
import sys

from inference.engine import Engine, FinishEvent
from inference.sampling import SamplingParams

engine = Engine.from_pretrained(sys.argv[1], device="cuda")
prompt = "def quicksort(xs):"


def run(logprobs):
    params = SamplingParams(max_tokens=256, ignore_eos=True, speculate=False, logprobs=logprobs)
    for _ in range(2):  # the first captures the graph of this mode
        events = list(engine.generate(prompt, params))
    tokens = [t for e in events[:-1] for t in e.token_ids]
    assert isinstance(events[-1], FinishEvent)
    return tokens, events[-1].stats


base, stats = run(None)
print(f"model {engine.info['model']} runner {engine.info['runner']}")
print("| logprobs | decode tok/s | TTFT ms | greedy tokens equal to plain |")
print("|---|---:|---:|---|")
print(f"| off | {stats.decode_tok_s:.0f} | {stats.ttft_ms:.1f} | - |")
for k in (0, 5, 20):
    tokens, stats = run(k)
    same = sum(a == b for a, b in zip(tokens, base))
    print(f"| top {k} | {stats.decode_tok_s:.0f} | {stats.ttft_ms:.1f} | {same}/{len(base)} |")
