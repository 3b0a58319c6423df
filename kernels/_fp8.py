"""Shared pieces of the FP8-weight GEMV kernels (kernels/fp8_*.py): unpacking e4m3 with integer ops, one
tile's group sums, launch configs and argument checks.

Weights are e4m3 [N, K] (row-major, K % 32 == 0) with a float32 scale and offset per row and group of
32 columns (inference.quant): w = offset + scale * q. Activations stay float32 and products are summed
in float32; a group's dot product is scale * sum(q * x) + offset * sum(x), so a tile [BLOCK_N, BLOCK_K]
is handled as [BLOCK_N, groups, 8 words]: the 8 words of a group are summed, then the group's scale
and offset applied (`group_tile`). A row is read as K/4 int32 words; byte j of word c is column 4c + j,
so each tile pairs with x through four stride-4 reads (L1 hits: x is a few KB). Measured on an H100
(lab/probe_fp8_gemv.py, per-row scales then, the same configs on two machines whose LM head timed the
same): storing rows K-quarter interleaved instead, so those reads become four contiguous chunks, made
the layer GEMVs 5-13% slower (1.5B gate/up 14.8 -> 16.7 us, down 9.6 -> 10.1).

Unpacking: each byte becomes a float32 with integer ops only (`e4m3_byte`): sign to bit 31, the 7
exponent/mantissa bits to bits 26..20. That is the e4m3 value times 2^-120 exactly (e4m3 subnormals
land on float32 subnormals, which FMAs keep: Triton does not flush them), so each group's scale is
multiplied by 2^120 (UNIT) before it scales the group's sum. Measured against the hardware conversion (.to(tl.float32) of e4m3) on an H100,
each with its best config (row-major both): the LM head 1.11-1.14x
and the 1.5B's gate/up 1.24x faster, the other weights of the 1.5B / Llama-1B / 3B shapes within -7%..+7%
(lab/probe_fp8_gemv.py).

The LM head may be int8 instead (inference.quant.Int8Weight: a float16 scale per group, no offset; `offset`
None in the launchers, INT8 in the kernels): each byte becomes a float32 with integer ops too (`int8_byte`:
the byte, its sign bit flipped, as the low mantissa bits of 2^23, minus 2^23 + 128: exact), the unit 1.

Not here: the kernels themselves, quantization (inference/quant.py).
"""

import torch
import triton
import triton.language as tl

from kernels._util import check_gate_up_vecs, check_vec, interpreting

E4M3 = torch.float8_e4m3fn
UNIT = 1.329227995784916e36  # 2.0 ** 120, exact in float32: what the scales are multiplied by
GROUP = 32  # e4m3 columns per scale and offset (inference.quant.GROUP)
GW: tl.constexpr = tl.constexpr(8)  # int32 words per group


@triton.jit
def e4m3_byte(words, J: tl.constexpr):
    """Byte J (0 = lowest) of each int32 word, an e4m3 value, as float32 times 2^-120 (exact)."""
    if J == 3:
        s = words
        m = words >> 4
    else:
        s = words << (24 - 8 * J)
        m = words << (20 - 8 * J)
    bits = (s & -2147483648) | (m & 0x07F00000)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def int8_byte(words, J: tl.constexpr):
    """Byte J (0 = lowest) of each int32 word, an int8 value, as float32 (exact): 2^23 + 128 + b - (2^23 + 128)."""
    bits = ((words >> (8 * J)) & 0xFF) ^ 0x4B000080
    return bits.to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def x_chunk(x_ptr, norm_w_ptr, k_offs, k_mask, HAS_NORM: tl.constexpr):
    """x[k_offs] (masked) as fp32 -> (x * norm_w if HAS_NORM else x, x * x)."""
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    sq = x * x
    if HAS_NORM:
        x = x * tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    return x, sq


@triton.jit
def word_offsets(k0, NG: tl.constexpr):
    """Word offsets [NG, GW] of the NG groups of a tile starting at word k0."""
    return k0 + tl.arange(0, NG)[:, None] * GW + tl.arange(0, GW)[None, :]


@triton.jit
def load_words(w_rows, offs, row_mask, KQ):
    """The tile of int32 words [BN, NG, GW] at word offsets offs [NG, GW] of rows w_rows [BN, 1, 1] (0 past
    KQ or the last row)."""
    return tl.load(w_rows + offs[None, :, :], mask=row_mask[:, None, None] & (offs < KQ)[None, :, :], other=0)


@triton.jit
def group_tile(w, k0, s_rows, o_rows, row_mask, KG, x_ptr, norm_w_ptr, KQ, unit, HAS_NORM: tl.constexpr,
               NG: tl.constexpr, INT8: tl.constexpr = False):
    """One tile of int32 words w [BN, NG, GW] starting at word k0 (a multiple of GW; words past KQ = K/4 are 0)
    times x -> (its dot products per group [BN, NG] fp32: scale * sum(q * x) + offset * sum(x); x^2 [NG, GW]
    of its columns). s_rows / o_rows [BN, 1]: the rows' scale and offset pointers; KG = K/32 groups a row.
    INT8: int8 bytes, float16 scales, no offset (o_rows unread)."""
    offs = word_offsets(k0, NG)
    mask = offs < KQ
    x, sq = x_chunk(x_ptr, norm_w_ptr, offs * 4, mask, HAS_NORM)
    p = (int8_byte(w, 0) if INT8 else e4m3_byte(w, 0)) * x[None, :, :]
    xs = x
    for j in tl.static_range(1, 4):
        x, s = x_chunk(x_ptr, norm_w_ptr, offs * 4 + j, mask, HAS_NORM)
        p += (int8_byte(w, j) if INT8 else e4m3_byte(w, j)) * x[None, :, :]
        xs += x
        sq += s
    g = k0 // GW + tl.arange(0, NG)
    gm = row_mask[:, None] & (g < KG)[None, :]
    scale = tl.load(s_rows + g[None, :], mask=gm, other=0.0).to(tl.float32)
    if INT8:
        return tl.sum(p, axis=2) * (scale * unit), sq
    offset = tl.load(o_rows + g[None, :], mask=gm, other=0.0)
    return tl.sum(p, axis=2) * (scale * unit) + offset * tl.sum(xs, axis=1)[None, :], sq


def check_fp8(q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None) -> None:
    """Asserts for an 8-bit weight: q [N, K] contiguous with K % 32 == 0, e4m3 with scale and offset [N, K/32]
    float32, or (offset None) int8 with scale [N, K/32] float16."""
    int8 = offset is None
    code = torch.int8 if int8 else E4M3
    assert q.dim() == 2 and q.is_contiguous() and q.dtype == code, \
        f"q must be contiguous [N, K] {str(code).removeprefix('torch.')}"
    assert q.shape[1] % GROUP == 0, f"K must be a multiple of {GROUP}, got {q.shape[1]}"
    groups = (q.shape[0], q.shape[1] // GROUP)
    dtype = torch.float16 if int8 else torch.float32
    for name, t in (("scale", scale),) if int8 else (("scale", scale), ("offset", offset)):
        assert t.shape == groups and t.dtype == dtype and t.is_contiguous(), \
            f"{name} must be contiguous {list(groups)} {str(dtype).removeprefix('torch.')}"
        assert t.device == q.device


def unit_of(offset: torch.Tensor | None) -> float:
    """What the kernels multiply each group's scale by: 2^120 for e4m3 (e4m3_byte's values), 1 for int8."""
    return 1.0 if offset is None else UNIT


def check_residual_args(a, q, scale, offset, x) -> tuple[int, int]:
    """The checks of an FP8 x[N] += W @ a[K] (Triton and CUDA launchers alike) -> (N, K)."""
    check_fp8(q, scale, offset)
    n, k = q.shape
    check_vec(a, k, "a")
    check_vec(x, n, "x")
    assert a.device == q.device == x.device
    assert a.data_ptr() != x.data_ptr(), "a and x must be different buffers"
    return n, k


def check_gate_up_args(x, norm_w, q, scale, offset, out) -> tuple[int, int]:
    """The checks of an FP8 out[I] = silu(gate) * up, [gate; up] = W[2I, K] @ rmsnorm(x) -> (I, K)."""
    check_fp8(q, scale, offset)
    return check_gate_up_vecs(x, norm_w, out, q)


def words(q: torch.Tensor) -> torch.Tensor:
    """What the kernels read: the rows as int32 words."""
    return q.view(torch.int32)


def dequantize(q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None) -> torch.Tensor:
    """float32 [N, K] = offset + scale * q per group (offset None: scale * q): the reference twins' weight."""
    n, k = q.shape
    w = q.float().view(n, k // GROUP, GROUP) * scale.float()[..., None]
    return (w if offset is None else w + offset[..., None]).view(n, k)


def fp8_config(kind: str, n: int, k: int) -> dict:
    """{BLOCK_N, BLOCK_K (e4m3 columns per tile), num_warps} for an FP8 GEMV of `kind` ("gemv": QKV and the LM
    head, "residual": o_proj and down_proj, "gate_up": n = I) over an [n, k] weight. The bests of
    lab/probe_fp8_gemv.py on an H100 (24 launches in one graph, PDL on), the same for the 1.5B, Llama-1B
    and 3B shapes: QKV (4, 512, 4), o_proj and down (4, 2048, 8), gate/up (8, 512, 4), LM head (16, 512, 4);
    larger tiles per thread (16 rows x 8 warps) spill and run up to 2x slower."""
    if interpreting():
        return {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4}  # BLOCK_K: a multiple of GROUP, a power of 2
    cap = max(64, triton.next_power_of_2(k))
    if kind == "gate_up":
        bn, bk, w = 8, 512, 4
    elif kind == "residual":
        bn, bk, w = 4, 2048, 8
    elif n <= 8192:
        bn, bk, w = 4, 512, 4
    else:
        bn, bk, w = 16, 512, 4
    return {"BLOCK_N": bn, "BLOCK_K": min(bk, cap), "num_warps": w}
