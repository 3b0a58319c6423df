"""Spec for kernels.cluster_attention (CUDA C, thread-block clusters; Hopper GPUs only): the same
answers as decode_attention_ref at every kind of position (first token, split and cluster edges,
one cluster or several), for the Qwen2.5 (G=6, 8) and Qwen3 (G=2, q/k norm) layouts, bf16 and fp16
caches; the new row appended at pos and no other row touched; ticket counters back at zero after
every call and every CUDA-graph replay. CPU machines run only the launch-shape rules."""

import math

import pytest
import torch
from kernel_helpers import check_attention_replays, HAS_CUDA, captured, poisoned, randn, rel_err

from kernels import cluster_attention as ca
from kernels.decode_attention import decode_attention_ref, rope_tables

CACHE_TOL = {torch.bfloat16: dict(rtol=1e-2, atol=1e-2), torch.float16: dict(rtol=1e-3, atol=1e-3)}
hopper = pytest.mark.skipif(not (HAS_CUDA and ca.supported(12, 2, 128, torch.bfloat16, "cuda")),
                            reason="needs a CUDA GPU of compute capability >= 9.0 and NVRTC")


def test_shared_memory_fits_two_ctas_per_sm_for_every_group_size():
    for g in range(1, ca.MAX_GROUP + 1):
        assert 2 * ca.smem_bytes(g) <= 227 * 1024, g


def test_supported_layouts():
    assert not ca.supported(12, 2, 64, torch.bfloat16, "cpu")  # head_dim 64
    assert not ca.supported(32, 2, 128, torch.bfloat16, "cpu")  # G = 16
    assert not ca.supported(12, 2, 128, torch.float32, "cpu")  # fp32 cache


def make_case(hq, hkv, t_max, dtype, qk_norm, gen):
    d = ca.HEAD_DIM
    qkv = randn((hq + 2 * hkv) * d, gen=gen, device="cuda", scale=2.0)
    k_cache = randn(hkv, t_max, d, gen=gen, dtype=dtype, device="cuda")
    v_cache = randn(hkv, t_max, d, gen=gen, dtype=dtype, device="cuda")
    cos, sin = rope_tables(t_max, d, theta=10000.0, device="cuda")
    q_norm = randn(d, gen=gen, dtype=dtype, device="cuda") if qk_norm else None
    k_norm = randn(d, gen=gen, dtype=dtype, device="cuda") if qk_norm else None
    return qkv, k_cache, v_cache, cos, sin, q_norm, k_norm


def run_and_check(hq, hkv, t_max, dtype, qk_norm, positions, gen, splits=None, cluster=16, pdl=False, tol=1e-4):
    d = ca.HEAD_DIM
    qkv, k_cache, v_cache, cos, sin, q_norm, k_norm = make_case(hq, hkv, t_max, dtype, qk_norm, gen)
    s = splits or ca.default_splits(hkv, cluster, "cuda")
    ws = ca.ClusterWorkspace(hq, hkv, d, s, cluster, "cuda")
    scale = 1.0 / math.sqrt(d)
    for p in positions:
        before_k, before_v = k_cache.clone(), v_cache.clone()
        ref, k_row, v_row = decode_attention_ref(qkv, p, k_cache, v_cache, cos, sin, scale, q_norm, k_norm)
        out = poisoned(hq * d, device="cuda")
        pos = torch.tensor([p], dtype=torch.int32, device="cuda")
        ca.cluster_attention(qkv, pos, k_cache, v_cache, cos, sin, out, ws, scale, q_norm, k_norm, pdl=pdl)
        torch.cuda.synchronize()
        err = rel_err(out, ref)
        assert err <= tol, f"pos={p}: rel err {err}"
        assert not ws.tickets.any(), f"pos={p}: ticket counters not reset: {ws.tickets.tolist()}"
        torch.testing.assert_close(k_cache[:, p].float(), k_row.to(dtype).float(), **CACHE_TOL[dtype])
        torch.testing.assert_close(v_cache[:, p].float(), v_row.to(dtype).float(), **CACHE_TOL[dtype])
        keep = torch.ones(t_max, dtype=torch.bool, device="cuda")
        keep[p] = False
        assert torch.equal(k_cache[:, keep], before_k[:, keep]) and torch.equal(v_cache[:, keep], before_v[:, keep])


# 64-row splits up to 1024 rows (one cluster of 16), then longer splits and several clusters.
POSITIONS = [0, 1, 63, 64, 65, 127, 128, 511, 512, 1000, 1023, 1024, 1025, 4095, 4096, 12345, 16383]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gpu_qwen25_layout(dtype, pdl, gen):
    run_and_check(12, 2, 16384, dtype, False, POSITIONS, gen, pdl=pdl)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("hq,hkv,qk_norm", [(16, 8, True), (16, 2, False), (8, 8, False), (28, 4, False)])
def test_gpu_other_layouts(hq, hkv, qk_norm, gen):
    run_and_check(hq, hkv, 5000, torch.bfloat16, qk_norm, [0, 5, 700, 1023, 1024, 2047, 4999], gen)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("cluster,splits", [(8, 8), (16, 16), (8, 64), (2, 6)])
def test_gpu_cluster_sizes_and_split_counts(cluster, splits, gen):
    run_and_check(12, 2, 9000, torch.bfloat16, False, [0, 100, 1024, 3000, 8999], gen, splits=splits, cluster=cluster)


@pytest.mark.gpu
@hopper
def test_gpu_cuda_graph_replays_reset_the_tickets(gen):
    hq, hkv, d, t_max = 12, 2, ca.HEAD_DIM, 6000
    layers = [make_case(hq, hkv, t_max, torch.bfloat16, False, gen) for _ in range(2)]
    ws = ca.ClusterWorkspace(hq, hkv, d, ca.default_splits(hkv, 16, "cuda"), 16, "cuda")
    pos = torch.zeros(1, dtype=torch.int32, device="cuda")
    outs = [torch.empty(hq * d, device="cuda") for _ in layers]

    def step():
        for (qkv, k, v, cos, sin, _, _), out in zip(layers, outs):
            ca.cluster_attention(qkv, pos, k, v, cos, sin, out, ws, d ** -0.5, pdl=True)

    check_attention_replays(captured(step), pos, [0, 1, 100, 1023, 4095, 5999, 63, 2500], layers, outs, ws, d ** -0.5)


@pytest.mark.gpu
@hopper
def test_gpu_early_release_still_hands_the_whole_output_to_the_next_kernel(gen):
    """early=True releases the next kernel at the attention's start (so that it can load its weights
    meanwhile): an o_proj GEMV launched after it with PDL still reads the finished output, replay
    after replay."""
    from kernels.gemv_residual import gemv_residual, gemv_residual_ref
    hq, hkv, d, t_max, h = 12, 2, ca.HEAD_DIM, 2048, 1536
    qkv, k, v, cos, sin, _, _ = make_case(hq, hkv, t_max, torch.bfloat16, False, gen)
    ws = ca.ClusterWorkspace(hq, hkv, d, ca.CLUSTER, ca.CLUSTER, "cuda")
    w = randn(h, hq * d, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    pos = torch.zeros(1, dtype=torch.int32, device="cuda")
    out, x = torch.zeros(hq * d, device="cuda"), torch.zeros(h, device="cuda")

    def step():
        ca.cluster_attention(qkv, pos, k, v, cos, sin, out, ws, d ** -0.5, pdl=True, early=True)
        gemv_residual(out, w, x, pdl=True)

    graph = captured(step)
    for p in [0, 64, 511, 1000, 1023, 7]:
        pos.fill_(p)
        x.zero_()
        ref = decode_attention_ref(qkv, p, k, v, cos, sin, d ** -0.5)[0]
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(x, gemv_residual_ref(ref, w, torch.zeros_like(x))) <= 1e-4, f"pos={p}"
