"""Tensor-parallel runners: one `RankRunner` per process, and the `TPRunner` the engine drives.

`RankRunner` is `ReferenceRunner`'s twin on one rank: its shard, its slice of the KV cache (its
K/V heads), a `ShardedSampler`, and the same two calls. Every rank runs the same calls in the
same order; the collectives inside keep them in step, and every rank ends a call with the same
token.

`TPRunner` is rank 0 in the engine's process: each `start` / `step` (or `forced_logits`,
`time_steps`) is first sent to the other ranks (`followers`: the launcher's handles, see
launch.py), then run locally; its token is the engine's. A request without a seed gets one here,
so all ranks draw the same noise. Its rank is this reference runner or the GPU fast rank
(fast.py); the followers run the same kind.
"""

from __future__ import annotations

import os
from dataclasses import replace

import torch
from torch import Tensor

from ..reference import KVCache
from ..runner import Runner
from ..sampling import SamplingParams
from ..weights import ModelWeights
from .comm import Comm
from .model import TPModel
from .plan import TPPlan
from .sampling import ShardedSampler


class RankRunner(Runner):
    name = "tp-reference"

    def __init__(self, plan: TPPlan, rank: int, shard: ModelWeights, comm: Comm, max_context: int):
        local = plan.local_cfg()
        self.comm = comm
        self.cfg, self.tp_plan, self.rank = plan.cfg, plan, rank
        self.max_context, self.device = max_context, shard.device
        self.w = shard
        self.model = TPModel(local, shard, max_context, comm)
        self.cache = KVCache(local, max_context, shard.device, shard.dtype)
        self.sampler = ShardedSampler(plan.cfg.vocab_size, plan.vocab(rank), shard.device, comm)
        self.pos = 0
        self.last: Tensor | None = None

    @property
    def seed(self) -> int:
        return self.sampler.seed

    @torch.inference_mode()
    def start(self, prompt_ids: list[int], params: SamplingParams) -> Tensor:
        ids = torch.tensor(prompt_ids, dtype=torch.int64, device=self.device)
        self.sampler.configure(params, ids)
        logits = self.model.forward(ids, 0, self.cache)
        self.pos = len(prompt_ids)
        self.last = self.sampler(logits[-1])
        return self.last

    @torch.inference_mode()
    def step(self) -> Tensor:
        logits = self.model.forward(self.last, self.pos, self.cache)
        self.pos += 1
        self.last = self.sampler(logits[0])
        return self.last

    def use_pdl(self, on: bool) -> None:
        """Nothing to switch: the reference rank launches no PDL kernels."""

    def use_graphs(self, on: bool) -> None:
        """Nothing to switch: the reference rank captures no graphs."""

    @torch.inference_mode()
    def forced_logits(self, token: int) -> Tensor:
        """Teacher forcing (GPU tests): decode `token` at the next position -> the whole vocabulary's
        logits [V] float32 on every rank; the sampler is not advanced."""
        ids = torch.tensor([token], dtype=torch.int64, device=self.device)
        logits = self.model.forward(ids, self.pos, self.cache)[0]
        self.pos += 1
        return self.comm.all_gather(logits)


class TPRunner(Runner):
    """Rank 0: drives the followers, runs its own rank, returns the token. Its rank is a `RankRunner`
    (reference path) or a `FastRankRunner` (inference.parallel.fast, GPU)."""

    def __init__(self, local: Runner, followers):
        self.local, self.followers = local, followers
        self.name = local.name
        self.cfg, self.max_context, self.device = local.tp_plan.cfg, local.max_context, local.device
        self.tp = local.tp_plan.tp
        self.w, self.cache = local.w, local.cache  # rank 0's shard: bytes each GPU reads per token
        for name in ("tuning", "attention_mode", "gemv_mode"):  # the fast rank's kernel choices (engine info)
            if hasattr(local, name):
                setattr(self, name, getattr(local, name))

    @property
    def seed(self) -> int:
        return self.local.seed

    @property
    def comm(self) -> Comm:
        return self.local.comm

    @property
    def pdl(self) -> bool:
        """Whether the ranks' kernels launch with programmatic dependent launch (fast ranks; bench reports it)."""
        return getattr(self.local, "pdl", False)

    @pdl.setter
    def pdl(self, on: bool) -> None:
        """The bench's --no-pdl, on every rank."""
        self._all("use_pdl", bool(on))

    def _all(self, method: str, *args):
        """Run `method(*args)` on every rank: sent to the followers first, then run here."""
        self.followers.check()
        self.followers.send((method, *args))
        return getattr(self.local, method)(*args)

    def start(self, prompt_ids: list[int], params: SamplingParams) -> Tensor:
        if params.seed is None:
            params = replace(params, seed=int.from_bytes(os.urandom(8), "little") >> 1)
        return self._all("start", list(prompt_ids), params)

    def step(self) -> Tensor:
        return self._all("step")

    def forced_logits(self, token: int) -> Tensor:
        return self._all("forced_logits", int(token))

    def use_graphs(self, on: bool) -> None:
        """The fast ranks replay their captured steps (on) or launch the kernels eagerly (off), every rank."""
        self._all("use_graphs", bool(on))

    def time_steps(self, pos: int, steps: int, collectives: bool = True) -> float:
        """The fast ranks' step timing (FastRankRunner.time_steps) on every rank; rank 0's ms per step."""
        return self._all("time_steps", pos, steps, collectives)

    def close(self) -> None:
        """Stop the other ranks and leave the process group (idempotent)."""
        getattr(self.local, "release", lambda: None)()
        self.followers.close()
