"""The fast ranks' all-reduce of the residual stream inside the captured step.

    reducer = make_reducer("nccl" | "symm" | "flag", comm, hidden_size, device, per_step)
    reducer.buffers     # None, or the two buffers the residual stream must live in (x, x_mlp)
    reducer.partials    # None, or (flag) the two buffers o_proj and down add their partials into
    reducer.begin_step(pdl)  # once per decode step, before its first reduction (captured with the step)
    reducer(src, dst)   # after o_proj (x -> x_mlp) and after down_proj (x_mlp -> x): dst = sum over ranks
                        # (flag: src a partial buffer, dst the residual stream x)

"nccl": torch.distributed's all_reduce in place (src is dst; NCCL; capturable in a CUDA graph).
"symm": PyTorch symmetric memory's one-shot all-reduce: every rank reads every peer's src over NVLink
and sums them in rank order (so every rank gets the same bits) into its dst. src and dst are the
reducer's two symmetric buffers, so no copy is needed: the attention half of a layer works in x, the
MLP half in x_mlp. A rank writes a buffer (as a sum, or as a GEMV's output) only after every peer has
entered a later reduction than the one that read it (the one-shot's start barrier), whatever the op's
own end-of-kernel synchronisation.
"flag": our own one-kernel reduction (kernels/flag_reduce.py): each rank publishes an epoch to every
peer's flag slots (store-release, system scope), waits for theirs, then sums the peers' partials in rank
order into its dst, the residual stream x (a plain local buffer), and starts its other partial buffer for
the next residual GEMV: the sum on rank 0, zeros elsewhere (so no rank launches a zeroing op; begin_step
starts the step's first partial buffer, with one copy or fill). o_proj adds into partial buffer a, down
into b (two symmetric buffers). The epoch is step * per_step + r + 1, from a device step counter that
begin_step increments inside the graph (replays need no host work) and the reduction's index r within the
step; launched with PDL like the GEMVs around it. The hazard a fast rank could cause (writing a partial
buffer a slow peer still reads) cannot happen: a rank writes buffer a (or b) only after it has seen every
peer's epoch of the reduction after the one that read it, which each peer publishes only after that
reading reduction has completed (griddepcontrol.wait, transitively through the kernels between).
The flag reducer also gives the greedy step's distributed argmax in one kernel (`argmax`), in place of
Comm.argmax's ops and all-gather. (A "flag-push" variant, each rank storing its partial into its peers' receive
slots, was slower at every size and was removed in the eleventh session.)
"fused": no reduction launches where the step's GEMVs are all streamed (kernels.stream_gemv, the overlap plan):
o_proj and down_proj push their output rows (rank 0's with the residual) into slot `rank` of every rank's
receive buffer for their kind, each value in one 8-byte word with its epoch (NCCL's LL protocol: no fence, no
flag; `push_to`); the next normalizing GEMV (gate/up, the next layer's QKV) reads the slots until they carry
the epoch and sums them in rank order as its input, writing the sum to x from its first CTA (`reduce_in`);
after the last layer one small kernel does the same for the LM head (`sum_into`). The bits are the flag
reduction's (the same partials, the same order). A fused step counts itself in a device counter of its own
(`begin_step(fused=True)`), from which the epochs follow; elsewhere (a position whose plan does not stream
every GEMV) the flag reduction runs as "flag".
No multicast (the launcher's environment turns it off; the multimem ops are never called).
NoReduce: no collective (each rank alone: the bench's compute-only step; dst is left as it is).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .comm import Comm

REDUCERS = ("nccl", "symm", "flag", "fused")


class NoReduce:
    buffers = partials = None

    def begin_step(self, pdl: bool = False) -> None:
        pass

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        pass


class NcclReduce:
    buffers = partials = None

    def __init__(self, comm: Comm):
        self.comm = comm

    def begin_step(self, pdl: bool = False) -> None:
        pass

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        assert src is dst, "NCCL reduces in place"
        self.comm.all_reduce_(src)


class SymmReduce:
    partials = None

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


class FlagReduce:
    """The flag reduction (kernels/flag_reduce.py) over two symmetric partial buffers; per_step reductions a
    step. rank: this rank (the one whose partial carries the residual is 0)."""

    buffers = None

    def __init__(self, comm: Comm, hidden_size: int, device: torch.device, per_step: int,
                 blocks: int | None = None):
        """blocks: CTAs per reduction (None: kernels.flag_reduce.blocks_for's rule)."""
        import torch.distributed as dist

        from kernels.flag_reduce import ARGMAX_SLOTS, FLAG_SLOTS, MAX_RANKS, FlagPeers

        group = dist.group.WORLD.group_name
        self.blocks = blocks
        a, ha = _symmetric(hidden_size, torch.float32, device, group)  # collective: every rank, same order
        b, hb = _symmetric(hidden_size, torch.float32, device, group)
        self.flags, hf = _symmetric(FLAG_SLOTS, torch.int64, device, group)
        self.partials = (a, b)
        self.rank, self.per_step = comm.rank, per_step
        self.step = torch.zeros(1, dtype=torch.int64, device=device)
        flags = tuple(hf.buffer_ptrs)
        # a partial buffer -> (the peers' addresses of it; this rank's other partial buffer)
        self.peers = {id(a): (FlagPeers(tuple(ha.buffer_ptrs), flags), b),
                      id(b): (FlagPeers(tuple(hb.buffer_ptrs), flags), a)}

        self.argmax_slots, hs = _symmetric(ARGMAX_SLOTS, torch.int64, device, group)
        self.argmax_flags, hg = _symmetric(MAX_RANKS, torch.int64, device, group)
        self._argmax_ptrs = (tuple(hs.buffer_ptrs), tuple(hg.buffer_ptrs))
        self.token = torch.zeros(1, dtype=torch.int64, device=device)
        torch.cuda.synchronize(device)
        dist.barrier()  # every rank's flags are zero before any rank publishes
        self.r, self.pdl = 0, False

    def begin_step(self, pdl: bool = False, x: Tensor | None = None) -> None:
        """Advance the step counter; with x (the residual stream at the step's start), start partial buffer a:
        x on rank 0, zeros elsewhere."""
        self.step.add_(1)
        self.r, self.pdl = 0, pdl
        if x is not None:
            if self.rank == 0:
                self.partials[0].copy_(x)
            else:
                self.partials[0].zero_()

    def argmax(self, logits: Tensor, offset: int) -> Tensor:
        """The greedy token [1] int64 over every rank's vocabulary slice (logits: this rank's, ids from
        offset), ties to the lowest id: Comm.argmax in one kernel (kernels.flag_reduce.flag_argmax), its
        epoch the step counter (one argmax a step, after begin_step)."""
        from kernels import flag_reduce as fr

        return fr.flag_argmax(logits, offset, *self._argmax_ptrs, self.step, self.token, self.rank, pdl=self.pdl)

    def __call__(self, src: Tensor, dst: Tensor) -> None:
        from kernels import flag_reduce as fr

        assert id(src) in self.peers and dst is not src and all(dst is not p for p in self.partials)
        assert self.r < self.per_step, f"flag reduce: more than {self.per_step} reductions in one step"
        peers, other = self.peers[id(src)]
        fr.flag_reduce(peers, dst, self.step, self.rank, self.r, self.per_step, pdl=self.pdl, next=other,
                       blocks=self.blocks)
        self.r += 1


class FusedReduce(FlagReduce):
    """The flag reduction (FlagReduce: partial buffers, flags, the greedy argmax) plus the fused one's receive
    buffers (two kinds: 0 after o_proj, 1 after down_proj; world x hidden int64 words each, symmetric: value and
    epoch, kernels.stream_gemv.Push) and a device counter of the fused steps. layers: uses of each kind a step."""

    KINDS = 2

    def __init__(self, comm: Comm, hidden_size: int, device: torch.device, layers: int):
        import torch.distributed as dist

        super().__init__(comm, hidden_size, device, 2 * layers)
        group = dist.group.WORLD.group_name
        self.world, self.layers, self.hidden = comm.world, layers, hidden_size
        self.recv, hr = _symmetric(self.KINDS * comm.world * hidden_size, torch.int64, device, group)  # epoch 0: none
        self._recv_ptrs = tuple(hr.buffer_ptrs)
        self._counts = torch.zeros(2, dtype=torch.int64, device=device)  # (step, fused_step) bumped in one launch
        self.step, self.fused_step = self._counts[0:1], self._counts[1:2]
        torch.cuda.synchronize(device)
        dist.barrier()  # every rank's slots are zero before any rank pushes

    def begin_step(self, pdl: bool = False, x: Tensor | None = None, fused: bool = False) -> None:
        """FlagReduce.begin_step; a fused step (fused=True, no x) also counts itself among the fused steps."""
        if not fused:
            return super().begin_step(pdl, x)
        self._counts.add_(1)
        self.r, self.pdl = 0, pdl

    def slots(self, kind: int) -> Tensor:
        """This rank's receive buffer of `kind` (world x hidden int64 words: slot q from rank q)."""
        n = self.world * self.hidden
        return self.recv[kind * n:(kind + 1) * n]

    def push_to(self, kind: int, use: int):
        """The kernels.stream_gemv.Push of the residual GEMV of `kind` in layer `use` on this rank."""
        from kernels.stream_gemv import Push

        nbytes = self.world * self.hidden * self.recv.element_size()
        return Push(tuple(p + kind * nbytes for p in self._recv_ptrs), self.rank, self.fused_step, self.layers, use)

    def reduce_in(self, kind: int, use: int, x: Tensor):
        """The kernels.stream_gemv.ReduceIn of the normalizing GEMV that reads the `use`-th (0-based, per step)
        reduction of `kind`, writing the sum to x."""
        from kernels.stream_gemv import ReduceIn

        return ReduceIn(self.fused_step, self.world, self.layers, use, x)

    def sum_into(self, x: Tensor) -> None:
        """x = the step's last down_proj reduction (kind 1, use layers - 1): for the LM head."""
        from kernels import flag_reduce as fr

        fr.fused_sum(self.slots(1), self.fused_step, x, self.world, self.layers, self.layers - 1, pdl=self.pdl)


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
    if kind == "fused":
        return FusedReduce(comm, hidden_size, device, per_step // 2)
    raise ValueError(f"tensor-parallel reduction must be one of {', '.join(REDUCERS)}, not {kind!r}")
