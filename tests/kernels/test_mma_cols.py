"""Spec for the tensor-core GEMVs of 1..16 columns (kernels/gemv_mma_cols.py, kernels/lm_head_mma_cols.py):
each equals its PyTorch twin to fp32-ish precision (the activation split in three bf16 parts), and a column's
output is the same bits whatever the other columns are and however many there are (n = 1, 2, 4, 8, 16): what
makes a verify step's column equal the plain step. Odd shapes under the interpreter; on a GPU (gpu tests) the
1.5B shapes, compiled. Each with the default launch config and with split-K (3 programs per row block, their
partial sums added in a fixed order)."""

import pytest
import torch
from kernel_helpers import DEVICE, HAS_CUDA, poisoned, randn, rel_err

from kernels.gemv_mma_cols import (gemv_residual_mma, gemv_residual_mma_ref, rmsnorm_gate_up_silu_mma,
                                   rmsnorm_gate_up_silu_mma_ref, rmsnorm_gemv_mma, rmsnorm_gemv_mma_ref, split_scratch)
from kernels.lm_head_mma_cols import lm_head_argmax_mma, lm_head_argmax_mma_ref, mma_scratch

WIDTHS = [1, 2, 4, 8, 16]
SHAPES = [(37, 100), (16, 64)] if not HAS_CUDA else [(2048, 1536), (1536, 8960)]
DTYPES = [torch.bfloat16, torch.float32]
TOL = 3e-5  # relative error vs the float32 twin (bf16 x three bf16 parts ~ fp32; an H100 gave up to 1.01e-5 at K 8960, an H200 1.99e-5)
CONFIGS = [None, {"SPLIT_K": 3}]  # the default launch config; split-K over 3 programs per row block


def columns(n, k, gen, scale=1.0):
    """n activation columns: the first 8 random, later ones copies of them scaled (different bits)."""
    x = randn(min(n, 8), k, gen=gen, scale=scale)
    return torch.cat([x, x[: n - x.shape[0]] * 0.5]) if n > 8 else x


def per_column(launch, x, out_cols):
    """launch(x_c, out_c) for each column alone (one [K] vector), stacked: the plain step's view."""
    return torch.stack([launch(x[c].contiguous(), out_cols(c)) for c in range(x.shape[0])])


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("with_norm,with_bias", [(True, True), (False, False)])
def test_rmsnorm_gemv_mma_gives_each_column_the_same_bits_for_any_column_count(n, k, with_norm, with_bias, dtype,
                                                                              config, gen):
    w = randn(n, k, gen=gen, dtype=dtype, scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16) if with_norm else None
    bias = randn(n, gen=gen, dtype=torch.bfloat16) if with_bias else None
    x = columns(16, k, gen, scale=3.0)
    alone = per_column(lambda xc, o: rmsnorm_gemv_mma(xc, w, o, norm_w, 1e-6, bias, config=config), x,
                       lambda c: poisoned(n))
    assert rel_err(alone, rmsnorm_gemv_mma_ref(x, w, norm_w, 1e-6, bias)) <= TOL
    for cols in WIDTHS:
        out = poisoned(cols, n)
        assert rmsnorm_gemv_mma(x[:cols].contiguous(), w, out, norm_w, 1e-6, bias, config=config) is out
        assert torch.equal(out, alone[:cols]), f"{cols} columns"


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,k", SHAPES)
def test_gemv_residual_mma_adds_in_place_with_the_same_bits_for_any_column_count(n, k, dtype, config, gen):
    w = randn(n, k, gen=gen, dtype=dtype, scale=0.05)
    a, x0 = columns(16, k, gen), columns(16, n, gen)

    def one(c):
        x = x0[c].clone()
        return gemv_residual_mma(a[c].contiguous(), w, x, config=config)

    alone = torch.stack([one(c) for c in range(16)])
    assert rel_err(alone, gemv_residual_mma_ref(a, w, x0)) <= TOL
    for cols in WIDTHS:
        x = x0[:cols].clone()
        assert gemv_residual_mma(a[:cols].contiguous(), w, x, config=config) is x
        assert torch.equal(x, alone[:cols]), f"{cols} columns"
    assert not split_scratch(DEVICE, "tickets", 1, torch.int32).any(), "split-K tickets not reset"


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i,k", [(s[0] // 2 if HAS_CUDA else s[0], s[1]) for s in SHAPES])
def test_gate_up_silu_mma_gives_each_column_the_same_bits_for_any_column_count(i, k, dtype, config, gen):
    w = randn(2 * i, k, gen=gen, dtype=dtype, scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    x = columns(16, k, gen, scale=2.0)
    alone = per_column(lambda xc, o: rmsnorm_gate_up_silu_mma(xc, norm_w, 1e-6, w, o, config=config), x,
                       lambda c: poisoned(i))
    assert rel_err(alone, rmsnorm_gate_up_silu_mma_ref(x, norm_w, 1e-6, w)) <= TOL
    for cols in WIDTHS:
        out = poisoned(cols, i)
        rmsnorm_gate_up_silu_mma(x[:cols].contiguous(), norm_w, 1e-6, w, out, config=config)
        assert torch.equal(out, alone[:cols]), f"{cols} columns"


def lm_head_case(gen, v, k, dtype=torch.bfloat16):
    w = randn(v, k, gen=gen, dtype=dtype, scale=0.05)
    embed = randn(v, k, gen=gen, dtype=torch.bfloat16)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    return w, embed, norm_w


@pytest.mark.parametrize("dtype", DTYPES)
def test_lm_head_argmax_mma_accepts_the_agreeing_prefix_and_feeds_its_token(dtype, gen):
    v, k = (151936, 1536) if HAS_CUDA else (300, 64)
    w, embed, norm_w = lm_head_case(gen, v, k, dtype)
    x = randn(8, k, gen=gen)
    logits_ref, g, _ = lm_head_argmax_mma_ref(x, w, norm_w=norm_w)
    scratch = mma_scratch(DEVICE)
    for cols, right, klen in [(8, 7, 7), (8, 3, 7), (8, 0, 7), (8, 7, 2), (4, 3, 3), (2, 1, 1), (2, 0, 1)]:
        draft = g[:7].clone()  # column j's input is the token before; its argmax g[j] is compared with draft[j]
        if right < 7:
            draft[right] = (g[right] + 1) % v  # agrees up to `right`
        token = torch.zeros(1, dtype=torch.int64, device=DEVICE)
        pos = torch.tensor([100], dtype=torch.int32, device=DEVICE)
        x_next, result, logits = poisoned(k), torch.zeros(cols + 1, dtype=torch.int64, device=DEVICE), poisoned(cols, v)
        lm_head_argmax_mma(x[:cols].contiguous(), w, logits, token, pos, embed, scratch, norm_w, 1e-6,
                           draft=draft, klen=torch.tensor([klen], device=DEVICE), x_next=x_next, result=result)
        a = min(right, klen, cols - 1)
        assert result.tolist() == g[:cols].tolist() + [a], (cols, right, klen)
        assert int(token) == int(g[a]) and int(pos) == 100 + a + 1
        assert torch.equal(x_next, embed[int(g[a])].float())
        assert rel_err(logits, logits_ref[:cols]) <= TOL
        assert scratch[:16].eq(scratch[0]).all() and int(scratch[16]) == 0  # reset for the next launch


def test_lm_head_argmax_mma_one_column_is_the_plain_greedy_step(gen):
    """One column, no draft (a plain step of a speculating run): token = argmax, pos + 1, the ring slot, x =
    its embedding, and the logits are the same bits as that column in an 8-column launch."""
    v, k = (151936, 1536) if HAS_CUDA else (300, 64)
    w, embed, norm_w = lm_head_case(gen, v, k)
    x8 = randn(8, k, gen=gen)
    logits8 = poisoned(8, v)
    scratch = mma_scratch(DEVICE)
    lm_head_argmax_mma(x8, w, logits8, torch.zeros(1, dtype=torch.int64, device=DEVICE),
                       torch.zeros(1, dtype=torch.int32, device=DEVICE), embed, scratch, norm_w, 1e-6,
                       draft=torch.zeros(7, dtype=torch.int64, device=DEVICE),
                       klen=torch.zeros(1, dtype=torch.int64, device=DEVICE), x_next=poisoned(k))
    ring = torch.full((8,), -1, dtype=torch.int64, device=DEVICE)
    for c in range(8):
        x, logits = x8[c].clone(), poisoned(v)
        token = torch.zeros(1, dtype=torch.int64, device=DEVICE)
        pos = torch.tensor([10 + c], dtype=torch.int32, device=DEVICE)
        assert lm_head_argmax_mma(x, w, logits, token, pos, embed, scratch, norm_w, 1e-6, ring) is token
        assert torch.equal(logits, logits8[c])
        assert int(token) == int(logits8[c].argmax()) and int(pos) == 11 + c and int(ring[(11 + c) % 8]) == int(token)
        assert torch.equal(x, embed[int(token)].float())


def test_lm_head_argmax_mma_ties_go_to_the_lowest_row(gen):
    v, k = 300, 64
    w, embed, _ = lm_head_case(gen, v, k)
    w[250] = w[40]  # rows 40 and 250 give equal logits; 40 must win wherever it is the best
    x = randn(2, k, gen=gen)
    x[0] = w[40].float()  # a column that picks row 40 (and 250)
    x[1] = w[250].float()
    result = torch.zeros(3, dtype=torch.int64, device=DEVICE)
    lm_head_argmax_mma(x, w, poisoned(2, v), torch.zeros(1, dtype=torch.int64, device=DEVICE),
                       torch.zeros(1, dtype=torch.int32, device=DEVICE), embed, mma_scratch(DEVICE),
                       draft=torch.zeros(1, dtype=torch.int64, device=DEVICE),
                       klen=torch.zeros(1, dtype=torch.int64, device=DEVICE), x_next=poisoned(k), result=result)
    assert result[:2].tolist() == [40, 40]


def test_launchers_refuse_bad_shapes(gen):
    w = randn(32, 64, gen=gen, dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="columns, must be 1..16"):
        rmsnorm_gemv_mma(randn(17, 64, gen=gen), w, poisoned(17, 32))
    with pytest.raises(AssertionError, match="same number of columns"):
        gemv_residual_mma(randn(2, 64, gen=gen), w, poisoned(3, 32))
    with pytest.raises(AssertionError, match="x_next is needed"):
        lm_head_argmax_mma(randn(2, 64, gen=gen), w, poisoned(2, 32), torch.zeros(1, dtype=torch.int64),
                           torch.zeros(1, dtype=torch.int32), w, mma_scratch(DEVICE))
