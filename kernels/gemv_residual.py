"""GEMV with the residual add fused: x += W @ a (in place), for o_proj and down_proj at batch 1.

Each program owns BLOCK_N rows of W and the matching elements of x, reads them, adds its dot
products and writes them back; no two programs touch the same x element, so in-place is safe
(a and x must not overlap).

Not here: norms (see rmsnorm_gemv), bias (o_proj / down_proj have none in Qwen2/3 and Llama).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_configs, pdl_launch_kwargs, prune_gemv_configs, split_k


@triton.jit
def _dot_part(w, a_ptr, k_offs, K):
    a = tl.load(a_ptr + k_offs, mask=k_offs < K, other=0.0).to(tl.float32)
    return tl.sum(w.to(tl.float32) * a[None, :], axis=1)


# Contract:
#   a   [K]     fp32, contiguous (the activation: attention output, or silu(g)*u)
#   W   [N, K]  bf16/fp16/fp32, row-major contiguous (stride K, 1)
#   x   [N]     fp32, contiguous, updated in place (the residual stream)
#   K = KA + rest, rest <= KB (kernels._util.split_k); grid (cdiv(N, BLOCK_N),): program p owns
#   rows [p*BLOCK_N, (p+1)*BLOCK_N) and loads its whole weight slice before waiting (PDL).
# restore_value: autotuning runs the kernel many times; x is put back after each trial.
@triton.autotune(
    configs=gemv_configs(), key=["N", "K"], restore_value=["x_ptr"],
    prune_configs_by={"early_config_prune": prune_gemv_configs},
)
@triton.jit
def _gemv_residual_kernel(
    a_ptr, w_ptr, x_ptr, N, K,
    USE_PDL: tl.constexpr, KA: tl.constexpr, KB: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    row_mask = rows < N
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K
    ka = tl.arange(0, KA)
    wa = tl.load(w_rows + ka[None, :], mask=row_mask[:, None], other=0.0)  # [BLOCK_N, KA]
    if KB > 0:
        kb = KA + tl.arange(0, KB)
        wb = tl.load(w_rows + kb[None, :], mask=row_mask[:, None] & (kb[None, :] < K), other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # a and x are written by earlier kernels

    y = _dot_part(wa, a_ptr, ka, K)
    if KB > 0:
        y += _dot_part(wb, a_ptr, kb, K)
    y += tl.load(x_ptr + rows, mask=row_mask, other=0.0)
    tl.store(x_ptr + rows, y, mask=row_mask)


def gemv_residual(a: torch.Tensor, w: torch.Tensor, x: torch.Tensor, *, pdl: bool = False) -> torch.Tensor:
    """x[N] += W[N, K] @ a[K], in place; returns x."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    check_vec(a, k, "a")
    check_vec(x, n, "x")
    assert a.device == w.device == x.device
    assert a.data_ptr() != x.data_ptr(), "a and x must be different buffers"
    ka, kb = split_k(k)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    _gemv_residual_kernel[grid](a, w, x, n, k, USE_PDL=pdl, KA=ka, KB=kb, **pdl_launch_kwargs(pdl, w.device))
    return x


def gemv_residual_ref(a, w, x) -> torch.Tensor:
    """Plain PyTorch twin of gemv_residual (returns a new tensor; x is not modified)."""
    return x.float() + w.float() @ a.float()
