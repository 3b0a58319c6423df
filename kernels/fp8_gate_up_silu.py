"""Fused RMSNorm + gate/up GEMV + SiLU·mul with FP8 weights, for the MLP at batch 1:
out = silu(W_gate @ n) * (W_up @ n),  n = x * rsqrt(mean(x^2) + eps) * norm_w,  W = offset + scale * Q.

The FP8 twin of kernels.gate_up_silu: Q is the packed [2I, K] e4m3 gate_up matrix (gate rows 0..I-1,
up rows I..2I-1) with a float32 scale and offset per row and group of 32 columns ([2I, K/32], same
order), applied to each group's sums inside the loop (kernels/_fp8.py group_tile). A program streams
BLOCK_N gate rows and the matching up rows (next tiles loaded before the current ones are multiplied),
so the SiLU·mul happens in its epilogue; the norm's rsqrt multiplies the finished dot products.

Not here: down_proj (fp8_gemv_residual), other activations.
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import GW, UNIT, check_gate_up_args, dequantize, fp8_config, group_tile, load_words, word_offsets, words
from kernels._util import pdl_launch_kwargs


# Contract:
#   x        [K]       fp32, contiguous (residual stream)
#   norm_w   [K]       any float dtype (post_attention_layernorm)
#   Q        [2I, K]   float8_e4m3fn row-major, K % 32 == 0, read as int32 words; rows 0..I-1 gate, I..2I-1 up
#   scale, offset  [2I, K/32]  fp32, row-major contiguous
#   out      [I]       fp32, fully written
#   grid     (cdiv(I, BLOCK_N),): program p owns gate rows and up rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _fp8_gate_up_silu_kernel(
    x_ptr, norm_w_ptr, w_ptr, s_ptr, o_ptr, out_ptr, N, K, KQ, KG, eps, unit,
    USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # N = I
    row_mask = rows < N
    NG: tl.constexpr = BLOCK_K // (4 * GW)  # groups per tile
    BW: tl.constexpr = BLOCK_K // 4  # tile width in int32 words
    g_rows = w_ptr + rows.to(tl.int64)[:, None, None] * KQ
    u_rows = g_rows + N * KQ
    gs_rows = s_ptr + rows.to(tl.int64)[:, None] * KG
    go_rows = o_ptr + rows.to(tl.int64)[:, None] * KG
    us_rows, uo_rows = gs_rows + N * KG, go_rows + N * KG
    wg = load_words(g_rows, word_offsets(0, NG), row_mask, KQ)
    wu = load_words(u_rows, word_offsets(0, NG), row_mask, KQ)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()  # as the bf16 kernel: down_proj's programs load while we stream
    acc_g = tl.zeros((BLOCK_N, NG), tl.float32)
    acc_u = tl.zeros((BLOCK_N, NG), tl.float32)
    ssq = tl.zeros((NG, GW), tl.float32)
    for k0 in range(0, KQ, BW):
        nxt = word_offsets(k0 + BW, NG)
        wg_next = load_words(g_rows, nxt, row_mask, KQ)
        wu_next = load_words(u_rows, nxt, row_mask, KQ)
        pg, sq = group_tile(wg, k0, gs_rows, go_rows, row_mask, KG, x_ptr, norm_w_ptr, KQ, unit, True, NG)
        pu, _ = group_tile(wu, k0, us_rows, uo_rows, row_mask, KG, x_ptr, norm_w_ptr, KQ, unit, True, NG)
        acc_g += pg
        acc_u += pu
        ssq += sq
        wg, wu = wg_next, wu_next
    rstd = tl.rsqrt(tl.sum(tl.sum(ssq, axis=1), axis=0) / K + eps)
    g = tl.sum(acc_g, axis=1) * rstd
    u = tl.sum(acc_u, axis=1) * rstd
    tl.store(out_ptr + rows, g / (1.0 + tl.exp(-g)) * u, mask=row_mask)


def fp8_rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor,
    out: torch.Tensor,
    *, pdl: bool = False, config: dict | None = None,
) -> torch.Tensor:
    """out[I] = silu(gate) * up with [gate; up] = W[2I, K] @ (rmsnorm(x) * norm_w), W = offset + scale * Q;
    returns out.
    config: as fp8_rmsnorm_gemv."""
    i, k = check_gate_up_args(x, norm_w, q, scale, offset, out)
    cfg = config or fp8_config("gate_up", i, k)
    _fp8_gate_up_silu_kernel[(triton.cdiv(i, cfg["BLOCK_N"]),)](
        x, norm_w, words(q), scale, offset, out, i, k, k // 4, k // 32, eps, UNIT, USE_PDL=pdl, **cfg,
        **pdl_launch_kwargs(pdl, q.device))
    return out


def fp8_rmsnorm_gate_up_silu_ref(x, norm_w, eps, q, scale, offset) -> torch.Tensor:
    """Plain PyTorch twin of fp8_rmsnorm_gate_up_silu, in float32 (the weight dequantized)."""
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    i = q.shape[0] // 2
    gu = dequantize(q, scale, offset) @ n
    return torch.nn.functional.silu(gu[:i]) * gu[i:]
