"""GEMV with FP8 weights and the residual add fused: x += W @ a, in place (o_proj, down_proj), W = offset + scale * Q.

The FP8 twin of kernels.gemv_residual: Q [N, K] e4m3 with a float32 scale and offset per row and group of
32 columns, a and x float32, products summed in float32 (kernels/_fp8.py group_tile). Each program owns
BLOCK_N rows and the matching elements of x, loads the next tile before multiplying the current one, and
adds its dot products to x; no two programs touch the same element of x. With l2_prefetch its programs
then prefetch 32 KB each of the next kernel's weights into L2, as the bf16 kernel does for the runner's
down_proj.

Not here: norms (fp8_rmsnorm_gemv), bias.
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import GW, UNIT, check_residual_args, dequantize, fp8_config, group_tile, load_words, word_offsets, words
from kernels._util import interpreting, pdl_launch_kwargs


# Contract:
#   a      [K]     fp32, contiguous (attention output, or silu(g)*u)
#   Q      [N, K]  float8_e4m3fn, row-major contiguous, K % 32 == 0, read as int32 words
#   scale, offset  [N, K/32]  fp32, row-major contiguous
#   x      [N]     fp32, contiguous, updated in place (the residual stream)
#   grid   (cdiv(N, BLOCK_N),): program p owns rows [p*BLOCK_N, (p+1)*BLOCK_N)
@triton.jit
def _fp8_gemv_residual_kernel(
    a_ptr, w_ptr, s_ptr, o_ptr, x_ptr, N, KQ, KG, unit, pf_ptr, pf_bytes,
    USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PF: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    NG: tl.constexpr = BLOCK_K // (4 * GW)  # groups per tile
    BW: tl.constexpr = BLOCK_K // 4  # tile width in int32 words
    w_rows = w_ptr + rows.to(tl.int64)[:, None, None] * KQ
    s_rows = s_ptr + rows.to(tl.int64)[:, None] * KG
    o_rows = o_ptr + rows.to(tl.int64)[:, None] * KG
    w = load_words(w_rows, word_offsets(0, NG), row_mask, KQ)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the activation is written by the previous kernel
    acc = tl.zeros((BLOCK_N, NG), tl.float32)
    for k0 in range(0, KQ, BW):
        w_next = load_words(w_rows, word_offsets(k0 + BW, NG), row_mask, KQ)
        p, _ = group_tile(w, k0, s_rows, o_rows, row_mask, KG, a_ptr, a_ptr, KQ, unit, False, NG)
        acc += p
        w = w_next
    if PF:  # our weights are read: prefetch our 32 KB piece of the next kernel's weights into L2
        start = pid.to(tl.int64) * 32768
        if start < pf_bytes:
            size = tl.minimum(pf_bytes - start, 32768).to(tl.int32)
            tl.inline_asm_elementwise(
                "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
                "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
                "=r,l,r", [pf_ptr + start, size], dtype=tl.int32, is_pure=False, pack=1)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    y = tl.sum(acc, axis=1)
    y += tl.load(x_ptr + rows, mask=row_mask, other=0.0)
    tl.store(x_ptr + rows, y, mask=row_mask)


def fp8_gemv_residual(a: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, x: torch.Tensor,
                      *, pdl: bool = False, l2_prefetch: torch.Tensor | None = None,
                      config: dict | None = None) -> torch.Tensor:
    """x[N] += W[N, K] @ a[K] (W = offset + scale * Q), in place; returns x. l2_prefetch: a flat tensor
    (16-byte multiple; GPU only) whose bytes the programs prefetch into L2 after their main loop, 32 KB each,
    in pid order.
    config: as fp8_rmsnorm_gemv."""
    n, k = check_residual_args(a, q, scale, offset, x)
    cfg = config or fp8_config("residual", n, k)
    pf = x.view(torch.uint8) if l2_prefetch is None else l2_prefetch.view(-1).view(torch.uint8)
    assert l2_prefetch is None or (pf.numel() % 16 == 0 and pf.data_ptr() % 16 == 0 and not interpreting())
    _fp8_gemv_residual_kernel[(triton.cdiv(n, cfg["BLOCK_N"]),)](
        a, words(q), scale, offset, x, n, k // 4, k // 32, UNIT, pf, pf.numel(), USE_PDL=pdl,
        PF=l2_prefetch is not None, **cfg, **pdl_launch_kwargs(pdl, q.device))
    return x


def fp8_gemv_residual_ref(a, q, scale, offset, x) -> torch.Tensor:
    """Plain PyTorch twin of fp8_gemv_residual (returns a new tensor; x is not modified)."""
    return x.float() + dequantize(q, scale, offset) @ a.float()
