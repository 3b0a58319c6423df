"""Spec for the prefill's GEMM with FP8 weights (kernels/fp8_gemm.py): x @ W^T with W dequantized tile by tile
equals its PyTorch twin (the dequantized weight's GEMM in float32, cast) to 16-bit output precision, for bf16 and
fp16 activations and shapes off the tiles (T, N, K); on the GPU also at a real model's shape and inside a CUDA
graph."""

import pytest
import torch

from kernel_helpers import DEVICE, captured, gpu, randn, rel_err

from inference.quant import quantize_fp8
from kernels.fp8_gemm import fp8_gemm, fp8_gemm_ref

SHAPES = [(1, 16, 32), (5, 37, 96), (19, 40, 160), (64, 33, 64)]  # (T, N, K), K % 32 == 0
TOL = 6e-3  # relative error vs the twin: sums in another order, then rounded to 16 bits


def fp8(n, k, gen, scale=0.05):
    w = quantize_fp8(randn(n, k, gen=gen, scale=scale, device="cpu") + 0.1 * scale)
    return w.q.to(DEVICE), w.scale.to(DEVICE), w.offset.to(DEVICE)


@pytest.mark.parametrize("t,n,k", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fp8_gemm_equals_the_dequantized_weights_gemm(t, n, k, dtype, gen):
    q, s, o = fp8(n, k, gen)
    x = randn(t, k, gen=gen, dtype=dtype)
    out = fp8_gemm(x, q, s, o)
    assert out.dtype == dtype and out.shape == (t, n)
    assert rel_err(out, fp8_gemm_ref(x, q, s, o)) <= TOL


def test_fp8_gemm_refuses_bad_inputs(gen):
    q, s, o = fp8(16, 64, gen)
    with pytest.raises(AssertionError, match="contiguous"):
        fp8_gemm(randn(4, 64, gen=gen), q, s, o)  # float32 x
    with pytest.raises(AssertionError, match="contiguous"):
        fp8_gemm(randn(4, 32, gen=gen, dtype=torch.bfloat16), q, s, o)  # K differs


@gpu
@pytest.mark.parametrize("n,k", [(2048, 1536), (17920, 1536), (1536, 8960)])
def test_fp8_gemm_at_the_1_5b_shapes_in_a_graph(n, k, gen):
    q, s, o = fp8(n, k, gen)
    x = randn(128, k, gen=gen, dtype=torch.bfloat16)
    eager = fp8_gemm(x, q, s, o)
    assert rel_err(eager, fp8_gemm_ref(x, q, s, o)) <= TOL
    box = {}
    graph = captured(lambda: box.__setitem__("out", fp8_gemm(x, q, s, o)))
    box["out"].zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(box["out"], eager)
