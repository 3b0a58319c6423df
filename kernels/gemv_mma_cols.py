"""The decode GEMVs for 1..16 activation columns on tensor cores: speculative decoding's verify step (k
columns) AND the plain steps of a speculating run (one column), which must compute the same bits.

    rmsnorm_gemv_mma          out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias    (QKV; final norm + LM head logits)
    gemv_residual_mma         x[c] += W @ a[c]                                (o_proj, down_proj)
    rmsnorm_gate_up_silu_mma  out[c] = silu(W_g @ n_c) * (W_u @ n_c), n_c = rmsnorm(x[c]) * norm_w

A program owns BLOCK_N rows of W and all columns. Per K tile: the weight tile [BLOCK_N, BLOCK_K] (bf16, exact)
and the columns' activation tile [BLOCK_K, 16] in fp32 (columns >= n are zeros) split in three bf16 parts,
hi + mid + lo = x to ~24 bits, then three tl.dot (MMA, fp32 accumulation) into one [BLOCK_N, 16] accumulator.
Each output column of an MMA is computed from its own activation column only, in an order fixed by the compiled
kernel; n is a runtime argument that Triton does not specialize on, so every n runs the same compiled kernel:
column c gives the same bits whether it comes alone (a plain step) or with others (a verify step).
The RMSNorm's scale is applied per column after the dot (sum of squares over the same tiles).
fp16 / fp32 weights: one fp32 "ieee" dot instead (CUDA cores; the CPU tests' float32 models), same contract.

Split-K (config SPLIT_K = S > 1, for weights with few row blocks): S programs per row block take a K range each,
store their partial [BLOCK_N, 16] sums (and sums of squares) in a workspace, and the last of them (a ticket per
row block) adds the S partials in the order 0..S-1 and runs the epilogue: deterministic, so still the same bits
for any n. Workspaces and tickets are cached per device and size (allocated at a launcher's first call, which
comes before any graph capture; tickets are 0 again after every launch).

Launch configs: `mma_config` (a rule of the weight's shape, never of n). Not here: the LM head's argmax and the
draft's acceptance (kernels.lm_head_mma_cols), attention (kernels.decode_attention_cols).
"""

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, interpreting, pdl_launch_kwargs, split_scratch

NC = 16  # the MMA's column width (tl.dot needs >= 16): at most 16 columns per launch, padded with zeros


def mma_config(rows: int, k: int) -> dict:
    """{BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages} for a W of `rows` x k (gate/up: rows = I, each program
    takes BLOCK_N gate and BLOCK_N up rows). A function of the shape only: a plain step and a verify step of the
    same weight must run the same config. 64 rows per program (each program splits its activation tile again:
    fewer, wider programs do less of it per weight byte; H100, 1.5B: gate/up 165 us with 16 rows, 44 us with
    64 rows and split-K 4, 45 us with split-K 8), and split-K up to 8 for about 512 programs."""
    if interpreting():
        return {"BLOCK_N": 16, "BLOCK_K": 32, "SPLIT_K": 1, "num_warps": 4, "num_stages": 1}
    if rows > 65536:  # the LM head: rows enough
        return {"BLOCK_N": 64, "BLOCK_K": min(256, triton.next_power_of_2(k)), "SPLIT_K": 1, "num_warps": 4,
                "num_stages": 3}
    blocks = triton.cdiv(rows, 64)
    split = min(8, triton.next_power_of_2(triton.cdiv(512, blocks)), max(1, k // 256))
    return {"BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": split, "num_warps": 4, "num_stages": 4}


def split_args(device, row_blocks: int, cfg: dict, accs: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(partials, tickets) for cfg's SPLIT_K and `accs` accumulators per program; (None, None) without split-K."""
    s = cfg["SPLIT_K"]
    if s == 1:
        return None, None
    slot = (accs * cfg["BLOCK_N"] + 1) * NC
    return (split_scratch(device, "partials", row_blocks * s * slot, torch.float32),
            split_scratch(device, "tickets", row_blocks, torch.int32))


def k_chunk(k: int, cfg: dict) -> int:
    """The K range of one split program: K / SPLIT_K rounded up to whole BLOCK_K tiles."""
    return triton.cdiv(triton.cdiv(k, cfg["SPLIT_K"]), cfg["BLOCK_K"]) * cfg["BLOCK_K"]


@triton.jit
def x_tile(x_cols, norm_w_ptr, k, col_mask, K, HAS_NORM: tl.constexpr):
    """The activation tile [BLOCK_K, NC] fp32 at K offsets k (times norm_w when HAS_NORM) and, when HAS_NORM, its
    columns' sums of squares [NC] (before norm_w; else zeros)."""
    x = tl.load(x_cols + k[:, None], mask=col_mask[None, :] & (k[:, None] < K), other=0.0).to(tl.float32)
    if HAS_NORM:
        sq = tl.sum(x * x, axis=0)
        x = x * tl.load(norm_w_ptr + k, mask=k < K, other=0.0).to(tl.float32)[:, None]
    else:
        sq = tl.zeros((x.shape[1],), tl.float32)
    return x, sq


@triton.jit
def dot_split(w, x, acc, SPLIT: tl.constexpr):
    """acc + w @ x for w [BN, BK] and x [BK, NC] fp32: three bf16 MMAs over x = hi + mid + lo (SPLIT: bf16 w),
    else one fp32 dot."""
    if SPLIT:
        hi = x.to(tl.bfloat16)
        r = x - hi.to(tl.float32)
        mid = r.to(tl.bfloat16)
        lo = (r - mid.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(w, hi, acc)
        acc = tl.dot(w, mid, acc)
        acc = tl.dot(w, lo, acc)
    else:
        acc = tl.dot(w.to(tl.float32), x, acc, input_precision="ieee")
    return acc


@triton.jit
def mma_rows(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, n_cols, K, k_lo, k_hi,
             HAS_NORM: tl.constexpr, SPLIT: tl.constexpr, NCOL: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr):
    """(W[rows, k_lo:k_hi] @ (x[c] * norm_w)[k_lo:k_hi] for the n_cols columns as a [BLOCK_N, NCOL] fp32 tile
    (zeros past n_cols), the columns' sums of squares over k_lo:k_hi [NCOL]). k_lo and k_hi - k_lo are whole
    BLOCK_K tiles (or k_hi = K): the masks need only K, which keeps the loads vectorized and pipelined."""
    ks = tl.arange(0, BLOCK_K)
    cs = tl.arange(0, NCOL)
    col_mask = cs < n_cols
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K
    x_cols = x_ptr + cs[None, :] * K
    acc = tl.zeros((BLOCK_N, NCOL), tl.float32)
    ssq = tl.zeros((NCOL,), tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        k = k0 + ks
        w = tl.load(w_rows + k[None, :], mask=row_mask[:, None] & (k[None, :] < K), other=0.0)
        x, sq = x_tile(x_cols, norm_w_ptr, k, col_mask, K, HAS_NORM)
        ssq += sq
        acc = dot_split(w, x, acc, SPLIT)
    return acc, ssq


@triton.jit
def _tile_ptrs(ptr, ROWS: tl.constexpr, NCOL: tl.constexpr):
    return ptr + tl.arange(0, ROWS)[:, None] * NCOL + tl.arange(0, NCOL)[None, :]


@triton.jit
def split_reduce(part_ptr, ticket_ptr, rb, s, acc, acc2, ssq, S: tl.constexpr, TWO: tl.constexpr,
                 NCOL: tl.constexpr, BLOCK_N: tl.constexpr):
    """Split-K: store this program's partials (acc, acc2 if TWO, ssq) in slot (rb, s), draw the row block's
    ticket; returns (last, sums of the S partials in order 0..S-1) — meaningful for the program that drew the
    last ticket (which also resets it)."""
    SLOT: tl.constexpr = ((1 + TWO) * BLOCK_N + 1) * NCOL
    base = part_ptr + rb * (S * SLOT)
    mine = base + s * SLOT
    tl.store(_tile_ptrs(mine, BLOCK_N, NCOL), acc)
    if TWO:
        tl.store(_tile_ptrs(mine + BLOCK_N * NCOL, BLOCK_N, NCOL), acc2)
    tl.store(mine + (1 + TWO) * BLOCK_N * NCOL + tl.arange(0, NCOL), ssq)
    tl.debug_barrier()
    last = tl.atomic_add(ticket_ptr + rb, 1, sem="acq_rel", scope="gpu") == S - 1
    acc = tl.zeros((BLOCK_N, NCOL), tl.float32)
    acc2 = tl.zeros((BLOCK_N, NCOL), tl.float32)
    ssq = tl.zeros((NCOL,), tl.float32)
    if last:
        for j in tl.static_range(S):
            slot = base + j * SLOT
            acc += tl.load(_tile_ptrs(slot, BLOCK_N, NCOL), cache_modifier=".cg")
            if TWO:
                acc2 += tl.load(_tile_ptrs(slot + BLOCK_N * NCOL, BLOCK_N, NCOL), cache_modifier=".cg")
            ssq += tl.load(slot + (1 + TWO) * BLOCK_N * NCOL + tl.arange(0, NCOL), cache_modifier=".cg")
        tl.store(ticket_ptr + rb, 0)
    return last, acc, acc2, ssq


@triton.jit
def _rmsnorm_epilogue(acc, ssq, rows, row_mask, cs, n_cols, bias_ptr, out_ptr, N, K, eps,
                      HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr):
    if HAS_NORM:
        acc = acc * tl.rsqrt(ssq / K + eps)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rows, mask=row_mask, other=0.0).to(tl.float32)[:, None]
    tl.store(out_ptr + cs[None, :] * N + rows[:, None], acc, mask=row_mask[:, None] & (cs < n_cols)[None, :])


# Contract (all three kernels):
#   x / a  [n, K] fp32 contiguous (column c = row c), 1 <= n <= NC;  W [N, K] (gate/up: [2N, K]) row-major
#   out    [n, N] fp32 (gemv_residual: x [n, N] updated in place)
#   grid   (cdiv(N, BLOCK_N) * SPLIT_K,): program p owns row block p // SPLIT_K, K range (p % SPLIT_K) * KS + [0, KS)
#   part   [row blocks * SPLIT_K * slot] fp32, ticket [row blocks] int32 (0 on entry and exit): SPLIT_K > 1 only
@triton.jit(do_not_specialize=["n_cols"])
def _rmsnorm_gemv_mma_kernel(
    x_ptr, w_ptr, norm_w_ptr, bias_ptr, out_ptr, part_ptr, ticket_ptr, n_cols, N, K, KS, eps,
    HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr, USE_PDL: tl.constexpr,
    NCOL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):
    pid = tl.program_id(0)
    rb = pid // SPLIT_K
    s = pid % SPLIT_K
    rows = rb * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cs = tl.arange(0, NCOL)
    k_lo = s * KS
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    acc, ssq = mma_rows(x_ptr, w_ptr, norm_w_ptr, rows, row_mask, n_cols, K, k_lo, tl.minimum(k_lo + KS, K),
                        HAS_NORM, SPLIT, NCOL, BLOCK_N, BLOCK_K)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if SPLIT_K > 1:
        last, acc, _, ssq = split_reduce(part_ptr, ticket_ptr, rb, s, acc, acc, ssq, SPLIT_K, False, NCOL, BLOCK_N)
        if last:
            _rmsnorm_epilogue(acc, ssq, rows, row_mask, cs, n_cols, bias_ptr, out_ptr, N, K, eps, HAS_NORM, HAS_BIAS)
    else:
        _rmsnorm_epilogue(acc, ssq, rows, row_mask, cs, n_cols, bias_ptr, out_ptr, N, K, eps, HAS_NORM, HAS_BIAS)


@triton.jit
def _residual_epilogue(acc, rows, row_mask, cs, n_cols, x_ptr, N):
    ptrs = x_ptr + cs[None, :] * N + rows[:, None]
    m = row_mask[:, None] & (cs < n_cols)[None, :]
    tl.store(ptrs, acc + tl.load(ptrs, mask=m, other=0.0), mask=m)


@triton.jit(do_not_specialize=["n_cols"])
def _gemv_residual_mma_kernel(
    a_ptr, w_ptr, x_ptr, part_ptr, ticket_ptr, n_cols, N, K, KS,
    SPLIT: tl.constexpr, USE_PDL: tl.constexpr, NCOL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    pid = tl.program_id(0)
    rb = pid // SPLIT_K
    s = pid % SPLIT_K
    rows = rb * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    cs = tl.arange(0, NCOL)
    k_lo = s * KS
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    acc, ssq = mma_rows(a_ptr, w_ptr, a_ptr, rows, row_mask, n_cols, K, k_lo, tl.minimum(k_lo + KS, K), False,
                        SPLIT, NCOL, BLOCK_N, BLOCK_K)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if SPLIT_K > 1:
        last, acc, _, _ = split_reduce(part_ptr, ticket_ptr, rb, s, acc, acc, ssq, SPLIT_K, False, NCOL, BLOCK_N)
        if last:
            _residual_epilogue(acc, rows, row_mask, cs, n_cols, x_ptr, N)
    else:
        _residual_epilogue(acc, rows, row_mask, cs, n_cols, x_ptr, N)


@triton.jit
def _gate_up_epilogue(acc_g, acc_u, ssq, rows, row_mask, cs, n_cols, out_ptr, N, K, eps):
    rstd = tl.rsqrt(ssq / K + eps)[None, :]
    g = acc_g * rstd
    u = acc_u * rstd
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + cs[None, :] * N + rows[:, None], y, mask=row_mask[:, None] & (cs < n_cols)[None, :])


@triton.jit(do_not_specialize=["n_cols"])
def _gate_up_silu_mma_kernel(
    x_ptr, norm_w_ptr, w_ptr, out_ptr, part_ptr, ticket_ptr, n_cols, N, K, KS, eps,
    SPLIT: tl.constexpr, USE_PDL: tl.constexpr, NCOL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    pid = tl.program_id(0)
    rb = pid // SPLIT_K
    s = pid % SPLIT_K
    rows = rb * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < N
    ks = tl.arange(0, BLOCK_K)
    cs = tl.arange(0, NCOL)
    col_mask = cs < n_cols
    g_rows = w_ptr + rows.to(tl.int64)[:, None] * K
    u_rows = g_rows + N * K
    x_cols = x_ptr + cs[None, :] * K
    acc_g = tl.zeros((BLOCK_N, NCOL), tl.float32)
    acc_u = tl.zeros((BLOCK_N, NCOL), tl.float32)
    ssq = tl.zeros((NCOL,), tl.float32)
    k_lo = s * KS
    k_hi = tl.minimum(k_lo + KS, K)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    for k0 in range(k_lo, k_hi, BLOCK_K):
        k = k0 + ks
        m = row_mask[:, None] & (k[None, :] < K)  # (k_hi: see mma_rows)
        wg = tl.load(g_rows + k[None, :], mask=m, other=0.0)
        wu = tl.load(u_rows + k[None, :], mask=m, other=0.0)
        x, sq = x_tile(x_cols, norm_w_ptr, k, col_mask, K, True)
        ssq += sq
        if SPLIT:  # split once, for both weights (dot_split's parts)
            hi = x.to(tl.bfloat16)
            r = x - hi.to(tl.float32)
            mid = r.to(tl.bfloat16)
            lo = (r - mid.to(tl.float32)).to(tl.bfloat16)
            acc_g = tl.dot(wg, hi, acc_g)
            acc_g = tl.dot(wg, mid, acc_g)
            acc_g = tl.dot(wg, lo, acc_g)
            acc_u = tl.dot(wu, hi, acc_u)
            acc_u = tl.dot(wu, mid, acc_u)
            acc_u = tl.dot(wu, lo, acc_u)
        else:
            acc_g = tl.dot(wg.to(tl.float32), x, acc_g, input_precision="ieee")
            acc_u = tl.dot(wu.to(tl.float32), x, acc_u, input_precision="ieee")
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    if SPLIT_K > 1:
        last, acc_g, acc_u, ssq = split_reduce(part_ptr, ticket_ptr, rb, s, acc_g, acc_u, ssq, SPLIT_K, True, NCOL,
                                               BLOCK_N)
        if last:
            _gate_up_epilogue(acc_g, acc_u, ssq, rows, row_mask, cs, n_cols, out_ptr, N, K, eps)
    else:
        _gate_up_epilogue(acc_g, acc_u, ssq, rows, row_mask, cs, n_cols, out_ptr, N, K, eps)


def as_cols(t: torch.Tensor, k: int, name: str) -> torch.Tensor:
    """t as [n, k] fp32 contiguous: a [k] vector is one column; 1 <= n <= NC."""
    t2 = t.view(1, -1) if t.dim() == 1 else t
    assert t2.dim() == 2 and t2.shape[1] == k and t2.is_contiguous() and t2.dtype == torch.float32, \
        f"{name}: expected a contiguous float32 [{k}] or [n, {k}], got {tuple(t.shape)} {t.dtype}"
    assert 1 <= t2.shape[0] <= NC, f"{name}: {t2.shape[0]} columns, must be 1..{NC}"
    return t2


def check_weight(w: torch.Tensor, name: str = "W") -> tuple[int, int]:
    assert w.dim() == 2 and w.is_contiguous() and w.dtype in WEIGHT_DTYPES, f"{name} must be contiguous [N, K]"
    return w.shape


def rmsnorm_cols_args(x, w, out, norm_w, bias):
    """The checks of a column launcher of out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias -> (n, k, xs, outs), x and
    out as [columns, K] / [columns, N] (also kernels.cols_gemv's)."""
    n, k = check_weight(w)
    xs = as_cols(x, k, "x")
    outs = as_cols(out, n, "out")
    assert outs.shape[0] == xs.shape[0], "x and out must have the same number of columns"
    if norm_w is not None:
        check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    if bias is not None:
        check_vec(bias, n, "bias", WEIGHT_DTYPES)
    assert x.device == w.device == out.device
    return n, k, xs, outs


def residual_cols_args(a, w, x):
    """The checks of a column launcher of x[c] += W @ a[c] -> (n, k, a_cols, x_cols)."""
    n, k = check_weight(w)
    as_ = as_cols(a, k, "a")
    xs = as_cols(x, n, "x")
    assert as_.shape[0] == xs.shape[0], "a and x must have the same number of columns"
    assert a.device == w.device == x.device and a.data_ptr() != x.data_ptr(), "a and x: different buffers"
    return n, k, as_, xs


def gate_up_cols_args(x, norm_w, w_gate_up, out):
    """The checks of a column launcher of out[c] = silu(W_g @ n_c) * (W_u @ n_c) -> (i, k, xs, outs)."""
    two_i, k = check_weight(w_gate_up, "W_gate_up")
    assert two_i % 2 == 0, "gate_up must have an even number of rows"
    i = two_i // 2
    xs = as_cols(x, k, "x")
    outs = as_cols(out, i, "out")
    assert outs.shape[0] == xs.shape[0], "x and out must have the same number of columns"
    check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    assert x.device == w_gate_up.device == out.device
    return i, k, xs, outs


def rmsnorm_gemv_mma(
    x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    bias: torch.Tensor | None = None, *, pdl: bool = False, config: dict | None = None,
) -> torch.Tensor:
    """out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias for the n columns of x ([n, K] or one [K]); out [n, N]
    (or [N]). config: a launch config instead of mma_config's (the lab's sweeps). Returns out."""
    n, k, xs, outs = rmsnorm_cols_args(x, w, out, norm_w, bias)
    cfg = dict(mma_config(n, k), **(config or {}))
    blocks = triton.cdiv(n, cfg["BLOCK_N"])
    part, tickets = split_args(w.device, blocks, cfg, 1)
    _rmsnorm_gemv_mma_kernel[(blocks * cfg["SPLIT_K"],)](
        xs, w, norm_w if norm_w is not None else xs, bias if bias is not None else outs, outs,
        part if part is not None else outs, tickets if tickets is not None else outs, xs.shape[0], n, k,
        k_chunk(k, cfg), eps, HAS_NORM=norm_w is not None, HAS_BIAS=bias is not None,
        SPLIT=w.dtype == torch.bfloat16, USE_PDL=pdl, NCOL=NC, **cfg, **pdl_launch_kwargs(pdl, w.device))
    return out


def gemv_residual_mma(a: torch.Tensor, w: torch.Tensor, x: torch.Tensor, *, pdl: bool = False,
                      config: dict | None = None) -> torch.Tensor:
    """x[c] += W @ a[c] for the n columns of a ([n, K] or [K]) and x ([n, N] or [N]), in place; returns x."""
    n, k, as_, xs = residual_cols_args(a, w, x)
    cfg = dict(mma_config(n, k), **(config or {}))
    blocks = triton.cdiv(n, cfg["BLOCK_N"])
    part, tickets = split_args(w.device, blocks, cfg, 1)
    _gemv_residual_mma_kernel[(blocks * cfg["SPLIT_K"],)](
        as_, w, xs, part if part is not None else xs, tickets if tickets is not None else xs, xs.shape[0], n, k,
        k_chunk(k, cfg), SPLIT=w.dtype == torch.bfloat16, USE_PDL=pdl, NCOL=NC, **cfg,
        **pdl_launch_kwargs(pdl, w.device))
    return x


def rmsnorm_gate_up_silu_mma(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, w_gate_up: torch.Tensor, out: torch.Tensor, *,
    pdl: bool = False, config: dict | None = None,
) -> torch.Tensor:
    """out[c] = silu(W[0:I] @ n_c) * (W[I:2I] @ n_c), n_c = rmsnorm(x[c]) * norm_w, for the n columns of
    x ([n, K] or [K]); out [n, I] (or [I]). Returns out."""
    i, k, xs, outs = gate_up_cols_args(x, norm_w, w_gate_up, out)
    cfg = dict(mma_config(i, k), **(config or {}))
    blocks = triton.cdiv(i, cfg["BLOCK_N"])
    part, tickets = split_args(w_gate_up.device, blocks, cfg, 2)
    _gate_up_silu_mma_kernel[(blocks * cfg["SPLIT_K"],)](
        xs, norm_w, w_gate_up, outs, part if part is not None else outs, tickets if tickets is not None else outs,
        xs.shape[0], i, k, k_chunk(k, cfg), eps, SPLIT=w_gate_up.dtype == torch.bfloat16, USE_PDL=pdl, NCOL=NC,
        **cfg, **pdl_launch_kwargs(pdl, w_gate_up.device))
    return out


# -- PyTorch twins (float32) ----------------------------------------------------------------------------
def rmsnorm_gemv_mma_ref(x, w, norm_w=None, eps=1e-6, bias=None) -> torch.Tensor:
    x = x.float()
    if norm_w is not None:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    y = x @ w.float().t()
    return y + bias.float() if bias is not None else y


def gemv_residual_mma_ref(a, w, x) -> torch.Tensor:
    """A new tensor; x is not modified."""
    return x.float() + a.float() @ w.float().t()


def rmsnorm_gate_up_silu_mma_ref(x, norm_w, eps, w_gate_up) -> torch.Tensor:
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    i = w_gate_up.shape[0] // 2
    gu = n @ w_gate_up.float().t()
    return torch.nn.functional.silu(gu[..., :i]) * gu[..., i:]
