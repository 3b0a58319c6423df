"""Decode attention for one new token: q/k RMSNorm (Qwen3) + RoPE + KV-cache append + split-KV
GQA flash-decoding + the combine, in ONE launch with a fixed grid (CUDA-graph safe; the work
follows the live context because chunk bounds are computed on the device from `pos`).

`_attn_kernel`, grid (Hkv, S): program (kvh, s) takes all G = Hq/Hkv query heads of kv head kvh
(K/V are read once per kv head) over cache rows [s*chunk, min((s+1)*chunk, pos)),
chunk = max(roundup(cdiv(pos+1, S), CHUNK_ALIGN), MIN_CHUNK), in BLOCK_T tiles with an online
softmax; the new token (row pos) is merged from registers after the loop by the program whose
chunk holds pos, which also appends its k/v row to the cache. Programs past the context
(s >= n_active = cdiv(pos+1, chunk)) exit. Each active program stores its (max, sum, acc)
partial, then the combine runs in the same launch, "last to finish combines":
  1. active splits form groups of GS; each program draws a ticket from its group's counter
     (atomic, acq_rel); the one that draws the last ticket merges the group's <= GS partials
     and, if there is only one group (short context), writes `out` for the G heads;
  2. otherwise it draws a ticket from the kv head's counter; the last group merges the group
     partials and writes `out`.
Each last program sets its counter back to 0, so the next launch (next layer, next CUDA-graph
replay) starts from zero. Two levels keep the serial tail short at long context (one SM merging
all G * S * D floats alone would take longer than a second launch).

Dots: for 16-bit caches K/V tiles feed the tensor cores as they are; q (and p) are split into a
16-bit high part and a 16-bit remainder, two dots each, so the products are as exact as fp32
inputs (~16 mantissa bits) at the speed of 16-bit MMAs. fp32 caches use exact fp32 dots.

Not here: prefill attention (many query tokens), paged caches, sliding windows, ALiBi.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, interpreting, pdl_launch_kwargs

LOG2E = 1.4426950408889634
# Columns of a verify step's launch at most: the size of the window block every launch compiles, the one-token
# step's too (its column 0 stores no window row), so the plain step and a verify step run one compiled kernel and a
# column's bits are the one-token step's by construction (a block sized per launch changed the compiled tile loop's
# bits at 16 columns on an H200: tests/kernels/test_decode_attention_cols.py)
MAX_COLUMNS = 16


@triton.jit
def _halve(s, R: tl.constexpr, N: tl.constexpr):
    """[R, N] -> [R, N/2]: each pair (2i, 2i+1) summed (one addition: the same bits in any layout)."""
    return tl.sum(tl.reshape(s, (R, N // 2, 2)), axis=2)


@triton.jit
def _row_sums(s, R: tl.constexpr, D: tl.constexpr):
    """Row sums of s [R, D] (D a power of two, 32 to 256) as a fixed pairwise tree: the same bits whatever
    layout the kernel around it gives s (tl.sum's order follows the layout: the verify step's K rows, computed
    in kernels.decode_attention_cols's small kernel, differed from the one-token kernel's on an H200)."""
    tl.static_assert(D >= 32 and D <= 256)
    if D >= 256:
        s = _halve(s, R, 256)
    if D >= 128:
        s = _halve(s, R, 128)
    if D >= 64:
        s = _halve(s, R, 64)
    s = _halve(s, R, 32)
    s = _halve(s, R, 16)
    s = _halve(s, R, 8)
    s = _halve(s, R, 4)
    s = _halve(s, R, 2)
    return tl.reshape(s, (R,))


@triton.jit
def _norm_rope(base_ptr, rows, row_mask, d, norm_w_ptr, cos, sin, eps,
               D: tl.constexpr, HALF: tl.constexpr, HAS_NORM: tl.constexpr):
    """Heads at base_ptr + rows*D: per-head RMSNorm (optional) then rotate_half RoPE. -> [R, D] fp32. cos, sin:
    [1, D] (every row at one position) or [R, D].

    y[i] = x[i]*cos[i] - x[i+HALF]*sin[i],  y[i+HALF] = x[i+HALF]*cos[i] + x[i]*sin[i]
    implemented as y = x*cos[d%HALF] + sign(d) * x[(d+HALF)%D] * sin[d%HALF], one explicit fma, and the
    norm's sum of squares as a fixed tree: the same bits in every kernel that calls it.
    """
    rot = (d + HALF) % D
    m = row_mask[:, None]
    x = tl.load(base_ptr + rows[:, None] * D + d[None, :], mask=m, other=0.0).to(tl.float32)  # [R, D]
    xr = tl.load(base_ptr + rows[:, None] * D + rot[None, :], mask=m, other=0.0).to(tl.float32)
    if HAS_NORM:
        rstd = tl.rsqrt(_row_sums(x * x, x.shape[0], D) / D + eps)  # [R]
        x = x * rstd[:, None] * tl.load(norm_w_ptr + d).to(tl.float32)[None, :]
        xr = xr * rstd[:, None] * tl.load(norm_w_ptr + rot).to(tl.float32)[None, :]
    sign = tl.where(d < HALF, -1.0, 1.0)
    return tl.fma(x, cos, sign[None, :] * sin * xr)


@triton.jit
def _merge(m_ptr, l_ptr, acc_ptr, heads, h_mask, stride, n, G2: tl.constexpr, SB: tl.constexpr, D: tl.constexpr):
    """Merge partials j < n of each head: m/l at [heads*stride + j], acc at [(heads*stride + j)*D + d].

    -> (m [G2], l [G2], acc [G2, D]); (-inf, 0, 0) for n == 0. Loads bypass L1 (.cg): the partials
    were written by other SMs in this launch.
    """
    j = tl.arange(0, SB)
    d = tl.arange(0, D)
    m_run = tl.full([G2], float("-inf"), tl.float32)
    l_run = tl.zeros([G2], tl.float32)
    acc_run = tl.zeros([G2, D], tl.float32)
    for j0 in range(0, n, SB):
        jj = j0 + j
        msk = h_mask[:, None] & (jj < n)[None, :]  # [G2, SB]
        idx = heads[:, None] * stride + jj[None, :]
        m = tl.load(m_ptr + idx, mask=msk, other=float("-inf"), cache_modifier=".cg")
        l = tl.load(l_ptr + idx, mask=msk, other=0.0, cache_modifier=".cg")
        acc = tl.load(acc_ptr + idx[:, :, None] * D + d[None, None, :], mask=msk[:, :, None], other=0.0,
                      cache_modifier=".cg")  # [G2, SB, D]
        m_new = tl.maximum(m_run, tl.max(m, axis=1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # all empty so far: keep weights 0, not NaN
        alpha = tl.exp2(m_run - m_ref)
        w = tl.exp2(m - m_ref[:, None])  # [G2, SB]
        l_run = l_run * alpha + tl.sum(w * l, axis=1)
        acc_run = acc_run * alpha[:, None] + tl.sum(w[:, :, None] * acc, axis=1)
        m_run = m_new
    return m_run, l_run, acc_run


# Contract:
#   qkv      [(HQ + 2*HKV) * D] fp32: q heads, k heads, v heads (projection output + bias, pre-norm/RoPE)
#   pos      [1] int32 on device: the new token's position; cache rows 0..pos-1 are valid
#   k_cache, v_cache [HKV, Tmax, D] contiguous, bf16/fp16/fp32; row pos is written here
#   cos, sin [Tmax, D/2] fp32
#   q_norm, k_norm [D] (read only when HAS_QK_NORM)
#   m_ws, l_ws [HQ, S] fp32; acc_ws [HQ, S, D] fp32 (log2-domain running max, sum, unnormalised acc)
#   m2_ws, l2_ws [HQ, NG] fp32; acc2_ws [HQ, NG, D] fp32: the same per group of GS splits
#   cnt [>= HKV, NG + 1] int32, all 0 on entry and on exit: ticket counters (NG groups + final)
#   out [HQ * D] fp32
#   WINDOW: MAX_COLUMNS (>= C): column c's programs first store the rows pos-c..pos-1 of their split from those
#   columns' qkv (the code that appends row pos: the same bits; columns storing a row store the same)
#   grid (HKV, S, C): axis 2 picks a column c (kernels.decode_attention_cols): the token at pos + c, with its
#   qkv, out, workspace and counters at column c of [C, ...] buffers; c = 0 is the one-token decode step
#   SPLIT_PROGRAMS: 0, or the size of grid axis 1 (< S) when its programs take the splits in turn
@triton.jit
def _attn_kernel(
    qkv_ptr, pos_ptr, k_cache_ptr, v_cache_ptr, cos_ptr, sin_ptr, q_norm_ptr, k_norm_ptr,
    m_ws_ptr, l_ws_ptr, acc_ws_ptr, m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, cnt_ptr, out_ptr,
    T_MAX, S, NG, qk_scale, eps,
    HQ: tl.constexpr, HKV: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, G2: tl.constexpr,
    D: tl.constexpr, BLOCK_T: tl.constexpr, CHUNK_ALIGN: tl.constexpr, MIN_CHUNK: tl.constexpr, GS: tl.constexpr,
    HAS_QK_NORM: tl.constexpr, SPLIT_DOTS: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr,
    SPLIT_PROGRAMS: tl.constexpr, WINDOW: tl.constexpr,
):
    kvh = tl.program_id(0)
    col = tl.program_id(2)  # 0 but in a verify step: the same code for every column
    qkv_ptr += col * ((HQ + 2 * HKV) * D)
    out_ptr += col * (HQ * D)
    m_ws_ptr += col * (HQ * S)
    l_ws_ptr += col * (HQ * S)
    acc_ws_ptr += col * (HQ * S * D)
    m2_ws_ptr += col * (HQ * NG)
    l2_ws_ptr += col * (HQ * NG)
    acc2_ws_ptr += col * (HQ * NG * D)
    cnt_ptr += col * (HQ * (NG + 1))
    if USE_PDL:
        # Nothing here is constant across steps (qkv, cache, workspace all change), so wait first.
        tl.extra.cuda.gdc_wait()

    pos = tl.load(pos_ptr) + col
    n_ctx = pos + 1
    chunk = tl.maximum(tl.cdiv(tl.cdiv(n_ctx, S), CHUNK_ALIGN) * CHUNK_ALIGN, MIN_CHUNK)
    n_active = tl.cdiv(n_ctx, chunk)  # splits with rows: always the prefix 0..n_active-1
    if SPLIT_PROGRAMS == 0:  # a program per split (grid axis 1 = S); an empty split has nothing to do
        split = tl.program_id(1)
        if split < n_active:  # (at short context, most of them are empty)
            _attn_split(qkv_ptr, k_cache_ptr, v_cache_ptr, cos_ptr, sin_ptr, q_norm_ptr, k_norm_ptr,
                        m_ws_ptr, l_ws_ptr, acc_ws_ptr, m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, cnt_ptr, out_ptr,
                        T_MAX, S, NG, qk_scale, eps, kvh, split, col, pos, n_ctx, chunk, n_active,
                        HQ, HKV, G, G_PAD, G2, D, BLOCK_T, GS, HAS_QK_NORM, SPLIT_DOTS, DOT_PRECISION, USE_PDL, WINDOW)
    else:  # SPLIT_PROGRAMS programs (grid axis 1) take the splits in turn: each split computed as above
        for split in range(tl.program_id(1), n_active, SPLIT_PROGRAMS):
            _attn_split(qkv_ptr, k_cache_ptr, v_cache_ptr, cos_ptr, sin_ptr, q_norm_ptr, k_norm_ptr,
                        m_ws_ptr, l_ws_ptr, acc_ws_ptr, m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, cnt_ptr, out_ptr,
                        T_MAX, S, NG, qk_scale, eps, kvh, split, col, pos, n_ctx, chunk, n_active,
                        HQ, HKV, G, G_PAD, G2, D, BLOCK_T, GS, HAS_QK_NORM, SPLIT_DOTS, DOT_PRECISION, USE_PDL, WINDOW)


@triton.jit
def _attn_split(
    qkv_ptr, k_cache_ptr, v_cache_ptr, cos_ptr, sin_ptr, q_norm_ptr, k_norm_ptr,
    m_ws_ptr, l_ws_ptr, acc_ws_ptr, m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, cnt_ptr, out_ptr,
    T_MAX, S, NG, qk_scale, eps, kvh, split, col, pos, n_ctx, chunk, n_active,
    HQ: tl.constexpr, HKV: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, G2: tl.constexpr,
    D: tl.constexpr, BLOCK_T: tl.constexpr, GS: tl.constexpr,
    HAS_QK_NORM: tl.constexpr, SPLIT_DOTS: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr,
    WINDOW: tl.constexpr,
):
    """One split of _attn_kernel (a non-empty one): its rows' partial softmax, the new row where it falls in the
    split, the partial's store and the level-1 / level-2 merges of the last program to finish."""
    HALF: tl.constexpr = D // 2
    start = split * chunk
    end = tl.minimum(start + chunk, n_ctx)
    end_old = tl.minimum(end, pos)  # cache rows read; row pos (the new token) comes from registers

    d = tl.arange(0, D)
    cos = tl.load(cos_ptr + pos * HALF + d % HALF)  # [D]
    sin = tl.load(sin_ptr + pos * HALF + d % HALF)

    # Query heads of this group, normed + rotated, pre-scaled by softmax scale * log2(e).
    g = tl.arange(0, G_PAD)
    q = _norm_rope(qkv_ptr, kvh * G + g, g < G, d, q_norm_ptr, cos[None, :], sin[None, :], eps, D, HALF,
                   HAS_QK_NORM)
    q = q * qk_scale  # [G_PAD, D]
    # The new token's k (normed + rotated) and v for this kv head.
    one = tl.arange(0, 1)
    k_new = _norm_rope(qkv_ptr + HQ * D, kvh + one, one < 1, d, k_norm_ptr, cos[None, :], sin[None, :], eps, D, HALF,
                       HAS_QK_NORM)
    k_new = tl.reshape(k_new, (D,))
    v_new = tl.load(qkv_ptr + (HQ + HKV + kvh) * D + d).to(tl.float32)  # [D]

    cache_off = kvh.to(tl.int64) * T_MAX * D
    k_base = k_cache_ptr + cache_off
    v_base = v_cache_ptr + cache_off
    cache_ty = k_cache_ptr.dtype.element_ty
    if SPLIT_DOTS:  # q = q_hi + q_lo, both in the cache dtype: two 16-bit dots ~ one fp32 dot
        q_hi = q.to(cache_ty)
        q_lo = (q - q_hi.to(tl.float32)).to(cache_ty)

    if WINDOW > 0:  # column col of a verify step: the window's earlier rows in this split, from their columns' qkv
        wi = tl.arange(0, WINDOW)
        w_row = pos - col + wi  # rows pos - col .. pos - 1: columns 0 .. col - 1
        w_in = (wi < col) & (w_row >= start) & (w_row < end_old)
        w_mask = w_in[:, None]
        w_head = (w_row - pos) * (HQ + 2 * HKV) + kvh  # the k head of the row's column, in heads from this column's
        w_rope = w_row[:, None] * HALF + (d % HALF)[None, :]
        w_cos = tl.load(cos_ptr + w_rope, mask=w_mask, other=0.0)
        w_sin = tl.load(sin_ptr + w_rope, mask=w_mask, other=0.0)
        w_k = _norm_rope(qkv_ptr + HQ * D, w_head, w_in, d, k_norm_ptr, w_cos, w_sin, eps, D, HALF, HAS_QK_NORM)
        w_v = tl.load(qkv_ptr + (w_head + HQ + HKV)[:, None] * D + d[None, :], mask=w_mask, other=0.0)
        w_off = w_row[:, None] * D + d[None, :]
        tl.store(k_base + w_off, w_k.to(cache_ty), mask=w_mask)
        tl.store(v_base + w_off, w_v.to(cache_ty), mask=w_mask)
        tl.debug_barrier()  # the rows stored before the tiles below read them

    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for t0 in range(start, end_old, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)  # [BLOCK_T]
        t_mask = t < end_old
        kv_off = t[:, None] * D + d[None, :]
        k = tl.load(k_base + kv_off, mask=t_mask[:, None], other=0.0)  # [BLOCK_T, D]
        v = tl.load(v_base + kv_off, mask=t_mask[:, None], other=0.0)
        if SPLIT_DOTS:
            kt = tl.trans(k)
            s = tl.dot(q_lo, kt, tl.dot(q_hi, kt))  # [G_PAD, BLOCK_T], log2 units
        else:
            s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision=DOT_PRECISION)
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if SPLIT_DOTS:
            p_hi = p.to(cache_ty)
            p_lo = (p - p_hi.to(tl.float32)).to(cache_ty)
            pv = tl.dot(p_lo, v, tl.dot(p_hi, v))
        else:
            pv = tl.dot(p, v.to(tl.float32), input_precision=DOT_PRECISION)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # only the epilogue and the combine are left

    # The new token (row pos), in fp32, by the program whose chunk holds it.
    mine = (start <= pos) & (pos < end)
    s_new = tl.sum(q * k_new[None, :], axis=1)  # [G_PAD]
    m_new = tl.maximum(m_i, s_new)
    alpha = tl.exp2(m_i - m_new)
    p_new = tl.exp2(s_new - m_new)
    l_i = tl.where(mine, l_i * alpha + p_new, l_i)
    acc = tl.where(mine, acc * alpha[:, None] + p_new[:, None] * v_new[None, :], acc)
    m_i = tl.where(mine, m_new, m_i)
    # Append the new row only after the loop: no program ever reads a row written in this launch
    # (loops stop before row pos), so there is no intra-launch read-after-write.
    tl.store(k_base + pos * D + d, k_new.to(cache_ty), mask=mine & (d < D))
    tl.store(v_base + pos * D + d, v_new.to(cache_ty), mask=mine & (d < D))

    # Partials of non-empty chunks (empty ones are never read: the merges count active splits).
    qh = kvh * G + g
    keep = (g < G) & (split < n_active)
    tl.store(m_ws_ptr + qh * S + split, m_i, mask=keep)
    tl.store(l_ws_ptr + qh * S + split, l_i, mask=keep)
    tl.store(acc_ws_ptr + (qh[:, None] * S + split) * D + d[None, :], acc, mask=keep[:, None])

    # Level 1: the last program of this group of GS active splits merges the group. Empty splits
    # (split >= n_active) take no part: every program computes the same n_active from pos.
    if split < n_active:
        grp = split // GS
        n_groups = tl.cdiv(n_active, GS)
        cnt_row = cnt_ptr + kvh * (NG + 1)
        tl.debug_barrier()  # every thread's partial stores precede the release below
        ticket = tl.atomic_add(cnt_row + grp, 1, sem="acq_rel", scope="gpu")
        n1 = tl.minimum(n_active - grp * GS, GS)
        if ticket == n1 - 1:
            tl.store(cnt_row + grp, 0)  # the whole group has drawn: reset for the next launch
            h2 = tl.arange(0, G2)
            heads = kvh * G + h2
            h_mask = h2 < G
            m1, l1, a1 = _merge(m_ws_ptr + grp * GS, l_ws_ptr + grp * GS, acc_ws_ptr + grp * GS * D,
                                heads, h_mask, S, n1, G2, GS, D)
            if n_groups == 1:
                tl.store(out_ptr + heads[:, None] * D + d[None, :], a1 / tl.where(h_mask, l1, 1.0)[:, None],
                         mask=h_mask[:, None])
            else:
                # Level 2: the last group to finish merges the group partials and writes out.
                tl.store(m2_ws_ptr + heads * NG + grp, m1, mask=h_mask)
                tl.store(l2_ws_ptr + heads * NG + grp, l1, mask=h_mask)
                tl.store(acc2_ws_ptr + (heads[:, None] * NG + grp) * D + d[None, :], a1, mask=h_mask[:, None])
                tl.debug_barrier()
                ticket2 = tl.atomic_add(cnt_row + NG, 1, sem="acq_rel", scope="gpu")
                if ticket2 == n_groups - 1:
                    tl.store(cnt_row + NG, 0)
                    m2, l2, a2 = _merge(m2_ws_ptr, l2_ws_ptr, acc2_ws_ptr, heads, h_mask, NG, n_groups, G2, GS, D)
                    tl.store(out_ptr + heads[:, None] * D + d[None, :], a2 / tl.where(h_mask, l2, 1.0)[:, None],
                             mask=h_mask[:, None])




class AttentionWorkspace:
    """Split-KV partials and ticket counters for decode_attention (reusable across layers and steps,
    not by two launches in flight at once). Counters start at 0 and every launch leaves them at 0.

    combine_group: splits merged per level-1 group (default 16; 2 under the interpreter so the
    CPU tests run both levels). columns: query positions per launch it serves (kernels.decode_attention_cols;
    each has its own partials and counters, at the same offsets after the first's).
    """

    def __init__(self, num_heads: int, head_dim: int, num_splits: int, device, combine_group: int | None = None,
                 columns: int = 1):
        gs = combine_group or (2 if interpreting() else 16)
        assert gs >= 1 and gs & (gs - 1) == 0, "combine_group must be a power of two"
        self.num_splits = num_splits
        self.group = min(gs, triton.next_power_of_2(num_splits))
        self.num_groups = triton.cdiv(num_splits, self.group)
        self.columns = columns
        f32 = dict(dtype=torch.float32, device=device)
        c = (columns,) if columns > 1 else ()  # column c's buffers follow column c-1's
        self.m = torch.empty(*c, num_heads, num_splits, **f32)
        self.l = torch.empty(*c, num_heads, num_splits, **f32)
        self.acc = torch.empty(*c, num_heads, num_splits, head_dim, **f32)
        self.m2 = torch.empty(*c, num_heads, self.num_groups, **f32)
        self.l2 = torch.empty(*c, num_heads, self.num_groups, **f32)
        self.acc2 = torch.empty(*c, num_heads, self.num_groups, head_dim, **f32)
        self.tickets = torch.zeros(*c, num_heads, self.num_groups + 1, dtype=torch.int32, device=device)


def default_num_splits(num_kv_heads: int, device) -> int:
    """S such that Hkv * S is about two programs per SM, capped at 256 (4 under the interpreter).

    Measured on an H200 (in a CUDA graph, PDL on, kernels/PERF.md): Qwen2.5 layout (Hkv=2) at
    ctx 16384, S=132 12.6 us vs S=128 13.7 (129 splits of 128 rows instead of 86 of 192) vs
    S=66 14.2; equal at 512 / 4096 (splits of >= 64 rows there). Qwen3 (Hkv=8): S=33 24.7 vs
    S=17 29.9 vs S=66 28.6.
    """
    device = torch.device(device)
    if device.type != "cuda" or interpreting():
        return 4
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(256, triton.cdiv(2 * sms, num_kv_heads)))


@dataclass(frozen=True)
class AttentionConfig:
    """Launch config of _attn_kernel. split_dots: hi/lo 16-bit dots (16-bit caches only), else
    one dot with fp32 operands at `precision` (tf32 for 16-bit caches, ieee for fp32)."""
    block_t: int
    num_warps: int = 4
    num_stages: int = 3
    split_dots: bool = True
    min_chunk: int = 0  # rows per split at least this (fewer, longer splits at short context)
    chunk_align: int = 0  # rows per split rounded up to a multiple of this (0: block_t)
    # programs per kv head and column of a verify step at short context (few_split_rows), each taking the splits
    # in turn (the same splits, so the same bits; 0: a program per split). H200, 135M heads, 8 columns at ctx
    # 512: 8.34 us with a program per split (88), 6.92 with 11 (lab.probe_attention_splits); at 1,024 11.87 vs
    # 10.95 and at 4,096 30.6 vs 20.4 (a program's splits run one after another): short contexts only.
    verify_split_programs: int = 0


def few_split_rows(cfg: AttentionConfig) -> int:
    """Contexts (rows) up to which cfg.verify_split_programs programs cover every split with one split each: the
    verify step's attention takes them there (decode_attention_cols' few_splits)."""
    return cfg.verify_split_programs * max(cfg.min_chunk, cfg.block_t)


def attention_config(head_dim: int, cache_dtype: torch.dtype) -> AttentionConfig:
    """Fixed rule from an in-graph sweep on an H200 (kernels/PERF.md); tiny tiles under the interpreter.
    head_dim <= 64: 2 warps and 2 stages, so that twice the programs share an SM (a split at short context is one
    64-row tile: its latency counts, not its throughput): one H100, the 135M model's heads, a verify step's 16
    columns at ctx 512 9.94 -> 6.56 us, 8 columns 5.97 -> 6.13, one column 4.57 -> 4.48, at ctx 4096 7.58 -> 6.51
    (lab.probe_attention_splits --configs; bench-results/h100-2026-11-26-session10/)."""
    if interpreting():
        return AttentionConfig(block_t=16, split_dots=False, verify_split_programs=2)
    small = head_dim <= 64
    return AttentionConfig(block_t=64, num_warps=2 if small else 4, num_stages=2 if small else 3,
                           split_dots=cache_dtype != torch.float32, min_chunk=64, verify_split_programs=11)


def decode_attention(
    qkv: torch.Tensor,
    pos: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    out: torch.Tensor,
    workspace: AttentionWorkspace,
    scale: float,
    q_norm: torch.Tensor | None = None,
    k_norm: torch.Tensor | None = None,
    eps: float = 1e-6,
    *,
    pdl: bool = False,
) -> torch.Tensor:
    """Attention of the token at `pos` over cache rows 0..pos (appending its k/v at row pos).

    qkv [(Hq+2Hkv)*D] fp32; pos int32 [1] (device); caches [Hkv, Tmax, D]; cos/sin [Tmax, D/2]
    fp32; out [Hq*D] fp32. Returns out.
    """
    cfg = attention_config(k_cache.shape[-1], k_cache.dtype)
    return decode_attention_with(cfg, qkv, pos, k_cache, v_cache, cos, sin, out, workspace, scale,
                                 q_norm, k_norm, eps, pdl=pdl)


def decode_attention_with(cfg: AttentionConfig, qkv, pos, k_cache, v_cache, cos, sin, out, workspace, scale,
                          q_norm=None, k_norm=None, eps=1e-6, *, pdl=False, columns: int = 1,
                          split_programs: int = 0) -> torch.Tensor:
    """decode_attention with an explicit launch config (benchmarks and sweeps). columns > 1: the launch of
    kernels.decode_attention_cols (qkv [C*(Hq+2Hkv)*D], out [C*Hq*D], cache rows pos..pos+C-1 written).
    split_programs (0 < P < S): P programs per kv head and column take the S splits in turn (the same bits)."""
    assert k_cache.dim() == 3 and k_cache.shape == v_cache.shape, "caches must be [Hkv, Tmax, D]"
    assert k_cache.is_contiguous() and v_cache.is_contiguous(), "caches must be contiguous"
    assert k_cache.dtype == v_cache.dtype and k_cache.dtype in WEIGHT_DTYPES
    hkv, t_max, d = k_cache.shape
    assert 32 <= d <= 256 and d & (d - 1) == 0, "head_dim must be a power of two, 32 to 256"
    ws = workspace
    hq, num_splits = ws.m.shape[-2:]
    assert ws.acc.shape[-3:] == (hq, num_splits, d) and hq % hkv == 0, "workspace does not match the heads"
    g = hq // hkv
    assert 1 <= columns <= min(ws.columns, MAX_COLUMNS), f"1..{MAX_COLUMNS} columns, no more than the workspace's"
    check_vec(qkv, columns * (hq + 2 * hkv) * d, "qkv")
    check_vec(out, columns * hq * d, "out")
    assert pos.shape == (1,) and pos.dtype == torch.int32, "pos must be an int32 tensor of shape [1]"
    assert cos.shape == sin.shape == (t_max, d // 2), "cos/sin must be [Tmax, D/2]"
    assert cos.dtype == sin.dtype == torch.float32 and cos.is_contiguous() and sin.is_contiguous()
    assert (q_norm is None) == (k_norm is None), "q_norm and k_norm come together"
    if q_norm is not None:
        check_vec(q_norm, d, "q_norm", WEIGHT_DTYPES)
        check_vec(k_norm, d, "k_norm", WEIGHT_DTYPES)
    assert qkv.device == pos.device == k_cache.device == out.device == ws.m.device

    split_dots = cfg.split_dots and k_cache.dtype != torch.float32
    precision = "ieee" if k_cache.dtype == torch.float32 else "tf32"
    programs = split_programs if 0 < split_programs < num_splits else 0
    _attn_kernel[(hkv, programs or num_splits, columns)](
        qkv, pos, k_cache, v_cache, cos, sin,
        q_norm if q_norm is not None else cos, k_norm if k_norm is not None else cos,
        ws.m, ws.l, ws.acc, ws.m2, ws.l2, ws.acc2, ws.tickets, out,
        t_max, num_splits, ws.num_groups, scale * LOG2E, eps,
        HQ=hq, HKV=hkv, G=g, G_PAD=max(16, triton.next_power_of_2(g)), G2=triton.next_power_of_2(g), D=d,
        BLOCK_T=cfg.block_t, CHUNK_ALIGN=cfg.chunk_align or cfg.block_t, MIN_CHUNK=max(cfg.min_chunk, cfg.block_t),
        GS=ws.group,
        HAS_QK_NORM=q_norm is not None, SPLIT_DOTS=split_dots, DOT_PRECISION=precision, USE_PDL=pdl,
        SPLIT_PROGRAMS=programs, WINDOW=MAX_COLUMNS, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        **pdl_launch_kwargs(pdl, qkv.device),
    )
    return out


def decode_attention_ref(qkv, pos: int, k_cache, v_cache, cos, sin, scale, q_norm=None, k_norm=None, eps=1e-6):
    """Plain PyTorch twin. Returns (out [Hq*D], k_row [Hkv, D], v_row [Hkv, D]) in fp32; caches untouched.

    Attends over cache rows 0..pos-1 plus the new token's (k_row, v_row) at pos.
    """
    hkv, _, d = k_cache.shape
    hq = qkv.numel() // d - 2 * hkv
    heads = qkv.float().view(hq + 2 * hkv, d)
    q, k, v = heads[:hq], heads[hq:hq + hkv], heads[hq + hkv:]

    def norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float() if w is not None else x

    def rope(x):
        c, s = cos[pos].float(), sin[pos].float()
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    q, k = rope(norm(q, q_norm)), rope(norm(k, k_norm))
    keys = torch.cat([k_cache[:, :pos].float(), k[:, None]], dim=1)  # [Hkv, pos+1, D]
    vals = torch.cat([v_cache[:, :pos].float(), v[:, None]], dim=1)
    rep = hq // hkv
    keys, vals = keys.repeat_interleave(rep, 0), vals.repeat_interleave(rep, 0)  # [Hq, pos+1, D]
    att = torch.softmax(torch.einsum("hd,htd->ht", q, keys) * scale, dim=-1)
    out = torch.einsum("ht,htd->hd", att, vals)
    return out.reshape(-1), k, v


def rope_tables(t_max: int, head_dim: int, theta: float = 10000.0, device="cpu"):
    """cos, sin [t_max, head_dim/2] fp32 for plain (unscaled) RoPE; for tests and benchmarks."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(t_max, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return ang.cos().float().to(device), ang.sin().float().to(device)
