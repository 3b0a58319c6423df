"""Where a tensor-parallel decode step's time goes: compute vs synchronisation (inference.bench --tp).

`split(engine, ...)` picks the measurement the engine's ranks allow:

`graph_split(engine, pos, steps)` (fast ranks: the step is one CUDA graph, so its collectives
cannot be timed one by one): the step graph replayed back to back on every rank, then a graph of
the same step captured without its collectives, replayed on each rank alone; sync = the
difference per step, compute = the collective-free step. Both are device time on rank 0.

`sync_split(engine, prompt_ids, tokens, ms_per_token)` (reference ranks) decodes once more with rank 0's
collectives timed (a device event on each side of every all-reduce and all-gather, so a
collective's time includes waiting for the slowest rank) and splits the step: sync = the
collectives' time per decoded token, compute = the untimed run's ms/token minus that. The
events themselves slow the timed run a little; the split is an estimate, the tok/s is not.
"""

from __future__ import annotations


def sync_split(engine, prompt_ids: list[int], tokens: int, ms_per_token: float) -> dict:
    from ..engine import FinishEvent
    from ..prompts import Prompt
    from ..sampling import SamplingParams

    comm = engine.runner.comm
    comm.spans_ms()  # drop anything recorded before
    comm.timed = True
    try:
        for ev in engine.generate(Prompt.from_ids(prompt_ids), SamplingParams(max_tokens=tokens, ignore_eos=True)):
            if isinstance(ev, FinishEvent):
                generated = ev.stats.generated_tokens
    finally:
        comm.timed = False
    spans = comm.spans_ms()
    per_step = 2 * engine.cfg.num_layers + 1  # two all-reduces per layer + the greedy argmax's all-gather
    assert len(spans) == per_step * generated, (len(spans), per_step, generated)
    decode = spans[per_step:]  # the prefill's collectives (and the first token's) are not decode
    steps = generated - 1
    sync = sum(decode) / steps if steps else 0.0
    return {"collectives_per_token": per_step, "sync_ms_per_token": sync,
            "sync_us_per_collective": 1000 * sync / per_step,
            "compute_ms_per_token": ms_per_token - sync}


def graph_split(engine, pos: int, steps: int) -> dict:
    runner = engine.runner
    with_sync = runner.time_steps(pos, steps, True)
    alone = runner.time_steps(pos, steps, False)
    per_step = 2 * engine.cfg.num_layers + 1
    sync = with_sync - alone
    return {"collectives_per_token": per_step, "graph_ms_per_token": with_sync, "sync_ms_per_token": sync,
            "sync_us_per_collective": 1000 * sync / per_step, "compute_ms_per_token": alone}


def split(engine, prompt_ids: list[int], tokens: int, ms_per_token: float) -> dict:
    """The compute-vs-sync split of a TP engine's greedy step (graph_split on fast ranks, else sync_split)."""
    if hasattr(engine.runner, "time_steps") and engine.info["runner"] == "tp-cuda-graph":
        return graph_split(engine, len(prompt_ids), min(tokens, 128))
    return sync_split(engine, prompt_ids, tokens, ms_per_token)
