"""Spec for kernels.gemv_residual: x += W @ a in place, matches its PyTorch twin."""

import pytest
import torch

from kernel_helpers import gpu, randn, rel_err

from kernels.gemv_residual import gemv_residual, gemv_residual_ref

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-4}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n,k", [(37, 100), (64, 300), (5, 33), (128, 64)])
@pytest.mark.parametrize("ahead", [False, True])  # the next tile loaded before this one is used
def test_adds_product_into_residual_in_place(n, k, dtype, ahead, gen):
    a = randn(k, gen=gen)
    w = randn(n, k, gen=gen, dtype=dtype)
    x = randn(n, gen=gen, scale=5.0)
    ref = gemv_residual_ref(a, w, x)
    got = gemv_residual(a, w, x, ahead=ahead)
    assert got is x
    assert rel_err(x, ref) <= TOL[dtype]


def test_rejects_aliased_input_and_residual(gen):
    x = randn(16, gen=gen)
    with pytest.raises(AssertionError):
        gemv_residual(x, randn(16, 16, gen=gen), x)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("n,k", [(1536, 1536), (1536, 8960), (999, 777)])
def test_gpu_real_shapes(n, k, pdl, gen):
    a = randn(k, gen=gen)
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, scale=0.02)
    x = randn(n, gen=gen)
    ref = gemv_residual_ref(a, w, x)
    gemv_residual(a, w, x, pdl=pdl)  # first call compiles: x must still be updated exactly once
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-4
    gemv_residual(a, w, x, pdl=pdl)
    torch.cuda.synchronize()
    assert rel_err(x, gemv_residual_ref(a, w, ref)) <= 1e-4


@pytest.mark.gpu
@gpu
def test_gpu_l2_prefetch_of_the_next_weights_changes_nothing(gen):
    # the runner's down_proj prefetches the next layer's QKV into L2: same result, the prefetched weight untouched
    a, x = randn(8960, gen=gen), randn(1536, gen=gen)
    w = randn(1536, 8960, gen=gen, dtype=torch.bfloat16, scale=0.02)
    nxt = randn(2048, 1536, gen=gen, dtype=torch.bfloat16)
    before = nxt.clone()
    ref = gemv_residual_ref(a, w, x)
    gemv_residual(a, w, x, pdl=True, l2_prefetch=nxt.view(-1)[: (2 << 20) // 2])
    torch.cuda.synchronize()
    assert rel_err(x, ref) <= 1e-4
    assert torch.equal(nxt, before)
