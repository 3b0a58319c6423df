"""Why the Qwen3-shape TP=2 test's sampled request gives other tokens with graphs on and off (found 2026-11-26,
flag and fused alike; tests/inference/test_parallel.py's QWEN3_SAMPLED). The hypothesis: graphs off runs the
prefill eagerly on the prompt's own length, graphs on replays the prompt bucket's graph (at least
inference.fast.prefill.MIN_BUCKET rows), and cuBLAS on the two shapes need not give the same bits; decode is not
involved (its greedy graph and eager kernels agree).

For each prompt length (32: padded to the 64 bucket; 64: a whole bucket) and reduction, it prints whether the
sampled tokens with graphs on and off agree. If the hypothesis holds, the 64-token prompt agrees with every
reduction (the prefill's shapes are the same either way).

    PYTHONPATH=. python scripts/gpu/tp_prefill_bits.py [--shape qwen3-1.7b] [--reduce flag fused nccl]   (2 GPUs)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from inference.engine import Engine, FinishEvent
from inference.prompts import Prompt
from inference.sampling import SamplingParams
from inference.synth import write_checkpoint


def sampled(engine, ids, graphs: bool) -> list[int]:
    engine.runner.use_graphs(graphs)
    params = SamplingParams(max_tokens=32, ignore_eos=True, temperature=0.8, top_p=0.95, seed=3)
    events = list(engine.generate(Prompt.from_ids(ids), params))
    assert isinstance(events[-1], FinishEvent)
    engine.runner.use_graphs(True)
    return [t for e in events[:-1] for t in e.token_ids]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="qwen3-1.7b")
    p.add_argument("--reduce", nargs="+", default=["flag", "fused", "nccl"])
    args = p.parse_args()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30000, (64,), generator=g).tolist()
    with tempfile.TemporaryDirectory() as tmp:
        path = write_checkpoint(args.shape, Path(tmp) / "m", layers=4, device="cuda")
        for reduce in args.reduce:
            engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=512, tp=2,
                                            tp_reduce=reduce)
            try:
                for n in (32, 64):
                    on, off = sampled(engine, ids[:n], True), sampled(engine, ids[:n], False)
                    part = next((i for i, (a, b) in enumerate(zip(on, off)) if a != b), None)
                    print(f"{args.shape} tp=2 {reduce}: prompt {n}: sampled graphs on vs off "
                          f"{'agree' if part is None else f'part at token {part}'}", flush=True)
            finally:
                engine.close()


if __name__ == "__main__":
    main()
