"""gemv_residual for KC activation columns at once (the verify step of speculative decoding):
x[c] += W @ a[c] in place for c < KC, each weight tile loaded ONCE per program.

Column c's arithmetic is the one-column kernel's (kernels.gemv_residual), bit for bit: the same launch
config and look-ahead rule (gemv_config, residual_lookahead), and per column the same [BLOCK_N, BLOCK_K]
partial sums (a tuple of KC accumulators) summed in the same order; see kernels.rmsnorm_gemv_cols for why
the columns are a tuple and not a tensor dimension. No L2 prefetch of the next weights (the verify step
is not tuned yet). KC (1..16) is a constexpr: one compiled kernel per draft-width bucket; `group` splits the
columns over programs (kernels.rmsnorm_gemv_cols).

Not here: norms (rmsnorm_gemv_cols), bias.
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, gemv_config, pdl_launch_kwargs, residual_lookahead
from kernels.rmsnorm_gemv_cols import check_cols, column_groups
from kernels.tuning import Tuning, for_device


# Contract:
#   a   [KC, K]  fp32, contiguous;  W [N, K] bf16/fp16/fp32 row-major;  x [KC, N] fp32, updated in place
#   grid (cdiv(N, BLOCK_N) * G,): program p owns rows [(p//G)*BLOCK_N, ...+BLOCK_N) of the KC columns of group p%G
@triton.jit
def _gemv_residual_cols_kernel(
    a_ptr, w_ptr, x_ptr, N, K,
    USE_PDL: tl.constexpr, KC: tl.constexpr, G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    AHEAD: tl.constexpr,
):
    pid = tl.program_id(0)
    grp = pid % G
    a_ptr += grp * (KC * K)
    x_ptr += grp * (KC * N)
    rows = (pid // G) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K

    w = tl.load(w_rows + cols[None, :], mask=row_mask[:, None] & (cols[None, :] < K), other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    a_s = ()
    for c in tl.static_range(KC):
        a_s = a_s + (tl.load(a_ptr + c * K + cols, mask=cols < K, other=0.0).to(tl.float32),)
    accs = ()
    if AHEAD:  # the one-column kernel's look-ahead loop: the same sums, from zero
        for c in tl.static_range(KC):
            accs = accs + (tl.zeros((BLOCK_N, BLOCK_K), tl.float32),)
        for k0 in range(0, K, BLOCK_K):
            k_offs = k0 + BLOCK_K + cols
            k_mask = k_offs < K
            w_next = tl.load(w_rows + k_offs[None, :], mask=row_mask[:, None] & k_mask[None, :], other=0.0)
            new_accs = ()
            new_a = ()
            for c in tl.static_range(KC):
                a_next = tl.load(a_ptr + c * K + k_offs, mask=k_mask, other=0.0).to(tl.float32)
                new_accs = new_accs + (accs[c] + w.to(tl.float32) * a_s[c][None, :],)
                new_a = new_a + (a_next,)
            accs = new_accs
            a_s = new_a
            w = w_next
    else:
        for c in tl.static_range(KC):
            accs = accs + (w.to(tl.float32) * a_s[c][None, :],)
        for k0 in range(BLOCK_K, K, BLOCK_K):
            k_offs = k0 + cols
            k_mask = k_offs < K
            w = tl.load(w_rows + k_offs[None, :], mask=row_mask[:, None] & k_mask[None, :], other=0.0)
            new_accs = ()
            for c in tl.static_range(KC):
                a = tl.load(a_ptr + c * K + k_offs, mask=k_mask, other=0.0).to(tl.float32)
                new_accs = new_accs + (accs[c] + w.to(tl.float32) * a[None, :],)
            accs = new_accs
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()

    for c in tl.static_range(KC):
        y = tl.sum(accs[c], axis=1) + tl.load(x_ptr + c * N + rows, mask=row_mask, other=0.0)
        tl.store(x_ptr + c * N + rows, y, mask=row_mask)


def gemv_residual_cols(a: torch.Tensor, w: torch.Tensor, x: torch.Tensor, *, pdl: bool = False,
                       tuning: Tuning | None = None, group: int | None = None) -> torch.Tensor:
    """x[c] += W @ a[c] for each of the KC rows of a [KC, K] and x [KC, N], in place; returns x.
    tuning: the kernels.tuning row (None: the device's) — the one-column kernel's config; group: columns per
    program (None: all KC)."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    kc = check_cols(a, k, "a")
    assert check_cols(x, n, "x") == kc, "a and x must have the same number of columns"
    assert a.device == w.device == x.device
    assert a.data_ptr() != x.data_ptr(), "a and x must be different buffers"
    tuning = for_device(w.device) if tuning is None else tuning
    cfg = gemv_config(n, k, tuning)
    per, groups = column_groups(kc, group)
    _gemv_residual_cols_kernel[(triton.cdiv(n, cfg["BLOCK_N"]) * groups,)](
        a, w, x, n, k, USE_PDL=pdl, KC=per, G=groups, AHEAD=residual_lookahead(k, cfg, tuning), **cfg,
        **pdl_launch_kwargs(pdl, w.device))
    return x


def gemv_residual_cols_ref(a, w, x) -> torch.Tensor:
    """Plain PyTorch twin of gemv_residual_cols (a new [KC, N] tensor; x is not modified)."""
    return x.float() + a.float() @ w.float().t()
