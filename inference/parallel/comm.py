"""The communication layer of tensor parallelism: the three collectives a TP decode step needs.

    all_reduce_(t)          sum partial outputs in place (after o_proj and after down_proj)
    all_gather(t)           concatenate every rank's vocabulary slice (filtered sampling only)
    argmax(scores, offset)  the global argmax over vocabulary slices, ties to the lowest id
                            (what torch.argmax returns on the whole vector)

`Comm` is the interface (the tests drive it with threads); `DistComm` runs it over a
torch.distributed process group: gloo on CPU, NCCL on GPU. None of these wait on the host, so a
step can run ahead of the tokens read back (and be captured in a CUDA graph with NCCL).
Optionally it records the device time spent inside collectives (`timed=True`: the TP bench's
compute-vs-sync split). `init_group` creates the process group; the launcher calls it.
Multicast (NVLS) is never used: the launcher turns it off in the environment before any rank
starts, and nothing here calls a multicast API.
Not here: fused or overlapped reductions (GEMV-epilogue peer stores): not built.
"""

from __future__ import annotations

import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import Tensor


class Comm:
    rank: int = 0
    world: int = 1

    def all_reduce_(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def all_gather(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def argmax(self, scores: Tensor, offset: int) -> Tensor:
        """scores [n] (this rank's slice, starting at global id `offset`) -> global argmax [1] int64."""
        value, index = torch.max(scores, dim=-1)
        pair = torch.stack([value.double(), (index + offset).double()])  # exact for float32 / ids < 2^53
        pairs = self.all_gather(pair).view(self.world, 2)
        best = pairs[:, 0].max()
        ids = torch.where(pairs[:, 0] == best, pairs[:, 1], torch.full_like(pairs[:, 1], float("inf")))
        return ids.min().to(torch.int64).view(1)


def _gather_into(out: Tensor, t: Tensor, group) -> None:
    # torch >= 2.13 renames all_gather_into_tensor to all_gather_single (the old name warns).
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(out, t, group=group)


class DistComm(Comm):
    """Collectives over a torch.distributed group (the default group unless one is given)."""

    def __init__(self, group=None, timed: bool = False):
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.timed = timed
        self._spans: list = []  # (start, end) events on CUDA, or seconds on CPU

    def all_reduce_(self, t: Tensor) -> Tensor:
        mark = self._begin(t)
        dist.all_reduce(t, group=self.group)
        self._end(t, mark)
        return t

    def all_gather(self, t: Tensor) -> Tensor:
        out = torch.empty((self.world * t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
        mark = self._begin(t)
        _gather_into(out, t.contiguous(), self.group)
        self._end(t, mark)
        return out

    # ---- timing: the bench's sync share of a step ----
    def _begin(self, t: Tensor):
        if not self.timed:
            return None
        if t.is_cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def _end(self, t: Tensor, mark) -> None:
        if mark is None:
            return
        if t.is_cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._spans.append((mark, ev))
        else:
            self._spans.append(time.perf_counter() - mark)

    def spans_ms(self, reset: bool = True) -> list[float]:
        """Milliseconds inside each timed collective, in issue order; waits for the device."""
        out = []
        for span in self._spans:
            if isinstance(span, tuple):
                span[1].synchronize()
                out.append(span[0].elapsed_time(span[1]))
            else:
                out.append(span * 1000)
        if reset:
            self._spans.clear()
        return out


def init_group(rank: int, world: int, init_method: str, backend: str, timeout_s: float = 300.0) -> None:
    """Join the default process group (one per process). NCCL ranks bind to cuda:rank first."""
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))
