"""Spec for the prefill's FP8 dequantization kernel (kernels/fp8_dequantize.py): the same bits as its PyTorch
twin (float32 offset + scale * q, then cast) for every e4m3 code, every output dtype, shapes off the tiles;
on the GPU also at a real model's shape and inside a CUDA graph."""

import pytest
import torch

from kernel_helpers import DEVICE, captured, gpu, randn

from inference.quant import quantize_fp8
from kernels.fp8_dequantize import fp8_dequantize, fp8_dequantize_ref

SHAPES = [(1, 32), (5, 32), (37, 96), (9, 544), (3, 1056)]  # K % 32 == 0; N and K off BLOCK_N = 8, BLOCK_K = 512


def fp8(n, k, gen, scale=1.0):
    w = quantize_fp8(randn(n, k, gen=gen, scale=scale, device="cpu") + 0.1 * scale)
    return w.q.to(DEVICE), w.scale.to(DEVICE), w.offset.to(DEVICE)


@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_dequantize_equals_its_pytorch_twin_bit_for_bit(n, k, dtype, gen):
    q, s, o = fp8(n, k, gen)
    out = fp8_dequantize(q, s, o, dtype)
    assert out.dtype == dtype and out.shape == (n, k)
    assert torch.equal(out, fp8_dequantize_ref(q, s, o, dtype))


def test_every_e4m3_code_and_sign_dequantizes_exactly():
    """All 254 finite codes (subnormals, -0) in one row group after another, with scale 1 and offset 0 the
    kernel gives the codes' own values; with another scale and offset, the twin's."""
    codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)
    codes = torch.cat([codes, codes[:2]]).view(8, 32)  # 8 rows of one group
    q = codes.view(torch.float8_e4m3fn).to(DEVICE)
    ones, zeros = torch.ones(8, 1, device=DEVICE), torch.zeros(8, 1, device=DEVICE)
    assert torch.equal(fp8_dequantize(q, ones, zeros, torch.float32).cpu(), codes.view(torch.float8_e4m3fn).float())
    s, o = torch.full((8, 1), 0.0173, device=DEVICE), torch.full((8, 1), -0.41, device=DEVICE)
    assert torch.equal(fp8_dequantize(q, s, o), fp8_dequantize_ref(q, s, o))


def test_bf16_ties_round_to_even():
    """1 + 2^-8 and 1 + 3 * 2^-8 lie halfway between bf16 neighbours: they round to 1 and 1 + 2^-6 (even)."""
    q = torch.ones(2, 32, dtype=torch.float8_e4m3fn, device=DEVICE)
    ones = torch.ones(2, 1, device=DEVICE)
    offset = torch.tensor([[2.0 ** -8], [3 * 2.0 ** -8]], device=DEVICE)
    out = fp8_dequantize(q, ones, offset).float().cpu()
    assert out[0].eq(1.0).all() and out[1].eq(1 + 2.0 ** -6).all()


def test_bad_arguments_are_refused():
    q = torch.zeros(4, 48, dtype=torch.float8_e4m3fn)
    with pytest.raises(AssertionError, match="multiple of 32"):
        fp8_dequantize(q, torch.ones(4, 1), torch.zeros(4, 1))
    q = torch.zeros(4, 32, dtype=torch.float8_e4m3fn)
    with pytest.raises(AssertionError, match="dtype"):
        fp8_dequantize(q, torch.ones(4, 1), torch.zeros(4, 1), torch.int8)


@gpu
def test_at_a_model_shape_and_inside_a_cuda_graph(gen):
    """The 1.5B's gate/up weight [17920, 1536], eagerly and replayed from a graph, equals the twin."""
    q, s, o = fp8(17920, 1536, gen, scale=0.02)
    ref = fp8_dequantize_ref(q, s, o)
    assert torch.equal(fp8_dequantize(q, s, o), ref)
    box = {}
    graph = captured(lambda: box.__setitem__("out", fp8_dequantize(q, s, o)))
    box["out"].zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(box["out"], ref)
