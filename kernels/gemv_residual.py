"""GEMV with the residual add fused: x += W @ a (in place), for o_proj and down_proj at batch 1.

Each program owns BLOCK_N rows of W and the matching elements of x, reads them, adds its dot
products and writes them back; no two programs touch the same x element, so in-place is safe
(a and x must not overlap). Where the rule says so (kernels._util.residual_lookahead) a program loads its
next tile before multiplying the current one; with l2_prefetch its programs then prefetch 32 KB each of the
next kernel's weights into L2 (the runner's down_proj: the next layer's QKV).

Not here: norms (see rmsnorm_gemv), bias (o_proj / down_proj have none in Qwen2/3 and Llama).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_config, interpreting, pdl_launch_kwargs, residual_lookahead
from kernels.tuning import Tuning, for_device


# Contract:
#   a   [K]     fp32, contiguous (the activation: attention output, or silu(g)*u)
#   W   [N, K]  bf16/fp16/fp32, row-major contiguous (stride K, 1)
#   x   [N]     fp32, contiguous, updated in place (the residual stream)
#   grid (cdiv(N, BLOCK_N),): program p owns rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _gemv_residual_kernel(
    a_ptr, w_ptr, x_ptr, N, K, pf_ptr, pf_bytes,
    USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EARLY: tl.constexpr,
    AHEAD: tl.constexpr, PF: tl.constexpr = False,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    row_mask = rows < N
    cols = tl.arange(0, BLOCK_K)  # [BLOCK_K]
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K

    # First weight tile before waiting on the previous kernel (W does not depend on it).
    w = tl.load(w_rows + cols[None, :], mask=row_mask[:, None] & (cols[None, :] < K), other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the activation is written by the previous kernel
        if EARLY:
            tl.extra.cuda.gdc_launch_dependents()
    a = tl.load(a_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
    if AHEAD:  # the next tile's loads are issued before this tile's FMAs: two tiles in flight
        acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k_offs = k0 + BLOCK_K + cols
            k_mask = k_offs < K
            w_next = tl.load(w_rows + k_offs[None, :], mask=row_mask[:, None] & k_mask[None, :], other=0.0)
            a_next = tl.load(a_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
            acc += w.to(tl.float32) * a[None, :]
            w, a = w_next, a_next
    else:
        acc = w.to(tl.float32) * a[None, :]  # [BLOCK_N, BLOCK_K]
        for k0 in range(BLOCK_K, K, BLOCK_K):
            k_offs = k0 + cols
            k_mask = k_offs < K
            w = tl.load(w_rows + k_offs[None, :], mask=row_mask[:, None] & k_mask[None, :], other=0.0)
            a = tl.load(a_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
            acc += w.to(tl.float32) * a[None, :]
    if PF:  # our weights are read: prefetch our 32 KB piece of the next kernel's weights into L2
        start = pid.to(tl.int64) * 32768
        if start < pf_bytes:
            size = tl.minimum(pf_bytes - start, 32768).to(tl.int32)
            tl.inline_asm_elementwise(
                "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
                "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
                "=r,l,r", [pf_ptr + start, size], dtype=tl.int32, is_pure=False, pack=1)
    if USE_PDL and not EARLY:
        # Weights streamed: let the next kernel launch now so its prologue overlaps our tail.
        # (Not earlier: a kernel that triggers at its start lets a chain of waiting kernels pile up.)
        tl.extra.cuda.gdc_launch_dependents()

    y = tl.sum(acc, axis=1) + tl.load(x_ptr + rows, mask=row_mask, other=0.0)
    tl.store(x_ptr + rows, y, mask=row_mask)


def gemv_residual(a: torch.Tensor, w: torch.Tensor, x: torch.Tensor, *, pdl: bool = False,
                  early: bool = False, ahead: bool | None = None,
                  l2_prefetch: torch.Tensor | None = None, tuning: Tuning | None = None) -> torch.Tensor:
    """x[N] += W[N, K] @ a[K], in place; returns x. early (with pdl): release the next kernel right
    after the PDL wait instead of after the main loop (for a next kernel that streams its weights
    before its own wait, kernels.stream_gemv). ahead: each program loads the next tile before
    multiplying the current one (None: _util.residual_lookahead's rule). l2_prefetch: a flat weight (16-byte
    multiple; GPU only) whose bytes the programs prefetch into L2 after their main loop, 32 KB each, in pid order.
    tuning: the kernels.tuning row for launch configs (None: the device's)."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    check_vec(a, k, "a")
    check_vec(x, n, "x")
    assert a.device == w.device == x.device
    assert a.data_ptr() != x.data_ptr(), "a and x must be different buffers"
    tuning = for_device(w.device) if tuning is None else tuning
    cfg = gemv_config(n, k, tuning)
    ahead = residual_lookahead(k, cfg, tuning) if ahead is None else ahead
    pf = x.view(torch.uint8) if l2_prefetch is None else l2_prefetch.view(-1).view(torch.uint8)
    assert l2_prefetch is None or (pf.numel() % 16 == 0 and pf.data_ptr() % 16 == 0 and not interpreting())
    _gemv_residual_kernel[(triton.cdiv(n, cfg["BLOCK_N"]),)](
        a, w, x, n, k, pf, pf.numel(), USE_PDL=pdl, EARLY=early, PF=l2_prefetch is not None, AHEAD=ahead, **cfg,
        **pdl_launch_kwargs(pdl, w.device))
    return x


def gemv_residual_ref(a, w, x) -> torch.Tensor:
    """Plain PyTorch twin of gemv_residual (returns a new tensor; x is not modified)."""
    return x.float() + w.float() @ a.float()
