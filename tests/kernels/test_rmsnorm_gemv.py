"""Spec for kernels.rmsnorm_gemv: out = W @ (rmsnorm(x) * norm_w) + bias, matches its PyTorch twin."""

import pytest
import torch

from kernel_helpers import DEVICE, gpu, poisoned, randn, rel_err

from kernels.rmsnorm_gemv import rmsnorm_gemv, rmsnorm_gemv_ref

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-4}  # same weight values in kernel and ref: only sum order differs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n,k", [(37, 100), (64, 300), (5, 33), (16, 64)])
@pytest.mark.parametrize("with_norm,with_bias", [(True, True), (True, False), (False, True), (False, False)])
def test_matches_reference_on_odd_shapes(n, k, dtype, with_norm, with_bias, gen):
    x = randn(k, gen=gen, scale=3.0)
    w = randn(n, k, gen=gen, dtype=dtype)
    norm_w = randn(k, gen=gen, dtype=dtype) if with_norm else None
    bias = randn(n, gen=gen, dtype=dtype) if with_bias else None
    out = poisoned(n)
    got = rmsnorm_gemv(x, w, out, norm_w=norm_w, eps=1e-6, bias=bias)
    assert got is out
    assert rel_err(out, rmsnorm_gemv_ref(x, w, norm_w, 1e-6, bias)) <= TOL[dtype]


def test_norm_uses_eps(gen):
    # x = 0 except one tiny entry: without eps the norm would blow the output up
    k, n = 48, 8
    x = torch.zeros(k, device=DEVICE)
    x[3] = 1e-4
    w = randn(n, k, gen=gen)
    norm_w = torch.ones(k, device=DEVICE)
    out = rmsnorm_gemv(x, w, poisoned(n), norm_w=norm_w, eps=1e-2)
    assert rel_err(out, rmsnorm_gemv_ref(x, w, norm_w, 1e-2)) <= 1e-5


def test_rejects_wrong_shapes(gen):
    w = randn(8, 16, gen=gen)
    with pytest.raises(AssertionError):
        rmsnorm_gemv(randn(15, gen=gen), w, poisoned(8))
    with pytest.raises(AssertionError):
        rmsnorm_gemv(randn(16, gen=gen), w.t(), poisoned(16))  # not row-major contiguous


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("n,k,with_bias", [(2048, 1536, True), (151936, 1536, False), (1000, 1000, True)])
def test_gpu_real_shapes(n, k, with_bias, pdl, gen):
    x = randn(k, gen=gen, scale=3.0)
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, scale=0.02)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    bias = randn(n, gen=gen, dtype=torch.bfloat16) if with_bias else None
    out = poisoned(n)
    rmsnorm_gemv(x, w, out, norm_w=norm_w, eps=1e-6, bias=bias, pdl=pdl)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_gemv_ref(x, w, norm_w, 1e-6, bias)) <= 1e-4
