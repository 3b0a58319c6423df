"""The last launch of a verify step: final RMSNorm + LM head + argmax for KC columns, then acceptance
of the draft and feeding the next token back, in one launch.

    logits[c] = W @ (rmsnorm(x[c]) * norm_w);  g[c] = argmax(logits[c])          for c < KC
    n = the number of leading j < klen with draft[j] == g[j]   (column j's argmax is the model's token
        after column j's input; column j+1's input is draft[j])
    token = g[n];  pos += n + 1;  x_next = embed[token];  result = (g[0..KC-1], n)

Column c's logits are the one-column kernel's (kernels.lm_head_argmax, via
kernels.rmsnorm_gemv_cols' main loop) bit for bit, and the argmax picks the same row (the largest logit,
the lowest row among equal ones). Each program votes per column into scratch[c] (kernels.lm_head_argmax's
int64 keys), then draws one ticket; the last program reads the KC winners, resets the scratch, accepts
and feeds. `result` may be pinned host memory: the host reads it once the launch is done.

Not here: sampling (speculation is greedy only), the ring of plain steps (the verifier's caller reads
`result`).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, gemv_config, pdl_launch_kwargs
from kernels.lm_head_argmax import NO_KEY
from kernels.rmsnorm_gemv_cols import MAX_COLS, _rmsnorm_rows_dot_cols, check_cols, column_groups
from kernels.tuning import Tuning, for_device


@triton.jit
def _vote(y, rows, row_mask, key_ptr):
    """Fold this program's best (value, row) of y into key_ptr[0] (kernels.lm_head_argmax.argmax_vote's key)."""
    y = tl.where(row_mask, y, float("-inf"))
    best = tl.max(y, axis=0)
    row = tl.min(tl.where(y == best, rows, 2147483647), axis=0)
    bits = best.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    key = (ordered.to(tl.int64) << 32) + (2147483647 - row).to(tl.int64)
    tl.atomic_max(key_ptr, key, sem="relaxed", scope="gpu")


# Contract:
#   x        [KC, K]  fp32 (final hidden states of the KC columns)
#   W        [N, K]   the LM head; norm_w [K] (read when HAS_NORM)
#   logits   [KC, N]  fp32, fully written
#   scratch  [MAX_COLS + 1] int64: per-column best keys (NO_KEY on entry and exit), ticket (0 on entry and exit)
#   draft    [>= KC - 1] int64 (column j+1's input token); klen [1] int64: how many of them are real
#   token [1] int64 written; pos [1] int32 += n + 1; embed [V, K]: row token copied into x_next [K] fp32
#   result   [KC + 1] int64: the KC argmaxes, then n
#   grid     (cdiv(N, BLOCK_N) * G,): program p owns rows [(p//G)*BLOCK_N, ...+BLOCK_N) of the CP columns of
#            group p%G (KC = G * CP columns in all)
@triton.jit
def _lm_head_argmax_cols_kernel(
    x_ptr, w_ptr, norm_w_ptr, logits_ptr, scratch_ptr, draft_ptr, klen_ptr, token_ptr, pos_ptr, embed_ptr,
    x_next_ptr, result_ptr, N, K, eps, n_programs, no_key,
    HAS_NORM: tl.constexpr, USE_PDL: tl.constexpr, KC: tl.constexpr, CP: tl.constexpr, G: tl.constexpr,
    MAXC: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr,
):
    pid = tl.program_id(0)
    grp = pid % G
    rows = (pid // G) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    ys = _rmsnorm_rows_dot_cols(x_ptr + grp * (CP * K), w_ptr, norm_w_ptr, rows, row_mask, K, eps, HAS_NORM, USE_PDL,
                                CP, BLOCK_K)
    for c in tl.static_range(CP):
        tl.store(logits_ptr + (grp * CP + c) * N + rows, ys[c], mask=row_mask)
        _vote(ys[c], rows, row_mask, scratch_ptr + grp * CP + c)
    tl.debug_barrier()
    if tl.atomic_add(scratch_ptr + MAXC, 1, sem="acq_rel", scope="gpu") == n_programs - 1:
        gs = ()
        for c in tl.static_range(KC):
            won = tl.atomic_xchg(scratch_ptr + c, no_key, sem="acquire", scope="gpu")  # reads and resets
            g = (2147483647 - (won - ((won >> 32) << 32))).to(tl.int64)
            tl.store(result_ptr + c, g)
            gs = gs + (g,)
        tl.store(scratch_ptr + MAXC, 0)
        klen = tl.load(klen_ptr)
        n = klen * 0  # drafted tokens accepted (int64)
        going = n == 0  # every drafted token so far agreed
        for c in tl.static_range(KC - 1):
            going = going & (c < klen) & (tl.load(draft_ptr + c) == gs[c])
            n = tl.where(going, n + 1, n)
        token = gs[0]
        for c in tl.static_range(1, KC):
            token = tl.where(n == c, gs[c], token)
        tl.store(result_ptr + KC, n)
        tl.store(token_ptr, token)
        tl.store(pos_ptr, tl.load(pos_ptr) + (n + 1).to(tl.int32))
        h = tl.arange(0, BLOCK_H)
        row = embed_ptr + token * K
        for h0 in range(0, K, BLOCK_H):
            e = tl.load(row + h0 + h, mask=h0 + h < K, other=0.0)
            tl.store(x_next_ptr + h0 + h, e.to(tl.float32), mask=h0 + h < K)


def cols_scratch(device) -> torch.Tensor:
    """The scratch lm_head_argmax_cols needs (reusable by every launch on one stream, never two at once)."""
    s = torch.full((MAX_COLS + 1,), NO_KEY, dtype=torch.int64, device=device)
    s[MAX_COLS] = 0
    return s


def lm_head_argmax_cols(
    x: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, scratch: torch.Tensor, draft: torch.Tensor,
    klen: torch.Tensor, token: torch.Tensor, pos: torch.Tensor, embed: torch.Tensor, x_next: torch.Tensor,
    result: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6, *, pdl: bool = False,
    tuning: Tuning | None = None, group: int | None = None,
) -> torch.Tensor:
    """The KC columns' logits and argmaxes, the accepted draft length n, token = argmax of column n,
    pos += n + 1, x_next = embed[token]; result = (argmaxes, n). Returns result. group: columns per program
    (None: all KC)."""
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, "W must be contiguous [N, K]"
    n, k = w.shape
    kc = check_cols(x, k, "x")
    assert logits.shape == (kc, n) and logits.is_contiguous() and logits.dtype == torch.float32
    check_vec(scratch, MAX_COLS + 1, "scratch", (torch.int64,))
    assert draft.dim() == 1 and draft.numel() >= kc - 1 and draft.dtype == torch.int64 and draft.is_contiguous()
    check_vec(klen, 1, "klen", (torch.int64,))
    check_vec(token, 1, "token", (torch.int64,))
    check_vec(pos, 1, "pos", (torch.int32,))
    check_vec(x_next, k, "x_next")
    assert embed.dim() == 2 and embed.shape[1] == k and embed.is_contiguous() and embed.shape[0] >= n
    check_vec(result, kc + 1, "result", (torch.int64,))
    assert result.device == x.device or result.is_pinned(), "result must be on the device or in pinned host memory"
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    assert n < 2 ** 31
    cfg = gemv_config(n, k, for_device(w.device) if tuning is None else tuning)
    per, groups = column_groups(kc, group)
    grid = triton.cdiv(n, cfg["BLOCK_N"]) * groups
    _lm_head_argmax_cols_kernel[(grid,)](
        x, w, norm_w if norm_w is not None else x, logits, scratch, draft, klen, token, pos, embed, x_next, result,
        n, k, eps, grid, NO_KEY, HAS_NORM=norm_w is not None, USE_PDL=pdl, KC=kc, CP=per, G=groups, MAXC=MAX_COLS,
        BLOCK_H=min(1024, triton.next_power_of_2(k)), **cfg, **pdl_launch_kwargs(pdl, w.device))
    return result


def lm_head_argmax_cols_ref(x, w, draft, klen: int, norm_w=None, eps=1e-6):
    """Plain PyTorch twin: (logits [KC, N] fp32, argmaxes [KC] int64, n). The caller does
    token = argmaxes[n], pos += n + 1, x = embed[token]."""
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    logits = x @ w.float().t()
    g = logits.argmax(-1)
    n = 0
    while n < min(klen, len(g) - 1) and int(draft[n]) == int(g[n]):
        n += 1
    return logits, g, n

