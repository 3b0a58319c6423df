"""Fused RMSNorm + GEMV (+ bias) with FP8 weights: out = W @ (rmsnorm(x) * norm_w) + bias, W = offset + scale * Q.

The FP8 twin of kernels.rmsnorm_gemv (QKV with the input norm fused in; the final norm + LM head): Q is
[N, K] e4m3 with a float32 scale and offset per row and group of 32 columns (or, for an int8 LM head,
int8 with a float16 scale: `offset` None, W = scale * Q), x is float32, products are
summed in float32; each group's scale and offset apply to its sums inside the loop (kernels/_fp8.py
group_tile) and the norm's rsqrt multiplies the finished dot product. Every program streams BLOCK_N rows
once, loading the next tile before multiplying the current one. `fp8_rows_dot` is the main loop, shared
with fp8_lm_head_argmax. The integer unpacking of e4m3: kernels/_fp8.py.

Not here: the residual add (fp8_gemv_residual), FP8 activations.
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import GW, check_fp8, dequantize, fp8_config, group_tile, load_words, unit_of, word_offsets, words
from kernels._util import pdl_launch_kwargs
from kernels.rmsnorm_gemv import check_rmsnorm_gemv_args


@triton.jit
def fp8_rows_dot(x_ptr, w_ptr, s_ptr, o_ptr, norm_w_ptr, rows, row_mask, K, KQ, KG, eps, unit,
                 HAS_NORM: tl.constexpr, USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 INT8: tl.constexpr):
    """W[rows] @ (rmsnorm(x) * norm_w) in fp32 -> [BLOCK_N] (no norm without HAS_NORM), W = offset + scale * Q
    (INT8: int8 Q, W = scale * Q).
    KQ = K / 4: the words per row; KG = K / 32: the groups per row. The first tile is issued before the PDL
    wait; the dependents are released after the loop."""
    NG: tl.constexpr = BLOCK_K // (4 * GW)  # groups per tile
    BW: tl.constexpr = BLOCK_K // 4  # tile width in int32 words
    w_rows = w_ptr + rows.to(tl.int64)[:, None, None] * KQ
    s_rows = s_ptr + rows.to(tl.int64)[:, None] * KG
    o_rows = o_ptr + rows.to(tl.int64)[:, None] * KG
    w = load_words(w_rows, word_offsets(0, NG), row_mask, KQ)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the activation is written by the previous kernel
    acc = tl.zeros((BLOCK_N, NG), tl.float32)
    ssq = tl.zeros((NG, GW), tl.float32)
    for k0 in range(0, KQ, BW):
        w_next = load_words(w_rows, word_offsets(k0 + BW, NG), row_mask, KQ)
        p, sq = group_tile(w, k0, s_rows, o_rows, row_mask, KG, x_ptr, norm_w_ptr, KQ, unit, HAS_NORM, NG, INT8)
        acc += p
        ssq += sq
        w = w_next
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    y = tl.sum(acc, axis=1)
    if HAS_NORM:
        y = y * tl.rsqrt(tl.sum(tl.sum(ssq, axis=1), axis=0) / K + eps)
    return y


# Contract:
#   x      [K]     fp32, contiguous
#   Q      [N, K]  float8_e4m3fn (INT8: int8), row-major contiguous, K % 32 == 0, read as int32 words
#   scale, offset  [N, K/32]  fp32, row-major contiguous (INT8: scale float16, offset unread)
#   norm_w [K]     any float dtype (read only when HAS_NORM)
#   bias   [N]     any float dtype (read only when HAS_BIAS)
#   out    [N]     fp32, fully written
#   grid   (cdiv(N, BLOCK_N),): program p owns rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _fp8_rmsnorm_gemv_kernel(
    x_ptr, w_ptr, s_ptr, o_ptr, norm_w_ptr, bias_ptr, out_ptr, N, K, KQ, KG, eps, unit,
    HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, USE_PDL: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INT8: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    y = fp8_rows_dot(x_ptr, w_ptr, s_ptr, o_ptr, norm_w_ptr, rows, row_mask, K, KQ, KG, eps, unit, HAS_NORM, USE_PDL,
                     BLOCK_N, BLOCK_K, INT8)
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y, mask=row_mask)


def fp8_rmsnorm_gemv(
    x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, out: torch.Tensor,
    norm_w: torch.Tensor | None = None, eps: float = 1e-6, bias: torch.Tensor | None = None,
    *, pdl: bool = False, config: dict | None = None,
) -> torch.Tensor:
    """out[N] = W[N, K] @ (x * rsqrt(mean(x^2) + eps) * norm_w) + bias, W = offset + scale * Q per group of 32
    columns (offset None: int8 Q, W = scale * Q); no norm when norm_w is None. config: launch config (None:
    _fp8.fp8_config)."""
    check_fp8(q, scale, offset)
    n, k = q.shape
    check_rmsnorm_gemv_args(n, k, x, out, norm_w, bias, q.device)
    cfg = config or fp8_config("gemv", n, k)
    _fp8_rmsnorm_gemv_kernel[(triton.cdiv(n, cfg["BLOCK_N"]),)](
        x, words(q), scale, scale if offset is None else offset, norm_w if norm_w is not None else x,
        bias if bias is not None else out, out, n, k, k // 4, k // 32, eps, unit_of(offset),
        HAS_NORM=norm_w is not None, HAS_BIAS=bias is not None, USE_PDL=pdl, INT8=offset is None, **cfg, **pdl_launch_kwargs(pdl, q.device))
    return out


def fp8_rmsnorm_gemv_ref(x, q, scale, offset, norm_w=None, eps=1e-6, bias=None) -> torch.Tensor:
    """Plain PyTorch twin of fp8_rmsnorm_gemv, in float32 (the weight dequantized)."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    y = dequantize(q, scale, offset) @ x
    return y + bias.float() if bias is not None else y
