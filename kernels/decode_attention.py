"""Decode attention for one new token: q/k RMSNorm (Qwen3) + RoPE + KV-cache append + split-KV
GQA flash-decoding, in two launches with a fixed grid (CUDA-graph safe; the work follows the
live context because chunk bounds are computed on the device from `pos`).

1. `_attn_partial_kernel`, grid (Hkv, S): program (kvh, s) takes all G = Hq/Hkv query heads of kv
   head kvh (K/V are read once per kv head) over positions [s*chunk, min((s+1)*chunk, pos+1)),
   chunk = roundup(cdiv(pos+1, S), BLOCK_T); online softmax in BLOCK_T tiles; writes (max, sum,
   acc) partials. In the loop, row `pos` is taken from registers (tl.where), never from memory;
   after it, the program whose chunk holds `pos` appends the new k/v row to the cache.
2. `_attn_combine_kernel`, grid (Hq,): merges the S partials of one q head into out.

Not here: prefill attention (many query tokens), paged caches, sliding windows, ALiBi.
"""


import torch
import triton
import triton.language as tl

from kernels._util import WEIGHT_DTYPES, check_vec, interpreting, pdl_launch_kwargs

LOG2E = 1.4426950408889634


@triton.jit
def _norm_rope(base_ptr, rows, row_mask, d, norm_w_ptr, cos, sin, eps,
               D: tl.constexpr, HALF: tl.constexpr, HAS_NORM: tl.constexpr):
    """Heads at base_ptr + rows*D: per-head RMSNorm (optional) then rotate_half RoPE. -> [R, D] fp32.

    y[i] = x[i]*cos[i] - x[i+HALF]*sin[i],  y[i+HALF] = x[i+HALF]*cos[i] + x[i]*sin[i]
    implemented as y = x*cos[d%HALF] + sign(d) * x[(d+HALF)%D] * sin[d%HALF].
    """
    rot = (d + HALF) % D
    m = row_mask[:, None]
    x = tl.load(base_ptr + rows[:, None] * D + d[None, :], mask=m, other=0.0).to(tl.float32)  # [R, D]
    xr = tl.load(base_ptr + rows[:, None] * D + rot[None, :], mask=m, other=0.0).to(tl.float32)
    if HAS_NORM:
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)  # [R]
        x = x * rstd[:, None] * tl.load(norm_w_ptr + d).to(tl.float32)[None, :]
        xr = xr * rstd[:, None] * tl.load(norm_w_ptr + rot).to(tl.float32)[None, :]
    sign = tl.where(d < HALF, -1.0, 1.0)
    return x * cos[None, :] + (sign * sin)[None, :] * xr


# Contract:
#   qkv      [(HQ + 2*HKV) * D] fp32: q heads, k heads, v heads (projection output + bias, pre-norm/RoPE)
#   pos      [1] int32 on device: the new token's position; cache rows 0..pos-1 are valid
#   k_cache, v_cache [HKV, Tmax, D] contiguous, bf16/fp16/fp32; row pos is written here
#   cos, sin [Tmax, D/2] fp32
#   q_norm, k_norm [D] (read only when HAS_QK_NORM)
#   m_ws, l_ws [HQ, S] fp32; acc_ws [HQ, S, D] fp32 (log2-domain running max, sum, unnormalised acc)
#   grid (HKV, S)
@triton.jit
def _attn_partial_kernel(
    qkv_ptr, pos_ptr, k_cache_ptr, v_cache_ptr, cos_ptr, sin_ptr, q_norm_ptr, k_norm_ptr,
    m_ws_ptr, l_ws_ptr, acc_ws_ptr, T_MAX, S, qk_scale, eps,
    HQ: tl.constexpr, HKV: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
    BLOCK_T: tl.constexpr, HAS_QK_NORM: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr,
):
    HALF: tl.constexpr = D // 2
    kvh = tl.program_id(0)
    split = tl.program_id(1)
    if USE_PDL:
        # Nothing here is constant across steps (qkv, cache, workspace all change), so wait first.
        tl.extra.cuda.gdc_wait()

    pos = tl.load(pos_ptr)
    n_ctx = pos + 1
    chunk = tl.cdiv(tl.cdiv(n_ctx, S), BLOCK_T) * BLOCK_T
    start = split * chunk
    end = tl.minimum(start + chunk, n_ctx)

    d = tl.arange(0, D)
    cos = tl.load(cos_ptr + pos * HALF + d % HALF)  # [D]
    sin = tl.load(sin_ptr + pos * HALF + d % HALF)

    # Query heads of this group, normed + rotated, pre-scaled by softmax scale * log2(e).
    g = tl.arange(0, G_PAD)
    q = _norm_rope(qkv_ptr, kvh * G + g, g < G, d, q_norm_ptr, cos, sin, eps, D, HALF, HAS_QK_NORM)
    q = q * qk_scale  # [G_PAD, D]
    # The new token's k (normed + rotated) and v for this kv head.
    one = tl.arange(0, 1)
    k_new = _norm_rope(qkv_ptr + HQ * D, kvh + one, one < 1, d, k_norm_ptr, cos, sin, eps, D, HALF, HAS_QK_NORM)
    k_new = tl.reshape(k_new, (D,))
    v_new = tl.load(qkv_ptr + (HQ + HKV + kvh) * D + d).to(tl.float32)  # [D]

    cache_off = kvh.to(tl.int64) * T_MAX * D
    k_base = k_cache_ptr + cache_off
    v_base = v_cache_ptr + cache_off

    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for t0 in range(start, end, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)  # [BLOCK_T]
        t_mask = t < end
        is_new = (t == pos)[:, None]
        kv_off = t[:, None] * D + d[None, :]
        k = tl.load(k_base + kv_off, mask=t_mask[:, None], other=0.0).to(tl.float32)  # [BLOCK_T, D]
        k = tl.where(is_new, k_new[None, :], k)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # [G_PAD, BLOCK_T], log2 units
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + kv_off, mask=t_mask[:, None], other=0.0).to(tl.float32)
        v = tl.where(is_new, v_new[None, :], v)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=DOT_PRECISION)
        m_i = m_new
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # only the (tiny) epilogue is left

    # Append the new row only after the loop: no program ever reads a row written in this launch
    # (the loop took row pos from registers), so there is no intra-launch read-after-write.
    mine = (start <= pos) & (pos < end)
    tl.store(k_base + pos * D + d, k_new.to(k_cache_ptr.dtype.element_ty), mask=mine & (d < D))
    tl.store(v_base + pos * D + d, v_new.to(v_cache_ptr.dtype.element_ty), mask=mine & (d < D))

    # Empty chunks (start >= end) store the neutral partial (-inf, 0, 0).
    qh = kvh * G + g
    g_mask = g < G
    tl.store(m_ws_ptr + qh * S + split, m_i, mask=g_mask)
    tl.store(l_ws_ptr + qh * S + split, l_i, mask=g_mask)
    tl.store(acc_ws_ptr + (qh[:, None] * S + split) * D + d[None, :], acc, mask=g_mask[:, None])


# Contract: m_ws, l_ws [HQ, S] fp32; acc_ws [HQ, S, D] fp32; out [HQ * D] fp32; pos [1] int32. grid (HQ,)
# Only the splits that held positions (same chunk formula as above) are read.
@triton.jit
def _attn_combine_kernel(
    m_ws_ptr, l_ws_ptr, acc_ws_ptr, out_ptr, pos_ptr, S,
    D: tl.constexpr, S_PAD: tl.constexpr, BLOCK_T: tl.constexpr, USE_PDL: tl.constexpr,
):
    h = tl.program_id(0)
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    n_ctx = tl.load(pos_ptr) + 1
    chunk = tl.cdiv(tl.cdiv(n_ctx, S), BLOCK_T) * BLOCK_T
    s = tl.arange(0, S_PAD)
    s_mask = (s < S) & (s * chunk < n_ctx)
    d = tl.arange(0, D)
    m = tl.load(m_ws_ptr + h * S + s, mask=s_mask, other=float("-inf"))  # [S_PAD]
    l = tl.load(l_ws_ptr + h * S + s, mask=s_mask, other=0.0)
    m_max = tl.max(m, axis=0)  # finite: split 0 always holds position 0
    w = tl.exp2(m - m_max)  # 0 for empty splits
    acc = tl.load(acc_ws_ptr + (h * S + s)[:, None] * D + d[None, :], mask=s_mask[:, None], other=0.0)
    o = tl.sum(w[:, None] * acc, axis=0) / tl.sum(w * l, axis=0)
    tl.store(out_ptr + h * D + d, o)


class AttentionWorkspace:
    """Split-KV partials for one decode_attention call (reusable across layers and steps)."""

    def __init__(self, num_heads: int, head_dim: int, num_splits: int, device):
        self.num_splits = num_splits
        self.m = torch.empty(num_heads, num_splits, dtype=torch.float32, device=device)
        self.l = torch.empty(num_heads, num_splits, dtype=torch.float32, device=device)
        self.acc = torch.empty(num_heads, num_splits, head_dim, dtype=torch.float32, device=device)


def default_num_splits(num_kv_heads: int, device) -> int:
    """S such that Hkv * S is about two programs per SM, capped at 128 (4 under the interpreter).

    Measured on an H200 (Hq=12, Hkv=2, D=128, bf16 cache, in a CUDA graph): S=128 vs 64 is
    equal at context 512 (7.3 us, launch-bound) and faster at 4096 (10.0 vs 11.9 us) and 16384
    (18.9 vs 21.5 us).
    """
    device = torch.device(device)
    if device.type != "cuda" or interpreting():
        return 4
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(128, triton.cdiv(2 * sms, num_kv_heads)))


def _block_t(head_dim: int) -> int:
    return 16 if interpreting() else 64 if head_dim <= 64 else 32


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
    assert k_cache.dim() == 3 and k_cache.shape == v_cache.shape, "caches must be [Hkv, Tmax, D]"
    assert k_cache.is_contiguous() and v_cache.is_contiguous(), "caches must be contiguous"
    assert k_cache.dtype == v_cache.dtype and k_cache.dtype in WEIGHT_DTYPES
    hkv, t_max, d = k_cache.shape
    assert d >= 32 and d & (d - 1) == 0, "head_dim must be a power of two >= 32"
    ws = workspace
    hq, num_splits = ws.m.shape
    assert ws.acc.shape == (hq, num_splits, d) and hq % hkv == 0, "workspace does not match the heads"
    g = hq // hkv
    check_vec(qkv, (hq + 2 * hkv) * d, "qkv")
    check_vec(out, hq * d, "out")
    assert pos.shape == (1,) and pos.dtype == torch.int32, "pos must be an int32 tensor of shape [1]"
    assert cos.shape == sin.shape == (t_max, d // 2), "cos/sin must be [Tmax, D/2]"
    assert cos.dtype == sin.dtype == torch.float32 and cos.is_contiguous() and sin.is_contiguous()
    assert (q_norm is None) == (k_norm is None), "q_norm and k_norm come together"
    if q_norm is not None:
        check_vec(q_norm, d, "q_norm", WEIGHT_DTYPES)
        check_vec(k_norm, d, "k_norm", WEIGHT_DTYPES)
    assert qkv.device == pos.device == k_cache.device == out.device == ws.m.device

    extra = pdl_launch_kwargs(pdl, qkv.device)
    precision = "ieee" if k_cache.dtype == torch.float32 else "tf32"
    block_t = _block_t(d)
    _attn_partial_kernel[(hkv, num_splits)](
        qkv, pos, k_cache, v_cache, cos, sin,
        q_norm if q_norm is not None else cos, k_norm if k_norm is not None else cos,
        ws.m, ws.l, ws.acc, t_max, num_splits, scale * LOG2E, eps,
        HQ=hq, HKV=hkv, G=g, G_PAD=max(16, triton.next_power_of_2(g)), D=d,
        BLOCK_T=block_t, HAS_QK_NORM=q_norm is not None, DOT_PRECISION=precision, USE_PDL=pdl,
        num_warps=4, num_stages=3, **extra,
    )
    _attn_combine_kernel[(hq,)](
        ws.m, ws.l, ws.acc, out, pos, num_splits,
        D=d, S_PAD=triton.next_power_of_2(num_splits), BLOCK_T=block_t, USE_PDL=pdl, num_warps=4, **extra,
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
