"""What the GPU probes in lab/ share: an engine over a random-weight checkpoint, and its greedy
decode step's CUDA graph at a given context. Not a benchmark (see inference.bench)."""
from pathlib import Path

import torch

from inference.bench import random_prompt
from inference.engine import Engine
from inference.sampling import SamplingParams
from inference.synth import write_checkpoint


def random_engine(shape: str, max_context: int, tmp: str | Path, weights: str | None = None) -> Engine:
    """An Engine on CUDA over a synthetic checkpoint of `shape` written under `tmp` (weights: e.g. "fp8")."""
    path = write_checkpoint(shape, Path(tmp) / "m", device="cuda")
    return Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=max_context, weights=weights)


def greedy_graph(engine: Engine, context: int, warmup: int = 5) -> torch.cuda.CUDAGraph:
    """The runner's greedy step graph after a random `context`-token prompt, replayed `warmup` times."""
    runner = engine.runner
    runner.start(random_prompt(context, engine.cfg.vocab_size), SamplingParams(max_tokens=10_000, temperature=0.0))
    graph = runner.step_graph()
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, replays: int) -> float:
    """Microseconds per replay of `graph`, replayed `replays` times back to back."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        graph.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / replays


class RankAlone:
    """Rank `rank`'s share of a tensor-parallel step, alone on one GPU (greedy_graph takes it like an Engine): the
    one-GPU fast path (FastRunner) over that rank's shard of a random `shape`, with the shard's config and the
    fused reduction's tuning (QKV and gate/up streamed at any hidden size), no reductions. What
    inference.parallel.profile calls a rank's compute, without the peers; its down_proj is the one-GPU plan's
    (Triton), where the fused step streams it."""

    def __init__(self, shape: str, tp: int, max_context: int, tmp: str | Path, rank: int = 0):
        from dataclasses import replace

        from inference.source import open_checkpoint
        from inference.fast.runner import FastRunner
        from inference.parallel.plan import TPPlan
        from inference.parallel.shard import shard_weights
        from kernels.tuning import for_device

        ckpt = open_checkpoint(write_checkpoint(shape, Path(tmp) / "m", device="cuda"))
        plan = TPPlan(ckpt.config, tp)
        shard = shard_weights(ckpt.loader(torch.bfloat16)(device="cuda"), plan, rank)
        tuning = for_device("cuda")
        tuning = replace(tuning, stream_max_hidden=max(tuning.stream_max_hidden, ckpt.config.hidden_size))
        self.cfg = plan.local_cfg()
        self.runner = FastRunner(self.cfg, shard, max_context, tuning=tuning)
        self.info = {"weights": "bfloat16", "runner": f"rank {rank} of tp {tp} alone"}
