"""Final RMSNorm + LM head + per-column argmax on tensor cores (kernels.gemv_mma_cols' MMA), then the draft's
acceptance and the next token fed back, in one launch: the last launch of a speculating run's steps, plain
(one column, no draft) and verify (n columns).

    logits[c] = W @ (rmsnorm(x[c]) * norm_w);  g[c] = argmax(logits[c])          for c < n
    a = the number of leading j < klen with draft[j] == g[j]   (column j's argmax is the model's token after
        column j's input; column j+1's input is draft[j]); without a draft a = 0
    token = g[a];  pos += a + 1;  ring[pos % R] = token (if a ring);  x_next = embed[token];  result = (g, a)

Column c's logits are the same bits for any n (gemv_mma_cols), and its argmax is the largest logit, the lowest
row among equal ones (kernels.lm_head_argmax's int64 keys, one per column), so a verify step's column picks
the token the plain step picks. Each program votes per column into scratch, then draws one ticket; the last
program reads the winners, resets the scratch, accepts and feeds. `result` and `ring` may be pinned host memory.

Not here: sampling (speculation is greedy only).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, pdl_launch_kwargs
from kernels.gemv_mma_cols import NC, as_cols, check_weight, mma_config, mma_rows
from kernels.lm_head_argmax import NO_KEY

SCRATCH = NC + 1  # per-column best keys, then the ticket counter


@triton.jit
def vote_accept_feed(y, rows, row_mask, cs, col_mask, scratch_ptr, draft_ptr, klen_ptr, token_ptr, pos_ptr,
                     embed_ptr, x_next_ptr, result_ptr, ring_ptr, ring_size, n_cols, K, n_programs, no_key,
                     HAS_DRAFT: tl.constexpr, HAS_RESULT: tl.constexpr, HAS_RING: tl.constexpr,
                     TICKET: tl.constexpr, BLOCK_H: tl.constexpr):
    """A program's logits y [BLOCK_N, columns cs] voted per column into scratch (its best value, lowest row among
    equal ones, as kernels.lm_head_argmax's ordered int64 key), then a ticket (scratch[TICKET]); the last program
    reads and resets the winners, accepts the draft's agreeing prefix a and feeds g[a] back (pos, ring, x_next,
    result). Shared by this module's kernel and kernels.stream_lm_head's."""
    y = tl.where(row_mask[:, None], y, float("-inf"))
    best = tl.max(y, axis=0)
    row = tl.min(tl.where(y == best[None, :], rows[:, None], 2147483647), axis=0)
    bits = best.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    key = (ordered.to(tl.int64) << 32) + (2147483647 - row).to(tl.int64)
    tl.atomic_max(scratch_ptr + cs, key, mask=col_mask, sem="relaxed", scope="gpu")
    tl.debug_barrier()
    if tl.atomic_add(scratch_ptr + TICKET, 1, sem="acq_rel", scope="gpu") == n_programs - 1:
        won = tl.atomic_xchg(scratch_ptr + cs, (cs * 0).to(tl.int64) + no_key, mask=col_mask,
                             sem="acquire", scope="gpu")  # reads and resets
        g = (2147483647 - (won - ((won >> 32) << 32))).to(tl.int64)
        tl.store(scratch_ptr + TICKET, 0)
        if HAS_DRAFT:
            klen = tl.load(klen_ptr)
            d = tl.load(draft_ptr + cs, mask=cs < n_cols - 1, other=-1)
            agree = (cs < klen) & (cs < n_cols - 1) & (d == g)
        else:
            agree = cs < 0
        a = tl.min(tl.where(agree, TICKET, cs), axis=0)  # the first column that disagrees
        token = tl.sum(tl.where(cs == a, g, 0), axis=0)
        if HAS_RESULT:
            tl.store(result_ptr + cs, g, mask=col_mask)
            tl.store(result_ptr + n_cols, a.to(tl.int64))
        tl.store(token_ptr, token)
        new_pos = tl.load(pos_ptr) + (a + 1).to(tl.int32)
        tl.store(pos_ptr, new_pos)
        if HAS_RING:
            tl.store(ring_ptr + new_pos % ring_size, token)
        h = tl.arange(0, BLOCK_H)
        erow = embed_ptr + token * K
        for h0 in range(0, K, BLOCK_H):
            e = tl.load(erow + h0 + h, mask=h0 + h < K, other=0.0)
            tl.store(x_next_ptr + h0 + h, e.to(tl.float32), mask=h0 + h < K)


# Contract:
#   x [n, K] fp32;  W [N, K];  norm_w [K] (HAS_NORM);  logits [n, N] fp32, fully written
#   scratch [NC + 1] int64: NO_KEY x NC, 0 on entry and exit
#   draft [>= n - 1] int64, klen [1] int64 (HAS_DRAFT);  token [1] int64;  pos [1] int32;  embed [V, K]
#   x_next [K] fp32;  result [n + 1] int64 (HAS_RESULT);  ring [R] int64 (HAS_RING)
#   grid (cdiv(N, BLOCK_N),)
@triton.jit(do_not_specialize=["n_cols"])
def _lm_head_argmax_mma_kernel(
    x_ptr, w_ptr, norm_w_ptr, logits_ptr, scratch_ptr, draft_ptr, klen_ptr, token_ptr, pos_ptr, embed_ptr,
    x_next_ptr, result_ptr, ring_ptr, ring_size, n_cols, N, K, eps, n_programs, no_key,
    HAS_NORM: tl.constexpr, HAS_DRAFT: tl.constexpr, HAS_RESULT: tl.constexpr, HAS_RING: tl.constexpr,
    SPLIT: tl.constexpr, USE_PDL: tl.constexpr, NCOL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cs = tl.arange(0, NCOL)
    col_mask = cs < n_cols
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    acc, ssq = mma_rows(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, n_cols, K, 0, K, HAS_NORM, SPLIT, NCOL, BLOCK_N,
                        BLOCK_K)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if HAS_NORM:
        acc = acc * tl.rsqrt(ssq / K + eps)[None, :]
    tl.store(logits_ptr + cs[None, :] * N + rows[:, None], acc, mask=row_mask[:, None] & col_mask[None, :])

    vote_accept_feed(acc, rows, row_mask, cs, col_mask, scratch_ptr, draft_ptr, klen_ptr, token_ptr, pos_ptr,
                     embed_ptr, x_next_ptr, result_ptr, ring_ptr, ring_size, n_cols, K, n_programs, no_key, HAS_DRAFT,
                     HAS_RESULT, HAS_RING, NCOL, BLOCK_H)


def mma_scratch(device) -> torch.Tensor:
    """The scratch lm_head_argmax_mma needs (reusable by every launch on one stream, never two at once)."""
    s = torch.full((SCRATCH,), NO_KEY, dtype=torch.int64, device=device)
    s[NC] = 0
    return s


def head_cols_args(x, w, logits, token, pos, embed, scratch, norm_w, ring, draft, klen, x_next, result):
    """The checks of a column LM head launcher (this module's contract; also kernels.cols_gemv's) ->
    (n, k, x as [columns, K], logits as [columns, N], x_next: x itself for one column when not given)."""
    n, k = check_weight(w)
    xs = as_cols(x, k, "x")
    cols = xs.shape[0]
    lg = as_cols(logits, n, "logits")
    assert lg.shape[0] == cols, "x and logits must have the same number of columns"
    check_vec(scratch, SCRATCH, "scratch", (torch.int64,))
    assert (draft is None) == (klen is None), "draft and klen go together"
    if draft is not None:
        assert draft.dim() == 1 and draft.numel() >= cols - 1 and draft.dtype == torch.int64 and draft.is_contiguous()
        check_vec(klen, 1, "klen", (torch.int64,))
    if x_next is None:
        assert cols == 1, "x_next is needed with more than one column"
        x_next = xs.view(-1)
    check_vec(token, 1, "token", (torch.int64,))
    check_vec(pos, 1, "pos", (torch.int32,))
    check_vec(x_next, k, "x_next")
    assert embed.dim() == 2 and embed.shape[1] == k and embed.is_contiguous() and embed.shape[0] >= n
    if result is not None:
        check_vec(result, cols + 1, "result", (torch.int64,))
        assert result.device == x.device or result.is_pinned(), "result: on the device or in pinned host memory"
    if ring is not None:
        check_vec(ring, ring.numel(), "ring", (torch.int64,))
        assert ring.device == x.device or ring.is_pinned(), "ring: on the device or in pinned host memory"
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    assert n < 2 ** 31
    return n, k, xs, lg, x_next


def lm_head_argmax_mma(
    x: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, token: torch.Tensor, pos: torch.Tensor,
    embed: torch.Tensor, scratch: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    ring: torch.Tensor | None = None, *, draft: torch.Tensor | None = None, klen: torch.Tensor | None = None,
    x_next: torch.Tensor | None = None, result: torch.Tensor | None = None, pdl: bool = False,
    config: dict | None = None,
) -> torch.Tensor:
    """The n columns' logits (x [n, K] or one [K]) and argmaxes; with a draft, the accepted length a; then
    token = argmax of column a, pos += a + 1, ring[pos % R] = token, x_next (default: x, one column only) =
    embed[token]; result = (argmaxes, a). The argument order up to `ring` is kernels.lm_head_argmax's.
    Returns token."""
    n, k, xs, lg, x_next = head_cols_args(x, w, logits, token, pos, embed, scratch, norm_w, ring, draft, klen,
                                          x_next, result)
    cols = xs.shape[0]
    cfg = dict(mma_config(n, k), SPLIT_K=1, **(config or {}))
    assert cfg.pop("SPLIT_K") == 1, "no split-K here (the argmax votes per program)"
    grid = triton.cdiv(n, cfg["BLOCK_N"])
    _lm_head_argmax_mma_kernel[(grid,)](
        xs, w, norm_w if norm_w is not None else xs, lg, scratch, draft if draft is not None else token,
        klen if klen is not None else token, token, pos, embed, x_next, result if result is not None else token,
        ring if ring is not None else token, ring.numel() if ring is not None else 1, cols, n, k, eps, grid, NO_KEY,
        HAS_NORM=norm_w is not None, HAS_DRAFT=draft is not None, HAS_RESULT=result is not None,
        HAS_RING=ring is not None, SPLIT=w.dtype == torch.bfloat16, USE_PDL=pdl, NCOL=NC,
        BLOCK_H=min(1024, triton.next_power_of_2(k)), **cfg, **pdl_launch_kwargs(pdl, w.device))
    return token


def lm_head_argmax_mma_ref(x, w, draft=None, klen: int = 0, norm_w=None, eps=1e-6):
    """Plain PyTorch twin: (logits [n, N] fp32, argmaxes [n] int64, a). The caller does token = argmaxes[a],
    pos += a + 1, x_next = embed[token]."""
    x = x.float().reshape(-1, w.shape[1])
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    logits = x @ w.float().t()
    g = logits.argmax(-1)
    a = 0
    while draft is not None and a < min(klen, len(g) - 1) and int(draft[a]) == int(g[a]):
        a += 1
    return logits, g, a
