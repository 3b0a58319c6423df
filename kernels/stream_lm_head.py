"""Final RMSNorm + LM head with its weights streamed (kernels.stream_gemv), then per-column argmax, the draft's
acceptance and the next token fed back: the last two launches of a speculating run's steps on the streamed GEMVs,
plain (one column, no draft) and verify (n columns).

    logits[c] = W @ (rmsnorm(x[c]) * norm_w);  g[c] = argmax(logits[c])          for c < n
    a = the number of leading j < klen with draft[j] == g[j];  without a draft a = 0
    token = g[a];  pos += a + 1;  ring[pos % R] = token (if a ring);  x_next = embed[token];  result = (g, a)

Launch 1 is kernels.stream_gemv's rmsnorm_gemv over the columns (up to STREAM_TOKENS a launch: more take several;
mma=True: its tensor-core mode, rmsnorm_gemv_mma, which a speculating run uses), so column c's logits are the bits
of a one-column launch whatever n. Launch 2 (Triton, `_logits_argmax_kernel`)
reads the logits back (n x N floats, just written: L2) and votes per column as kernels.lm_head_mma_cols does
(the largest logit, the lowest row among equal ones, one int64 key per column in scratch), then the last program
to draw a ticket accepts and feeds; its contract and scratch are kernels.lm_head_mma_cols' (head_cols_args,
mma_scratch). `result` and `ring` may be pinned host memory.

Not here: sampling (speculation is greedy only).
"""

import torch
import triton
import triton.language as tl

from kernels._util import pdl_launch_kwargs
from kernels.gemv_mma_cols import NC
from kernels.lm_head_argmax import NO_KEY
from kernels.lm_head_mma_cols import head_cols_args, lm_head_argmax_mma_ref, vote_accept_feed
from kernels.stream_gemv import stream_rmsnorm_gemv

STREAM_TOKENS = 8  # columns a streamed launch takes at most (kernels.stream_gemv's staged activations)
BLOCK = 8192  # logits a program of launch 2 reads, over its columns


# Contract:
#   logits [n, N] fp32;  scratch [NC + 1] int64: NO_KEY x NC, 0 on entry and exit (the ticket at TICKET = NC)
#   draft [>= n - 1] int64, klen [1] int64 (HAS_DRAFT);  token [1] int64;  pos [1] int32;  embed [V, K]
#   x_next [K] fp32;  result [n + 1] int64 (HAS_RESULT);  ring [R] int64 (HAS_RING)
#   grid (cdiv(N, BLOCK_N),)
@triton.jit(do_not_specialize=["n_cols"])
def _logits_argmax_kernel(
    logits_ptr, scratch_ptr, draft_ptr, klen_ptr, token_ptr, pos_ptr, embed_ptr, x_next_ptr, result_ptr, ring_ptr,
    ring_size, n_cols, N, K, n_programs, no_key,
    HAS_DRAFT: tl.constexpr, HAS_RESULT: tl.constexpr, HAS_RING: tl.constexpr, USE_PDL: tl.constexpr,
    NCOL: tl.constexpr, TICKET: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cs = tl.arange(0, NCOL)
    col_mask = cs < n_cols
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the logits are the previous launch's
        tl.extra.cuda.gdc_launch_dependents()
    y = tl.load(logits_ptr + cs[None, :] * N + rows[:, None], mask=row_mask[:, None] & col_mask[None, :],
                other=float("-inf"))
    vote_accept_feed(y, rows, row_mask, cs, col_mask, scratch_ptr, draft_ptr, klen_ptr, token_ptr, pos_ptr, embed_ptr,
                     x_next_ptr, result_ptr, ring_ptr, ring_size, n_cols, K, n_programs, no_key, HAS_DRAFT,
                     HAS_RESULT, HAS_RING, TICKET, BLOCK_H)


def stream_lm_head_argmax(
    x: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, token: torch.Tensor, pos: torch.Tensor,
    embed: torch.Tensor, scratch: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    ring: torch.Tensor | None = None, *, draft: torch.Tensor | None = None, klen: torch.Tensor | None = None,
    x_next: torch.Tensor | None = None, result: torch.Tensor | None = None, pdl: bool = False, **launch,
) -> torch.Tensor:
    """kernels.lm_head_argmax_mma's contract and scratch (mma_scratch), the logits streamed: the n columns' logits
    (x [n, K] or one [K]) and argmaxes; with a draft, the accepted length a; then token = argmax of column a,
    pos += a + 1, ring[pos % R] = token, x_next (default: x, one column only) = embed[token]; result = (argmaxes,
    a). launch: kernels.stream_gemv.stream_op's options for the logits (budget, carveout, ...). Returns token."""
    n, k, xs, lg, x_next = head_cols_args(x, w, logits, token, pos, embed, scratch, norm_w, ring, draft, klen,
                                          x_next, result)
    cols = xs.shape[0]
    assert 1 <= cols <= NC, f"at most {NC} columns"
    for i in range(0, cols, STREAM_TOKENS):
        xi, li = (xs[0], lg[0]) if cols == 1 else (xs[i:i + STREAM_TOKENS], lg[i:i + STREAM_TOKENS])
        stream_rmsnorm_gemv(xi, w, li, norm_w=norm_w, eps=eps, pdl=pdl, **launch)
    return logits_argmax(lg, token, pos, embed, scratch, ring, draft=draft, klen=klen, x_next=x_next, result=result,
                         pdl=pdl)


def logits_argmax(logits: torch.Tensor, token: torch.Tensor, pos: torch.Tensor, embed: torch.Tensor,
                  scratch: torch.Tensor, ring: torch.Tensor | None = None, *, draft: torch.Tensor | None = None,
                  klen: torch.Tensor | None = None, x_next: torch.Tensor, result: torch.Tensor | None = None,
                  pdl: bool = False) -> torch.Tensor:
    """Launch 2 alone, over logits [n, N] already written (stream_lm_head_argmax checked its arguments; the CPU
    tests call it directly). Returns token."""
    cols, n = logits.shape
    k = x_next.numel()
    ncol = max(2, triton.next_power_of_2(cols))  # the columns' block (padded; masked)
    block_n = BLOCK // ncol
    grid = triton.cdiv(n, block_n)
    _logits_argmax_kernel[(grid,)](
        logits, scratch, draft if draft is not None else token, klen if klen is not None else token, token, pos, embed,
        x_next, result if result is not None else token, ring if ring is not None else token,
        ring.numel() if ring is not None else 1, cols, n, k, grid, NO_KEY, HAS_DRAFT=draft is not None,
        HAS_RESULT=result is not None, HAS_RING=ring is not None, USE_PDL=pdl, NCOL=ncol, TICKET=NC, BLOCK_N=block_n,
        BLOCK_H=min(1024, triton.next_power_of_2(k)), num_warps=8, **pdl_launch_kwargs(pdl, logits.device))
    return token


def stream_lm_head_argmax_ref(x, w, draft=None, klen: int = 0, norm_w=None, eps=1e-6):
    """Plain PyTorch twin: (logits [n, N] fp32, argmaxes [n] int64, a) (kernels.lm_head_mma_cols')."""
    return lm_head_argmax_mma_ref(x, w, draft, klen, norm_w, eps)
