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

from kernels._util import WEIGHT_DTYPES, check_gate_up_vecs, gate_up_config, gate_up_lookahead, pdl_launch_kwargs
from kernels.tuning import Tuning, for_device


@triton.jit
def _x_chunk(x_ptr, norm_w_ptr, k_offs, K):
    """Load x[k_offs] (masked to K) as fp32; return (x * norm_w, x * x)."""
    k_mask = k_offs < K
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    nw = tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    return x * nw, x * x


# Contract:
#   x        [K]       fp32, contiguous (residual stream)
#   norm_w   [K]       any float dtype (post_attention_layernorm)
#   W        [2I, K]   bf16/fp16/fp32, row-major contiguous; rows 0..I-1 gate, I..2I-1 up
#   out      [I]       fp32, fully written
#   grid     (cdiv(I, BLOCK_N),): program p owns gate rows and up rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _gate_up_silu_kernel(
    x_ptr, norm_w_ptr, w_ptr, out_ptr, N, K, eps,
    USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, AHEAD: tl.constexpr,
    RED: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N], N = I
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)
    g_rows = w_ptr + rows.to(tl.int64)[:, None] * K  # gate rows
    u_rows = g_rows + N * K  # the matching up rows, I rows further

    m = row_mask[:, None] & (cols[None, :] < K)
    wg = tl.load(g_rows + cols[None, :], mask=m, other=0.0)
    wu = tl.load(u_rows + cols[None, :], mask=m, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the activation is written by the previous kernel
        # Let down_proj launch now (the other kernels trigger after their main loop): its programs
        # take the SM slots our programs free and load their first tiles while we stream. Measured
        # in the whole step (kernels/PERF.md): -8 to -12 us per token on all three shapes; the same
        # early trigger in the other kernels was slower.
        tl.extra.cuda.gdc_launch_dependents()
    x, sq = _x_chunk(x_ptr, norm_w_ptr, cols, K)
    if AHEAD:  # the next tiles' loads are issued before this tile's FMAs: two tiles in flight
        acc_g = tl.zeros((BLOCK_N, BLOCK_K // RED), tl.float32)  # RED neighbouring columns summed in-thread
        acc_u = tl.zeros((BLOCK_N, BLOCK_K // RED), tl.float32)
        ssq = tl.zeros((BLOCK_K,), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k_offs = k0 + BLOCK_K + cols
            m = row_mask[:, None] & (k_offs[None, :] < K)
            wg_next = tl.load(g_rows + k_offs[None, :], mask=m, other=0.0)
            wu_next = tl.load(u_rows + k_offs[None, :], mask=m, other=0.0)
            x_next, sq_next = _x_chunk(x_ptr, norm_w_ptr, k_offs, K)
            pg = wg.to(tl.float32) * x[None, :]
            pu = wu.to(tl.float32) * x[None, :]
            if RED > 1:
                pg = tl.sum(tl.reshape(pg, (BLOCK_N, BLOCK_K // RED, RED)), axis=2)
                pu = tl.sum(tl.reshape(pu, (BLOCK_N, BLOCK_K // RED, RED)), axis=2)
            acc_g += pg
            acc_u += pu
            ssq += sq
            wg, wu, x, sq = wg_next, wu_next, x_next, sq_next
    else:
        acc_g = wg.to(tl.float32) * x[None, :]  # [BLOCK_N, BLOCK_K]
        acc_u = wu.to(tl.float32) * x[None, :]
        ssq = sq
        for k0 in range(BLOCK_K, K, BLOCK_K):
            k_offs = k0 + cols
            m = row_mask[:, None] & (k_offs[None, :] < K)
            wg = tl.load(g_rows + k_offs[None, :], mask=m, other=0.0)
            wu = tl.load(u_rows + k_offs[None, :], mask=m, other=0.0)
            x, sq = _x_chunk(x_ptr, norm_w_ptr, k_offs, K)
            acc_g += wg.to(tl.float32) * x[None, :]
            acc_u += wu.to(tl.float32) * x[None, :]
            ssq += sq

    rstd = tl.rsqrt(tl.sum(ssq, axis=0) / K + eps)
    g = tl.sum(acc_g, axis=1) * rstd  # [BLOCK_N]
    u = tl.sum(acc_u, axis=1) * rstd
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + rows, y, mask=row_mask)


def rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, w_gate_up: torch.Tensor, out: torch.Tensor,
    *, pdl: bool = False, ahead: bool | None = None, red: int | None = None, tuning: Tuning | None = None,
) -> torch.Tensor:
    """out[I] = silu(W[0:I] @ n) * (W[I:2I] @ n) with n = rmsnorm(x) * norm_w; returns out. ahead, red:
    each program loads the next tiles before multiplying the current ones, summing red neighbouring columns
    in-thread (None: _util.gate_up_lookahead's rule). tuning: the kernels.tuning row (None: the device's)."""
    w = w_gate_up
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [2I, K]"
    i, k = check_gate_up_vecs(x, norm_w, out, w)
    tuning = for_device(w.device) if tuning is None else tuning
    cfg = gate_up_config(i, k, tuning)
    look = gate_up_lookahead(cfg, tuning)
    look.update({k: v for k, v in (("AHEAD", ahead), ("RED", red)) if v is not None})
    _gate_up_silu_kernel[(triton.cdiv(i, cfg["BLOCK_N"]),)](
        x, norm_w, w, out, i, k, eps, USE_PDL=pdl, **look, **cfg, **pdl_launch_kwargs(pdl, w.device))
    return out


def rmsnorm_gate_up_silu_ref(x, norm_w, eps, w_gate_up) -> torch.Tensor:
    """Plain PyTorch twin of rmsnorm_gate_up_silu, in float32."""
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    i = w_gate_up.shape[0] // 2
    gu = w_gate_up.float() @ n
    return torch.nn.functional.silu(gu[:i]) * gu[i:]
