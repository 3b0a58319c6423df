"""The fast ranks' all-reduce of the residual stream inside the captured step.

    reducer = make_reducer("nccl" | "symm", comm, hidden_size, device)
    reducer.buffers     # None, or the two buffers the residual stream must live in (x, x_mlp)
    reducer(src, dst)   # after o_proj (x -> x_mlp) and after down_proj (x_mlp -> x): dst = sum over ranks

"nccl": torch.distributed's all_reduce in place (src is dst; NCCL; capturable in a CUDA graph).
"symm": PyTorch symmetric memory's one-shot all-reduce: every rank reads every peer's src over NVLink
and sums them in rank order (so every rank gets the same bits) into its dst. src and dst are the
reducer's two symmetric buffers, so no copy is needed: the attention half of a layer works in x, the
MLP half in x_mlp. A rank writes a buffer (as a sum, or as a GEMV's output) only after every peer has
entered a later reduction than the one that read it (the one-shot's start barrier), whatever the op's
own end-of-kernel synchronisation.
No multicast (the launcher's environment turns it off; the multimem ops are never called).
NoReduce: no collective (each rank alone: the bench's compute-only step; dst is left as it is).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .comm import Comm

REDUCERS = ("nccl", "symm")


class NoReduce:
    buffers = None

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        pass


class NcclReduce:
    buffers = None

    def __init__(self, comm: Comm):
        self.comm = comm

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        assert src is dst, "NCCL reduces in place"
        self.comm.all_reduce_(src)


class SymmReduce:
    def __init__(self, hidden_size: int, device: torch.device):
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        self.group = dist.group.WORLD.group_name
        bufs = []
        for _ in range(2):  # collective: every rank allocates and exchanges handles in the same order
            buf = symm_mem.empty(hidden_size, dtype=torch.float32, device=device).zero_()
            symm_mem.rendezvous(buf, self.group)
            bufs.append(buf)
        self.buffers = tuple(bufs)

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        assert src is not dst and {id(src), id(dst)} == {id(b) for b in self.buffers}
        torch.ops.symm_mem.one_shot_all_reduce_out(src, "sum", self.group, dst)


def make_reducer(kind: str, comm: Comm, hidden_size: int, device: torch.device):
    if kind == "nccl":
        return NcclReduce(comm)
    if kind == "symm":
        return SymmReduce(hidden_size, device)
    raise ValueError(f"tensor-parallel reduction must be one of {', '.join(REDUCERS)}, not {kind!r}")
