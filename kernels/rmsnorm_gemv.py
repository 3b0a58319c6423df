"""Fused RMSNorm + GEMV (+ bias) for batch-1 decode: out = W @ (rmsnorm(x) * norm_w) + bias.

Used for the QKV projection (input_layernorm fused in, qkv bias added) and for the final norm +
LM head. With norm_w=None it is a plain GEMV (+ bias). Pure HBM streaming of W: every program
reads BLOCK_N full rows once; x (a few KB) is re-read by every program from L2.

The norm is folded into the epilogue: W @ (x * rstd * norm_w) = rstd * (W @ (x * norm_w)),
so each program sums x^2 in the same pass in which it multiplies — no separate norm pass, no
extra launch, no split-K.

Not here: the residual add (see gemv_residual), batching (>1 token), quantised weights.
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_configs, pdl_launch_kwargs, prune_gemv_configs, split_k


@triton.jit
def _dot_part(w, x_ptr, norm_w_ptr, k_offs, K, HAS_NORM: tl.constexpr):
    """Row sums of w * (x * norm_w) over columns k_offs (masked to K), and sum(x^2) over them."""
    k_mask = k_offs < K
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    ssq = tl.sum(x * x, axis=0)
    if HAS_NORM:
        x = x * tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    return tl.sum(w.to(tl.float32) * x[None, :], axis=1), ssq


# Contract:
#   x      [K]     fp32, contiguous
#   W      [N, K]  bf16/fp16/fp32, row-major contiguous (stride K, 1)
#   norm_w [K]     any float dtype (read only when HAS_NORM)
#   bias   [N]     any float dtype (read only when HAS_BIAS)
#   out    [N]     fp32, fully written
#   K = KA + rest, rest <= KB (kernels._util.split_k); grid (cdiv(N, BLOCK_N),): program p owns
#   rows [p*BLOCK_N, (p+1)*BLOCK_N) and loads its whole [BLOCK_N, K] slice at once (no K loop),
#   before waiting on the previous kernel (PDL): W does not depend on it, so it streams while the
#   previous kernel finishes.
@triton.autotune(configs=gemv_configs(), key=["N", "K"], prune_configs_by={"early_config_prune": prune_gemv_configs})
@triton.jit
def _rmsnorm_gemv_kernel(
    x_ptr, w_ptr, norm_w_ptr, bias_ptr, out_ptr, N, K, eps,
    HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, USE_PDL: tl.constexpr,
    KA: tl.constexpr, KB: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    row_mask = rows < N
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K  # [BLOCK_N, 1] row starts
    ka = tl.arange(0, KA)
    wa = tl.load(w_rows + ka[None, :], mask=row_mask[:, None], other=0.0)  # [BLOCK_N, KA]
    if KB > 0:
        kb = KA + tl.arange(0, KB)
        wb = tl.load(w_rows + kb[None, :], mask=row_mask[:, None] & (kb[None, :] < K), other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # x is written by the previous kernel

    y, ssq = _dot_part(wa, x_ptr, norm_w_ptr, ka, K, HAS_NORM)  # [BLOCK_N], scalar
    if KB > 0:
        yb, ssqb = _dot_part(wb, x_ptr, norm_w_ptr, kb, K, HAS_NORM)
        y += yb
        ssq += ssqb
    if HAS_NORM:
        y = y * tl.rsqrt(ssq / K + eps)
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y, mask=row_mask)


def rmsnorm_gemv(
    x: torch.Tensor,
    w: torch.Tensor,
    out: torch.Tensor,
    norm_w: torch.Tensor | None = None,
    eps: float = 1e-6,
    bias: torch.Tensor | None = None,
    *,
    pdl: bool = False,
) -> torch.Tensor:
    """out[N] = W[N, K] @ (x * rsqrt(mean(x^2) + eps) * norm_w) + bias; no norm when norm_w is None."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    check_vec(x, k, "x")
    check_vec(out, n, "out")
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    if bias is not None:
        check_vec(bias, n, "bias", WEIGHT_DTYPES)
    assert x.device == w.device == out.device
    ka, kb = split_k(k)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    _rmsnorm_gemv_kernel[grid](
        x, w, norm_w if norm_w is not None else x, bias if bias is not None else out, out, n, k, eps,
        HAS_NORM=norm_w is not None, HAS_BIAS=bias is not None, USE_PDL=pdl, KA=ka, KB=kb,
        **pdl_launch_kwargs(pdl, w.device),
    )
    return out


def rmsnorm_gemv_ref(x, w, norm_w=None, eps=1e-6, bias=None) -> torch.Tensor:
    """Plain PyTorch twin of rmsnorm_gemv, in float32."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    y = w.float() @ x
    return y + bias.float() if bias is not None else y
