"""Spec for the k-column GEMVs of the verify step on CUDA cores (kernels/{rmsnorm_gemv,gemv_residual,gate_up_silu,
lm_head_argmax}_cols.py, the default verify kernels): each equals its PyTorch twin, and column c equals, bit for
bit, the one-column Triton decode kernel run on column c alone. Odd shapes, every bucket width; on a GPU (gpu
tests) the same on the real shapes, compiled. (The attention: test_decode_attention_cols.py; the tensor-core
GEMVs: test_mma_cols.py.)"""


import pytest
import torch
from kernel_helpers import DEVICE, HAS_CUDA, poisoned, randn, rel_err

from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gate_up_silu_cols import rmsnorm_gate_up_silu_cols, rmsnorm_gate_up_silu_cols_ref
from kernels.gemv_residual import gemv_residual
from kernels.gemv_residual_cols import gemv_residual_cols, gemv_residual_cols_ref
from kernels.lm_head_argmax import argmax_scratch, lm_head_argmax
from kernels.lm_head_argmax_cols import cols_scratch, lm_head_argmax_cols, lm_head_argmax_cols_ref
from kernels.rmsnorm_gemv import rmsnorm_gemv
from kernels.rmsnorm_gemv_cols import rmsnorm_gemv_cols, rmsnorm_gemv_cols_ref

WIDTHS = [1, 3, 4] if not HAS_CUDA else [1, 8]
SHAPES = [(37, 100), (16, 64)] if not HAS_CUDA else [(2048, 1536)]
BIG_K = [(24, 200)] if not HAS_CUDA else [(1536, 8960)]


def groups(kc, split):
    """The launchers' `group`: all columns in one program, or 2 (1 for odd widths) per program."""
    return (2 if kc % 2 == 0 else 1) if split else None


def weights(n, k, gen, dtype=torch.bfloat16):
    return randn(n, k, gen=gen, dtype=dtype, scale=0.05)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kc", WIDTHS)
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("with_norm,with_bias", [(True, True), (False, False)])
def test_rmsnorm_gemv_cols_is_the_one_column_kernel_per_column(kc, n, k, with_norm, with_bias, split, gen):
    x = randn(kc, k, gen=gen, scale=3.0)
    w = weights(n, k, gen)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16) if with_norm else None
    bias = randn(n, gen=gen, dtype=torch.bfloat16) if with_bias else None
    out = poisoned(kc, n)
    assert rmsnorm_gemv_cols(x, w, out, norm_w, 1e-6, bias, group=groups(kc, split)) is out
    assert rel_err(out, rmsnorm_gemv_cols_ref(x, w, norm_w, 1e-6, bias)) <= 1e-4
    for c in range(kc):
        one = rmsnorm_gemv(x[c].contiguous(), w, poisoned(n), norm_w, 1e-6, bias)
        assert torch.equal(out[c], one), f"column {c}"


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kc", WIDTHS)
@pytest.mark.parametrize("n,k", SHAPES + BIG_K)
def test_gemv_residual_cols_is_the_one_column_kernel_per_column(kc, n, k, split, gen):
    a = randn(kc, k, gen=gen)
    w = weights(n, k, gen)
    x0 = randn(kc, n, gen=gen)
    x = x0.clone()
    assert gemv_residual_cols(a, w, x, group=groups(kc, split)) is x
    assert rel_err(x, gemv_residual_cols_ref(a, w, x0)) <= 1e-4
    for c in range(kc):
        assert torch.equal(x[c], gemv_residual(a[c].contiguous(), w, x0[c].clone())), f"column {c}"


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kc", WIDTHS)
@pytest.mark.parametrize("i,k", [(40, 100), (16, 64)] if not HAS_CUDA else [(8960, 1536)])
def test_gate_up_silu_cols_is_the_one_column_kernel_per_column(kc, i, k, split, gen):
    x = randn(kc, k, gen=gen, scale=3.0)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    w = weights(2 * i, k, gen)
    out = poisoned(kc, i)
    assert rmsnorm_gate_up_silu_cols(x, norm_w, 1e-6, w, out, group=groups(kc, split)) is out
    assert rel_err(out, rmsnorm_gate_up_silu_cols_ref(x, norm_w, 1e-6, w)) <= 1e-4
    for c in range(kc):
        one = rmsnorm_gate_up_silu(x[c].contiguous(), norm_w, 1e-6, w, poisoned(i))
        assert torch.equal(out[c], one), f"column {c}"


ACCEPTS = [(0, 0), (2, 1), (15, 15)] if not HAS_CUDA else [(0, 0), (2, 1), (2, 2), (15, 15), (15, 1)]


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kc", WIDTHS)
@pytest.mark.parametrize("klen,agree", ACCEPTS)
def test_lm_head_argmax_cols_accepts_the_agreeing_prefix_and_feeds_its_next_token(kc, klen, agree, split, gen):
    v, k = (120, 64) if not HAS_CUDA else (151936, 1536)
    klen = min(klen, kc - 1)
    agree = min(agree, klen)
    x = randn(kc, k, gen=gen, scale=3.0)
    w = weights(v, k, gen)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    embed = randn(v, k, gen=gen, dtype=torch.bfloat16)
    _, g, _ = lm_head_argmax_cols_ref(x, w, [], 0, norm_w)
    draft = torch.tensor([int(g[j]) if j < agree else (int(g[j]) + 1) % v for j in range(kc - 1)] + [0],
                         dtype=torch.int64, device=DEVICE)  # agrees on exactly `agree` tokens
    klen_t = torch.tensor([klen], dtype=torch.int64, device=DEVICE)
    token = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    pos = torch.tensor([10], dtype=torch.int32, device=DEVICE)
    x_next, logits = poisoned(k), poisoned(kc, v)
    result = torch.full((kc + 1,), -1, dtype=torch.int64, device=DEVICE)
    scratch = cols_scratch(DEVICE)
    for _ in range(2):  # the scratch is left ready for the next launch
        pos.fill_(10)
        lm_head_argmax_cols(x, w, logits, scratch, draft, klen_t, token, pos, embed, x_next, result, norm_w,
                            group=groups(kc, split))
        ref_logits, ref_g, n = lm_head_argmax_cols_ref(x, w, draft, klen, norm_w)
        assert n == agree
        assert rel_err(logits, ref_logits) <= 1e-4
        assert result[:kc].tolist() == ref_g.tolist() and int(result[kc]) == n
        assert int(token) == int(ref_g[n]) and int(pos) == 10 + n + 1
        assert torch.equal(x_next, embed[int(ref_g[n])].float())
    for c in range(kc):  # bit for bit the one-column kernel's logits and token
        one_logits, one_token, one_pos, one_x = poisoned(v), torch.zeros_like(token), pos.clone(), poisoned(k)
        lm_head_argmax(x[c].clone(), w, one_logits, one_token, one_pos, embed, argmax_scratch(DEVICE), norm_w)
        assert torch.equal(logits[c], one_logits) and int(one_token) == int(result[c]), f"column {c}"


def test_cols_launchers_reject_bad_widths(gen):
    w = weights(8, 16, gen)
    with pytest.raises(AssertionError):
        rmsnorm_gemv_cols(randn(17, 16, gen=gen), w, poisoned(17, 8))  # more than 16 columns
    with pytest.raises(AssertionError):
        gemv_residual_cols(randn(2, 16, gen=gen), w, randn(3, 8, gen=gen))  # columns differ
