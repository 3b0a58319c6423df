"""Batch-1 GEMVs with FP8 weights (inference.quant's format: e4m3 [N, K], float32 scale and offset per row and
group of 32 columns) streamed through a shared-memory ring by one persistent CTA per SM (Hopper with NVRTC;
K a multiple of 128). The twins of kernels.fp8_cuda_gemv, same contracts, same references:
    fp8_stream_rmsnorm_gemv          out = W @ (rmsnorm(x) * norm_w) + bias   (kernels.fp8_rmsnorm_gemv; QKV)
    fp8_stream_gemv_residual         x += W @ a, optional L2 prefetch after   (kernels.fp8_gemv_residual)
    fp8_stream_rmsnorm_gate_up_silu  out = silu(Wg @ n) * (Wu @ n)            (kernels.fp8_gate_up_silu)

Why: the CUDA-core FP8 GEMVs (kernels.fp8_cuda_gemv) are bound by their SMs, not by DRAM (Nsight Compute on
an H200: gate/up's time follows the SM clock, 40% DRAM throughput; kernels/PERF.md): each short-lived CTA
waits for its own loads, stages the activation, reduces, exits. Here, as in kernels.stream_gemv, a producer
thread per CTA keeps bulk copies of the CTA's rows in flight from the kernel's start (weights do not depend on
the previous kernel) while the consumer warps (8; gate/up at K = 1536 / 2048: 12 / 16, see plan) stage the
activation once and work through the ring; the arithmetic is fp8_cuda_gemv's (hardware e4m3 -> f16 ->
float32, float32 sums). CUDA C: kernels/csrc/fp8_stream_gemv.cu.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._fp8 import check_fp8, check_gate_up_args, check_residual_args
from kernels.rmsnorm_gemv import check_rmsnorm_gemv_args

NWARP = 8  # consumer warps (and a producer warp) per CTA unless a launch says otherwise
MT = 16  # rows per tile at most (fewer where a CTA has fewer rows: plan's "mt"), unless a launch says otherwise
MAX_MT = 32
MAX_KC = 2048  # columns per ring slot at most: whole rows up to K = 2048 (three bulk copies a tile)
SMEM_BUDGET = 200 * 1024
MODES = {"rmsnorm_gemv": (0, "fp8_stream_rmsnorm_gemv", 1), "residual": (1, "fp8_stream_gemv_residual", 1),
         "gate_up": (2, "fp8_stream_gate_up_silu", 2)}
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
COMPILE_OPTIONS = ("--ftz=false",)  # e4m3 subnormals become f16 subnormals, then float32 ones: keep them

_SOURCE = _cuda_rtc.load_source("fp8_stream_gemv.cu")


class _Params(ctypes.Structure):
    _fields_ = [("q", ctypes.c_void_p), ("scale", ctypes.c_void_p), ("offset", ctypes.c_void_p),
                ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p), ("bias", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("pf", ctypes.c_void_p), ("pf_bytes", ctypes.c_uint64),
                ("units", ctypes.c_int), ("eps", ctypes.c_float)]


def slot_columns(k: int, cap: int = MAX_KC) -> int:
    """Columns per ring slot: all of K up to `cap`, else about equal slices, multiples of 128."""
    n = -(-k // cap)
    return -(-(-(-k // n)) // 128) * 128


# gate/up at K = 1536 / 2048 (whole rows a slot): each row pair's K / 16 chunks over K / 512 warps, one chunk a lane,
# and four such groups (12 / 16 consumer warps instead of 8 warps of a row pair each): per launch on an H200 1.5B
# 12.71 -> 11.65 us, Llama-3.2-1B 13.53 -> 12.53, 3B 17.47 -> 16.61 (`python -m lab.probe_fp8_stream`, eighteenth
# session, bench-results/h200-2026-11-27-session18/fp8warps/; 16 warps at K = 1536 leave a quarter of the lanes
# idle: 12.61). down_proj gained from no count (4 to 24 warps).


@dataclass(frozen=True)
class Config:
    """A launch's overrides of its plan (None: the plan's): consumer warps, warps per row pair (wks), rows per tile
    (mt), most columns per ring slot (kc), CTAs (grid; one an SM by default). For probes (lab.probe_fp8_stream)."""
    warps: int | None = None
    wks: int | None = None
    mt: int | None = None
    kc: int | None = None
    grid: int | None = None


def plan(mode: str, units: int, k: int, sms: int, budget: int | None = None, config: Config = Config()) -> dict:
    """Grid (one CTA per SM, at most one per unit), consumer warps (NWARP), warps per row pair (4 where a CTA has a
    single tile of rows longer than a slot: down_proj; else 1), columns per slot, ring slots, per-row partial sums
    and dynamic shared memory (bytes, at most `budget`) of a launch; `config` overrides the plan's choices (gate/up
    at K = 1536 or 2048: K / 512 warps a row pair, 4 pairs at once; see the comment above).
    Tiles (and ring slots) have mt rows: MT, or a CTA's rows (rounded up to even) where it has fewer, so that the
    slots hold no empty rows and more of them fit the budget (the 1.5B's down_proj: 12 rows a CTA, all five slots
    of a row in flight at once instead of four), and a ring has no more slots than the CTA fills."""
    budget = budget or SMEM_BUDGET
    grid = max(1, min(config.grid or sms, units))
    per_cta = -(-units // grid)
    wks, warps = config.wks, config.warps
    if mode == "gate_up" and k % 512 == 0 and k // 512 in (3, 4) and wks is None and warps is None:
        wks, warps = k // 512, 4 * (k // 512)  # one 16-byte chunk of a row a lane (above)
    wks = wks or (4 if per_cta <= MT and k > MAX_KC else 1)
    mt = min(config.mt or MT, per_cta + per_cta % 2)
    sums = MODES[mode][2] * per_cta * wks
    fixed = 4 * k + 4 * (k // 16) + 4 * sums  # staged activation, chunk sums, row sums
    kc = slot_columns(k, config.kc or MAX_KC)

    def stage(c: int) -> int:  # bytes of a slot: e4m3, then the scales and offsets
        return mt * c + 2 * mt * (c // 32) * 4
    while kc > 128 and fixed + 2 * stage(kc) > budget:
        kc = slot_columns(k, kc - 128)
    # no more slots than the CTA ever fills: shared memory left over lets the next kernel's CTAs in beside it
    fills = MODES[mode][2] * -(-per_cta // mt) * -(-k // kc)
    stages = max(2, min(8, fills, (budget - fixed) // stage(kc)))
    return {"grid": grid, "kc": kc, "stages": stages, "sums": sums, "wks": wks, "mt": mt, "warps": warps or NWARP,
            "smem": stages * stage(kc) + fixed}


def source(mode: str, k: int, kc: int, stages: int, norm_kind: int = -1, bias_kind: int = -1, early: bool = False,
           pf: bool = False, wks: int = 1, mt: int = MT, warps: int = NWARP) -> tuple[str, str]:
    """(CUDA source, kernel name) of a variant; kinds: -1 none, 0 bf16, 1 fp16, 2 fp32; mt: rows per tile;
    warps: consumer warps."""
    m, name = MODES[mode][:2]
    assert k % 128 == 0 and kc % 128 == 0 and stages >= 1 and 1 <= warps <= 31 and warps % wks == 0
    assert 2 <= mt <= MAX_MT and mt % 2 == 0
    defines = {"KERNEL_NAME": name, "MODE": m, "KDIM": k, "KC": kc, "NS": stages, "WKS": wks, "NORM_KIND": norm_kind,
               "BIAS_KIND": bias_kind, "EARLY": int(early), "PF": int(pf), "MT": mt, "NWARP": warps}
    return "".join(f"#define {a} {b}\n" for a, b in defines.items()) + _SOURCE, name


@lru_cache(maxsize=None)
def _kernel(device_index: int, mode: str, k: int, kc: int, stages: int, smem: int, norm_kind: int, bias_kind: int,
            early: bool, pf: bool, wks: int, mt: int, warps: int):
    src, name = source(mode, k, kc, stages, norm_kind, bias_kind, early, pf, wks, mt, warps)
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", COMPILE_OPTIONS)
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem, 1)


@lru_cache(maxsize=None)
def _sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def supported(q: torch.Tensor) -> bool:
    """Whether these kernels take FP8 weight values `q` ([N, K] e4m3) on their device."""
    return (q.dim() == 2 and q.dtype == torch.float8_e4m3fn and q.is_contiguous() and q.shape[1] % 128 == 0
            and q.data_ptr() % 16 == 0 and q.device.type == "cuda" and _cuda_rtc.available(q.device))


def _launch(mode: str, q, scale, offset, act, out, units: int, *, norm_w=None, bias=None, eps: float = 1e-6,
            pdl: bool = False, early: bool = False, pf: torch.Tensor | None = None, budget: int | None = None,
            config: Config | None = None) -> None:
    assert supported(q), "the streamed FP8 GEMVs need contiguous e4m3 weights, K % 128 == 0, a Hopper GPU with NVRTC"
    assert scale.is_contiguous() and offset.is_contiguous() and scale.data_ptr() % 16 == 0 \
        and offset.data_ptr() % 16 == 0, "scale and offset: contiguous, 16-byte aligned (bulk copies)"
    assert act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert norm_w is None or norm_w.data_ptr() % (4 * norm_w.element_size()) == 0, \
        "norm_w must be aligned to 4 of its elements (read 4 at a time)"
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    k = q.shape[1]
    p = plan(mode, units, k, _sms(dev), budget, config or Config())
    kern = _kernel(dev, mode, k, p["kc"], p["stages"], p["smem"], -1 if norm_w is None else _KIND[norm_w.dtype],
                   -1 if bias is None else _KIND[bias.dtype], early, pf is not None, p["wks"], p["mt"], p["warps"])
    prm = _Params(q.data_ptr(), scale.data_ptr(), offset.data_ptr(), act.data_ptr(),
                  norm_w.data_ptr() if norm_w is not None else 0, bias.data_ptr() if bias is not None else 0,
                  out.data_ptr(), pf.data_ptr() if pf is not None else 0, pf.numel() if pf is not None else 0,
                  units, eps)
    kern.launch((p["grid"], 1, 1), 32 * (p["warps"] + 1), [prm], pdl=pdl)  # the consumers and the producer


def fp8_stream_rmsnorm_gemv(
    x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, out: torch.Tensor,
    norm_w: torch.Tensor | None = None, eps: float = 1e-6, bias: torch.Tensor | None = None,
    *, pdl: bool = False, early: bool = False, budget: int | None = None, config: Config | None = None,
) -> torch.Tensor:
    """Same contract as kernels.fp8_rmsnorm_gemv.fp8_rmsnorm_gemv (reference: fp8_rmsnorm_gemv_ref); early:
    release the next kernel (PDL) at the start; budget: shared memory per CTA (default SMEM_BUDGET); config: the
    plan's overrides (Config)."""
    check_fp8(q, scale, offset)
    n, k = q.shape
    check_rmsnorm_gemv_args(n, k, x, out, norm_w, bias, q.device)
    _launch("rmsnorm_gemv", q, scale, offset, x, out, n, norm_w=norm_w, bias=bias, eps=eps, pdl=pdl, early=early,
            budget=budget, config=config)
    return out


def fp8_stream_gemv_residual(a: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor,
                             x: torch.Tensor, *, pdl: bool = False, l2_prefetch: torch.Tensor | None = None,
                             early: bool = False, budget: int | None = None,
                             config: Config | None = None) -> torch.Tensor:
    """Same contract as kernels.fp8_gemv_residual.fp8_gemv_residual (reference: fp8_gemv_residual_ref):
    x[N] += W @ a in place; l2_prefetch: a flat tensor (16-byte aligned, a multiple of 16 bytes) whose bytes
    the producers prefetch into L2 after their copies, an even share each; config: the plan's overrides."""
    n, k = check_residual_args(a, q, scale, offset, x)
    pf = None
    if l2_prefetch is not None:
        pf = l2_prefetch.reshape(-1).view(torch.uint8)
        assert pf.numel() % 16 == 0 and pf.data_ptr() % 16 == 0, "l2_prefetch: 16-byte aligned, 16-byte multiple"
    _launch("residual", q, scale, offset, a, x, n, pdl=pdl, early=early, pf=pf, budget=budget, config=config)
    return x


def fp8_stream_rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, q: torch.Tensor, scale: torch.Tensor,
    offset: torch.Tensor, out: torch.Tensor, *, pdl: bool = False, early: bool = False, budget: int | None = None,
    config: Config | None = None,
) -> torch.Tensor:
    """Same contract as kernels.fp8_gate_up_silu.fp8_rmsnorm_gate_up_silu (reference:
    fp8_rmsnorm_gate_up_silu_ref); config: the plan's overrides."""
    i, k = check_gate_up_args(x, norm_w, q, scale, offset, out)
    _launch("gate_up", q, scale, offset, x, out, i, norm_w=norm_w, eps=eps, pdl=pdl, early=early, budget=budget,
            config=config)
    return out
