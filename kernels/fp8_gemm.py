"""The prefill's GEMM with FP8 weights: out[T, N] = x[T, K] @ W^T, W = offset + scale * q dequantized tile by tile.

The prefill of an FP8 model (inference/fast/prefill.py) used to dequantize each weight to bf16 in one pass
(kernels/fp8_dequantize.py: 1.25 bytes read, 2 written a weight) and hand it to cuBLAS (2 read again): 5.25 bytes
a weight, where the prompt's GEMMs at a few hundred tokens are bound by the weight bytes. Here each program
dequantizes its [BLOCK_N, BLOCK_K] weight tile in registers, with fp8_dequantize's arithmetic (integer unpacking,
q * scale + offset as two rounded float32 operations, rounded to nearest even into x's 16-bit dtype: the same
weight values bit for bit), and multiplies it on tensor cores with float32 accumulation: 1.25 bytes a weight.

Launch config: BLOCK_M rows of x (the prompt bucket is a multiple of 64), BLOCK_N x 32 weight tiles (a scale
group: one scale and offset per row and tile), a fixed rule (not tuned). Not here: the bias (the caller adds it), quantization (inference/quant.py).
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import GROUP, UNIT, check_fp8, e4m3_byte
from kernels._util import interpreting

X_DTYPES = (torch.bfloat16, torch.float16)


# Contract:
#   x      [T, K]  bf16 / fp16, row-major contiguous
#   q      [N, K]  float8_e4m3fn read as uint8, row-major contiguous, K % 32 == 0
#   scale, offset  [N, K/32]  fp32, row-major contiguous
#   out    [T, N]  x's dtype, written whole
#   grid   (cdiv(T, BLOCK_M), cdiv(N, BLOCK_N))
@triton.jit
def _fp8_gemm_kernel(x_ptr, q_ptr, s_ptr, o_ptr, out_ptr, T, N, K, KG, unit,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr,
                     X_BF16: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)  # BLOCK_K == GROUP: one scale and offset per row and tile
    m_mask, n_mask = rm < T, rn < N
    rn64 = rn.to(tl.int64)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        x = tl.load(x_ptr + rm.to(tl.int64)[:, None] * K + ks[None, :], mask=m_mask[:, None], other=0.0)
        b = tl.load(q_ptr + rn64[:, None] * K + ks[None, :], mask=n_mask[:, None], other=0).to(tl.int32)
        scale = tl.load(s_ptr + rn64 * KG + k0 // GROUP, mask=n_mask, other=0.0)[:, None]
        offset = tl.load(o_ptr + rn64 * KG + k0 // GROUP, mask=n_mask, other=0.0)[:, None]
        w = (e4m3_byte(b, 0) * unit) * scale + offset  # fp8_dequantize's float32 math
        if X_BF16:  # round to nearest even with integer ops (fp8_dequantize's bits)
            u = w.to(tl.int32, bitcast=True)
            w16 = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
        else:
            w16 = w.to(tl.float16)
        acc = tl.dot(x, tl.trans(w16), acc)
    out = out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def config() -> dict:
    """{BLOCK_M, BLOCK_N, num_warps, num_stages} (BLOCK_K is the scale group, 32): a fixed rule (tiny tiles under
    the interpreter). A first version with 128 x 64 weight tiles and per-element scale loads was 14x slower than
    dequantize + cuBLAS (TTFT 93.8 vs 6.9 ms, H200, 1.5B, 128 tokens)."""
    if interpreting():
        return {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    return {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4}


def fp8_gemm(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """A new [T, N] tensor of x's dtype: x [T, K] @ (offset + scale * q)^T, float32 accumulation."""
    check_fp8(q, scale, offset)
    n, k = q.shape
    assert x.dim() == 2 and x.shape[1] == k and x.is_contiguous() and x.dtype in X_DTYPES, \
        f"x must be a contiguous {X_DTYPES} [T, {k}], got {tuple(x.shape)} {x.dtype}"
    assert x.device == q.device
    t = x.shape[0]
    out = torch.empty((t, n), dtype=x.dtype, device=x.device)
    if t == 0 or n == 0:
        return out
    cfg = config()
    extra = {} if interpreting() else {"enable_fp_fusion": False}  # q*scale and +offset rounded apart
    grid = (triton.cdiv(t, cfg["BLOCK_M"]), triton.cdiv(n, cfg["BLOCK_N"]))
    _fp8_gemm_kernel[grid](x, q.view(torch.uint8), scale, offset, out, t, n, k, k // GROUP, UNIT,
                           BLOCK_K=GROUP, GROUP=GROUP, X_BF16=x.dtype == torch.bfloat16, **cfg, **extra)
    return out


def fp8_gemm_ref(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The PyTorch twin: x @ dequantized W^T in float32, cast to x's dtype."""
    from kernels._fp8 import dequantize

    return (x.float() @ dequantize(q, scale, offset).to(x.dtype).float().t()).to(x.dtype)
