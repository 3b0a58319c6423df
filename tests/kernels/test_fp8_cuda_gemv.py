"""Spec for the CUDA C FP8 GEMVs (kernels/fp8_cuda_gemv.py): each matches the PyTorch twin of its Triton
kernel (the weight dequantized, float32 math) at the model layer shapes (1.5B, Llama-3.2-1B, 3B, Qwen3-1.7B),
on odd shapes, with bias, PDL, every launch config of the rule, and inside one CUDA graph; the int8 LM head
(logits, and logits + argmax + feed) at the model vocabularies. On the CPU: the variants assemble, and the
launch configs fill the GPU."""

import ctypes

import pytest
import torch

from kernel_helpers import check_down_prefetch, check_replays, fp8_weight, poisoned, randn, rel_err

from inference.quant import quantize_fp8, quantize_int8
from kernels import _cuda_rtc
from kernels.fp8_cuda_gemv import (MODES, Config, _Params, config_for, fp8_cuda_gemv_residual, fp8_cuda_lm_head_argmax,
                                   fp8_cuda_rmsnorm_gate_up_silu, fp8_cuda_rmsnorm_gemv, smem_bytes, source)
from kernels.fp8_lm_head_argmax import fp8_lm_head_argmax_ref
from kernels.lm_head_mma_cols import mma_scratch
from kernels.fp8_gate_up_silu import fp8_rmsnorm_gate_up_silu_ref
from kernels.fp8_gemv_residual import fp8_gemv_residual_ref
from kernels.fp8_rmsnorm_gemv import fp8_rmsnorm_gemv_ref

HOPPER = pytest.mark.skipif(not (torch.cuda.is_available() and _cuda_rtc.available()),
                                    reason="needs a Hopper GPU with NVRTC")

# (name, N, K) of the layer GEMVs: QKV, o_proj, gate/up (N = 2I), down
LAYERS = {
    "qwen2.5-coder-1.5b": [("qkv", 2048, 1536), ("o", 1536, 1536), ("gate_up", 17920, 1536), ("down", 1536, 8960)],
    "llama-3.2-1b": [("qkv", 3072, 2048), ("o", 2048, 2048), ("gate_up", 16384, 2048), ("down", 2048, 8192)],
    "qwen2.5-coder-3b": [("qkv", 2560, 2048), ("o", 2048, 2048), ("gate_up", 22016, 2048), ("down", 2048, 11008)],
    "qwen3-1.7b": [("qkv", 4096, 2048), ("o", 2048, 2048), ("gate_up", 12288, 2048), ("down", 2048, 6144)],
}
CASES = [(s, *w) for s, ws in LAYERS.items() for w in ws]



def test_the_params_mirror_has_the_kernel_struct_layout():
    """Eight pointers, the prefetch size, units and eps: the kernel's Params, no padding."""
    assert ctypes.sizeof(_Params) == 8 * 8 + 8 + 4 + 4
    assert _Params.eps.offset == 8 * 8 + 8 + 4


@pytest.mark.parametrize("mode", list(MODES))
def test_each_variant_assembles_with_its_defines_before_the_source(mode):
    src, name = source(mode, 1536, Config(), 0, -1, False)
    assert name == MODES[mode][1] and f"#define KERNEL_NAME {name}\n" in src
    assert "#define KDIM 1536\n" in src and "#define U 3\n" in src  # 96 chunks over 32 lanes: 3 each
    assert 'extern "C" __global__ void __launch_bounds__(NW * 32) KERNEL_NAME(' in src


@pytest.mark.parametrize("shape,name,n,k", CASES)
def test_the_rule_gives_every_layer_enough_ctas_and_shared_memory_that_fits(shape, name, n, k):
    kind = {"qkv": "gemv", "o": "residual", "down": "residual", "gate_up": "gate_up"}[name]
    units = n // 2 if kind == "gate_up" else n
    cfg = config_for(kind, units, k)
    assert cfg.NW % cfg.WK == 0
    assert -(-units // cfg.units_per_cta()) >= 132, "fewer CTAs than an H100 has SMs"
    assert smem_bytes(k) <= 227 << 10


def test_an_int8_variant_defines_int8_and_the_head_rule_stages_the_activation_for_32_rows():
    src, _ = source("rmsnorm_gemv", 1536, config_for("head", 151936, 1536), 0, -1, False, True)
    assert "#define INT8 1\n" in src and config_for("head", 151936, 1536).units_per_cta() == 32
    assert "#define INT8 0\n" in source("rmsnorm_gemv", 1536, Config())[0]


def test_rejects_k_not_a_multiple_of_32():
    q, s = torch.zeros(8, 48, dtype=torch.float8_e4m3fn), torch.ones(8, 1)
    with pytest.raises(AssertionError, match="multiple of 32"):
        fp8_cuda_rmsnorm_gemv(torch.zeros(48), q, s, s.clone(), torch.zeros(8))


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("shape,name,n,k", CASES)
def test_gpu_layer_shapes_match_the_references_with_pdl(shape, name, n, k, gen):
    w = fp8_weight(n, k, gen)
    x = randn(k, gen=gen, scale=2.0)
    nw = randn(k, gen=gen, dtype=torch.bfloat16)
    if name == "qkv":
        bias = randn(n, gen=gen, dtype=torch.bfloat16)
        out = poisoned(n)
        fp8_cuda_rmsnorm_gemv(x, *w, out, norm_w=nw, eps=1e-6, bias=bias, pdl=True)
        torch.cuda.synchronize()
        assert rel_err(out, fp8_rmsnorm_gemv_ref(x, *w, nw, 1e-6, bias)) <= 1e-5
    elif name == "gate_up":
        out = poisoned(n // 2)
        fp8_cuda_rmsnorm_gate_up_silu(x, nw, 1e-6, *w, out, pdl=True)
        torch.cuda.synchronize()
        assert rel_err(out, fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *w)) <= 1e-5
    else:
        r = randn(n, gen=gen, scale=3.0)
        ref = fp8_gemv_residual_ref(x, *w, r)
        assert fp8_cuda_gemv_residual(x, *w, r, pdl=True) is r
        torch.cuda.synchronize()
        assert rel_err(r, ref) <= 1e-5


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("n,k,cfg", [(37, 96, Config()), (5, 32, Config())] + [
    (n, k, cfg) for n, k in ((999, 800), (130, 4128))
    for cfg in (Config(), Config(R=2, WK=4, U=2), Config(R=4, WK=8, NW=8, U=1), Config(R=1, WK=1, NW=4, U=8, early=True),
                Config(R=2, WK=2, cvt=True))])
def test_gpu_odd_shapes_configs_norm_bias_and_none(n, k, cfg, gen):
    w = fp8_weight(n, k, gen, scale=1.0)
    x = randn(k, gen=gen, scale=3.0)
    nw = randn(k, gen=gen, dtype=torch.float32 if n % 2 else torch.float16)  # float32 norms too (16-byte loads)
    bias = randn(n, gen=gen, dtype=torch.float32)
    for norm_w, b in ((nw, bias), (None, None)):
        out = poisoned(n)
        fp8_cuda_rmsnorm_gemv(x, *w, out, norm_w=norm_w, bias=b, config=cfg)
        torch.cuda.synchronize()
        assert rel_err(out, fp8_rmsnorm_gemv_ref(x, *w, norm_w, 1e-6, b)) <= 1e-5, (norm_w is None, cfg)
    r = randn(n, gen=gen)
    ref = fp8_gemv_residual_ref(x, *w, r)
    fp8_cuda_gemv_residual(x, *w, r, config=cfg)
    torch.cuda.synchronize()
    assert rel_err(r, ref) <= 1e-5
    if n % 2 == 0:
        out = poisoned(n // 2)
        fp8_cuda_rmsnorm_gate_up_silu(x, nw, 1e-6, *w, out, config=cfg)
        torch.cuda.synchronize()
        assert rel_err(out, fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *w)) <= 1e-5


@pytest.mark.gpu
@HOPPER
def test_gpu_subnormal_weights_and_tiny_activations_are_not_flushed(gen):
    """Groups of tiny spread (their q mostly e4m3 subnormals after scaling) and an activation of 1e-20:
    the products must keep float32 precision (no flush to zero)."""
    n, k = 64, 256
    base = randn(n, k, gen=gen, scale=1.0, device="cpu")
    base[:, :32] *= 1e-3
    w = quantize_fp8(base)
    q = torch.where(torch.rand(n, k, generator=torch.Generator().manual_seed(1)) < 0.3,
                    torch.tensor(2.0 ** -8), w.q.float()).to(torch.float8_e4m3fn)  # e4m3 subnormals
    q, s, o = q.cuda(), w.scale.cuda(), w.offset.cuda()
    for scale in (1e-20, 1.0, 1e6):
        for cfg in (Config(), Config(cvt=True)):
            x, r = randn(k, gen=gen, scale=scale), randn(n, gen=gen, scale=scale)
            ref = fp8_gemv_residual_ref(x, q, s, o, r)
            fp8_cuda_gemv_residual(x, q, s, o, r, config=cfg)
            torch.cuda.synchronize()
            assert rel_err(r, ref) <= 1e-5, (scale, cfg)


def int8_weight(n, k, gen, scale=0.02):
    w = quantize_int8(randn(n, k, gen=gen, scale=scale, device="cpu"))
    return w.q.cuda(), w.scale.cuda(), None


@pytest.mark.gpu
@HOPPER
@pytest.mark.parametrize("n,k", [(151936, 1536), (128256, 2048), (151936, 2048), (49152, 576), (999, 800)])
def test_gpu_int8_lm_head_logits_then_argmax_and_feed_match_the_reference(n, k, gen):
    w = int8_weight(n, k, gen)
    x, nw = randn(k, gen=gen, scale=2.0), randn(k, gen=gen, dtype=torch.bfloat16)
    ref_logits, ref_token = fp8_lm_head_argmax_ref(x, *w, nw)
    out = poisoned(n)
    fp8_cuda_rmsnorm_gemv(x, *w, out, norm_w=nw, pdl=True)
    torch.cuda.synchronize()
    assert rel_err(out, ref_logits) <= 1e-5
    for cfg in (None, Config(R=1, NW=8, U=2), Config(R=4, WK=2, NW=8)):
        embed = randn(n, k, gen=gen, dtype=torch.bfloat16)
        logits, xi = poisoned(n), x.clone()
        token = torch.zeros(1, dtype=torch.int64, device="cuda")
        pos = torch.tensor([5], dtype=torch.int32, device="cuda")
        ring = torch.full((16,), -1, dtype=torch.int64, device="cuda")
        fp8_cuda_lm_head_argmax(xi, *w, logits, token, pos, embed, mma_scratch("cuda"), norm_w=nw, ring=ring, pdl=True,
                                config=cfg)
        torch.cuda.synchronize()
        assert rel_err(logits, ref_logits) <= 1e-5 and int(token) == int(ref_token), cfg
        assert int(pos) == 6 and int(ring[6]) == int(token) and torch.equal(xi, embed[int(token)].float())


@pytest.mark.gpu
@HOPPER
def test_gpu_int8_values_unpack_exactly(gen):
    """Every int8 code in every byte position, as unit weights against one-hot activations: logits are the codes."""
    k = 256
    codes = torch.arange(-128, 128, dtype=torch.int8)
    q = torch.stack([codes.roll(i) for i in range(8)]).cuda()  # 8 rows, each a permutation of the codes
    scale = torch.ones(8, k // 32, dtype=torch.float16, device="cuda")
    for j in (0, 1, 2, 3, 101, 255):
        x = torch.zeros(k, device="cuda")
        x[j] = 1.0
        out = poisoned(8)
        fp8_cuda_rmsnorm_gemv(x, q, scale, None, out)
        torch.cuda.synchronize()
        assert torch.equal(out, q[:, j].float()), j


@pytest.mark.gpu
@HOPPER
def test_gpu_down_prefetch_leaves_the_result_unchanged(gen):
    check_down_prefetch(fp8_cuda_gemv_residual, gen)



@pytest.mark.gpu
@HOPPER
def test_gpu_a_layer_chains_in_one_cuda_graph(gen):
    """QKV-like, o_proj, gate/up and down of the 1.5B captured in one graph with PDL: each replay equals the
    references run one after the other."""
    h, i = 1536, 8960
    wq, wo, wg, wd = (fp8_weight(n, k, gen) for n, k in ((2048, h), (h, 2048), (2 * i, h), (h, i)))
    nw = randn(h, gen=gen, dtype=torch.bfloat16)
    x = randn(h, gen=gen)
    qkv, act = poisoned(2048), poisoned(i)

    def step():
        fp8_cuda_rmsnorm_gemv(x, *wq, qkv, norm_w=nw, pdl=True)
        fp8_cuda_gemv_residual(qkv, *wo, x, pdl=True)
        fp8_cuda_rmsnorm_gate_up_silu(x, nw, 1e-6, *wg, act, pdl=True)
        fp8_cuda_gemv_residual(act, *wd, x, pdl=True)

    def ref_step(x):
        x = fp8_gemv_residual_ref(fp8_rmsnorm_gemv_ref(x, *wq, nw), *wo, x)
        return fp8_gemv_residual_ref(fp8_rmsnorm_gate_up_silu_ref(x, nw, 1e-6, *wg), *wd, x)

    check_replays(step, ref_step, x)
