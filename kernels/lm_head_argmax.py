"""The last launch of a greedy decode step: final RMSNorm + LM head + argmax + feeding the token back.

    logits = W @ (rmsnorm(x) * norm_w);  token = argmax(logits);  pos += 1;  x = embed[token]

One launch instead of the LM head GEMV followed by torch's argmax, the token / position updates
and the next step's embedding lookup (five small launches that cannot overlap anything). Every
program computes its BLOCK_N logits (the same main loop as rmsnorm_gemv), stores them, and folds
its best (value, row) into one int64 key with `atomic_max`: the high 32 bits are the logit's bits
mapped to an order-preserving int32, the low 32 bits are 2^31 - 1 - row, so the largest key is the
largest logit and, among equal logits, the lowest row (torch.argmax's choice). The program that
draws the last ticket reads the winner, resets the scratch for the next launch and runs
feed_token's tail: writes the token, advances pos, puts the token in the host ring and copies its
embedding row into x for the next step (every other program has read x before drawing its
ticket).

Not here: sampling with temperature / top-k / penalties (inference.sampling does those on the
logits); NaN logits (torch.argmax picks a NaN, this picks a NaN whose bits sort highest).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_config, pdl_launch_kwargs
from kernels.tuning import Tuning, for_device
from kernels.feed_token import check_feed_args, feed, feed_args
from kernels.rmsnorm_gemv import _rmsnorm_rows_dot

NO_KEY = -(2 ** 63)  # scratch[0] between launches: below every logit's key


@triton.jit
def argmax_vote(y, rows, row_mask, scratch_ptr):
    """Fold this program's best (value, row) of y into scratch[0] (atomic max of the int64 key),
    then draw a ticket from scratch[1] (acq_rel: releases the vote). Returns the ticket."""
    y = tl.where(row_mask, y, float("-inf"))
    best = tl.max(y, axis=0)
    row = tl.min(tl.where(y == best, rows, 2147483647), axis=0)  # first of equal maxima
    bits = best.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # int32 order == float order (negatives flipped)
    key = (ordered.to(tl.int64) << 32) + (2147483647 - row).to(tl.int64)
    tl.atomic_max(scratch_ptr, key, sem="relaxed", scope="gpu")
    tl.debug_barrier()
    return tl.atomic_add(scratch_ptr + 1, 1, sem="acq_rel", scope="gpu")


@triton.jit
def argmax_winner(scratch_ptr, no_key):
    """For the program that drew the last ticket: the winning row; resets the scratch."""
    won = tl.atomic_xchg(scratch_ptr, no_key, sem="acquire", scope="gpu")  # reads and resets
    tl.store(scratch_ptr + 1, 0)
    return 2147483647 - (won - ((won >> 32) << 32))  # low 32 bits


# Contract:
#   x        [K]     fp32 (final hidden state in; the next token's embedding out)
#   W        [N, K]  bf16/fp16/fp32 row-major (the LM head); norm_w [K] (read when HAS_NORM)
#   logits   [N]     fp32, fully written
#   scratch  [2]     int64: best key (NO_KEY on entry and exit), ticket counter (0 on entry and exit)
#   token    [1]     int64, written; pos [1] int32, incremented
#   embed    [V, K]  the embedding table (any float dtype), row `token` copied into x
#   ring     [R]     int64 (read only when HAS_RING): ring[(pos + 1) % R] = token
#   grid     (cdiv(N, BLOCK_N),)
@triton.jit
def _lm_head_argmax_kernel(
    x_ptr, w_ptr, norm_w_ptr, logits_ptr, scratch_ptr, token_ptr, pos_ptr, embed_ptr,
    N, K, eps, n_programs, no_key, ring_ptr, ring_size,
    HAS_NORM: tl.constexpr, HAS_RING: tl.constexpr, USE_PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    y = _rmsnorm_rows_dot(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, K, eps, HAS_NORM, USE_PDL, BLOCK_K)
    tl.store(logits_ptr + rows, y, mask=row_mask)
    if argmax_vote(y, rows, row_mask, scratch_ptr) == n_programs - 1:
        token = argmax_winner(scratch_ptr, no_key)
        feed(token, token_ptr, pos_ptr, ring_ptr, ring_size, embed_ptr, x_ptr, K, HAS_RING, BLOCK_H)


def argmax_scratch(device) -> torch.Tensor:
    """The scratch lm_head_argmax needs (reusable by every launch on one stream, never two at once)."""
    return torch.tensor([NO_KEY, 0], dtype=torch.int64, device=device)


def check_lm_head_args(n: int, k: int, x, logits, token, pos, embed, scratch, norm_w, ring, device) -> None:
    """The launcher's checks of everything but the weight (shared with kernels.fp8_lm_head_argmax)."""
    check_vec(x, k, "x")
    check_vec(logits, n, "logits")
    check_vec(scratch, 2, "scratch", (torch.int64,))
    check_feed_args(token, pos, embed, x, ring)
    assert embed.shape[0] >= n, "the embedding table must cover every LM head row"
    assert n < 2 ** 31
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    assert x.device == device == logits.device == scratch.device


def lm_head_argmax(
    x: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, token: torch.Tensor, pos: torch.Tensor,
    embed: torch.Tensor, scratch: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    ring: torch.Tensor | None = None, *, pdl: bool = False, tuning: Tuning | None = None,
) -> torch.Tensor:
    """logits = W @ (rmsnorm(x) * norm_w); token = argmax; pos += 1; x = embed[token];
    ring[pos % len(ring)] = token (the new pos) if a ring is given. Returns token. tuning: the kernels.tuning
    row for the launch config (None: the device's)."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    check_lm_head_args(n, k, x, logits, token, pos, embed, scratch, norm_w, ring, w.device)
    cfg = gemv_config(n, k, for_device(w.device) if tuning is None else tuning)
    grid = triton.cdiv(n, cfg["BLOCK_N"])
    _lm_head_argmax_kernel[(grid,)](
        x, w, norm_w if norm_w is not None else x, logits, scratch, token, pos, embed, n, k, eps, grid, NO_KEY,
        HAS_NORM=norm_w is not None, USE_PDL=pdl, **feed_args(ring, token, k), **cfg,
        **pdl_launch_kwargs(pdl, w.device),
    )
    return token


def lm_head_argmax_ref(x, w, norm_w=None, eps=1e-6):
    """Plain PyTorch twin: (logits [N] fp32, token [1] int64). The caller does pos += 1, x = embed[token]."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean() + eps) * norm_w.float()
    logits = w.float() @ x
    return logits, torch.argmax(logits, dim=-1, keepdim=True)
