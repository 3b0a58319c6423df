"""GPU diagnostic (issue 24): where greedy FP8 decoding differs between the CUDA graph and eager launches.

    python scripts/gpu/fp8_graph_eager.py [--shape qwen3-1.7b] [--layers 4] [--tokens 64]

tests/inference/test_fp8_fast_path.py's graph-vs-eager test failed on the Qwen3-1.7B shape (random weights)
with the Triton FP8 GEMVs. For each kernel choice (attention auto / triton x GEMVs cuda / triton) this runs
the same prompt greedily: graph twice, eager twice, and prints the first token index where each run differs
from the first graph run (- where none), and whether two eager runs already differ (non-determinism) or only
graph vs eager (a launch-order or PDL effect). First, the prefill alone: graph (padded to its bucket) vs
eager logits for a 40- and a 64-token prompt. GPU only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv=None) -> int:
    from inference.engine import Engine, FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams
    from inference.synth import write_checkpoint

    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="qwen3-1.7b")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--prompt", type=int, default=40, help="prompt tokens")
    p.add_argument("--dir", default="/tmp/fp8_graph_eager")
    args = p.parse_args(argv)
    path = write_checkpoint(args.shape, Path(args.dir) / args.shape, layers=args.layers, device="cuda")
    engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=1024, weights="fp8")
    runner = engine.runner
    prompt = Prompt.from_ids(list(range(100, 100 + args.prompt)))
    greedy = SamplingParams(max_tokens=args.tokens, ignore_eos=True)

    def run():
        return [t for ev in engine.generate(prompt, greedy) if not isinstance(ev, FinishEvent) for t in ev.token_ids]

    def first_diff(a, b):
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), "-")

    cache = runner.cache
    for t in (40, 64):  # the prefill alone: graph (padded to the 64-token bucket) vs eager (exact length)
        ids = torch.arange(100, 100 + t, device="cuda")
        with torch.inference_mode():
            g = runner.model.prefill(ids, cache, use_graph=True).clone()
            e = runner.model.prefill(ids, cache, use_graph=False).clone()
        top = e.topk(2).values
        print(f"prefill {t} tokens: graph vs eager logits max |diff| {(g - e).abs().max().item():.3e}, "
              f"argmax {'same' if g.argmax() == e.argmax() else 'differs'} (top-2 gap {(top[0] - top[1]).item():.3e})",
              flush=True)
    for attention in ("auto", "triton"):
        for gemv in ("cuda", "triton"):
            try:
                runner.use_attention(attention)
                runner.use_gemv("overlap" if gemv == "cuda" else "triton")
            except ValueError as e:
                print(f"attention {attention} gemv {gemv}: not here ({e})")
                continue
            runs = {}
            for use_graph in (True, False):
                runner.use_graph = use_graph
                for again in (0, 1):
                    runs[("graph" if use_graph else "eager", again)] = run()
            ref = runs[("graph", 0)]
            diffs = ", ".join(f"{m}{a}: {first_diff(r, ref)}" for (m, a), r in runs.items() if (m, a) != ("graph", 0))
            eager_nd = first_diff(runs[("eager", 0)], runs[("eager", 1)])
            print(f"attention {runner.attention_kind} gemv {runner.gemv_kind}: first differing token vs graph0: "
                  f"{diffs}; eager0 vs eager1: {eager_nd}", flush=True)
            runner.use_graph = True
    return 0


if __name__ == "__main__":
    torch.manual_seed(0)
    sys.exit(main())
