"""Shared pieces of the FP8-weight GEMV kernels (kernels/fp8_*.py): unpacking e4m3 with integer ops, one
tile's products, launch configs and argument checks.

Weights are e4m3 [N, K] (row-major, K % 4 == 0) with one float32 scale per row; activations stay float32,
products are summed in float32 and the row's scale multiplies the finished dot product. A row is read as
K/4 int32 words; byte j of word c is column 4c + j, so each tile pairs with x through four stride-4 reads
(L1 hits: x is a few KB). Measured on an H100 (lab/probe_fp8_gemv.py, the same configs on two
machines whose LM head timed the same): storing rows K-quarter interleaved instead, so those reads become
four contiguous chunks, made the layer GEMVs 5-13% slower (1.5B gate/up 14.8 -> 16.7 us, down 9.6 -> 10.1).

Unpacking: each byte becomes a float32 with integer ops only (`e4m3_byte`): sign to bit 31, the 7
exponent/mantissa bits to bits 26..20. That is the e4m3 value times 2^-120 exactly (e4m3 subnormals
land on float32 subnormals, which FMAs keep: Triton does not flush them), so the epilogue multiplies
the scale by 2^120 (UNIT). Measured against the hardware conversion (.to(tl.float32) of e4m3) on an H100,
each with its best config (row-major both): the LM head 1.11-1.14x
and the 1.5B's gate/up 1.24x faster, the other weights of the 1.5B / Llama-1B / 3B shapes within -7%..+7%
(lab/probe_fp8_gemv.py).

Not here: the kernels themselves, quantization (inference/quant.py).
"""

import torch
import triton
import triton.language as tl

from kernels._util import interpreting

E4M3 = torch.float8_e4m3fn
UNIT = 1.329227995784916e36  # 2.0 ** 120, exact in float32: what the scales are multiplied by


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
def x_chunk(x_ptr, norm_w_ptr, k_offs, k_mask, HAS_NORM: tl.constexpr):
    """x[k_offs] (masked) as fp32 -> (x * norm_w if HAS_NORM else x, x * x)."""
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    sq = x * x
    if HAS_NORM:
        x = x * tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    return x, sq


@triton.jit
def tile_products(w, x_ptr, norm_w_ptr, offs, KQ, HAS_NORM: tl.constexpr):
    """One tile of int32 words w [BN, BW] at word offsets offs (< KQ = K/4) times x -> (products [BN, BW] fp32,
    a word's four columns summed in-thread, times 2^-120; x^2 [BW] of the same columns)."""
    mask = offs < KQ
    x, sq = x_chunk(x_ptr, norm_w_ptr, offs * 4, mask, HAS_NORM)
    p = e4m3_byte(w, 0) * x[None, :]
    for j in tl.static_range(1, 4):
        x, s = x_chunk(x_ptr, norm_w_ptr, offs * 4 + j, mask, HAS_NORM)
        p += e4m3_byte(w, j) * x[None, :]
        sq += s
    return p, sq


def check_fp8(q: torch.Tensor, scale: torch.Tensor, rows: int | None = None) -> None:
    """Asserts for an FP8 weight: q [N, K] contiguous e4m3 with K % 4 == 0, scale [rows or N] float32."""
    assert q.dim() == 2 and q.is_contiguous() and q.dtype == E4M3, "q must be contiguous [N, K] float8_e4m3fn"
    assert q.shape[1] % 4 == 0, f"K must be a multiple of 4, got {q.shape[1]}"
    n = q.shape[0] if rows is None else rows
    assert scale.dim() == 1 and scale.shape[0] == n and scale.dtype == torch.float32 and scale.is_contiguous(), \
        f"scale must be contiguous [{n}] float32"
    assert scale.device == q.device


def words(q: torch.Tensor) -> torch.Tensor:
    """What the kernels read: the rows as int32 words."""
    return q.view(torch.int32)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """float32 [N, K]: the reference twins' weight."""
    return q.float() * scale[:, None]


def fp8_config(kind: str, n: int, k: int) -> dict:
    """{BLOCK_N, BLOCK_K (e4m3 columns per tile), num_warps} for an FP8 GEMV of `kind` ("gemv": QKV and the LM
    head, "residual": o_proj and down_proj, "gate_up": n = I) over an [n, k] weight. The bests of
    lab/probe_fp8_gemv.py on an H100 (24 launches in one graph, PDL on), the same for the 1.5B, Llama-1B
    and 3B shapes: QKV (4, 512, 4), o_proj and down (4, 2048, 8), gate/up (8, 512, 4), LM head (16, 512, 4);
    larger tiles per thread (16 rows x 8 warps) spill and run up to 2x slower."""
    if interpreting():
        return {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4}
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
