"""Launcher of the flag all-reduce (kernels/csrc/flag_reduce.cu): one small kernel per reduction that sums
every rank's float32 partial, read from the peers' symmetric buffers over NVLink, in rank order
(`flag_reduce`; a variant where each rank first pushed its partial into its peers' receive slots was slower and
was removed in the eleventh session: lab/HISTORY.md); the greedy step's distributed argmax over vocabulary
slices the same way (`flag_argmax`); and the sum of a reduction fused into the streamed GEMVs
(kernels.stream_gemv's Push) for the LM head (`fused_sum`).

    ptrs = FlagPeers(src_ptrs=[...world addresses...], flag_ptrs=[...world addresses...])
    flag_reduce(ptrs, dst, step, rank, r, per_step, pdl=True, next=None)

The caller owns the memory (inference.parallel.reduce.FlagReduce allocates it with PyTorch's symmetric
memory): src_ptrs[q] is rank q's partial as mapped on this device (n float32), flag_ptrs[q] rank q's flag
slots (MAX_BLOCKS * MAX_RANKS uint64, zero before the first reduction), dst this rank's output (not a src),
next (optional) this rank's other partial buffer, which the kernel sets to the sum on rank 0 and to zeros
elsewhere (where the next residual GEMV adds its partial: no zeroing launch), step a one-element int64
device counter that the caller increments once per step (before the step's first reduction), r this
reduction's index within the step (0 <= r < per_step): epoch = step * per_step + r + 1 must grow from one
reduction to the next on every rank alike. CUDA only (sm_90+, NVRTC); `reference` is the
same sum on any device (the rank-order contract the GPU tests check).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernels import _cuda_rtc

MAX_RANKS = 8
MAX_BLOCKS = 16
THREADS = 256
FLAG_SLOTS = MAX_BLOCKS * MAX_RANKS  # uint64 flags per rank

_SOURCE = _cuda_rtc.load_source("flag_reduce.cu")


class _SrcPtrs(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p * MAX_RANKS)]


class _FlagPtrs(ctypes.Structure):
    _fields_ = [("p", ctypes.c_void_p * MAX_RANKS)]


def source() -> str:
    """The kernel's CUDA C with the launcher's defines (what nvrtc compiles)."""
    return f"#define MAX_RANKS {MAX_RANKS}\n" + _SOURCE


@lru_cache(maxsize=None)
def _cubin(device_index: int) -> bytes:
    major, minor = torch.cuda.get_device_capability(device_index)
    return _cuda_rtc.nvrtc_compile(source(), f"sm_{major}{minor}{'a' if major == 9 else ''}")


@lru_cache(maxsize=None)
def _kernel(device_index: int, name: str = "flag_reduce") -> _cuda_rtc.CudaKernel:
    return _cuda_rtc.CudaKernel(_cubin(device_index), name, torch.device("cuda", device_index), 0, 1)


def blocks_for(n: int) -> int:
    """CTAs per reduction of n floats: 4 floats per thread, at most MAX_BLOCKS (each CTA has its own flags)."""
    return max(1, min(MAX_BLOCKS, -(-n // (4 * THREADS))))


@dataclass(frozen=True)
class FlagPeers:
    """Addresses of every rank's source buffer and flag slots, as mapped on this device (rank order)."""

    src_ptrs: tuple[int, ...]
    flag_ptrs: tuple[int, ...]

    def __post_init__(self):
        assert 2 <= len(self.src_ptrs) == len(self.flag_ptrs) <= MAX_RANKS, \
            f"flag reduce: 2..{MAX_RANKS} ranks, one src and one flag address each"

    @property
    def world(self) -> int:
        return len(self.src_ptrs)

    def structs(self) -> tuple[_SrcPtrs, _FlagPtrs]:
        s, f = _SrcPtrs(), _FlagPtrs()
        for q in range(self.world):
            s.p[q], f.p[q] = self.src_ptrs[q], self.flag_ptrs[q]
        return s, f


def flag_reduce(peers: FlagPeers, dst: torch.Tensor, step: torch.Tensor, rank: int, r: int, per_step: int,
                *, pdl: bool = False, blocks: int | None = None, next: torch.Tensor | None = None) -> torch.Tensor:
    """dst = sum over q in rank order of src_q (float32, n elements, n % 4 == 0), once every peer has published
    this reduction's epoch; next (if given) = dst on rank 0, zeros on the others. Launched on the current
    stream (capturable in a CUDA graph)."""
    n = dst.numel()
    assert dst.dtype == torch.float32 and dst.is_contiguous() and dst.is_cuda and n % 4 == 0, \
        "flag reduce: dst must be a contiguous float32 CUDA vector of a multiple of 4 elements"
    assert step.dtype == torch.int64 and step.numel() == 1 and step.device == dst.device
    assert 0 <= rank < peers.world and 0 <= r < per_step
    assert dst.data_ptr() not in peers.src_ptrs, "flag reduce: dst must not be a source"
    if next is not None:
        assert next.dtype == torch.float32 and next.is_contiguous() and next.numel() == n and next.device == dst.device
        assert next.data_ptr() not in peers.src_ptrs and next.data_ptr() != dst.data_ptr(), \
            "flag reduce: next must be neither a source nor dst"
    blocks = blocks or blocks_for(n)
    assert 1 <= blocks <= MAX_BLOCKS
    src, flags = peers.structs()
    args = [src, flags, ctypes.c_void_p(dst.data_ptr()), ctypes.c_void_p(next.data_ptr() if next is not None else 0),
            ctypes.c_int(int(rank == 0)), ctypes.c_void_p(step.data_ptr()), ctypes.c_int(n),
            ctypes.c_int(rank), ctypes.c_int(peers.world), ctypes.c_int(r), ctypes.c_int(per_step)]
    _kernel(dst.device.index if dst.device.index is not None else torch.cuda.current_device()).launch(
        (blocks, 1, 1), THREADS, args, pdl=pdl)
    return dst


ARGMAX_THREADS = 1024
ARGMAX_SLOTS = 2 * MAX_RANKS  # uint64 (value, id) slots per rank: two sets, alternating with the epoch


def flag_argmax(logits: torch.Tensor, offset: int, slots: tuple[int, ...], flags: tuple[int, ...],
                step: torch.Tensor, out: torch.Tensor, rank: int, *, pdl: bool = False) -> torch.Tensor:
    """out[0] = the global argmax (ties to the lowest id) over every rank's vocabulary slice: this rank's
    logits [n] float32 hold ids offset..offset+n. slots[q] / flags[q]: rank q's ARGMAX_SLOTS / MAX_RANKS
    uint64 (symmetric, zero at first); the epoch is step[0], which must grow from one call to the next
    (FlagReduce.begin_step advances it once per step). One CTA; launched on the current stream."""
    n = logits.numel()
    assert logits.dtype == torch.float32 and logits.is_contiguous() and logits.is_cuda
    assert out.dtype == torch.int64 and out.numel() == 1 and out.device == logits.device
    assert step.dtype == torch.int64 and step.numel() == 1 and step.device == logits.device
    assert 2 <= len(slots) == len(flags) <= MAX_RANKS and 0 <= rank < len(slots)
    assert 0 <= offset and offset + n < 2**32, "flag argmax: token ids must fit in 32 bits"
    s, f = FlagPeers(tuple(slots), tuple(flags)).structs()
    args = [ctypes.c_void_p(logits.data_ptr()), ctypes.c_int(n), ctypes.c_uint(offset), s, f,
            ctypes.c_void_p(step.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_int(rank),
            ctypes.c_int(len(slots))]
    _kernel(logits.device.index if logits.device.index is not None else torch.cuda.current_device(),
            "flag_argmax").launch((1, 1, 1), ARGMAX_THREADS, args, pdl=pdl)
    return out


def fused_sum(slots: torch.Tensor, step: torch.Tensor, dst: torch.Tensor, world: int, per_step: int, use: int, *,
              pdl: bool = False) -> torch.Tensor:
    """The fused reduction's sum for a kernel that does not reduce in itself (the LM head): dst = this rank's
    receive slots (slots: world x n int64 words, slot q pushed by rank q's residual GEMV, kernels.stream_gemv.Push:
    value bits low, epoch high) summed in rank order, each word read once it carries epoch = (step[0] - 1) *
    per_step + use + 1 (kernels.stream_gemv.ReduceIn's rule). Launched on the current stream."""
    n = dst.numel()
    assert dst.dtype == torch.float32 and dst.is_contiguous() and dst.is_cuda and n % 4 == 0, \
        "fused sum: dst must be a contiguous float32 CUDA vector of a multiple of 4 elements"
    assert slots.dtype == torch.int64 and slots.is_contiguous() and slots.numel() == world * n
    assert step.dtype == torch.int64 and step.numel() == 1 and step.device == dst.device
    assert 1 <= world <= MAX_RANKS and 0 <= use < per_step
    args = [ctypes.c_void_p(slots.data_ptr()), ctypes.c_void_p(step.data_ptr()), ctypes.c_void_p(dst.data_ptr()),
            ctypes.c_int(n), ctypes.c_int(world), ctypes.c_int(per_step), ctypes.c_int(use)]
    _kernel(dst.device.index if dst.device.index is not None else torch.cuda.current_device(), "fused_sum").launch(
        (blocks_for(n), 1, 1), THREADS, args, pdl=pdl)
    return dst


def reference(partials: list[torch.Tensor]) -> torch.Tensor:
    """The kernel's result: the partials summed in rank order, float32."""
    acc = partials[0].float().clone()
    for p in partials[1:]:
        acc += p.float()
    return acc
