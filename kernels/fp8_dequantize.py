"""FP8 weight -> 16-bit weight in one pass, for the prefill's GEMMs: out[N, K] = offset + scale * q.

The prefill of an FP8 model hands each layer's GEMM a dequantized weight (inference/fast/prefill.py). In
PyTorch that was four passes over float32 copies of the weight (q.float(), * scale, + offset, .to(bf16)),
some 27 bytes moved per weight; this kernel reads the 1.25 bytes (e4m3 + the group's scale and offset)
and writes the 2 of the result. Each byte is unpacked with the integer ops of the decode GEMVs
(kernels/_fp8.py e4m3_byte), times 2^120 (exact), then `q * scale + offset` in float32 as two rounded
operations (FMA contraction off), rounded to bf16 with integer ops (round to nearest even, as PyTorch does;
Triton's interpreter truncates its own float -> bf16 cast), so the result equals the PyTorch twin's bit for
bit on the GPU and under TRITON_INTERPRET alike.

Launch config: BLOCK_N rows x BLOCK_K columns a program (512 contiguous bytes a row: whole 128-byte lines),
derived, not tuned (a GEMM-sized write dominates; no table entry).

Not here: quantization (inference/quant.py), the decode GEMVs that read the weight directly (kernels/fp8_*.py).
"""

import torch
import triton
import triton.language as tl

from kernels._fp8 import GROUP, UNIT, check_fp8, dequantize, e4m3_byte
from kernels._util import interpreting

BLOCK_N, BLOCK_K, NUM_WARPS = 8, 512, 4
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


# Contract:
#   q      [N, K]  float8_e4m3fn, row-major contiguous, K % 32 == 0, read as uint8
#   scale, offset  [N, K/32]  fp32, row-major contiguous
#   out    [N, K]  bf16 / fp16 / fp32, row-major contiguous, written whole
#   grid   (cdiv(N, BLOCK_N), cdiv(K, BLOCK_K))
@triton.jit
def _fp8_dequantize_kernel(q_ptr, s_ptr, o_ptr, out_ptr, N, K, KG, unit,
                           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr,
                           BF16_BITS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = (rows < N)[:, None] & (cols < K)[None, :]
    r64 = rows.to(tl.int64)[:, None]
    b = tl.load(q_ptr + r64 * K + cols[None, :], mask=mask, other=0).to(tl.int32)
    g = r64 * KG + (cols // GROUP)[None, :]
    scale = tl.load(s_ptr + g, mask=mask, other=0.0)
    offset = tl.load(o_ptr + g, mask=mask, other=0.0)
    w = (e4m3_byte(b, 0) * unit) * scale + offset
    if BF16_BITS:  # out is the bf16 result viewed as int16: round the float32 bits to nearest even
        u = w.to(tl.int32, bitcast=True)
        w = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).to(tl.int16)
    tl.store(out_ptr + r64 * K + cols[None, :], w.to(out_ptr.dtype.element_ty), mask=mask)


def fp8_dequantize(q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor,
                   dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """A new [N, K] tensor of `dtype`: offset + scale * q per row and group of 32 columns (float32 math)."""
    check_fp8(q, scale, offset)
    assert dtype in OUT_DTYPES, f"dtype must be one of {OUT_DTYPES}, got {dtype}"
    n, k = q.shape
    out = torch.empty((n, k), dtype=dtype, device=q.device)
    if n == 0:
        return out
    extra = {} if interpreting() else {"enable_fp_fusion": False}  # q*scale and +offset rounded apart, as in PyTorch
    grid = (triton.cdiv(n, BLOCK_N), triton.cdiv(k, BLOCK_K))
    bf16 = dtype == torch.bfloat16
    _fp8_dequantize_kernel[grid](q.view(torch.uint8), scale, offset, out.view(torch.int16) if bf16 else out,
                                 n, k, k // GROUP, UNIT, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP=GROUP,
                                 BF16_BITS=bf16, num_warps=NUM_WARPS, **extra)
    return out


def fp8_dequantize_ref(q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor,
                       dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """The PyTorch twin: float32 offset + scale * q, cast to `dtype`."""
    return dequantize(q, scale, offset).to(dtype)
