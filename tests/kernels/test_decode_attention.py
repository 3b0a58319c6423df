"""Spec for kernels.decode_attention: one decode token's q/k norm + RoPE + cache append + GQA
split-KV attention + in-launch combine, against decode_attention_ref, at every kind of position
(first token, chunk boundaries, last cache row) and head layout (GQA group 1, 2, 6, 8; head_dim
64 and 128); the ticket counters of the combine are back at zero after every call and every
CUDA-graph replay."""

import math

import pytest
import torch
from kernel_helpers import check_attention_replays, DEVICE, captured, gpu, poisoned, randn, rel_err

from kernels.decode_attention import (
    AttentionConfig,
    AttentionWorkspace,
    decode_attention,
    decode_attention_ref,
    decode_attention_with,
    default_num_splits,
    rope_tables,
)

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}  # bf16 caches: the new row is stored rounded
CACHE_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1e-2, atol=1e-2),
             torch.float16: dict(rtol=1e-3, atol=1e-3)}


def make_case(hq, hkv, d, t_max, dtype, qk_norm, gen, device=DEVICE):
    qkv = randn((hq + 2 * hkv) * d, gen=gen, device=device, scale=2.0)
    k_cache = randn(hkv, t_max, d, gen=gen, dtype=dtype, device=device)
    v_cache = randn(hkv, t_max, d, gen=gen, dtype=dtype, device=device)
    cos, sin = rope_tables(t_max, d, theta=10000.0, device=device)
    q_norm = randn(d, gen=gen, device=device) if qk_norm else None
    k_norm = randn(d, gen=gen, device=device) if qk_norm else None
    return qkv, k_cache, v_cache, cos, sin, q_norm, k_norm


def poison_workspace(ws):
    for t in (ws.m, ws.l, ws.acc, ws.m2, ws.l2, ws.acc2):
        t.fill_(float("nan"))


def run_and_check(hq, hkv, d, t_max, dtype, qk_norm, positions, gen, num_splits=None, device=DEVICE, pdl=False,
                  combine_group=None, config=None, tol=None):
    qkv, k_cache, v_cache, cos, sin, q_norm, k_norm = make_case(hq, hkv, d, t_max, dtype, qk_norm, gen, device)
    s = num_splits or default_num_splits(hkv, device)
    ws = AttentionWorkspace(hq, d, s, device, combine_group=combine_group)
    scale = 1.0 / math.sqrt(d)
    for p in positions:
        poison_workspace(ws)
        before_k, before_v = k_cache.clone(), v_cache.clone()
        ref, k_row, v_row = decode_attention_ref(qkv, p, k_cache, v_cache, cos, sin, scale, q_norm, k_norm)
        out = poisoned(hq * d, device=device)
        pos = torch.tensor([p], dtype=torch.int32, device=device)
        if config is None:
            got = decode_attention(qkv, pos, k_cache, v_cache, cos, sin, out, ws, scale, q_norm, k_norm, pdl=pdl)
        else:
            got = decode_attention_with(config, qkv, pos, k_cache, v_cache, cos, sin, out, ws, scale, q_norm, k_norm,
                                        pdl=pdl)
        assert got is out
        err = rel_err(out, ref)
        assert err <= (tol or TOL[dtype]), f"pos={p}: rel err {err}"
        assert not ws.tickets.any(), f"pos={p}: ticket counters not reset: {ws.tickets.tolist()}"
        # the new row is appended at pos (in cache dtype); every other row is untouched
        torch.testing.assert_close(k_cache[:, p].float(), k_row.to(dtype).float(), **CACHE_TOL[dtype])
        torch.testing.assert_close(v_cache[:, p].float(), v_row.to(dtype).float(), **CACHE_TOL[dtype])
        keep = torch.ones(t_max, dtype=torch.bool, device=device)
        keep[p] = False
        assert torch.equal(k_cache[:, keep], before_k[:, keep]) and torch.equal(v_cache[:, keep], before_v[:, keep])


# Interpreter: 4 splits, BLOCK_T 16 -> chunk 16 while pos < 64; pos 15/16 straddle a chunk edge,
# pos 0 leaves 3 empty splits, pos 69 (= Tmax-1) makes chunks of 32 with the last split empty.
POSITIONS = [0, 15, 16, 47, 69]


@pytest.mark.parametrize("hq,hkv", [(2, 2), (4, 2), (6, 1), (8, 1)])
@pytest.mark.parametrize("d", [64, 128])
def test_matches_reference_fp32_cache(hq, hkv, d, gen):
    run_and_check(hq, hkv, d, 70, torch.float32, False, POSITIONS, gen)


@pytest.mark.parametrize("hq,hkv,d", [(4, 2, 64), (6, 1, 128)])
def test_matches_reference_bf16_cache(hq, hkv, d, gen):
    run_and_check(hq, hkv, d, 70, torch.bfloat16, False, POSITIONS, gen)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_qwen3_qk_norm_applied_before_rope(dtype, gen):
    run_and_check(8, 2, 128, 70, dtype, True, [0, 33, 69], gen)


@pytest.mark.parametrize("num_splits", [1, 3, 7])
def test_any_number_of_splits_gives_the_same_answer(num_splits, gen):
    run_and_check(4, 1, 64, 50, torch.float32, False, [0, 20, 49], gen, num_splits=num_splits)


@pytest.mark.parametrize("num_splits,combine_group", [(4, 1), (5, 2), (8, 4), (6, 8)])
def test_tickets_are_back_to_zero_after_every_call(num_splits, combine_group, gen):
    # One or two combine levels, groups of 1 (every split merges alone) up to all splits in one
    # group, a last group smaller than the others; many calls in a row on one workspace.
    run_and_check(6, 2, 64, 90, torch.float32, False, [0, 1, 16, 33, 64, 89, 7, 89], gen,
                  num_splits=num_splits, combine_group=combine_group)


def test_min_chunk_gives_the_same_answer(gen):
    # Fewer, longer splits at short context (chunk >= min_chunk rows, not a multiple of BLOCK_T).
    run_and_check(4, 2, 64, 90, torch.float32, False, [0, 40, 47, 48, 89], gen, num_splits=5,
                  config=AttentionConfig(block_t=16, min_chunk=24))
    # splits that are not whole tiles (chunk rounded to 4 rows, not to BLOCK_T)
    run_and_check(4, 2, 64, 90, torch.float32, False, [0, 3, 4, 47, 89], gen, num_splits=7,
                  config=AttentionConfig(block_t=16, chunk_align=4))


def test_split_16bit_dots_are_as_exact_as_fp32_dots(gen):
    # q and p split into a 16-bit high part + remainder: two tensor-core dots per product, error
    # ~1e-6 (one tf32 or bf16 dot: ~1e-3). fp16 here: the interpreter cannot do bf16 dots.
    run_and_check(6, 1, 128, 70, torch.float16, False, POSITIONS, gen, tol=2e-5,
                  config=AttentionConfig(block_t=16, split_dots=True))


def test_sequential_decode_builds_the_cache_token_by_token(gen):
    # Start from an empty (NaN) cache and decode 40 tokens: each step must only read rows it wrote.
    hq, hkv, d, t_max = 4, 2, 64, 40
    qkv_steps = [randn((hq + 2 * hkv) * d, gen=gen) for _ in range(t_max)]
    k_cache = torch.full((hkv, t_max, d), float("nan"), device=DEVICE)
    v_cache = torch.full((hkv, t_max, d), float("nan"), device=DEVICE)
    k_ref, v_ref = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
    cos, sin = rope_tables(t_max, d, device=DEVICE)
    ws = AttentionWorkspace(hq, d, 4, DEVICE)
    for p, qkv in enumerate(qkv_steps):
        out = poisoned(hq * d)
        decode_attention(qkv, torch.tensor([p], dtype=torch.int32, device=DEVICE), k_cache, v_cache, cos, sin,
                         out, ws, 0.125)
        ref, k_row, v_row = decode_attention_ref(qkv, p, k_ref, v_ref, cos, sin, 0.125)
        k_ref[:, p], v_ref[:, p] = k_row, v_row
        assert rel_err(out, ref) <= 1e-5, f"step {p}"
    assert rel_err(k_cache, k_ref) <= 1e-5 and rel_err(v_cache, v_ref) <= 1e-5


def test_rejects_int64_pos(gen):
    qkv, k_cache, v_cache, cos, sin, _, _ = make_case(2, 1, 64, 8, torch.float32, False, gen)
    with pytest.raises(AssertionError):
        decode_attention(qkv, torch.tensor([0], device=DEVICE), k_cache, v_cache, cos, sin, poisoned(128),
                         AttentionWorkspace(2, 64, 2, DEVICE), 0.125)


# --- GPU: the Qwen2.5-Coder-1.5B layout (Hq=12, Hkv=2, D=128) and Qwen3 / Llama-like ones.

@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_qwen25_layout_long_context(dtype, pdl, gen):
    t_max = 16384
    positions = [0, 1, 63, 64, 127, 128, 511, 1000, 4095, 4096, 12345, t_max - 1]
    run_and_check(12, 2, 128, t_max, dtype, False, positions, gen, device="cuda", pdl=pdl)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("hq,hkv,d,qk_norm", [(16, 8, 128, True), (32, 8, 64, False), (8, 8, 64, False),
                                             (24, 4, 128, False)])
def test_gpu_other_layouts(hq, hkv, d, qk_norm, gen):
    run_and_check(hq, hkv, d, 3000, torch.bfloat16, qk_norm, [0, 5, 700, 2047, 2999], gen, device="cuda")


@pytest.mark.gpu
@gpu
def test_gpu_split_bf16_dots_are_near_fp32_exact(gen):
    run_and_check(12, 2, 128, 16384, torch.bfloat16, False, [5, 700, 4096, 16383], gen, device="cuda", tol=1e-4)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
def test_gpu_cuda_graph_replays_reset_the_tickets(pdl, gen):
    # Two "layers" share one workspace inside one graph, replayed at moving positions: every
    # launch must find the counters at zero, and leave them there.
    hq, hkv, d, t_max = 12, 2, 128, 5000
    layers = [make_case(hq, hkv, d, t_max, torch.bfloat16, False, gen, "cuda") for _ in range(2)]
    ws = AttentionWorkspace(hq, d, default_num_splits(hkv, "cuda"), "cuda")
    pos = torch.zeros(1, dtype=torch.int32, device="cuda")
    outs = [torch.empty(hq * d, device="cuda") for _ in layers]

    def step():
        for (qkv, k, v, cos, sin, _, _), out in zip(layers, outs):
            decode_attention(qkv, pos, k, v, cos, sin, out, ws, d ** -0.5, pdl=pdl)

    check_attention_replays(captured(step), pos, [0, 1, 100, 4095, 4999, 63, 2500], layers, outs, ws, d ** -0.5)
