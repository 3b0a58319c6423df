"""Spec for the FP8-weight GEMV kernels (kernels/fp8_*.py): each matches its PyTorch twin (the weight
dequantized, float32 math) on odd shapes, and the dense product within e4m3's rounding; on the GPU also at
the real model shapes, with PDL, and inside one CUDA graph. The LM head kernels take an int8 head as well
(inference.quant.Int8Weight: offset None)."""

import pytest
import torch

from kernel_helpers import DEVICE, gpu, poisoned, randn, rel_err

from inference.quant import quantize_fp8, quantize_int8
from kernels._fp8 import dequantize, e4m3_byte, int8_byte
from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu, fp8_rmsnorm_gate_up_silu_ref
from kernels.fp8_gemv_residual import fp8_gemv_residual, fp8_gemv_residual_ref
from kernels.fp8_lm_head_argmax import fp8_lm_head_argmax, fp8_lm_head_argmax_ref
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv, fp8_rmsnorm_gemv_ref
from kernels.lm_head_argmax import argmax_scratch

SHAPES = [(37, 96), (64, 352), (5, 32), (128, 64), (3, 160)]  # K % 32 == 0 (the FP8 contract); N, K off the tiles


def fp8(n, k, gen, scale=1.0):
    """(q, scale, offset) of a random [n, k] weight on DEVICE: the kernels' three weight arguments."""
    w = quantize_fp8(randn(n, k, gen=gen, scale=scale, device="cpu") + 0.1 * scale)  # + 0.1: offsets not ~0
    return w.q.to(DEVICE), w.scale.to(DEVICE), w.offset.to(DEVICE)


def int8(n, k, gen, scale=1.0):
    """(q, scale, None) of a random [n, k] weight in int8 on DEVICE: an int8 LM head's kernel arguments."""
    w = quantize_int8(randn(n, k, gen=gen, scale=scale, device="cpu"))
    return w.q.to(DEVICE), w.scale.to(DEVICE), None


def test_every_e4m3_byte_unpacks_to_its_value_times_2_pow_minus_120():
    """The integer unpacking (BITS) of all 254 finite e4m3 codes, subnormals and -0 included, in all four
    byte positions of a word."""
    import triton
    import triton.language as tl

    @triton.jit
    def unpack(words_ptr, out_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        w = tl.load(words_ptr + i)
        for j in tl.static_range(4):
            tl.store(out_ptr + i * 4 + j, e4m3_byte(w, j))

    codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)  # 0x7F / 0xFF: NaN
    codes = torch.cat([codes, codes[:2]])  # 256 bytes = 64 words
    out = torch.empty(256, device=DEVICE)
    unpack[(1,)](codes.to(DEVICE).view(torch.int32), out, 64)
    want = codes.view(torch.float8_e4m3fn).float()
    assert torch.equal(out.cpu() * 2.0 ** 120, want)


def test_every_int8_byte_unpacks_to_its_value():
    """int8_byte's integer unpacking of all 256 codes in all four byte positions of a word."""
    import triton
    import triton.language as tl

    @triton.jit
    def unpack(words_ptr, out_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        w = tl.load(words_ptr + i)
        for j in tl.static_range(4):
            tl.store(out_ptr + i * 4 + j, int8_byte(w, j))

    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    out = torch.empty(256, device=DEVICE)
    unpack[(1,)](codes.to(DEVICE).view(torch.int32), out, 64)
    assert torch.equal(out.cpu(), codes.view(torch.int8).float())


@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("norm,bias", [(True, True), (False, False)])
@pytest.mark.parametrize("code", ["e4m3", "int8"])
def test_rmsnorm_gemv_matches_reference(n, k, norm, bias, code, gen):
    w = (fp8 if code == "e4m3" else int8)(n, k, gen)
    x = randn(k, gen=gen, scale=3.0)
    nw = randn(k, gen=gen, dtype=torch.bfloat16) if norm else None
    b = randn(n, gen=gen, dtype=torch.bfloat16) if bias else None
    out = poisoned(n)
    fp8_rmsnorm_gemv(x, *w, out, norm_w=nw, eps=1e-6, bias=b)
    assert rel_err(out, fp8_rmsnorm_gemv_ref(x, *w, nw, 1e-6, b)) <= 1e-5


@pytest.mark.parametrize("n,k", SHAPES)
def test_gemv_residual_adds_into_x_in_place(n, k, gen):
    w = fp8(n, k, gen)
    a, x = randn(k, gen=gen), randn(n, gen=gen, scale=5.0)
    ref = fp8_gemv_residual_ref(a, *w, x)
    assert fp8_gemv_residual(a, *w, x) is x
    assert rel_err(x, ref) <= 1e-5


@pytest.mark.parametrize("i,k", [(37, 96), (8, 64), (20, 160)])
def test_gate_up_silu_matches_reference(i, k, gen):
    w = fp8(2 * i, k, gen)
    x, nw = randn(k, gen=gen, scale=2.0), randn(k, gen=gen, dtype=torch.bfloat16)
    out = poisoned(i)
    fp8_rmsnorm_gate_up_silu(x, nw, 1e-6, *w, out)
    assert rel_err(out, fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *w)) <= 1e-5


@pytest.mark.parametrize("code", ["e4m3", "int8"])
def test_lm_head_argmax_picks_the_best_logit_and_feeds_it_back(code, gen):
    n, k = 300, 64
    w = (fp8 if code == "e4m3" else int8)(n, k, gen)
    x, nw = randn(k, gen=gen), randn(k, gen=gen, dtype=torch.bfloat16)
    embed = randn(n, k, gen=gen, dtype=torch.bfloat16)
    logits, token = poisoned(n), torch.zeros(1, dtype=torch.int64, device=DEVICE)
    pos, ring = torch.tensor([7], dtype=torch.int32, device=DEVICE), torch.full((16,), -1, device=DEVICE)
    ref_logits, ref_token = fp8_lm_head_argmax_ref(x, *w, nw, 1e-6)
    fp8_lm_head_argmax(x, *w, logits, token, pos, embed, argmax_scratch(DEVICE), norm_w=nw, ring=ring)
    assert rel_err(logits, ref_logits) <= 1e-5
    assert int(token) == int(ref_token) and int(pos) == 8 and int(ring[8]) == int(token)
    assert torch.equal(x, embed[int(token)].float())


def test_the_kernels_read_the_layout_inference_quant_stores(gen):
    """Against the dense weight itself: a 4-bit grid per group of 32 (as GGUF Q4_1) is exact in this format, so
    the kernel's product equals the dense one to float32 rounding; any mix-up of columns, groups, scales or
    offsets between quantization and kernels cannot pass."""
    g = torch.Generator().manual_seed(5)
    i = torch.randint(0, 16, (24, 4, 32), generator=g)
    i[..., 0], i[..., -1] = 0, 15
    w = (torch.rand(24, 4, 1, generator=g) * 0.1 * i - torch.rand(24, 4, 1, generator=g)).view(24, 128)
    fw = quantize_fp8(w)
    x, out = randn(128, gen=gen), poisoned(24)
    fp8_rmsnorm_gemv(x, fw.q.to(DEVICE), fw.scale.to(DEVICE), fw.offset.to(DEVICE), out)
    assert rel_err(out, w.to(DEVICE) @ x) <= 1e-5
    assert torch.equal(fw.dequantize(), dequantize(fw.q, fw.scale, fw.offset))


def test_an_int8_head_reads_the_layout_inference_quant_stores(gen):
    """Against the dense weight: a Q8_0 grid (d * i per group of 32, d float16, |i| <= 127 with 127 present) is
    exact in int8, so the kernels' product equals the dense one to float32 rounding."""
    g = torch.Generator().manual_seed(6)
    i = torch.randint(-127, 128, (40, 5, 32), generator=g)
    i[..., 3] = 127
    d = (torch.rand(40, 5, 1, generator=g) * 0.01).half().float()
    w = (d * i).view(40, 160)
    iw = quantize_int8(w)
    assert torch.equal(iw.dequantize(), w)
    x, out = randn(160, gen=gen), poisoned(40)
    fp8_rmsnorm_gemv(x, iw.q.to(DEVICE), iw.scale.to(DEVICE), None, out)
    assert rel_err(out, w.to(DEVICE) @ x) <= 1e-5


def test_rejects_k_not_a_multiple_of_32(gen):
    q, s = torch.zeros(8, 48, dtype=torch.float8_e4m3fn, device=DEVICE), torch.ones(8, 1, device=DEVICE)
    with pytest.raises(AssertionError, match="multiple of 32"):
        fp8_rmsnorm_gemv(randn(48, gen=gen), q, s, s.clone(), poisoned(8))


def test_rejects_scales_not_one_per_group_of_32(gen):
    q, s = torch.zeros(8, 64, dtype=torch.float8_e4m3fn, device=DEVICE), torch.ones(8, device=DEVICE)
    with pytest.raises(AssertionError, match=r"scale must be contiguous \[8, 2\] float32"):
        fp8_rmsnorm_gemv(randn(64, gen=gen), q, s, s.clone(), poisoned(8))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("n,k", [(2048, 1536), (1536, 1536), (1536, 8960), (17920, 1536), (151936, 1536),
                                 (3072, 11008), (999, 800)])
def test_gpu_real_shapes_with_pdl(n, k, gen):
    """Every kernel at the model shapes (QKV, o_proj, down, gate/up, LM head), PDL on, twice in a row."""
    w = fp8(n, k, gen, scale=0.02)
    x = randn(k, gen=gen)
    nw = randn(k, gen=gen, dtype=torch.bfloat16)
    out = poisoned(n)
    fp8_rmsnorm_gemv(x, *w, out, norm_w=nw, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(out, fp8_rmsnorm_gemv_ref(x, *w, nw)) <= 1e-5
    if n % 2 == 0:
        h = poisoned(n // 2)
        fp8_rmsnorm_gate_up_silu(x, nw, 1e-6, *w, h, pdl=True)
        torch.cuda.synchronize()
        assert rel_err(h, fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *w)) <= 1e-5
    r = randn(n, gen=gen)
    ref = fp8_gemv_residual_ref(x, *w, r)
    fp8_gemv_residual(x, *w, r, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(r, ref) <= 1e-5


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("n,k", [(151936, 1536), (128256, 2048), (151936, 2048), (49152, 576)])
def test_gpu_int8_lm_head_at_real_shapes_with_pdl(n, k, gen):
    """The int8 LM head (logits, and logits + argmax + feed) at the vocabularies of the model shapes."""
    w = int8(n, k, gen, scale=0.02)
    x, nw = randn(k, gen=gen), randn(k, gen=gen, dtype=torch.bfloat16)
    out = poisoned(n)
    fp8_rmsnorm_gemv(x, *w, out, norm_w=nw, pdl=True)
    ref_logits, ref_token = fp8_lm_head_argmax_ref(x, *w, nw)
    torch.cuda.synchronize()
    assert rel_err(out, ref_logits) <= 1e-5
    embed = randn(n, k, gen=gen, dtype=torch.bfloat16)
    token, pos = torch.zeros(1, dtype=torch.int64, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
    fp8_lm_head_argmax(x, *w, poisoned(n), token, pos, embed, argmax_scratch("cuda"), norm_w=nw, pdl=True)
    torch.cuda.synchronize()
    assert int(token) == int(ref_token) and int(pos) == 1


@pytest.mark.gpu
@gpu
def test_gpu_kernels_chain_in_one_cuda_graph(gen):
    """QKV-like, residual, gate/up, down and (int8) LM head argmax captured in one graph with PDL: each replay
    equals the references run step by step."""
    from kernel_helpers import captured

    h, i, v = 512, 1024, 4096
    wq = fp8(768, h, gen, 0.05)
    wo = fp8(h, 768, gen, 0.05)
    wg = fp8(2 * i, h, gen, 0.05)
    wd = fp8(h, i, gen, 0.05)
    wl = int8(v, h, gen, 0.05)
    nw = randn(h, gen=gen, dtype=torch.bfloat16)
    embed = randn(v, h, gen=gen, dtype=torch.bfloat16)
    x = randn(h, gen=gen)
    qkv, act, logits = poisoned(768), poisoned(i), poisoned(v)
    token, pos = torch.zeros(1, dtype=torch.int64, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
    scratch = argmax_scratch("cuda")

    def step():
        fp8_rmsnorm_gemv(x, *wq, qkv, norm_w=nw, pdl=True)
        fp8_gemv_residual(qkv, *wo, x, pdl=True)
        fp8_rmsnorm_gate_up_silu(x, nw, 1e-6, *wg, act, pdl=True)
        fp8_gemv_residual(act, *wd, x, pdl=True)
        fp8_lm_head_argmax(x, *wl, logits, token, pos, embed, scratch, norm_w=nw, pdl=True)

    def ref_step(x):
        x = fp8_gemv_residual_ref(fp8_rmsnorm_gemv_ref(x, *wq, nw), *wo, x)
        x = fp8_gemv_residual_ref(fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *wg), *wd, x)
        return fp8_lm_head_argmax_ref(x, *wl, nw)[1]

    x0 = x.clone()
    graph = captured(step)
    for _ in range(3):
        x.copy_(x0)
        want = ref_step(x0)
        graph.replay()
        torch.cuda.synchronize()
        assert int(token) == int(want)
        x0 = embed[int(want)].float()
