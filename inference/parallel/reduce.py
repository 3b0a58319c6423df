"""The fast ranks' all-reduce of the residual stream inside the captured step.

    reducer = make_reducer("nccl" | "symm" | "flag", comm, hidden_size, device, per_step)
    reducer.buffers     # None, or the two buffers the residual stream must live in (x, x_mlp)
    reducer.begin_step(pdl)  # once per decode step, before its first reduction (captured with the step)
    reducer(src, dst)   # after o_proj (x -> x_mlp) and after down_proj (x_mlp -> x): dst = sum over ranks

"nccl": torch.distributed's all_reduce in place (src is dst; NCCL; capturable in a CUDA graph).
"symm": PyTorch symmetric memory's one-shot all-reduce: every rank reads every peer's src over NVLink
and sums them in rank order (so every rank gets the same bits) into its dst. src and dst are the
reducer's two symmetric buffers, so no copy is needed: the attention half of a layer works in x, the
MLP half in x_mlp. A rank writes a buffer (as a sum, or as a GEMV's output) only after every peer has
entered a later reduction than the one that read it (the one-shot's start barrier), whatever the op's
own end-of-kernel synchronisation.
"flag": our own one-kernel reduction (kernels/flag_reduce.py) on the same two symmetric buffers: each rank
publishes an epoch to every peer's flag slots (store-release, system scope), waits for theirs, then sums
the peers' partials in rank order into its dst. The epoch is step * per_step + r + 1, from a device step
counter that begin_step increments inside the graph (replays need no host work) and the reduction's index r
within the step; launched with PDL like the GEMVs around it. The hazard a fast rank could cause (writing a
buffer a slow peer still reads) is excluded as for "symm": a rank writes a buffer only in a later reduction
(or after it), whose epoch it cannot pass before every peer has published that epoch, which each peer does
only after its whole earlier reduction (the reader) has completed (griddepcontrol.wait, transitively).
No multicast (the launcher's environment turns it off; the multimem ops are never called).
NoReduce: no collective (each rank alone: the bench's compute-only step; dst is left as it is).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .comm import Comm

REDUCERS = ("nccl", "symm", "flag")


class NoReduce:
    buffers = None

    def begin_step(self, pdl: bool = False) -> None:
        pass

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        pass


class NcclReduce:
    buffers = None

    def __init__(self, comm: Comm):
        self.comm = comm

    def begin_step(self, pdl: bool = False) -> None:
        pass

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        assert src is dst, "NCCL reduces in place"
        self.comm.all_reduce_(src)


class SymmReduce:
    def __init__(self, hidden_size: int, device: torch.device):
        import torch.distributed as dist

        self.group = dist.group.WORLD.group_name
        bufs, self.handles = [], []
        for _ in range(2):  # collective: every rank allocates and exchanges handles in the same order
            buf, handle = _symmetric(hidden_size, torch.float32, device, self.group)
            bufs.append(buf)
            self.handles.append(handle)
        self.buffers = tuple(bufs)

    def begin_step(self, pdl: bool = False) -> None:
        pass

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        assert src is not dst and {id(src), id(dst)} == {id(b) for b in self.buffers}
        torch.ops.symm_mem.one_shot_all_reduce_out(src, "sum", self.group, dst)


class FlagReduce(SymmReduce):
    """The flag reduction (kernels/flag_reduce.py) on SymmReduce's two buffers; per_step reductions a step."""

    def __init__(self, comm: Comm, hidden_size: int, device: torch.device, per_step: int):
        import torch.distributed as dist

        from kernels.flag_reduce import FLAG_SLOTS, FlagPeers

        super().__init__(hidden_size, device)
        self.rank, self.per_step = comm.rank, per_step
        self.flags, flag_handle = _symmetric(FLAG_SLOTS, torch.int64, device, self.group)
        self.step = torch.zeros(1, dtype=torch.int64, device=device)
        flag_ptrs = tuple(flag_handle.buffer_ptrs)
        # (src, dst) -> the peers' addresses of src
        self.peers = {id(b): FlagPeers(tuple(h.buffer_ptrs), flag_ptrs) for b, h in zip(self.buffers, self.handles)}
        torch.cuda.synchronize(device)
        dist.barrier()  # every rank's flags are zero before any rank publishes
        self.r, self.pdl = 0, False

    def begin_step(self, pdl: bool = False) -> None:
        self.step.add_(1)
        self.r, self.pdl = 0, pdl

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        from kernels.flag_reduce import flag_reduce

        assert src is not dst and {id(src), id(dst)} == set(self.peers)
        assert self.r < self.per_step, f"flag reduce: more than {self.per_step} reductions in one step"
        flag_reduce(self.peers[id(src)], dst, self.step, self.rank, self.r, self.per_step, pdl=self.pdl)
        self.r += 1


def _symmetric(n: int, dtype: torch.dtype, device: torch.device, group: str):
    """A zeroed symmetric-memory tensor of n elements and its handle (collective: every rank, same order)."""
    import torch.distributed._symmetric_memory as symm_mem

    buf = symm_mem.empty(n, dtype=dtype, device=device).zero_()
    return buf, symm_mem.rendezvous(buf, group)


def make_reducer(kind: str, comm: Comm, hidden_size: int, device: torch.device, per_step: int = 0):
    """per_step: reductions per decode step (the flag reduction's epochs)."""
    if kind == "nccl":
        return NcclReduce(comm)
    if kind == "symm":
        return SymmReduce(hidden_size, device)
    if kind == "flag":
        return FlagReduce(comm, hidden_size, device, per_step)
    raise ValueError(f"tensor-parallel reduction must be one of {', '.join(REDUCERS)}, not {kind!r}")
