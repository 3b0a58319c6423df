"""Fused RMSNorm + gate/up GEMV + SiLU·mul with FP8 weights, for the MLP at batch 1:
out = silu(s_g * (Q_gate @ n)) * (s_u * (Q_up @ n)),  n = x * rsqrt(mean(x^2) + eps) * norm_w.

The FP8 twin of kernels.gate_up_silu: Q is the packed [2I, K] e4m3 gate_up matrix (gate rows 0..I-1,
up rows I..2I-1) with one float32 scale per row ([2I], same order). A program streams BLOCK_N gate
rows and the matching up rows (next tiles loaded before the current ones are multiplied), so the
SiLU·mul happens in its epilogue; the scales and the norm's rsqrt multiply the finished dot products.

Not here: down_proj (fp8_gemv_residual), other activations.
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import UNIT, check_fp8, dequantize, fp8_config, tile_products, words
from kernels._util import WEIGHT_DTYPES, check_vec, pdl_launch_kwargs


# Contract:
#   x        [K]       fp32, contiguous (residual stream)
#   norm_w   [K]       any float dtype (post_attention_layernorm)
#   Q        [2I, K]   float8_e4m3fn row-major, K % 4 == 0, read as int32 words; rows 0..I-1 gate, I..2I-1 up
#   scale    [2I]      fp32
#   out      [I]       fp32, fully written
#   grid     (cdiv(I, BLOCK_N),): program p owns gate rows and up rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _fp8_gate_up_silu_kernel(
    x_ptr, norm_w_ptr, w_ptr, s_ptr, out_ptr, N, K, KQ, eps, unit,
    USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # N = I
    row_mask = rows < N
    BW: tl.constexpr = BLOCK_K // 4  # tile width in int32 words
    cols = tl.arange(0, BW)
    g_rows = w_ptr + rows.to(tl.int64)[:, None] * KQ
    u_rows = g_rows + N * KQ
    m = row_mask[:, None] & (cols[None, :] < KQ)
    wg = tl.load(g_rows + cols[None, :], mask=m, other=0)
    wu = tl.load(u_rows + cols[None, :], mask=m, other=0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()  # as the bf16 kernel: down_proj's programs load while we stream
    acc_g = tl.zeros((BLOCK_N, BW), tl.float32)
    acc_u = tl.zeros((BLOCK_N, BW), tl.float32)
    ssq = tl.zeros((BW,), tl.float32)
    for k0 in range(0, KQ, BW):
        offs = k0 + cols
        nxt = offs + BW
        m = row_mask[:, None] & (nxt[None, :] < KQ)
        wg_next = tl.load(g_rows + nxt[None, :], mask=m, other=0)
        wu_next = tl.load(u_rows + nxt[None, :], mask=m, other=0)
        pg, sq = tile_products(wg, x_ptr, norm_w_ptr, offs, KQ, True)
        pu, _ = tile_products(wu, x_ptr, norm_w_ptr, offs, KQ, True)
        acc_g += pg
        acc_u += pu
        ssq += sq
        wg, wu = wg_next, wu_next
    rstd = tl.rsqrt(tl.sum(ssq, axis=0) / K + eps)
    g = tl.sum(acc_g, axis=1) * (tl.load(s_ptr + rows, mask=row_mask, other=0.0) * unit) * rstd
    u = tl.sum(acc_u, axis=1) * (tl.load(s_ptr + N + rows, mask=row_mask, other=0.0) * unit) * rstd
    tl.store(out_ptr + rows, g / (1.0 + tl.exp(-g)) * u, mask=row_mask)


def fp8_rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, q: torch.Tensor, scale: torch.Tensor, out: torch.Tensor,
    *, pdl: bool = False, config: dict | None = None,
) -> torch.Tensor:
    """out[I] = silu(gate) * up with [gate; up] = scale * (Q[2I, K] @ (rmsnorm(x) * norm_w)); returns out.
    config: as fp8_rmsnorm_gemv."""
    check_fp8(q, scale)
    two_i, k = q.shape
    assert two_i % 2 == 0, "gate_up must have an even number of rows"
    i = two_i // 2
    check_vec(x, k, "x")
    check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    check_vec(out, i, "out")
    assert x.device == q.device == out.device
    cfg = config or fp8_config("gate_up", i, k)
    _fp8_gate_up_silu_kernel[(triton.cdiv(i, cfg["BLOCK_N"]),)](
        x, norm_w, words(q), scale, out, i, k, k // 4, eps, UNIT, USE_PDL=pdl, **cfg,
        **pdl_launch_kwargs(pdl, q.device))
    return out


def fp8_rmsnorm_gate_up_silu_ref(x, norm_w, eps, q, scale) -> torch.Tensor:
    """Plain PyTorch twin of fp8_rmsnorm_gate_up_silu, in float32 (the weight dequantized)."""
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    i = q.shape[0] // 2
    gu = dequantize(q, scale) @ n
    return torch.nn.functional.silu(gu[:i]) * gu[i:]
