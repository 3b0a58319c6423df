"""The fast ranks' all-reduce of the residual stream x inside the captured step, in place.

    reducer = make_reducer("nccl" | "symm", comm, hidden_size, device)
    reducer(x)          # after o_proj and after down_proj: x now holds the sum over ranks

"nccl": torch.distributed's all_reduce (NCCL; capturable in a CUDA graph).
"symm": PyTorch symmetric memory's one-shot all-reduce: x is copied into this rank's symmetric buffer,
then every rank reads every peer's buffer over NVLink and sums them in rank order (so every rank gets
the same bits) back into x. Two buffers, used in turn by successive reductions: a rank writes a buffer
again only two reductions later, after every peer has entered the reduction in between (the one-shot's
start barrier), i.e. finished reading it, whatever the op's own end-of-kernel synchronisation.
No multicast (the launcher's environment turns it off; the multimem ops are never called).
NoReduce: no collective (each rank alone: the bench's compute-only step).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .comm import Comm

REDUCERS = ("nccl", "symm")


class NoReduce:
    def __call__(self, x: Tensor) -> None:
        pass


class NcclReduce:
    def __init__(self, comm: Comm):
        self.comm = comm

    def __call__(self, x: Tensor) -> None:
        self.comm.all_reduce_(x)


class SymmReduce:
    def __init__(self, hidden_size: int, device: torch.device):
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        self.group = dist.group.WORLD.group_name
        self.bufs = []
        for _ in range(2):  # collective: every rank allocates and exchanges handles in the same order
            buf = symm_mem.empty(hidden_size, dtype=torch.float32, device=device).zero_()
            symm_mem.rendezvous(buf, self.group)
            self.bufs.append(buf)
        self.calls = 0  # which buffer the next reduction uses (an even number per step: the same each step)

    def __call__(self, x: Tensor) -> None:
        buf = self.bufs[self.calls % 2]
        self.calls += 1
        buf.copy_(x)
        torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", self.group, x)


def make_reducer(kind: str, comm: Comm, hidden_size: int, device: torch.device):
    if kind == "nccl":
        return NcclReduce(comm)
    if kind == "symm":
        return SymmReduce(hidden_size, device)
    raise ValueError(f"tensor-parallel reduction must be one of {', '.join(REDUCERS)}, not {kind!r}")
