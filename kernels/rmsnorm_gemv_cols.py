"""rmsnorm_gemv for KC activation columns at once (the verify step of speculative decoding):
out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias for c < KC, each weight tile loaded ONCE per program.

Column c's arithmetic is the one-column kernel's (kernels.rmsnorm_gemv), bit for bit: the same launch
config (gemv_config, same warps), the same tiles, and per column the same [BLOCK_N, BLOCK_K] partial
sums (one accumulator per column, a tuple unrolled over KC), accumulated in the same order and reduced
the same way at the end. (One [KC, BLOCK_N, BLOCK_K] tensor instead would let the compiler pick another
layout along K, hence another order of the final sums.) The cost: KC accumulators per thread.

KC (1..16) is a constexpr: one compiled kernel per draft-width bucket. `group` splits the columns over
programs (G = KC / group programs per row block, adjacent in launch order: each weight tile comes from
HBM once and from L2 for the other groups), fewer accumulators per thread for the same arithmetic.
Not here: the residual add (gemv_residual_cols), the argmax (lm_head_argmax_cols).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_config, pdl_launch_kwargs
from kernels.rmsnorm_gemv import _x_chunk
from kernels.tuning import Tuning, for_device

MAX_COLS = 16


@triton.jit
def _rmsnorm_rows_dot_cols(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, K, eps,
                           HAS_NORM: tl.constexpr, USE_PDL: tl.constexpr, KC: tl.constexpr, BLOCK_K: tl.constexpr):
    """(W[rows] @ (rmsnorm(x[c]) * norm_w) for c < KC): a tuple of KC [BLOCK_N] fp32
    (kernels.rmsnorm_gemv._rmsnorm_rows_dot once per column, sharing the weight tiles)."""
    cols = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K

    w = tl.load(w_rows + cols[None, :], mask=row_mask[:, None] & (cols[None, :] < K), other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    accs = ()
    ssqs = ()
    for c in tl.static_range(KC):
        x, sq = _x_chunk(x_ptr + c * K, norm_w_ptr, cols, K, HAS_NORM)
        accs = accs + (w.to(tl.float32) * x[None, :],)
        ssqs = ssqs + (sq,)
    for k0 in range(BLOCK_K, K, BLOCK_K):
        k_offs = k0 + cols
        w = tl.load(w_rows + k_offs[None, :], mask=row_mask[:, None] & (k_offs[None, :] < K), other=0.0)
        new_accs = ()
        new_ssqs = ()
        for c in tl.static_range(KC):
            x, sq = _x_chunk(x_ptr + c * K, norm_w_ptr, k_offs, K, HAS_NORM)
            new_accs = new_accs + (accs[c] + w.to(tl.float32) * x[None, :],)
            new_ssqs = new_ssqs + (ssqs[c] + sq,)
        accs = new_accs
        ssqs = new_ssqs
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()

    ys = ()
    for c in tl.static_range(KC):
        y = tl.sum(accs[c], axis=1)
        if HAS_NORM:
            y = y * tl.rsqrt(tl.sum(ssqs[c], axis=0) / K + eps)
        ys = ys + (y,)
    return ys


# Contract:
#   x      [KC, K]  fp32, contiguous (column c = row c)
#   W      [N, K]   bf16/fp16/fp32, row-major contiguous
#   norm_w [K], bias [N]  any float dtype (read when HAS_NORM / HAS_BIAS)
#   out    [KC, N]  fp32, fully written
#   grid   (cdiv(N, BLOCK_N) * G,): program p owns rows [(p//G)*BLOCK_N, ...+BLOCK_N) of columns
#          [(p%G)*KC, (p%G+1)*KC) (G column groups of KC columns each)
@triton.jit
def _rmsnorm_gemv_cols_kernel(
    x_ptr, w_ptr, norm_w_ptr, bias_ptr, out_ptr, N, K, eps,
    HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, USE_PDL: tl.constexpr, KC: tl.constexpr, G: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    grp = pid % G
    x_ptr += grp * (KC * K)
    out_ptr += grp * (KC * N)
    rows = (pid // G) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    ys = _rmsnorm_rows_dot_cols(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, K, eps, HAS_NORM, USE_PDL, KC, BLOCK_K)
    for c in tl.static_range(KC):
        y = ys[c]
        if HAS_BIAS:
            y += tl.load(bias_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + c * N + rows, y, mask=row_mask)


def check_cols(x: torch.Tensor, k: int, name: str) -> int:
    """x must be a contiguous fp32 [KC, k] with 1 <= KC <= MAX_COLS; returns KC."""
    assert x.dim() == 2 and x.shape[1] == k and x.is_contiguous() and x.dtype == torch.float32, \
        f"{name}: expected a contiguous float32 [KC, {k}], got {tuple(x.shape)} {x.dtype}"
    assert 1 <= x.shape[0] <= MAX_COLS, f"{name}: KC={x.shape[0]} must be in 1..{MAX_COLS}"
    return x.shape[0]


def column_groups(kc: int, group: int | None) -> tuple[int, int]:
    """(columns per program, groups) for KC columns in groups of at most `group` (None: one group)."""
    per = kc if group is None else min(group, kc)
    assert per >= 1 and kc % per == 0, f"{kc} columns do not split into groups of {per}"
    return per, kc // per


def rmsnorm_gemv_cols(
    x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    bias: torch.Tensor | None = None, *, pdl: bool = False, tuning: Tuning | None = None, group: int | None = None,
) -> torch.Tensor:
    """out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias for each of the KC rows of x [KC, K]; out [KC, N].
    tuning: the kernels.tuning row (None: the device's) — the one-column kernel's launch config; group: columns
    per program (None: all KC)."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    kc = check_cols(x, k, "x")
    assert out.shape == (kc, n) and out.is_contiguous() and out.dtype == torch.float32, "out must be fp32 [KC, N]"
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    if bias is not None:
        check_vec(bias, n, "bias", WEIGHT_DTYPES)
    assert x.device == w.device == out.device
    cfg = gemv_config(n, k, for_device(w.device) if tuning is None else tuning)
    per, groups = column_groups(kc, group)
    _rmsnorm_gemv_cols_kernel[(triton.cdiv(n, cfg["BLOCK_N"]) * groups,)](
        x, w, norm_w if norm_w is not None else x, bias if bias is not None else out, out, n, k, eps,
        HAS_NORM=norm_w is not None, HAS_BIAS=bias is not None, USE_PDL=pdl, KC=per, G=groups,
        **cfg, **pdl_launch_kwargs(pdl, w.device),
    )
    return out


def rmsnorm_gemv_cols_ref(x, w, norm_w=None, eps=1e-6, bias=None) -> torch.Tensor:
    """Plain PyTorch twin of rmsnorm_gemv_cols, in float32: [KC, N]."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    y = x @ w.float().t()
    return y + bias.float() if bias is not None else y
