"""Spec for kernels.gate_up_silu: out = silu(W_g @ n) * (W_u @ n), n = rmsnorm(x) * norm_w."""

import pytest
import torch

from kernel_helpers import DEVICE, gpu, poisoned, randn, rel_err

from kernels.gate_up_silu import rmsnorm_gate_up_silu, rmsnorm_gate_up_silu_ref

TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-4}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("i,k", [(45, 100), (45, 300), (8, 33), (64, 64)])
@pytest.mark.parametrize("ahead,red", [(False, 1), (True, 1), (True, 4), (True, 8)])  # next tile early; sums
def test_matches_reference_on_odd_shapes(i, k, dtype, ahead, red, gen):
    x = randn(k, gen=gen, scale=2.0)
    norm_w = randn(k, gen=gen, dtype=dtype)
    w = randn(2 * i, k, gen=gen, dtype=dtype)
    out = poisoned(i)
    got = rmsnorm_gate_up_silu(x, norm_w, 1e-6, w, out, ahead=ahead, red=red)
    assert got is out
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= TOL[dtype]


def test_gate_rows_come_first(gen):
    # random gate rows, constant up rows: silu(gate) * up differs from silu(up) * gate
    i, k = 12, 40
    x, norm_w = randn(k, gen=gen), torch.ones(k, device=DEVICE)
    w = torch.cat([randn(i, k, gen=gen), torch.full((i, k), 0.01, device=DEVICE)])
    out = rmsnorm_gate_up_silu(x, norm_w, 1e-6, w, poisoned(i))
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= 1e-5


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("i,k", [(8960, 1536), (333, 1000)])
def test_gpu_real_shapes(i, k, pdl, gen):
    x = randn(k, gen=gen, scale=2.0)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    w = randn(2 * i, k, gen=gen, dtype=torch.bfloat16, scale=0.02)
    out = poisoned(i)
    rmsnorm_gate_up_silu(x, norm_w, 1e-6, w, out, pdl=pdl)
    torch.cuda.synchronize()
    assert rel_err(out, rmsnorm_gate_up_silu_ref(x, norm_w, 1e-6, w)) <= 1e-4
