"""Batch-1 GEMVs with FP8 weights in CUDA C on CUDA cores (Hopper with NVRTC): the twins of the Triton FP8
kernels, same contracts, same weight format (inference.quant: e4m3 [N, K] with a float32 scale and offset
per row and group of 32 columns), same PyTorch references:
    fp8_cuda_rmsnorm_gemv          out = W @ (rmsnorm(x) * norm_w) + bias   (kernels.fp8_rmsnorm_gemv; QKV)
    fp8_cuda_gemv_residual         x += W @ a, optional L2 prefetch after   (kernels.fp8_gemv_residual)
    fp8_cuda_rmsnorm_gate_up_silu  out = silu(Wg @ n) * (Wu @ n)            (kernels.fp8_gate_up_silu)
    fp8_cuda_lm_head_argmax        the LM head's logits (fp8_cuda_rmsnorm_gemv), then argmax and feed
                                   (kernels.stream_lm_head.logits_argmax)     (kernels.fp8_lm_head_argmax)
Activations float32, products and sums float32. fp8_cuda_rmsnorm_gemv and the LM head also take an int8
weight (inference.quant.Int8Weight, `offset` None: a float16 scale per group, w = scale * q; each byte to
float32 by one byte permute and one add, exact), the FP8 engine's LM head.

Why: the Triton FP8 GEMVs are instruction-bound (a reduction per group, layout conversions through shared
memory). Here a warp owns R rows (gate/up: R gate rows and their up rows), its lanes read 16-byte chunks
(half a group each) of every row, a batch of U chunks per row in registers with the next batch loaded
while this one is multiplied; the first batch is issued before the PDL wait. The activation is staged once
per CTA in shared memory, transposed for conflict-free float4 reads, with each chunk's sum of x (the
offsets' term). e4m3 bytes are unpacked with 3 integer ops each (2 for the top byte); sums are reduced
with warp shuffles once per row, and over the WK warps that split a row group's K through shared memory.
CUDA C and the arithmetic: kernels/csrc/fp8_gemv.cu.

Launch configs (`Config`): R rows per warp, WK warps per row group (splitting K), NW warps per CTA, U
chunks per row and batch, early (release the next kernel right after the PDL wait: gate/up, so that
down_proj's CTAs load their weights while it streams). `config_for(kind, n, k)` is the rule. (K split over
several CTAs per row block was measured not faster and removed: kernels/PERF.md.)

Not here: the Triton LM head with argmax in one launch (kernels.fp8_lm_head_argmax), quantization
(inference.quant).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._fp8 import check_fp8, check_gate_up_args, check_residual_args
from kernels.lm_head_argmax import check_lm_head_args
from kernels.lm_head_mma_cols import SCRATCH
from kernels.rmsnorm_gemv import check_rmsnorm_gemv_args
from kernels.stream_lm_head import logits_argmax

MODES = {"rmsnorm_gemv": (0, "fp8_cuda_rmsnorm_gemv"), "residual": (1, "fp8_cuda_gemv_residual"),
         "gate_up": (2, "fp8_cuda_gate_up_silu")}
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
COMPILE_OPTIONS = ("--ftz=false",)  # e4m3 subnormals unpack to float32 subnormals: they must not flush

_SOURCE = _cuda_rtc.load_source("fp8_gemv.cu")  # CUDA C: kernels/csrc/fp8_gemv.cu (+ common.cuh)


@dataclass(frozen=True)
class Config:
    """A launch's shape: R rows (gate/up: row pairs) per warp, WK warps per row group splitting K, NW warps
    per CTA (a multiple of WK), U 16-byte chunks per row and batch, early PDL release, cvt unpacking."""
    R: int = 2
    WK: int = 1
    NW: int = 8
    U: int = 4
    early: bool = False
    cvt: bool = False  # unpack with the hardware e4m3x2 -> f16x2 conversion instead of integer ops

    def units_per_cta(self) -> int:
        return self.NW // self.WK * self.R


def config_for(kind: str, n: int, k: int) -> Config:
    """The rule for a GEMV of `kind` ("gemv", "residual", "gate_up": n = I, "head": the LM head) over [n, k]:
    enough CTAs to fill the GPU at the 1.5B-3B shapes (o_proj and down split K over warps: their N is small), x
    staged once per CTA for several rows (the LM head: 32 rows a CTA, so that its ~5,000 CTAs stage ~30 MB of
    activation from L2, not ~120)."""
    if kind == "head":
        return Config(R=2, WK=1, NW=16, U=2)
    if kind == "gate_up":
        return Config(R=1, WK=1, NW=8, U=4, early=True, cvt=True)
    if kind == "residual":
        return Config(R=2, WK=2, NW=8, U=4, cvt=True) if k >= 4096 else Config(R=1, WK=2, NW=8, U=4, cvt=True)
    return Config(R=2, WK=1, NW=4, U=4, cvt=True)


class _Params(ctypes.Structure):
    _fields_ = [("q", ctypes.c_void_p), ("scale", ctypes.c_void_p), ("offset", ctypes.c_void_p),
                ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p), ("bias", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("pf", ctypes.c_void_p), ("pf_bytes", ctypes.c_uint64),
                ("units", ctypes.c_int), ("eps", ctypes.c_float)]


def smem_bytes(k: int) -> int:
    """Dynamic shared memory of a launch: the staged activation (k floats) and its chunk sums (k/16 floats)."""
    return 4 * k + 4 * (k // 16)


def source(mode: str, k: int, cfg: Config, norm_kind: int = -1, bias_kind: int = -1, pf: bool = False,
           int8: bool = False) -> tuple[str, str]:
    """(CUDA source, kernel name) of a variant; kinds: -1 none, 0 bf16, 1 fp16, 2 fp32; int8: int8 weights."""
    m, name = MODES[mode]
    assert k % 32 == 0 and cfg.NW % cfg.WK == 0 and cfg.R >= 1 and cfg.U >= 1
    per = -(-(k // 16) // (32 * cfg.WK))  # chunks per lane and row
    defines = {"KERNEL_NAME": name, "MODE": m, "KDIM": k, "R": cfg.R, "WK": cfg.WK, "NW": cfg.NW,
               "U": max(1, min(cfg.U, per)), "NORM_KIND": norm_kind, "BIAS_KIND": bias_kind,
               "EARLY": int(cfg.early), "PF": int(pf), "CVT": int(cfg.cvt), "INT8": int(int8)}
    return "".join(f"#define {a} {b}\n" for a, b in defines.items()) + _SOURCE, name


@lru_cache(maxsize=None)
def _kernel(device_index: int, mode: str, k: int, cfg: Config, norm_kind: int, bias_kind: int, pf: bool,
            int8: bool):
    src, name = source(mode, k, cfg, norm_kind, bias_kind, pf, int8)
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", COMPILE_OPTIONS)
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem_bytes(k), 1)



def supported(q: torch.Tensor) -> bool:
    """Whether these kernels take 8-bit weight values `q` ([N, K] e4m3, or int8 for rmsnorm_gemv and the LM
    head) on their device."""
    return (q.dim() == 2 and q.dtype in (torch.float8_e4m3fn, torch.int8) and q.is_contiguous() and q.shape[1] % 32 == 0
            and q.data_ptr() % 16 == 0 and q.device.type == "cuda" and _cuda_rtc.available(q.device))


def _launch(mode: str, q, scale, offset, act, out, units: int, cfg: Config, *, norm_w=None, bias=None,
            eps: float = 1e-6, pdl: bool = False, pf: torch.Tensor | None = None) -> None:
    assert supported(q), "the CUDA FP8 GEMVs need contiguous 8-bit weights, K % 32 == 0, a Hopper GPU with NVRTC"
    assert offset is not None or mode == "rmsnorm_gemv", "int8 weights: rmsnorm_gemv (the LM head) only"
    assert act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert norm_w is None or norm_w.data_ptr() % (4 * norm_w.element_size()) == 0, \
        "norm_w must be aligned to 4 of its elements (read 4 at a time)"
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    kern = _kernel(dev, mode, q.shape[1], cfg, -1 if norm_w is None else _KIND[norm_w.dtype],
                   -1 if bias is None else _KIND[bias.dtype], pf is not None, offset is None)
    prm = _Params(q.data_ptr(), scale.data_ptr(), offset.data_ptr() if offset is not None else 0, act.data_ptr(),
                  norm_w.data_ptr() if norm_w is not None else 0, bias.data_ptr() if bias is not None else 0,
                  out.data_ptr(), pf.data_ptr() if pf is not None else 0, pf.numel() if pf is not None else 0,
                  units, eps)
    kern.launch((-(-units // cfg.units_per_cta()), 1, 1), 32 * cfg.NW, [prm], pdl=pdl)


def fp8_cuda_rmsnorm_gemv(
    x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, out: torch.Tensor,
    norm_w: torch.Tensor | None = None, eps: float = 1e-6, bias: torch.Tensor | None = None,
    *, pdl: bool = False, early: bool | None = None, config: Config | None = None,
) -> torch.Tensor:
    """Same contract as kernels.fp8_rmsnorm_gemv.fp8_rmsnorm_gemv (reference: fp8_rmsnorm_gemv_ref); offset
    None: int8 q. The default config: the LM head's rule for an int8 weight, else the QKV rule. early: release
    the next kernel (PDL) right after the wait instead of after the main loop (None: the config's)."""
    check_fp8(q, scale, offset)
    n, k = q.shape
    check_rmsnorm_gemv_args(n, k, x, out, norm_w, bias, q.device)
    cfg = config or config_for("head" if offset is None else "gemv", n, k)
    if early is not None:
        cfg = replace(cfg, early=early)
    _launch("rmsnorm_gemv", q, scale, offset, x, out, n, cfg, norm_w=norm_w, bias=bias, eps=eps, pdl=pdl)
    return out


def fp8_cuda_lm_head_argmax(
    x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None, logits: torch.Tensor,
    token: torch.Tensor, pos: torch.Tensor, embed: torch.Tensor, scratch: torch.Tensor,
    norm_w: torch.Tensor | None = None, eps: float = 1e-6, ring: torch.Tensor | None = None, *, pdl: bool = False,
    config: Config | None = None,
) -> torch.Tensor:
    """kernels.fp8_lm_head_argmax's contract in two launches, the logits by fp8_cuda_rmsnorm_gemv (config: the
    head's rule), then kernels.stream_lm_head.logits_argmax (the largest logit, the lowest row among equal
    ones; pos += 1, ring, x = embed[token]); scratch: kernels.lm_head_mma_cols.mma_scratch. Returns token."""
    n, k = q.shape
    check_lm_head_args(n, k, x, logits, token, pos, embed, scratch[:2], norm_w, ring, q.device)
    assert scratch.numel() == SCRATCH, "scratch: kernels.lm_head_mma_cols.mma_scratch"
    fp8_cuda_rmsnorm_gemv(x, q, scale, offset, logits, norm_w, eps, pdl=pdl, config=config or config_for("head", n, k))
    return logits_argmax(logits.view(1, n), token, pos, embed, scratch, ring, x_next=x, pdl=pdl)


def fp8_cuda_gemv_residual(a: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor,
                           x: torch.Tensor, *, pdl: bool = False, l2_prefetch: torch.Tensor | None = None,
                           early: bool | None = None, config: Config | None = None) -> torch.Tensor:
    """Same contract as kernels.fp8_gemv_residual.fp8_gemv_residual (reference: fp8_gemv_residual_ref):
    x[N] += W @ a in place; l2_prefetch: a flat tensor (16-byte aligned, a multiple of 16 bytes) whose bytes
    the CTAs prefetch into L2 after their main loop, an even share each. early: release the next kernel (PDL)
    right after the wait instead of after the main loop (None: the config's)."""
    n, k = check_residual_args(a, q, scale, offset, x)
    pf = None
    if l2_prefetch is not None:
        pf = l2_prefetch.reshape(-1).view(torch.uint8)
        assert pf.numel() % 16 == 0 and pf.data_ptr() % 16 == 0, "l2_prefetch: 16-byte aligned, 16-byte multiple"
    cfg = config or config_for("residual", n, k)
    if early is not None:
        cfg = replace(cfg, early=early)
    _launch("residual", q, scale, offset, a, x, n, cfg, pdl=pdl, pf=pf)
    return x


def fp8_cuda_rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, q: torch.Tensor, scale: torch.Tensor,
    offset: torch.Tensor, out: torch.Tensor, *, pdl: bool = False, config: Config | None = None,
) -> torch.Tensor:
    """Same contract as kernels.fp8_gate_up_silu.fp8_rmsnorm_gate_up_silu (reference:
    fp8_rmsnorm_gate_up_silu_ref)."""
    i, k = check_gate_up_args(x, norm_w, q, scale, offset, out)
    _launch("gate_up", q, scale, offset, x, out, i, config or config_for("gate_up", i, k), norm_w=norm_w,
            eps=eps, pdl=pdl)
    return out
