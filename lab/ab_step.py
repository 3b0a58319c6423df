"""The decode step with the Triton or the CUDA kernels of one kind, same engine, same run (GPU only):

    python -m lab.ab_step --what attention|gemv [--shapes a,b] [--contexts 512,16384]
                                           [--replays 200]

--what attention switches decode attention (FastRunner.use_attention: Triton vs the CUDA cluster
kernel), gemv the layers' GEMVs (FastRunner.use_gemv: Triton vs kernels.stream_gemv); the other
kind stays on auto. For each shape: an engine over random weights; teacher-forced logits of 16
positions with each kernel (top-1 agreement, relative error between them); then the greedy step's
CUDA graph replayed back to back (us per step, median of 3 rounds, the two kernels alternating so
drift hits both). Prints one table row per shape x context x kernel.
"""
import argparse
import statistics
import tempfile

import torch

from lab.engine import greedy_graph, random_engine, replay_us
from inference.bench import random_prompt
from inference.sampling import SamplingParams

KINDS = ("triton", "cuda")


def use(engine, what: str, kind: str) -> None:
    if what == "attention":
        engine.runner.use_attention(kind)
    else:
        engine.runner.use_gemv(kind)


def forced_logits(engine, what: str, kind: str, prompt: list[int], follow: list[int]) -> torch.Tensor:
    r = engine.runner
    use(engine, what, kind)
    r.start(prompt, SamplingParams(max_tokens=64, temperature=0.0))
    return torch.stack([r.forced_logits(t) for t in follow])


def step_us(engine, what: str, kind: str, context: int, replays: int) -> float:
    use(engine, what, kind)
    return replay_us(greedy_graph(engine, context), replays)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--what", choices=("attention", "gemv"), required=True)
    p.add_argument("--shapes", default="qwen2.5-coder-1.5b,qwen3-1.7b,qwen2.5-coder-3b")
    p.add_argument("--contexts", default="512,16384")
    p.add_argument("--replays", type=int, default=200)
    args = p.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    rows = []
    for shape in args.shapes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            engine = random_engine(shape, max(contexts) + 3 * 4 * args.replays + 64, tmp)
            vocab = engine.cfg.vocab_size
            prompt, follow = random_prompt(700, vocab), random_prompt(16, vocab)
            la, lb = (forced_logits(engine, args.what, k, prompt, follow) for k in KINDS)
            agree = (la.argmax(-1) == lb.argmax(-1)).float().mean().item()
            err = ((la - lb).norm() / la.norm()).item()
            print(f"{shape}: {args.what} cuda vs triton logits, top-1 agreement {agree:.3f}, rel err {err:.2e}", flush=True)
            for ctx in contexts:
                times = {k: [] for k in KINDS}
                for _ in range(3):
                    for k in KINDS:
                        times[k].append(step_us(engine, args.what, k, ctx, args.replays))
                for k in KINDS:
                    med = statistics.median(times[k])
                    rows.append((shape, ctx, k, med, times[k]))
                    print(f"{shape} ctx {ctx} {k}: {med:.1f} us/step {[round(t, 1) for t in times[k]]}", flush=True)
            del engine
            torch.cuda.empty_cache()
    print(f"\n| shape | context | {args.what} | us/step | tok/s |")
    print("|---|---:|---|---:|---:|")
    for shape, ctx, k, med, _ in rows:
        print(f"| {shape} | {ctx} | {k} | {med:.1f} | {1e6 / med:.0f} |")


if __name__ == "__main__":
    main()
