"""Spec for the streamed FP8 GEMVs (kernels/fp8_stream_gemv.py): each matches the PyTorch twin of its Triton
kernel (the weight dequantized, float32 math) at the model layer shapes, with whole-row and sliced ring slots,
a ring smaller than a CTA's share (slots reused), bias, norm kinds, odd unit counts (fewer units than SMs,
tiles of a few rows), the L2 prefetch, and a layer chained in one CUDA graph. On the CPU: the launch plans
fit the shared memory and the variants assemble."""

import pytest
import torch

from kernel_helpers import check_down_prefetch, check_replays, fp8_weight, poisoned, randn, rel_err

from kernels import _cuda_rtc
from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu_ref
from kernels.fp8_gemv_residual import fp8_gemv_residual_ref
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv_ref
from kernels.fp8_stream_gemv import (Config, fp8_stream_gemv_residual, fp8_stream_rmsnorm_gate_up_silu,
                                     fp8_stream_rmsnorm_gemv, plan, slot_columns, source)

HOPPER = pytest.mark.skipif(not (torch.cuda.is_available() and _cuda_rtc.available()),
                            reason="needs a Hopper GPU with NVRTC")

LAYERS = {  # (name, N, K): QKV, o_proj, gate/up (N = 2I), down
    "qwen2.5-coder-1.5b": [("qkv", 2048, 1536), ("o", 1536, 1536), ("gate_up", 17920, 1536), ("down", 1536, 8960)],
    "llama-3.2-1b": [("qkv", 3072, 2048), ("o", 2048, 2048), ("gate_up", 16384, 2048), ("down", 2048, 8192)],
    "qwen2.5-coder-3b": [("qkv", 2560, 2048), ("o", 2048, 2048), ("gate_up", 22016, 2048), ("down", 2048, 11008)],
    "qwen3-1.7b": [("qkv", 4096, 2048), ("o", 2048, 2048), ("gate_up", 12288, 2048), ("down", 2048, 6144)],
}
CASES = [(s, *w) for s, ws in LAYERS.items() for w in ws]



@pytest.mark.parametrize("shape,name,n,k", CASES)
def test_every_layer_plan_fits_the_shared_memory_with_two_slots_or_more(shape, name, n, k):
    mode = {"qkv": "rmsnorm_gemv", "o": "residual", "down": "residual", "gate_up": "gate_up"}[name]
    units = n // 2 if mode == "gate_up" else n
    p = plan(mode, units, k, 132)
    assert p["grid"] == 132 and p["stages"] >= 2 and p["smem"] <= 227 << 10
    assert p["kc"] % 128 == 0 and (p["kc"] == k or k > 2048)  # whole rows up to K = 2048


def test_slots_slice_long_rows_evenly_in_multiples_of_128():
    assert slot_columns(1536) == 1536 and slot_columns(8960) == 1792  # 5 slices of 1792
    assert slot_columns(11008) == 1920  # 6 slices, the last 1408
    assert slot_columns(8960, 1024) == 1024


def test_ctas_of_a_few_long_rows_split_each_row_pair_over_four_warps():
    assert plan("residual", 1536, 8960, 132)["wks"] == 4  # down_proj: 12 rows a CTA, 5 slots a row
    assert plan("residual", 1536, 1536, 132)["wks"] == 1 and plan("gate_up", 4864, 896, 132)["wks"] == 1
    assert plan("residual", 1536, 8960, 132)["sums"] == 12 * 4
    assert plan("residual", 1536, 8960, 132, config=Config(wks=2))["wks"] == 2  # a probe's override


def test_a_small_budget_takes_narrower_slots():
    p = plan("residual", 1536, 8960, 132, budget=80 << 10)
    assert p["kc"] < 1792 and p["smem"] <= 80 << 10 and p["stages"] >= 2


def test_tiles_hold_a_ctas_rows_where_it_has_fewer_than_16():
    down = plan("residual", 1536, 8960, 132)  # 11-12 rows a CTA
    assert down["mt"] == 12 and down["stages"] >= 8960 // down["kc"]  # every slot of a row in flight at once
    assert plan("residual", 896, 4864, 132)["mt"] == 8 and plan("rmsnorm_gemv", 2048, 1536, 132)["mt"] == 16
    assert plan("gate_up", 8960, 1536, 132)["mt"] == 16


def test_gate_up_of_whole_rows_gives_each_lane_one_chunk_of_a_row_pair():
    for k, warps in ((1536, 12), (2048, 16)):  # K / 16 chunks over K / 512 warps, four row pairs at once
        p = plan("gate_up", 8960, k, 132)
        assert (p["warps"], p["wks"]) == (warps, k // 512) and p["kc"] == k
    assert (plan("gate_up", 4864, 896, 132)["warps"], plan("gate_up", 11008, 2560, 132)["warps"]) == (8, 8)


def test_a_launch_may_override_the_consumer_warps_and_rows_per_tile():
    p = plan("gate_up", 8960, 1536, 132, config=Config(warps=12, wks=3, mt=24))
    assert (p["warps"], p["wks"], p["mt"]) == (12, 3, 24) and plan("residual", 1536, 8960, 132)["warps"] == 8
    assert p["smem"] <= 227 << 10 and p["stages"] >= 2
    assert "#define NWARP 12\n" in source("gate_up", 1536, 1536, 4, 0, -1, wks=3, mt=24, warps=12)[0]
    with pytest.raises(AssertionError):
        source("gate_up", 1536, 1536, 4, warps=12, wks=5)  # the warps split into whole row-pair groups
    with pytest.raises(AssertionError):
        source("gate_up", 1536, 1536, 4, mt=34)
    two = plan("residual", 1536, 8960, 132, 100 << 10, Config(grid=264, kc=1024))  # 2 CTAs an SM, narrower slots
    assert (two["grid"], two["kc"], two["mt"]) == (264, 1024, 6) and two["smem"] <= 100 << 10


def test_k_must_be_a_multiple_of_128():
    with pytest.raises(AssertionError):
        source("residual", 96, 128, 2)
    src, name = source("gate_up", 1536, 1536, 6, 0, -1)
    assert name == "fp8_stream_gate_up_silu" and "#define KC 1536\n" in src and "#define MODE 2\n" in src


def run(name, w, x, nw, bias=None, **kw):
    """The launch for a layer `name`, and its reference; both from the same inputs."""
    n = w[0].shape[0]
    if name == "qkv":
        out = poisoned(n)
        fp8_stream_rmsnorm_gemv(x, *w, out, norm_w=nw, eps=1e-6, bias=bias, **kw)
        return out, fp8_rmsnorm_gemv_ref(x, *w, nw, 1e-6, bias)
    if name == "gate_up":
        out = poisoned(n // 2)
        fp8_stream_rmsnorm_gate_up_silu(x, nw, 1e-6, *w, out, **kw)
        return out, fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *w)
    r = randn(n, gen=torch.Generator().manual_seed(n), scale=3.0)
    ref = fp8_gemv_residual_ref(x, *w, r)
    assert fp8_stream_gemv_residual(x, *w, r, **kw) is r
    return r, ref


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("shape,name,n,k", CASES)
def test_gpu_layer_shapes_match_the_references_with_pdl(shape, name, n, k, gen):
    w = fp8_weight(n, k, gen)
    x = randn(k, gen=gen, scale=2.0)
    nw = randn(k, gen=gen, dtype=torch.bfloat16)
    bias = randn(n, gen=gen, dtype=torch.bfloat16) if name == "qkv" else None
    out, ref = run(name, w, x, nw, bias, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(out, ref) <= 1e-5


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("n,k,budget", [(37, 256, None), (5, 128, None), (300, 1536, 64 << 10),
                                        (1536, 8960, 80 << 10), (262, 4096, None)])
@pytest.mark.parametrize("name", ["qkv", "o", "gate_up"])
def test_gpu_odd_units_small_rings_and_norm_kinds(n, k, budget, name, gen):
    """Fewer units than SMs (CTAs with a tile of 0-2 rows), a tile of a few rows, a ring smaller than a CTA's
    share (its slots reused, rows sliced), float32 / fp16 norm weights and a float32 bias."""
    if name == "gate_up" and n % 2:
        n += 1
    w = fp8_weight(n, k, gen, scale=1.0)
    x = randn(k, gen=gen, scale=3.0)
    nw = randn(k, gen=gen, dtype=torch.float32 if n % 4 else torch.float16)
    bias = randn(n, gen=gen, dtype=torch.float32) if name == "qkv" else None
    out, ref = run(name, w, x, nw, bias, budget=budget)
    torch.cuda.synchronize()
    assert rel_err(out, ref) <= 1e-5, (n, k, budget)


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("over", [Config(warps=4), Config(warps=12, wks=3), Config(warps=16, wks=4),
                                  Config(warps=12, mt=24), Config(warps=16, mt=32), Config(warps=24, wks=8),
                                  Config(kc=1024), Config(grid=264, kc=1024)])
@pytest.mark.parametrize("name,n,k", [("gate_up", 17920, 1536), ("down", 1536, 8960), ("qkv", 2560, 2048),
                                      ("gate_up", 300, 1536)])
def test_gpu_other_consumer_warps_and_tiles_match_the_references(name, n, k, over, gen):
    """lab.probe_fp8_stream's variants: other consumer warps, warps per row pair, rows per tile, slot widths and
    two CTAs an SM (half the shared memory each)."""
    w = fp8_weight(n, k, gen)
    x = randn(k, gen=gen, scale=2.0)
    nw = randn(k, gen=gen, dtype=torch.bfloat16)
    out, ref = run(name, w, x, nw, config=over, budget=100 << 10 if over.grid else None)
    torch.cuda.synchronize()
    assert rel_err(out, ref) <= 1e-5, over


@pytest.mark.gpu
@HOPPER
def test_gpu_qkv_without_norm_or_bias(gen):
    w = fp8_weight(2048, 1536, gen)
    x = randn(1536, gen=gen)
    out = poisoned(2048)
    fp8_stream_rmsnorm_gemv(x, *w, out)
    torch.cuda.synchronize()
    assert rel_err(out, fp8_rmsnorm_gemv_ref(x, *w, None, 1e-6, None)) <= 1e-5


@pytest.mark.gpu
@HOPPER
def test_gpu_down_prefetch_leaves_the_result_unchanged(gen):
    check_down_prefetch(fp8_stream_gemv_residual, gen)


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("early", [False, True])
def test_gpu_a_layer_chains_in_one_cuda_graph(early, gen):
    """QKV, o_proj, gate/up and down of the 1.5B captured in one graph with PDL (each releasing the next early
    or after its wait), replayed three times from new inputs: each replay equals the references."""
    h, i = 1536, 8960
    wq, wo, wg, wd = (fp8_weight(n, k, gen) for n, k in ((2048, h), (h, 2048), (2 * i, h), (h, i)))
    nw = randn(h, gen=gen, dtype=torch.bfloat16)
    x = randn(h, gen=gen)
    qkv, act = poisoned(2048), poisoned(i)

    def step():
        fp8_stream_rmsnorm_gemv(x, *wq, qkv, norm_w=nw, pdl=True, early=early)
        fp8_stream_gemv_residual(qkv, *wo, x, pdl=True, early=early)
        fp8_stream_rmsnorm_gate_up_silu(x, nw, 1e-6, *wg, act, pdl=True, early=early)
        fp8_stream_gemv_residual(act, *wd, x, pdl=True, early=early)

    def ref_step(x):
        x = fp8_gemv_residual_ref(fp8_rmsnorm_gemv_ref(x, *wq, nw), *wo, x)
        return fp8_gemv_residual_ref(fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *wg), *wd, x)

    check_replays(step, ref_step, x)
