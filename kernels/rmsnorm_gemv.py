"""Fused RMSNorm + GEMV (+ bias) for batch-1 decode: out = W @ (rmsnorm(x) * norm_w) + bias.

Used for the QKV projection (input_layernorm fused in, qkv bias added) and for the final norm +
LM head. With norm_w=None it is a plain GEMV (+ bias). Pure HBM streaming of W: every program
reads BLOCK_N full rows once; x (a few KB) is re-read by every program from L2.

The norm is folded into the epilogue: W @ (x * rstd * norm_w) = rstd * (W @ (x * norm_w)),
so each program accumulates sum(x^2) in the same pass over K that it streams W in — no
separate norm pass, no extra launch, no split-K.

Not here: the residual add (see gemv_residual), batching (>1 token), quantised weights.
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_config, pdl_launch_kwargs
from kernels.tuning import Tuning, for_device


@triton.jit
def _x_chunk(x_ptr, norm_w_ptr, k_offs, K, HAS_NORM: tl.constexpr):
    """Load x[k_offs] (masked to K) as fp32; return (x * norm_w, x * x)."""
    k_mask = k_offs < K
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    sq = x * x
    if HAS_NORM:
        x = x * tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    return x, sq


@triton.jit
def _rmsnorm_rows_dot(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, K, eps,
                      HAS_NORM: tl.constexpr, USE_PDL: tl.constexpr, BLOCK_K: tl.constexpr):
    """W[rows] @ (rmsnorm(x) * norm_w) in fp32 -> [BLOCK_N] (no norm without HAS_NORM).

    The main loop of every fused-norm GEMV here (also lm_head_argmax): the first weight tile is
    issued before the PDL wait, the dependents are released after the loop.
    """
    cols = tl.arange(0, BLOCK_K)  # [BLOCK_K]
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K  # [BLOCK_N, 1] row starts

    # First weight tile is issued before waiting on the previous kernel: W does not depend on it.
    w = tl.load(w_rows + cols[None, :], mask=row_mask[:, None] & (cols[None, :] < K), other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the activation is written by the previous kernel
    x, sq = _x_chunk(x_ptr, norm_w_ptr, cols, K, HAS_NORM)
    acc = w.to(tl.float32) * x[None, :]  # [BLOCK_N, BLOCK_K]
    ssq = sq  # [BLOCK_K] running sum of x^2 (every program does it; x is L2-resident)
    for k0 in range(BLOCK_K, K, BLOCK_K):
        k_offs = k0 + cols
        w = tl.load(w_rows + k_offs[None, :], mask=row_mask[:, None] & (k_offs[None, :] < K), other=0.0)
        x, sq = _x_chunk(x_ptr, norm_w_ptr, k_offs, K, HAS_NORM)
        acc += w.to(tl.float32) * x[None, :]
        ssq += sq
    if USE_PDL:
        # Weights streamed: let the next kernel launch now so its prologue overlaps our tail.
        # (Not earlier: a kernel that triggers at its start lets a chain of waiting kernels pile up.)
        tl.extra.cuda.gdc_launch_dependents()

    y = tl.sum(acc, axis=1)  # [BLOCK_N]
    if HAS_NORM:
        y = y * tl.rsqrt(tl.sum(ssq, axis=0) / K + eps)
    return y


# Contract:
#   x      [K]     fp32, contiguous
#   W      [N, K]  bf16/fp16/fp32, row-major contiguous (stride K, 1)
#   norm_w [K]     any float dtype (read only when HAS_NORM)
#   bias   [N]     any float dtype (read only when HAS_BIAS)
#   out    [N]     fp32, fully written
#   grid   (cdiv(N, BLOCK_N),): program p owns rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _rmsnorm_gemv_kernel(
    x_ptr, w_ptr, norm_w_ptr, bias_ptr, out_ptr, N, K, eps,
    HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, USE_PDL: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    row_mask = rows < N
    y = _rmsnorm_rows_dot(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, K, eps, HAS_NORM, USE_PDL, BLOCK_K)
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y, mask=row_mask)


def check_rmsnorm_gemv_args(n: int, k: int, x, out, norm_w, bias, device) -> None:
    """The launcher's checks of everything but the weight (shared with kernels.fp8_rmsnorm_gemv)."""
    check_vec(x, k, "x")
    check_vec(out, n, "out")
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    if bias is not None:
        check_vec(bias, n, "bias", WEIGHT_DTYPES)
    assert x.device == device == out.device


def rmsnorm_gemv(
    x: torch.Tensor,
    w: torch.Tensor,
    out: torch.Tensor,
    norm_w: torch.Tensor | None = None,
    eps: float = 1e-6,
    bias: torch.Tensor | None = None,
    *,
    pdl: bool = False,
    tuning: Tuning | None = None,
) -> torch.Tensor:
    """out[N] = W[N, K] @ (x * rsqrt(mean(x^2) + eps) * norm_w) + bias; no norm when norm_w is None.
    tuning: the kernels.tuning row for the launch config (None: the device's)."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    check_rmsnorm_gemv_args(n, k, x, out, norm_w, bias, w.device)
    cfg = gemv_config(n, k, for_device(w.device) if tuning is None else tuning)
    _rmsnorm_gemv_kernel[(triton.cdiv(n, cfg["BLOCK_N"]),)](
        x, w, norm_w if norm_w is not None else x, bias if bias is not None else out, out, n, k, eps,
        HAS_NORM=norm_w is not None, HAS_BIAS=bias is not None, USE_PDL=pdl,
        **cfg, **pdl_launch_kwargs(pdl, w.device),
    )
    return out


def rmsnorm_gemv_ref(x, w, norm_w=None, eps=1e-6, bias=None) -> torch.Tensor:
    """Plain PyTorch twin of rmsnorm_gemv, in float32."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    y = w.float() @ x
    return y + bias.float() if bias is not None else y
