"""Spec for the tensor-parallel reduction fused into the streamed GEMVs (kernels.stream_gemv's Push and ReduceIn,
kernels.flag_reduce.fused_sum; inference.parallel.reduce.FusedReduce uses them across GPUs). On one GPU the
"ranks" are buffers of the same device: each rank's residual GEMV pushes its rows into every rank's receive
slots (each value in one word with its epoch), and each rank's next normalizing GEMV (or fused_sum) reads the
slots until they carry the epoch and sums them in rank order. What it must give, bit for bit: the unfused ops (each rank's residual GEMV into its own
partial, rank 0's carrying the residual), the partials summed in rank order (the flag reduction's sum), then the
unfused normalizing GEMV on that sum. Over several steps and layers the epochs keep growing, so a slot's old
word is never taken for the new one. The launcher's checks run anywhere; the CUDA C compiles on any machine with NVRTC."""

import pytest
import torch
from kernel_helpers import HAS_CUDA, needs_nvrtc, poisoned, randn

from kernels import _cuda_rtc, flag_reduce as fr, stream_gemv as sg

hopper = pytest.mark.skipif(
    not (HAS_CUDA and sg.supported(torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda"))),
    reason="needs a CUDA GPU of compute capability >= 9.0 and NVRTC")


class Ranks:
    """world ranks' receive buffers (kind 0 and 1, world x n words each), on one device."""

    def __init__(self, world: int, n: int, per_step: int):
        self.world, self.n, self.per_step = world, n, per_step
        self.recv = [torch.zeros((2, world * n), dtype=torch.int64, device="cuda") for _ in range(world)]
        self.step = torch.zeros(1, dtype=torch.int64, device="cuda")  # fused steps, this one included

    def push(self, kind: int, rank: int, use: int) -> sg.Push:
        return sg.Push(tuple(r[kind].data_ptr() for r in self.recv), rank, self.step, self.per_step, use)

    def reduce_in(self, rank: int, use: int, x: torch.Tensor) -> sg.ReduceIn:
        return sg.ReduceIn(self.step, self.world, self.per_step, use, x)


def unfused_sum(a, w, xs):
    """The flag reduction's x: each rank's residual GEMV into its own partial (rank 0's starts from x), summed in
    rank order."""
    parts = []
    for r in range(len(a)):
        p = xs.clone() if r == 0 else torch.zeros_like(xs)
        sg.stream_gemv_residual(a[r], w[r], p)
        parts.append(p)
    return fr.reference(parts)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("world", [2, 4, 8])  # 8: the reduce-in's chunks one at a time (registers)
@pytest.mark.parametrize("h,i", [(1536, 2240), (2048, 2752), (272, 48), (3072, 256)])  # 3072: K past 2 chunks a thread
def test_pushed_rows_summed_in_rank_order_give_the_unfused_ops_bits_step_after_step(world, h, i, gen):
    layers = 2  # uses of each buffer per step
    ranks = Ranks(world, h, layers)
    w_o = [randn(h, 256, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05) for _ in range(world)]
    w_gu = [randn(2 * i, h, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05) for _ in range(world)]
    w_qkv = [randn(384, h, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05) for _ in range(world)]
    w_d = [randn(h, i, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05) for _ in range(world)]
    norm = randn(h, gen=gen, dtype=torch.bfloat16, device="cuda")
    x = randn(h, gen=gen, device="cuda", scale=4.0)
    xs = [x.clone() for _ in range(world)]  # every rank's residual stream (the same values)
    for step in range(3):
        ranks.step.fill_(step + 1)
        for layer in range(layers):
            a = [randn(256, gen=gen, device="cuda") for _ in range(world)]
            want = unfused_sum(a, w_o, xs[0])
            for r in range(world):  # every rank pushes before any rank waits (one stream: no rank spins forever)
                sg.stream_gemv_residual(a[r], w_o[r], xs[r], pdl=True, fuse=ranks.push(0, r, layer))
            outs = []
            for r in range(world):
                out = poisoned(i, device="cuda")
                sg.stream_gate_up_silu(ranks.recv[r][0], norm, 1e-6, w_gu[r], out, pdl=True,
                                       fuse=ranks.reduce_in(r, layer, xs[r]))
                outs.append(out)
            torch.cuda.synchronize()
            for r in range(world):
                assert torch.equal(xs[r], want), (step, layer, r)
                ref = poisoned(i, device="cuda")
                sg.stream_gate_up_silu(want, norm, 1e-6, w_gu[r], ref)
                assert torch.equal(outs[r], ref), (step, layer, r)
            # down_proj pushes kind 1; the next QKV (or, after the last layer, fused_sum) takes it in
            h_act = [o.clone() for o in outs]
            want = unfused_sum(h_act, w_d, xs[0])
            for r in range(world):
                sg.stream_gemv_residual(h_act[r], w_d[r], xs[r], fuse=ranks.push(1, r, layer))
            got = []
            for r in range(world):
                if layer + 1 < layers:
                    out = poisoned(384, device="cuda")
                    sg.stream_rmsnorm_gemv(ranks.recv[r][1], w_qkv[r], out, norm_w=norm, eps=1e-6, pdl=True,
                                           fuse=ranks.reduce_in(r, layer, xs[r]))
                    got.append(out)
                else:
                    fr.fused_sum(ranks.recv[r][1], ranks.step, xs[r], world, layers, layer, pdl=True)
            torch.cuda.synchronize()
            for r in range(world):
                assert torch.equal(xs[r], want), (step, layer, r)
                if got:
                    ref = poisoned(384, device="cuda")
                    sg.stream_rmsnorm_gemv(want, w_qkv[r], ref, norm_w=norm, eps=1e-6)
                    assert torch.equal(got[r], ref), (step, layer, r)
    for recv in ranks.recv:  # every word of every slot carries the last use's epoch: 3 steps of `layers` uses
        assert torch.equal(recv >> 32, torch.full_like(recv, 3 * layers))


def test_only_a_residual_gemv_pushes_and_only_a_normalizing_one_reduces_in():
    step = torch.ones(1, dtype=torch.int64)
    push = sg.Push((1, 2), 0, step, 1, 0)
    reduce_in = sg.ReduceIn(step, 2, 1, 0, torch.zeros(16))
    w = torch.zeros(16, 16, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="pushes"):
        sg._check(sg.Op("gate_up", w, torch.zeros(16), torch.zeros(8)), push)
    with pytest.raises(AssertionError, match="not a reduction"):
        sg._check(sg.Op("residual", w, torch.zeros(16), torch.zeros(16)), reduce_in)


def test_the_fused_variants_are_their_own_kernels():
    """FUSE picks the variant at compile time: the unfused kernels compile without any of it."""
    plain, _ = sg.source(("residual", -1, -1, 384), False, 2, 128, 384)
    push, _ = sg.source(("residual", -1, -1, 384), False, 2, 128, 384, fuse=1)
    reduce_in, _ = sg.source(("gate_up", 0, -1, 1536), False, 2, 128, 1536, fuse=2, world=4)
    assert "#define FUSE 0\n" in plain and "#define FUSE 1\n" in push and "#define FUSE 2\n" in reduce_in
    assert "#define WORLD 4\n" in reduce_in  # the reduce-in's ranks are compiled in (their loads unrolled)
    src = sg._SOURCE
    assert "st.volatile.global.u64" in src and "ld.volatile.global.v2.u64" in src  # value + epoch in one word
    assert "multimem" not in src  # no multicast


@needs_nvrtc
@pytest.mark.parametrize("sig,fuse,world", [(("residual", -1, -1, 2240), 1, 1), (("rmsnorm_gemv", 0, 0, 1536), 2, 4),
                                            (("gate_up", 0, -1, 2048), 2, 2), (("gate_up", 0, -1, 1536), 2, 8),
                                            (("rmsnorm_gemv", 0, 0, 3072), 2, 4)])
def test_the_fused_variants_compile_for_sm90a(sig, fuse, world):
    p = sg.plan((sig[0], 1536, sig[3]), 132, 64 << 10)
    src, _ = sg.source(sig, False, p["stages"], p["sums"], p["kc"], False, fuse, world)
    assert len(_cuda_rtc.nvrtc_compile(src, "sm_90a", ("--use_fast_math",))) > 0
