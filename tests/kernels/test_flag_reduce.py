"""Spec for kernels/flag_reduce (the tensor-parallel flag all-reduce): its launcher's checks and layouts on
any machine, the CUDA C compiled by NVRTC where NVRTC loads; the kernel itself runs in the gpu checks
(inference.parallel.allreduce_bench --flag checks every rank's sum bit for bit; tests/inference/test_parallel.py
decodes with it)."""

import ctypes

import pytest
import torch
from kernel_helpers import HAS_CUDA, needs_nvrtc, randn

from kernels import _cuda_rtc, flag_reduce as fr, stream_gemv as sg


def test_the_source_publishes_with_release_and_waits_with_acquire_at_system_scope():
    """Three kernels (the reduction, the greedy argmax, the fused reduction's sum), each waiting on the previous
    kernel (PDL) and releasing the next."""
    src = fr.source()
    assert src.startswith(f"#define MAX_RANKS {fr.MAX_RANKS}\n") and '#include "' not in src
    for kernel in ("flag_reduce(", "__launch_bounds__(ARGMAX_THREADS) flag_argmax(", "fused_sum("):
        assert f'extern "C" __global__ void {kernel}' in src
    assert "st.release.sys.global.u64" in src and "ld.acquire.sys.global.u64" in src
    assert src.count("asm volatile(\"griddepcontrol.wait;") == 3
    assert src.count("asm volatile(\"griddepcontrol.launch_dependents;") == 3
    assert "multimem" not in src  # no multicast


def test_peer_addresses_pass_by_value_in_rank_order():
    peers = fr.FlagPeers(src_ptrs=(0x1000, 0x2000), flag_ptrs=(0x3000, 0x4000))
    s, f = peers.structs()
    assert ctypes.sizeof(s) == ctypes.sizeof(f) == 8 * fr.MAX_RANKS
    assert [s.p[q] for q in range(2)] == [0x1000, 0x2000] and [f.p[q] for q in range(2)] == [0x3000, 0x4000]
    assert all(not s.p[q] for q in range(2, fr.MAX_RANKS))
    assert peers.world == 2


@pytest.mark.parametrize("n_ranks", [1, fr.MAX_RANKS + 1])
def test_peers_refuse_fewer_than_two_or_more_than_max_ranks(n_ranks):
    with pytest.raises(AssertionError, match="ranks"):
        fr.FlagPeers(tuple(range(n_ranks)), tuple(range(n_ranks)))


def test_blocks_cover_the_vector_at_four_floats_a_thread_and_cap_at_the_flag_slots():
    assert fr.blocks_for(1536) == 2 and fr.blocks_for(1024) == 1 and fr.blocks_for(3584) == 4
    assert fr.blocks_for(10**7) == fr.MAX_BLOCKS
    assert fr.FLAG_SLOTS == fr.MAX_BLOCKS * fr.MAX_RANKS


def test_the_reference_sums_in_rank_order():
    a, b, c = torch.tensor([1e8]), torch.tensor([1.0]), torch.tensor([-1e8])
    assert fr.reference([a, b, c]).item() == 0.0  # (1e8 + 1) - 1e8 in float32 loses the 1
    assert fr.reference([a, c, b]).item() == 1.0


def test_the_launcher_refuses_a_cpu_destination():
    peers = fr.FlagPeers((1, 2), (3, 4))
    with pytest.raises(AssertionError, match="CUDA vector"):
        fr.flag_reduce(peers, torch.zeros(8), torch.zeros(1, dtype=torch.int64), 0, 0, 2)


@needs_nvrtc
def test_the_kernel_compiles_for_sm90a_with_nvrtc():
    assert len(_cuda_rtc.nvrtc_compile(fr.source(), "sm_90a")) > 0


@pytest.mark.gpu
@pytest.mark.skipif(not (HAS_CUDA and sg.supported(torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda"))),
                    reason="needs a CUDA GPU of compute capability >= 9.0 and NVRTC")
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("n", [75968, 1001, 4])  # the 1.5B's TP=2 vocabulary slice; a tail past the float4s; tiny
def test_the_greedy_argmax_over_the_ranks_slices_is_torchs_on_the_whole_vector_step_after_step(world, n, gen):
    """Every rank (here: one CTA each on its own stream of one GPU, buffers of the same device) gets
    torch.argmax of the ranks' slices end to end: ties to the lowest id, within a slice and across ranks."""
    logits = [randn(n, gen=gen, device="cuda") for _ in range(world)]
    top = max(t.max().item() for t in logits) + 1.0
    for t, i in ((logits[1], n // 2), (logits[1], n - 1), (logits[-1], 0)):  # three equal maxima
        t[i] = top
    slots = tuple(torch.zeros(fr.ARGMAX_SLOTS, dtype=torch.int64, device="cuda") for _ in range(world))
    flags = tuple(torch.zeros(fr.MAX_RANKS, dtype=torch.int64, device="cuda") for _ in range(world))
    step = torch.zeros(1, dtype=torch.int64, device="cuda")
    outs = [torch.full((1,), -1, dtype=torch.int64, device="cuda") for _ in range(world)]
    streams = [torch.cuda.Stream() for _ in range(world)]
    for s in range(1, 4):  # the epoch grows; the slots alternate
        if s == 3:
            logits[0][n - 1 - s % n] = top + 1.0  # a new winner on rank 0
        step.fill_(s)
        torch.cuda.synchronize()
        for r in range(world):  # every rank at once: each waits for the others' values
            with torch.cuda.stream(streams[r]):
                fr.flag_argmax(logits[r], r * n, tuple(t.data_ptr() for t in slots),
                               tuple(t.data_ptr() for t in flags), step, outs[r], r)
        torch.cuda.synchronize()
        want = torch.argmax(torch.cat(logits)).item()
        assert [o.item() for o in outs] == [want] * world, s
