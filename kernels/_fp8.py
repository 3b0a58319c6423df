"""Shared pieces of the FP8-weight GEMV kernels (kernels/fp8_*.py): unpacking e4m3, one tile's products,
launch configs and argument checks.

Weights are e4m3 [N, K] (row-major) with one float32 scale per row; activations stay float32 and the
products are summed in float32; the row's scale multiplies the finished dot product.

Two ways to turn e4m3 into float32, chosen per launch by the constexpr BITS:
- BITS=False: load e4m3 bytes and convert them with .to(tl.float32) (hardware cvt, two per element).
- BITS=True: load the row as int32 words (4 e4m3 bytes each, byte j = column 4c + j) and build each
  float32 with integer ops only: sign to bit 31, the 7 exponent/mantissa bits to bits 26..20. That is
  the e4m3 value times 2^-120 exactly (e4m3 subnormals land on float32 subnormals, which FMAs keep;
  Triton does not flush them), so the scale is multiplied by 2^120 (UNIT) in the epilogue.
  Needs K % 4 == 0. A word's four columns are not adjacent to the next word's, so x is read as four
  stride-4 gathers per tile (L1 hits: x is a few KB).

Not here: the kernels themselves, quantization (inference/quant.py).
"""

import torch
import triton
import triton.language as tl

from kernels._util import interpreting

E4M3 = torch.float8_e4m3fn
TWO_POW_120 = 1.329227995784916e36  # 2.0 ** 120, exact in float32


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
def x_chunk(x_ptr, norm_w_ptr, k_offs, K, HAS_NORM: tl.constexpr):
    """x[k_offs] (masked to K) as fp32 -> (x * norm_w if HAS_NORM else x, x * x)."""
    k_mask = k_offs < K
    x = tl.load(x_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    sq = x * x
    if HAS_NORM:
        x = x * tl.load(norm_w_ptr + k_offs, mask=k_mask, other=0.0).to(tl.float32)
    return x, sq


@triton.jit
def tile_products(w, x_ptr, norm_w_ptr, offs, K, HAS_NORM: tl.constexpr, BITS: tl.constexpr):
    """One weight tile's products with x: w [BN, BW] (BITS: int32 words at word offsets offs, else e4m3
    values at column offsets offs) -> (products [BN, BW] fp32, a word's 4 columns summed in-thread;
    x^2 [BW] of the same columns)."""
    if BITS:
        x, sq = x_chunk(x_ptr, norm_w_ptr, offs * 4, K, HAS_NORM)
        p = e4m3_byte(w, 0) * x[None, :]
        for j in tl.static_range(1, 4):
            x, s = x_chunk(x_ptr, norm_w_ptr, offs * 4 + j, K, HAS_NORM)
            p += e4m3_byte(w, j) * x[None, :]
            sq += s
    else:
        x, sq = x_chunk(x_ptr, norm_w_ptr, offs, K, HAS_NORM)
        p = w.to(tl.float8e4nv, bitcast=True).to(tl.float32) * x[None, :]
    return p, sq


def unit(bits: bool) -> float:
    """What the epilogue multiplies the scale by: 2^120 for BITS (its values carry 2^-120), else 1."""
    return TWO_POW_120 if bits else 1.0


def check_fp8(q: torch.Tensor, scale: torch.Tensor, rows: int | None = None) -> None:
    """Asserts for an FP8 weight: q [N, K] contiguous e4m3 with K % 4 == 0, scale [rows or N] float32."""
    assert q.dim() == 2 and q.is_contiguous() and q.dtype == E4M3, "q must be contiguous [N, K] float8_e4m3fn"
    assert q.shape[1] % 4 == 0, f"K must be a multiple of 4, got {q.shape[1]}"
    n = q.shape[0] if rows is None else rows
    assert scale.dim() == 1 and scale.shape[0] == n and scale.dtype == torch.float32 and scale.is_contiguous(), \
        f"scale must be contiguous [{n}] float32"
    assert scale.device == q.device


def weight_arg(q: torch.Tensor, bits: bool) -> torch.Tensor:
    """The tensor the kernel reads: int32 words for BITS, else the e4m3 bytes as uint8 (bitcast in the kernel:
    masked loads fill 0, which the interpreter cannot write into an e4m3 tile)."""
    return q.view(torch.int32) if bits else q.view(torch.uint8)


# Launch configs, in e4m3 elements per tile (BLOCK_K) and rows per program (BLOCK_N): the bf16 rules of
# kernels._util with tiles twice as many elements wide (the same bytes per load). FP8_TUNED overrides them
# per (kind, N, K) where a GPU sweep measured better (kernels/fp8_sweep.py).
FP8_TUNED: dict[tuple[str, int, int], tuple[int, int, int]] = {}
BITS_DEFAULT = True  # the unpacking the launchers use unless told


def fp8_config(kind: str, n: int, k: int) -> dict:
    """{BLOCK_N, BLOCK_K, num_warps} for an FP8 GEMV of `kind` ("gemv": QKV / LM head, "residual": o_proj /
    down_proj, "gate_up": n = I) over an [n, k] weight."""
    if interpreting():
        return {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4}
    if (kind, n, k) in FP8_TUNED:
        bn, bk, w = FP8_TUNED[(kind, n, k)]
        return {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w}
    if kind == "gate_up":
        return {"BLOCK_N": 16, "BLOCK_K": min(512, triton.next_power_of_2(k)), "num_warps": 8}
    if k >= 4096:
        return {"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 8}
    if n <= 8192:
        return {"BLOCK_N": 4, "BLOCK_K": min(1024, triton.next_power_of_2(k)), "num_warps": 4}
    bn = max(2, min(32, 1 << max(0, (n // 2048).bit_length() - 1)))
    bk = max(64, min(8192 // bn, 2048, triton.next_power_of_2(k)))
    return {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4}
