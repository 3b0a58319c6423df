"""Spec for kernels.stream_gemv (CUDA C, TMA bulk copies; Hopper GPUs only): the three GEMVs give
the answers of their Triton twins' references on the model shapes and on odd ones (rows not a
multiple of the grid or of a stage, K not a multiple of a chunk, fewer rows than SMs), with bf16
and fp16 weights, norm weights of any float dtype, PDL on or off; released early (PDL) inside a CUDA
graph replayed many times, they still read their inputs only when the previous op is done. CPU
machines check the launch plan only."""

import pytest
import torch
from kernel_helpers import HAS_CUDA, captured, poisoned, randn, rel_err

from kernels import stream_gemv as sg
from kernels.gate_up_silu import rmsnorm_gate_up_silu_ref
from kernels.gemv_residual import gemv_residual_ref
from kernels.rmsnorm_gemv import rmsnorm_gemv_ref

hopper = pytest.mark.skipif(
    not (HAS_CUDA and sg.supported(torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda"))),
    reason="needs a CUDA GPU of compute capability >= 9.0 and NVRTC")


LAYER_1_5B = [("residual", 1536, 1536), ("gate_up", 8960, 1536), ("residual", 1536, 8960),
              ("rmsnorm_gemv", 2048, 1536)]
LAYER_3B = [("residual", 2048, 2048), ("gate_up", 11008, 2048), ("residual", 2048, 11008),
            ("rmsnorm_gemv", 2560, 2048)]


@pytest.mark.parametrize("op", [*LAYER_1_5B, *LAYER_3B, ("rmsnorm_gemv", 151936, 1536)])
def test_plan_fits_an_sm_with_wide_ring_slots(op):
    p = sg.plan(op, 132)
    assert p["smem"] + 1024 <= 227 * 1024
    assert p["stages"] >= 2 and p["grid"] <= min(132, op[1])
    assert p["kc"] >= 1024  # bulk copies of >= 2 KB per row: narrower ones starve the stream


def test_a_tiny_launch_still_gets_two_slots():
    p = sg.plan(("residual", 5, 16), 132)
    assert p["grid"] == 5 and p["stages"] >= 2 and p["kc"] == 128


@pytest.mark.parametrize("k", [16, 272, 768, 1536, 2048, 6144, 8960, 11008, 20000])
def test_a_ring_slot_gives_every_consumer_warp_whole_mma_steps(k):
    kc = sg.chunk(k)
    assert kc % (16 * sg.NWARP) == 0 and kc <= sg.MAX_KC
    slots = -(-k // kc)
    assert slots == -(-k // sg.MAX_KC)  # as few slots per row tile as the cap allows
    assert slots * kc - k < 16 * sg.NWARP * slots  # of about equal width: no narrow tail


def test_weights_it_cannot_stream_are_refused():
    assert not sg.supported(torch.zeros(4, 24, dtype=torch.bfloat16))  # K % 16 != 0 (and on CPU)
    assert not sg.supported(torch.zeros(4, 16))  # fp32


SHAPES = [(2048, 1536), (1536, 1536), (1536, 8960), (37, 1008), (300, 272), (1, 16)]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("wdtype,ndtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)])
@pytest.mark.parametrize("n,k", SHAPES)
def test_rmsnorm_gemv_matches_reference(n, k, wdtype, ndtype, pdl, gen):
    x = randn(k, gen=gen, device="cuda", scale=3.0)
    w = randn(n, k, gen=gen, dtype=wdtype, device="cuda", scale=0.05)
    norm_w = randn(k, gen=gen, dtype=ndtype, device="cuda")
    bias = randn(n, gen=gen, dtype=wdtype, device="cuda")
    for nw, b in ((norm_w, bias), (norm_w, None), (None, None)):
        out = poisoned(n, device="cuda")
        sg.stream_rmsnorm_gemv(x, w, out, norm_w=nw, eps=1e-6, bias=b, pdl=pdl)
        torch.cuda.synchronize()
        assert rel_err(out, rmsnorm_gemv_ref(x, w, nw, 1e-6, b)) <= 1e-5, (nw is None, b is None)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("wdtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,k", SHAPES)
def test_gemv_residual_adds_into_x_once(n, k, wdtype, gen):
    a = randn(k, gen=gen, device="cuda")
    w = randn(n, k, gen=gen, dtype=wdtype, device="cuda", scale=0.05)
    x = randn(n, gen=gen, device="cuda", scale=5.0)
    ref = gemv_residual_ref(a, w, x)
    assert sg.stream_gemv_residual(a, w, x, pdl=True) is x
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-5
    sg.stream_gemv_residual(a, w, x)
    torch.cuda.synchronize()
    assert rel_err(x, gemv_residual_ref(a, w, ref)) <= 1e-5


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("spans", [[(6 << 20,)], [(16,), (4096 * 2 + 48,)], [(3 << 20,), (131 * 16,)]])
def test_l2_prefetch_spans_leave_the_result_alone(spans, gen):
    """Spans of any size (fewer bytes than CTAs, odd multiples of 16, ending at their allocation's end)."""
    a = randn(2048, gen=gen, device="cuda")
    w = randn(2048, 2048, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    x = randn(2048, gen=gen, device="cuda", scale=5.0)
    other = [randn(n // 2, gen=gen, dtype=torch.bfloat16, device="cuda") for (n,) in spans]
    kept = [t.clone() for t in other]
    ref = gemv_residual_ref(a, w, x)
    sg.stream_gemv_residual(a, w, x, pdl=True, budget=80 * 1024, l2_prefetch=tuple(other))
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-5
    assert all(torch.equal(t, k) for t, k in zip(other, kept))


@pytest.mark.gpu
@hopper
def test_l2_prefetch_spans_must_be_aligned_whole_16_bytes():
    a, x = torch.zeros(16, device="cuda"), torch.zeros(16, device="cuda")
    w = torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda")
    span = torch.zeros(64, dtype=torch.bfloat16, device="cuda")
    for bad in [(span[:7],), (span[1:9],), (span, span, span)]:
        with pytest.raises(AssertionError):
            sg.stream_gemv_residual(a, w, x, l2_prefetch=bad)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("wdtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("i,k", [(8960, 1536), (6144, 2048), (11008, 2048), (131, 272), (3, 16)])
def test_gate_up_silu_matches_reference(i, k, wdtype, gen):
    x = randn(k, gen=gen, device="cuda", scale=3.0)
    norm_w = randn(k, gen=gen, dtype=wdtype, device="cuda")
    w = randn(2 * i, k, gen=gen, dtype=wdtype, device="cuda", scale=0.05)
    out = poisoned(i, device="cuda")
    sg.stream_gate_up_silu(x, norm_w, 1e-6, w, out, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= 1e-5


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("skew", [(32, 16), (132, 3), (1, 60)])
def test_a_skewed_split_still_computes_every_unit_once(skew, gen):
    """skew=(late, deficit): the last CTAs take fewer gate/up units, the first more; every output is
    still written, and equals the reference (the output starts poisoned)."""
    i, k = 8960, 1536
    x = randn(k, gen=gen, device="cuda", scale=3.0)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16, device="cuda")
    w = randn(2 * i, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    out = poisoned(i, device="cuda")
    sg.stream_gate_up_silu(x, norm_w, 1e-6, w, out, pdl=True, budget=164 * 1024, carveout=100, skew=skew)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= 1e-5


def test_a_skew_that_leaves_a_cta_without_units_is_refused():
    with pytest.raises(AssertionError, match="skew"):
        sg.plan(("gate_up", 8960, 1536), 132, skew=(32, 100))


def mlp_ref(x, norm_w, wgu, wd):
    return gemv_residual_ref(rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, wgu), wd, x)


def check_replays(graph, x, x0, ref, times):
    """Replay `graph` `times` times from x = x0: x within 1e-4 of ref."""
    for _ in range(times):
        x.copy_(x0)
        graph.replay()
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-4


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("h,i", [(1536, 8960), (2048, 6144)])
def test_ops_released_early_in_a_graph_match_the_references(h, i, gen):
    """early=True (the next kernel launches at once, its CTAs loading weights beside these): o_proj
    and gate/up released early (with the runner's rings and all-shared carveout), then down_proj, four
    layers in one CUDA graph replayed 10 times, give the references: every op still reads its input
    only when the previous op is done."""
    def w(n, k):
        return randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.02)
    layers = [(w(h, h), w(2 * i, h), w(h, i), randn(h, gen=gen, dtype=torch.bfloat16, device="cuda"))
              for _ in range(4)]
    a, x0 = randn(h, gen=gen, device="cuda"), randn(h, gen=gen, device="cuda")
    x, hid = x0.clone(), torch.zeros(i, device="cuda")

    def layer_stack():
        for wo, wgu, wd, nw in layers:
            sg.stream_gemv_residual(a, wo, x, pdl=True, budget=80 * 1024, early=True, carveout=100)
            sg.stream_gate_up_silu(x, nw, 1e-6, wgu, hid, pdl=True, budget=164 * 1024, early=True, carveout=100)
            sg.stream_gemv_residual(hid, wd, x, pdl=True)

    ref = x0.clone()
    for wo, wgu, wd, nw in layers:
        ref = mlp_ref(gemv_residual_ref(a, wo, ref), nw, wgu, wd)
    check_replays(captured(layer_stack), x, x0, ref, 10)
