"""The last launch of a greedy decode step with an FP8 LM head: final RMSNorm + LM head + argmax + feeding
the token back.

    logits = W @ (rmsnorm(x) * norm_w);  token = argmax(logits);  pos += 1;  x = embed[token]
    W = offset + scale * Q  (e4m3 Q, a float32 scale and offset per row and group of 32 columns)
    W = scale * Q           (int8 Q, a float16 scale per row and group of 32: `offset` None; the FP8 engine's head)

The FP8 twin of kernels.lm_head_argmax: the main loop is fp8_rmsnorm_gemv's (fp8_rows_dot), the vote
(atomic max of an order-preserving int64 key, lowest row among equal logits), the last program's winner
and feed_token's tail are lm_head_argmax's own jit helpers. The embedding table stays 16-bit.

Not here: sampling with temperature / top-k / penalties (inference.sampling, on the logits).
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import check_fp8, dequantize, fp8_config, unit_of, words
from kernels._util import pdl_launch_kwargs
from kernels.feed_token import feed, feed_args
from kernels.fp8_rmsnorm_gemv import fp8_rows_dot
from kernels.lm_head_argmax import NO_KEY, argmax_vote, argmax_winner, check_lm_head_args


# Contract:
#   x        [K]     fp32 (final hidden state in; the next token's embedding out)
#   Q        [N, K]  float8_e4m3fn row-major (the LM head), K % 32 == 0; scale, offset [N, K/32] fp32; norm_w [K]
#                    (INT8: Q int8, scale [N, K/32] float16, offset unread)
#   logits   [N]     fp32, fully written
#   scratch  [2]     int64: best key (NO_KEY on entry and exit), ticket counter (0 on entry and exit)
#   token    [1]     int64, written; pos [1] int32, incremented
#   embed    [V, K]  the embedding table (any float dtype), row `token` copied into x
#   ring     [R]     int64 (read only when HAS_RING): ring[(pos + 1) % R] = token
#   grid     (cdiv(N, BLOCK_N),)
@triton.jit
def _fp8_lm_head_argmax_kernel(
    x_ptr, w_ptr, s_ptr, o_ptr, norm_w_ptr, logits_ptr, scratch_ptr, token_ptr, pos_ptr, embed_ptr,
    N, K, KQ, KG, eps, unit, n_programs, no_key, ring_ptr, ring_size,
    HAS_NORM: tl.constexpr, HAS_RING: tl.constexpr, USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr, INT8: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    y = fp8_rows_dot(x_ptr, w_ptr, s_ptr, o_ptr, norm_w_ptr, rows, row_mask, K, KQ, KG, eps, unit, HAS_NORM, USE_PDL,
                     BLOCK_N, BLOCK_K, INT8)
    tl.store(logits_ptr + rows, y, mask=row_mask)
    if argmax_vote(y, rows, row_mask, scratch_ptr) == n_programs - 1:
        token = argmax_winner(scratch_ptr, no_key)
        feed(token, token_ptr, pos_ptr, ring_ptr, ring_size, embed_ptr, x_ptr, K, HAS_RING, BLOCK_H)


def fp8_lm_head_argmax(
    x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, logits: torch.Tensor,
    token: torch.Tensor, pos: torch.Tensor, embed: torch.Tensor, scratch: torch.Tensor, norm_w: torch.Tensor | None = None,
    eps: float = 1e-6, ring: torch.Tensor | None = None, *, pdl: bool = False, config: dict | None = None,
) -> torch.Tensor:
    """logits = W @ (rmsnorm(x) * norm_w) (W = offset + scale * Q, or scale * Q for int8 Q with offset None);
    token = argmax; pos += 1; x = embed[token];
    ring[pos % len(ring)] = token (the new pos) if a ring is given. Returns token. scratch: as
    kernels.lm_head_argmax.argmax_scratch. config: as fp8_rmsnorm_gemv."""
    check_fp8(q, scale, offset)
    n, k = q.shape
    check_lm_head_args(n, k, x, logits, token, pos, embed, scratch, norm_w, ring, q.device)
    cfg = config or fp8_config("gemv", n, k)
    grid = triton.cdiv(n, cfg["BLOCK_N"])
    _fp8_lm_head_argmax_kernel[(grid,)](
        x, words(q), scale, scale if offset is None else offset, norm_w if norm_w is not None else x, logits, scratch,
        token, pos, embed, n, k, k // 4, k // 32, eps, unit_of(offset), grid, NO_KEY, HAS_NORM=norm_w is not None,
        USE_PDL=pdl, INT8=offset is None, **feed_args(ring, token, k), **cfg, **pdl_launch_kwargs(pdl, q.device))
    return token


def fp8_lm_head_argmax_ref(x, q, scale, offset, norm_w=None, eps=1e-6):
    """Plain PyTorch twin: (logits [N] fp32, token [1] int64). The caller does pos += 1, x = embed[token]."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    logits = dequantize(q, scale, offset) @ x
    return logits, torch.argmax(logits, dim=-1, keepdim=True)
