"""rmsnorm_gate_up_silu for KC activation columns at once (the verify step of speculative decoding):
out[c] = silu(W_gate @ n_c) * (W_up @ n_c), n_c = rmsnorm(x[c]) * norm_w, each weight tile loaded ONCE.

Column c's arithmetic is the one-column kernel's (kernels.gate_up_silu), bit for bit: the same launch
config and look-ahead / in-thread reduction rule (gate_up_config, gate_up_lookahead), per column the same
gate and up partial sums (tuples of KC accumulators; see kernels.rmsnorm_gemv_cols) summed in the same
order. KC (1..16) is a constexpr: one compiled kernel per draft-width bucket; `group` splits the columns over
programs (kernels.rmsnorm_gemv_cols).

Not here: down_proj (gemv_residual_cols).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gate_up_config, gate_up_lookahead, pdl_launch_kwargs
from kernels.gate_up_silu import _x_chunk
from kernels.rmsnorm_gemv_cols import check_cols, column_groups
from kernels.tuning import Tuning, for_device


@triton.jit
def _products(wg, wu, x, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, RED: tl.constexpr):
    """The look-ahead loop's per-tile gate / up products, RED neighbouring columns summed in-thread."""
    pg = wg.to(tl.float32) * x[None, :]
    pu = wu.to(tl.float32) * x[None, :]
    if RED > 1:
        pg = tl.sum(tl.reshape(pg, (BLOCK_N, BLOCK_K // RED, RED)), axis=2)
        pu = tl.sum(tl.reshape(pu, (BLOCK_N, BLOCK_K // RED, RED)), axis=2)
    return pg, pu


# Contract:
#   x [KC, K] fp32;  norm_w [K];  W [2I, K] packed gate (rows 0..I-1) / up (I..2I-1);  out [KC, I] fp32
#   grid (cdiv(I, BLOCK_N) * G,): program p owns gate and up rows [(p//G)*BLOCK_N, ...+BLOCK_N) of the KC
#        columns of group p%G
@triton.jit
def _gate_up_silu_cols_kernel(
    x_ptr, norm_w_ptr, w_ptr, out_ptr, N, K, eps,
    USE_PDL: tl.constexpr, KC: tl.constexpr, G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    AHEAD: tl.constexpr, RED: tl.constexpr,
):
    pid = tl.program_id(0)
    grp = pid % G
    x_ptr += grp * (KC * K)
    out_ptr += grp * (KC * N)
    rows = (pid // G) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)
    g_rows = w_ptr + rows.to(tl.int64)[:, None] * K
    u_rows = g_rows + N * K

    m = row_mask[:, None] & (cols[None, :] < K)
    wg = tl.load(g_rows + cols[None, :], mask=m, other=0.0)
    wu = tl.load(u_rows + cols[None, :], mask=m, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()  # as the one-column kernel: down_proj launches now
    xs = ()
    ssqs = ()
    for c in tl.static_range(KC):
        x, sq = _x_chunk(x_ptr + c * K, norm_w_ptr, cols, K)
        xs = xs + (x,)
        ssqs = ssqs + (sq,)
    acc_gs = ()
    acc_us = ()
    if AHEAD:
        sums = ()
        for c in tl.static_range(KC):
            acc_gs = acc_gs + (tl.zeros((BLOCK_N, BLOCK_K // RED), tl.float32),)
            acc_us = acc_us + (tl.zeros((BLOCK_N, BLOCK_K // RED), tl.float32),)
            sums = sums + (tl.zeros((BLOCK_K,), tl.float32),)
        for k0 in range(0, K, BLOCK_K):
            k_offs = k0 + BLOCK_K + cols
            m = row_mask[:, None] & (k_offs[None, :] < K)
            wg_next = tl.load(g_rows + k_offs[None, :], mask=m, other=0.0)
            wu_next = tl.load(u_rows + k_offs[None, :], mask=m, other=0.0)
            new_g = ()
            new_u = ()
            new_s = ()
            new_x = ()
            new_sq = ()
            for c in tl.static_range(KC):
                x_next, sq_next = _x_chunk(x_ptr + c * K, norm_w_ptr, k_offs, K)
                pg, pu = _products(wg, wu, xs[c], BLOCK_N, BLOCK_K, RED)
                new_g = new_g + (acc_gs[c] + pg,)
                new_u = new_u + (acc_us[c] + pu,)
                new_s = new_s + (sums[c] + ssqs[c],)
                new_x = new_x + (x_next,)
                new_sq = new_sq + (sq_next,)
            acc_gs, acc_us, sums, xs, ssqs = new_g, new_u, new_s, new_x, new_sq
            wg, wu = wg_next, wu_next
        ssqs = sums
    else:
        for c in tl.static_range(KC):
            acc_gs = acc_gs + (wg.to(tl.float32) * xs[c][None, :],)
            acc_us = acc_us + (wu.to(tl.float32) * xs[c][None, :],)
        for k0 in range(BLOCK_K, K, BLOCK_K):
            k_offs = k0 + cols
            m = row_mask[:, None] & (k_offs[None, :] < K)
            wg = tl.load(g_rows + k_offs[None, :], mask=m, other=0.0)
            wu = tl.load(u_rows + k_offs[None, :], mask=m, other=0.0)
            new_g = ()
            new_u = ()
            new_s = ()
            for c in tl.static_range(KC):
                x, sq = _x_chunk(x_ptr + c * K, norm_w_ptr, k_offs, K)
                new_g = new_g + (acc_gs[c] + wg.to(tl.float32) * x[None, :],)
                new_u = new_u + (acc_us[c] + wu.to(tl.float32) * x[None, :],)
                new_s = new_s + (ssqs[c] + sq,)
            acc_gs, acc_us, ssqs = new_g, new_u, new_s

    for c in tl.static_range(KC):
        rstd = tl.rsqrt(tl.sum(ssqs[c], axis=0) / K + eps)
        g = tl.sum(acc_gs[c], axis=1) * rstd
        u = tl.sum(acc_us[c], axis=1) * rstd
        y = g / (1.0 + tl.exp(-g)) * u
        tl.store(out_ptr + c * N + rows, y, mask=row_mask)


def rmsnorm_gate_up_silu_cols(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, w_gate_up: torch.Tensor, out: torch.Tensor,
    *, pdl: bool = False, tuning: Tuning | None = None, group: int | None = None,
) -> torch.Tensor:
    """out[c] = silu(W[0:I] @ n_c) * (W[I:2I] @ n_c), n_c = rmsnorm(x[c]) * norm_w, for the KC rows of
    x [KC, K]; out [KC, I]. tuning: the kernels.tuning row (None: the device's); group: columns per program
    (None: all KC)."""
    w = w_gate_up
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [2I, K]"
    two_i, k = w.shape
    assert two_i % 2 == 0, "gate_up must have an even number of rows"
    i = two_i // 2
    kc = check_cols(x, k, "x")
    check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    assert check_cols(out, i, "out") == kc, "x and out must have the same number of columns"
    assert x.device == w.device == out.device
    tuning = for_device(w.device) if tuning is None else tuning
    cfg = gate_up_config(i, k, tuning)
    per, groups = column_groups(kc, group)
    _gate_up_silu_cols_kernel[(triton.cdiv(i, cfg["BLOCK_N"]) * groups,)](
        x, norm_w, w, out, i, k, eps, USE_PDL=pdl, KC=per, G=groups, **gate_up_lookahead(cfg, tuning), **cfg,
        **pdl_launch_kwargs(pdl, w.device))
    return out


def rmsnorm_gate_up_silu_cols_ref(x, norm_w, eps, w_gate_up) -> torch.Tensor:
    """Plain PyTorch twin of rmsnorm_gate_up_silu_cols, in float32: [KC, I]."""
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    i = w_gate_up.shape[0] // 2
    gu = n @ w_gate_up.float().t()
    return torch.nn.functional.silu(gu[:, :i]) * gu[:, i:]
