"""Fused RMSNorm + gate/up GEMV + SiLU·mul for the MLP at batch 1:
out = silu(W_gate @ n) * (W_up @ n), n = x * rsqrt(mean(x^2) + eps) * norm_w.

W is the packed [2I, K] gate_up matrix (gate rows 0..I-1, then up rows I..2I-1). A program
streams BLOCK_N gate rows and the BLOCK_N matching up rows, so the SiLU·mul happens in its
epilogue and g / u never reach memory. As in rmsnorm_gemv, the norm's rsqrt is applied in the
epilogue: W @ (x * rstd * norm_w) = rstd * (W @ (x * norm_w)).

Not here: down_proj (see gemv_residual), other activations (GELU), batching.
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_configs, pdl_launch_kwargs, prune_gate_up_configs, split_k


@triton.jit
def _dot_part(wg, wu, x_ptr, norm_w_ptr, k_offs, K):
    """Row sums of wg * n and wu * n (n = x * norm_w) over columns k_offs, and sum(x^2) over them."""
    k_mask = k_offs < K
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    ssq = tl.sum(x * x, axis=0)
    n = (x * tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32))[None, :]
    return tl.sum(wg.to(tl.float32) * n, axis=1), tl.sum(wu.to(tl.float32) * n, axis=1), ssq


# Contract:
#   x        [K]       fp32, contiguous (residual stream)
#   norm_w   [K]       any float dtype (post_attention_layernorm)
#   W        [2I, K]   bf16/fp16/fp32, row-major contiguous; rows 0..I-1 gate, I..2I-1 up
#   out      [I]       fp32, fully written
#   K = KA + rest, rest <= KB (kernels._util.split_k); grid (cdiv(I, BLOCK_N),): program p owns
#   gate rows and up rows [p*BLOCK_N, (p+1)*BLOCK_N) and loads both whole slices before waiting (PDL).
@triton.autotune(configs=gemv_configs(), key=["N", "K"],
                 prune_configs_by={"early_config_prune": prune_gate_up_configs})
@triton.jit
def _gate_up_silu_kernel(
    x_ptr, norm_w_ptr, w_ptr, out_ptr, N, K, eps,
    USE_PDL: tl.constexpr, KA: tl.constexpr, KB: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N], N = I
    row_mask = rows < N
    g_rows = w_ptr + rows.to(tl.int64)[:, None] * K  # gate rows
    u_rows = g_rows + N * K  # the matching up rows, I rows further
    ka = tl.arange(0, KA)
    wga = tl.load(g_rows + ka[None, :], mask=row_mask[:, None], other=0.0)  # [BLOCK_N, KA]
    wua = tl.load(u_rows + ka[None, :], mask=row_mask[:, None], other=0.0)
    if KB > 0:
        kb = KA + tl.arange(0, KB)
        mb = row_mask[:, None] & (kb[None, :] < K)
        wgb = tl.load(g_rows + kb[None, :], mask=mb, other=0.0)
        wub = tl.load(u_rows + kb[None, :], mask=mb, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # x is written by the previous kernel

    g, u, ssq = _dot_part(wga, wua, x_ptr, norm_w_ptr, ka, K)
    if KB > 0:
        gb, ub, ssqb = _dot_part(wgb, wub, x_ptr, norm_w_ptr, kb, K)
        g += gb
        u += ub
        ssq += ssqb
    rstd = tl.rsqrt(ssq / K + eps)
    g = g * rstd
    u = u * rstd
    tl.store(out_ptr + rows, g / (1.0 + tl.exp(-g)) * u, mask=row_mask)


def rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, w_gate_up: torch.Tensor, out: torch.Tensor,
    *, pdl: bool = False,
) -> torch.Tensor:
    """out[I] = silu(W[0:I] @ n) * (W[I:2I] @ n) with n = rmsnorm(x) * norm_w; returns out."""
    w = w_gate_up
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [2I, K]"
    two_i, k = w.shape
    assert two_i % 2 == 0, "gate_up must have an even number of rows"
    i = two_i // 2
    check_vec(x, k, "x")
    check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    check_vec(out, i, "out")
    assert x.device == w.device == out.device
    ka, kb = split_k(k)
    grid = lambda meta: (triton.cdiv(i, meta["BLOCK_N"]),)  # noqa: E731
    _gate_up_silu_kernel[grid](x, norm_w, w, out, i, k, eps, USE_PDL=pdl, KA=ka, KB=kb,
                               **pdl_launch_kwargs(pdl, w.device))
    return out


def rmsnorm_gate_up_silu_ref(x, norm_w, eps, w_gate_up) -> torch.Tensor:
    """Plain PyTorch twin of rmsnorm_gate_up_silu, in float32."""
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    i = w_gate_up.shape[0] // 2
    gu = w_gate_up.float() @ n
    return torch.nn.functional.silu(gu[:i]) * gu[i:]
