"""The decode GEMVs for 1..16 activation columns in CUDA C on CUDA cores (Hopper with NVRTC, 16-bit weights):
speculative decoding's verify step (k columns) AND the plain steps of a speculating run (one column), which must
compute the same bits. The same contracts as kernels.gemv_mma_cols / lm_head_mma_cols (their PyTorch
references too):
    cols_rmsnorm_gemv          out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias     (QKV; final norm + LM head)
    cols_gemv_residual         x[c] += W @ a[c]                                 (o_proj, down_proj)
    cols_rmsnorm_gate_up_silu  out[c] = silu(W_g @ n_c) * (W_u @ n_c)
    cols_lm_head_argmax        the LM head's logits, per-column argmax, the draft's acceptance, the token fed back

Why: the tensor-core GEMVs (gemv_mma_cols) give column-count-independent bits but a slow one-column step, and
the k-column twins of the Triton kernels (rmsnorm_gemv_cols, ...) copy the one-column kernels' per-tile partial
sums per column: k accumulator tiles and k block-wide reductions per program, so a verify step of 8 tokens cost
2.7x a one-token step on the 135M default model (H200; lab.profile_verify). Here each column's arithmetic is
written out (kernels/csrc/cols_gemv.cu: explicit float32 operations in a fixed order, compiled without FMA
contraction, warp-shuffle trees), so it does not depend on how many columns a launch carries, and a column costs
its multiply-adds and a few shuffles: the weights are read once per launch for all columns.

Launch configs (`Config`): R rows per warp, WK warps splitting K, NW warps per CTA, U chunks per row and batch;
what sets a column's bits (`bits_key`: WK, and NW where the mode normalizes) is a function of the weight's shape
and kind only, never of the column count. Columns are staged in shared memory,
CG per CTA (`column_groups`: a divisor of the column count within SMEM_CAP; the groups of a row block are
neighbouring CTAs).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels.gemv_mma_cols import NC, gate_up_cols_args, residual_cols_args, rmsnorm_cols_args
from kernels.lm_head_mma_cols import head_cols_args

MODES = {"rmsnorm_gemv": (0, "cols_rmsnorm_gemv"), "residual": (1, "cols_gemv_residual"),
         "gate_up": (2, "cols_gate_up_silu"), "lm_head": (3, "cols_lm_head_argmax")}
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
COMPILE_OPTIONS = ("--fmad=false",)  # every multiply-add is an explicit fmaf: the same in every variant
SMEM_CAP = 96 * 1024  # staged columns per CTA: two CTAs an SM
SMALL = 8 << 20  # weights this small are read again from L2 by a launch's column groups (config_for)

_SOURCE = _cuda_rtc.load_source("cols_gemv.cu")  # CUDA C: kernels/csrc/cols_gemv.cu (+ common.cuh)
_SOURCE_MMA = _cuda_rtc.load_source("cols_gemv_mma.cu")  # tensor cores: kernels/csrc/cols_gemv_mma.cu


@dataclass(frozen=True)
class Config:
    """R rows (gate/up: row pairs) per warp, WK warps per row group splitting K, NW warps per CTA, U chunks
    per row and batch, at most CG columns per CTA (more columns: neighbouring CTAs on the same rows).
    mma: the tensor-core kernel (kernels/csrc/cols_gemv_mma.cu, bf16 weights): R is 16-row tiles per warp, U MMA
    steps (4 chunks) per batch, 8 columns per CTA (CG unused), SK CTAs of a cluster splitting K.
    source: CUDA C compiled instead of kernels/csrc/cols_gemv.cu (its includes pasted in), for an instrument's A/B
    of a kernel change (lab.probe_cols_gemv --against); None: this tree's."""
    R: int = 2
    WK: int = 1
    NW: int = 8
    U: int = 4
    CG: int = 16
    mma: bool = False
    SK: int = 1
    source: str | None = field(default=None, repr=False)

    def units_per_cta(self) -> int:
        return self.NW // self.WK * self.R * (16 if self.mma else 1)


def config_for(mode: str, n: int, k: int, ncols: int = 1) -> Config:
    """The rule (kernels.fp8_cuda_gemv's shapes): gate/up a row pair per warp, o_proj / down_proj two warps a
    row (few rows), QKV two rows a warp, the LM head four rows a warp and eight warps. Weights small enough to
    be read again from L2 (<= SMALL bytes; n = I for gate/up) take at most 2 columns per CTA: a warp's serial
    work grows with its columns, and the 135M model's layer GEMVs at 8 columns went 22.9 -> 16.3 us
    (lab.probe_cols_gemv --sweep, H200; the LM head lost with fewer columns per CTA: its activation is
    staged once per 64 rows).
    The column count `ncols` picks only what leaves the bits alone (bits_key: R, U, CG; NW without a norm), for
    small weights (lab.probe_cols_gemv --same-bits, 135M model, H200, us at 2 / 4 / 8 columns): o_proj and
    down_proj one column per CTA up to 4 columns (down 2.99 -> 2.36, 3.35 -> 2.86) and two rows per warp past
    that (down 4.28 -> 4.02 at 8); gate/up two row pairs per warp past 4 columns (5.89 -> 4.82 at 8); QKV four
    rows per warp and up to 4 columns per CTA past 4 columns (3.18 -> 3.03 at 8); past 8 columns a small o_proj
    (K <= 1,024) eight rows per warp and four warps (the 135M o_proj at 16 columns 4.72 -> 4.36 us; at 8 columns
    3.16 vs 3.55: lab.probe_cols_gemv --same-bits --columns 8,16, H200, 2026-11-26 fifteenth session). Since a
    warp's sums are scattered over its lanes (seventeenth session), wider CTAs pay less per output: past 8 columns
    gate/up 8 columns per CTA (the 135M's 7.15 -> 6.03 us) and a small down_proj four rows per warp and 2 columns
    per CTA (5.61 -> 4.30; same probe, H100, 2026-11-27)."""
    small = (2 * n if mode == "gate_up" else n) * k * 2 <= SMALL
    cg = 2 if small and mode != "lm_head" else 16
    wide = small and ncols > 4
    if mode == "gate_up":
        return Config(R=2 if wide else 1, WK=1, NW=8, U=4, CG=8 if small and ncols > 8 else cg)
    if mode == "residual":
        if k >= 4096:
            return Config(R=2, WK=2, NW=8, U=4, CG=cg)
        if small and k <= 1024 and ncols > 8:  # o_proj of the 16-column verify step
            return Config(R=8, WK=2, NW=4, U=4, CG=1)
        if small and ncols > 8:  # down_proj of the 16-column verify step
            return Config(R=4, WK=2, NW=8, U=4, CG=2)
        return Config(R=2 if wide else 1, WK=2, NW=8, U=4, CG=1 if small and ncols > 1 else cg)
    if mode == "lm_head":
        return Config(R=4, WK=1, NW=8, U=4)
    return Config(R=4 if wide else 2, WK=1, NW=4, U=4, CG=4 if wide else cg)


def bits_key(mode: str, cfg: Config) -> tuple:
    """What sets a column's bits in the CUDA-core kernel: WK (a lane's chunks in order, the shuffle tree, the WK
    partials in order) and, where the mode normalizes (all but residual), NW (the sum of squares over NW * 32
    threads, then the warps in order). R, U and CG do not: configs of one key give the same bits. The tensor-core
    kernel: WK and SK (which warp and CTA add which steps, then the partials in order); its norm's sum of squares
    is added in an order fixed by K, its chains take their steps in order whatever R and U."""
    if cfg.mma:  # a chain's steps in order whatever the batch (U) or tiles per warp (R); the norm's sum fixed by K
        return ("mma", cfg.WK, cfg.SK)
    return (cfg.WK,) if mode == "residual" else (cfg.WK, cfg.NW)


def default_config(mode: str, n: int, k: int, dtype: torch.dtype, ncols: int = 1) -> Config:
    """The launchers' config when none is given: the tensor-core kernel for a bf16 LM head whose K is not a
    multiple of 1,024 (H200, lab.probe_cols_gemv, us at 1 / 8 columns against the CUDA-core kernel: 135M
    19.7-20.0 / 25.1 vs 19.9 / 53.8, 0.5B 75.8 / 98.0 vs 80.6 / 179.1, 1.5B 144.0 / 183.7 vs 197.5 / 347.0; but
    0.6B, K 1,024, 88.6 / 111.6 vs 79.6 / 181.6 and no launch config of it under 88: probably its 2 KB rows,
    which put a warp's 16 rows at one DRAM-channel offset), config_for's CUDA-core kernel for the rest (the
    tensor-core one lost on the small layer weights at every column count: the 135M QKV 3.1-3.8 vs 2.2 us at 1
    column, 4.1-4.6 vs 3.1 at 8). A function of the weight only, so a plain step and a verify step of a weight
    compute the same bits (the column count picks within a bits_key)."""
    if mode == "lm_head" and dtype == torch.bfloat16 and mma_fits(k) and k % 1024:
        return mma_config_for(mode, n, k, ncols)
    return config_for(mode, n, k, ncols)


def mma_steps(k: int, sk: int = 1) -> int:
    """MMA steps (4 chunks, 32 of K) of one CTA of the tensor-core kernel when sk CTAs split K."""
    return -(-(-(-k // 32)) // sk)


def mma_smem(k: int, sk: int = 1) -> int:
    """The tensor-core kernel's shared memory: a CTA's K range (whole MMA steps of 32) of 8 columns, 3 bf16 parts
    (48 bytes per K) and the float4s' sums of squares (8 bytes per K)."""
    return 56 * 32 * mma_steps(k, sk)


def mma_fits(k: int, sk: int = 1) -> bool:
    """Whether the tensor-core kernel takes K split over sk CTAs: its staged columns fit SMEM_CAP."""
    return mma_smem(k, sk) <= SMEM_CAP


def mma_config_for(mode: str, n: int, k: int, ncols: int = 1) -> Config:
    """The tensor-core kernel's rule (n = I for gate/up): a 16-row tile per warp. Many tiles (the LM head): a warp
    per tile over all of K, 8 warps a CTA, 2 steps per batch (registers for two CTAs an SM; lab.probe_cols_gemv:
    at 1 column as fast as the CUDA-core kernel, 25 vs 54 us at 8 on the 135M model, H200). Few tiles: SK CTAs
    of a cluster split K until there are >= 128 CTAs (16 rows a CTA would leave most SMs idle: the 135M down_proj
    took 6.4 vs 3.8 us on 36 CTAs, Nsight Compute), and the warps of a CTA split its steps, about 2 each (small
    weights are latency-bound: every load in flight at once). ncols picks within the bits_key: the LM head past 8
    columns (two CTAs read each tile, one per 8 columns) two tiles a warp (the 135M model at 16 columns 46.1 ->
    41.9 us; at 8 columns 25.3 vs 30.9: lab.probe_cols_gemv --sweep --columns 8,16, H200)."""
    tiles, steps = -(-n // 16), -(-k // 32)
    if tiles >= 1024:
        assert mma_fits(k), f"K={k}: the tensor-core column GEMV stages 56 K bytes (<= {SMEM_CAP})"
        return Config(R=2 if ncols > 8 else 1, WK=1, NW=8, U=2, mma=True)
    sk = 1
    while sk < 8 and tiles * sk < 128 and steps // (2 * sk) >= 2:
        sk *= 2
    assert mma_fits(k, sk), f"K={k}: the tensor-core column GEMV stages 56 K / {sk} bytes (<= {SMEM_CAP})"
    per_cta = -(-steps // sk)
    wk = 2
    while wk < 8 and -(-per_cta // wk) > 2:
        wk *= 2
    return Config(R=1, WK=wk, NW=wk, U=8, mma=True, SK=sk)


def column_groups(ncols: int, k: int, cap: int = 16) -> int:
    """Columns per CTA: the largest divisor of ncols, at most `cap`, whose staged activation (4 k bytes a column)
    fits SMEM_CAP."""
    return max(d for d in range(1, ncols + 1) if ncols % d == 0 and (d == 1 or (4 * k * d <= SMEM_CAP and d <= cap)))


class _Params(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p),
                ("bias", ctypes.c_void_p), ("out", ctypes.c_void_p), ("scratch", ctypes.c_void_p),
                ("draft", ctypes.c_void_p), ("klen", ctypes.c_void_p), ("token", ctypes.c_void_p),
                ("pos", ctypes.c_void_p), ("embed", ctypes.c_void_p), ("x_next", ctypes.c_void_p),
                ("result", ctypes.c_void_p), ("ring", ctypes.c_void_p), ("ring_size", ctypes.c_int),
                ("units", ctypes.c_int), ("groups", ctypes.c_int), ("ncols", ctypes.c_int), ("eps", ctypes.c_float)]


def lane_chunks(k: int, wk: int) -> int:
    """16-byte chunks of a row a lane of the CUDA-core kernel reads at most (K split over wk warps): U past it
    builds the same kernel (source clamps it)."""
    return -(-(k // 8) // (32 * wk))


def source(mode: str, k: int, cg: int, cfg: Config, wkind: int, norm_kind: int = -1, bias_kind: int = -1
           ) -> tuple[str, str]:
    """(CUDA source, kernel name) of a variant; kinds: -1 none, 0 bf16, 1 fp16, 2 fp32."""
    m, name = MODES[mode]
    assert k % 8 == 0 and cfg.NW % cfg.WK == 0 and cfg.R >= 1 and cfg.U >= 1 and 1 <= cg <= NC
    if cfg.mma:
        assert wkind == 0 and mma_fits(k, cfg.SK), "the tensor-core column GEMV takes bf16 weights, K it stages"
        assert cfg.SK == 1 or mode != "lm_head", "the LM head does not split K"
        per = -(-mma_steps(k, cfg.SK) // cfg.WK)
    else:
        per = lane_chunks(k, cfg.WK)
    defines = {"KERNEL_NAME": name, "MODE": m, "KDIM": k, "CG": cg, "R": cfg.R, "WK": cfg.WK, "NW": cfg.NW,
               "U": max(1, min(cfg.U, per)), "WKIND": wkind, "NORM_KIND": norm_kind, "BIAS_KIND": bias_kind,
               "SK": cfg.SK}
    body = _SOURCE_MMA if cfg.mma else cfg.source or _SOURCE
    return "".join(f"#define {a} {b}\n" for a, b in defines.items()) + body, name


@lru_cache(maxsize=None)
def _kernel(device_index: int, mode: str, k: int, cg: int, cfg: Config, wkind: int, norm_kind: int,
            bias_kind: int):
    src, name = source(mode, k, cg, cfg, wkind, norm_kind, bias_kind)
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", COMPILE_OPTIONS)
    smem = mma_smem(k, cfg.SK) if cfg.mma else 4 * k * cg  # staged columns: 3 bf16 parts of 8 / float32 of cg
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem, cfg.SK)


def supported(w: torch.Tensor) -> bool:
    """Whether these kernels take the 16-bit weight `w` ([N, K], K % 8 == 0) on its device."""
    return (w.dim() == 2 and w.dtype in (torch.bfloat16, torch.float16) and w.is_contiguous()
            and w.shape[1] % 8 == 0 and w.data_ptr() % 16 == 0 and w.device.type == "cuda"
            and _cuda_rtc.available(w.device))


def _ptr(t: torch.Tensor | None) -> int:
    return t.data_ptr() if t is not None else 0


def _launch(mode: str, w, act, out, units: int, ncols: int, cfg: Config | None, *, norm_w=None, bias=None,
            eps: float = 1e-6, pdl: bool = False, head: dict | None = None) -> None:
    assert supported(w), "the CUDA column GEMVs need contiguous bf16/fp16 weights, K % 8 == 0, a Hopper GPU"
    k = w.shape[1]
    assert act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert norm_w is None or norm_w.data_ptr() % (4 * norm_w.element_size()) == 0, "norm_w: 4-element aligned"
    dev = w.device.index if w.device.index is not None else torch.cuda.current_device()
    cfg = cfg or default_config(mode, units, k, w.dtype, ncols)
    cg = 8 if cfg.mma else column_groups(ncols, k, cfg.CG)
    groups = -(-ncols // cg)
    kern = _kernel(dev, mode, k, cg, cfg, _KIND[w.dtype], -1 if norm_w is None else _KIND[norm_w.dtype],
                   -1 if bias is None else _KIND[bias.dtype])
    h = head or {}
    ring = h.get("ring")
    prm = _Params(w.data_ptr(), act.data_ptr(), _ptr(norm_w), _ptr(bias), out.data_ptr(), _ptr(h.get("scratch")),
                  _ptr(h.get("draft")), _ptr(h.get("klen")), _ptr(h.get("token")), _ptr(h.get("pos")),
                  _ptr(h.get("embed")), _ptr(h.get("x_next")), _ptr(h.get("result")), _ptr(ring),
                  ring.numel() if ring is not None else 1, units, groups, ncols, eps)
    blocks = -(-units // cfg.units_per_cta())
    kern.launch((blocks * groups * cfg.SK, 1, 1), 32 * cfg.NW, [prm], pdl=pdl)


def cols_rmsnorm_gemv(
    x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    bias: torch.Tensor | None = None, *, pdl: bool = False, config: Config | None = None,
) -> torch.Tensor:
    """out[c] = W @ (rmsnorm(x[c]) * norm_w) + bias for the n columns of x ([n, K] or one [K]); out [n, N]
    (or [N]). Reference: kernels.gemv_mma_cols.rmsnorm_gemv_mma_ref. Returns out."""
    n, k, xs, outs = rmsnorm_cols_args(x, w, out, norm_w, bias)
    _launch("rmsnorm_gemv", w, xs, outs, n, xs.shape[0], config, norm_w=norm_w, bias=bias, eps=eps, pdl=pdl)
    return out


def cols_gemv_residual(a: torch.Tensor, w: torch.Tensor, x: torch.Tensor, *, pdl: bool = False,
                       config: Config | None = None) -> torch.Tensor:
    """x[c] += W @ a[c] for the n columns of a ([n, K] or [K]) and x ([n, N] or [N]), in place; returns x."""
    n, k, as_, xs = residual_cols_args(a, w, x)
    _launch("residual", w, as_, xs, n, xs.shape[0], config, pdl=pdl)
    return x


def cols_rmsnorm_gate_up_silu(
    x: torch.Tensor, norm_w: torch.Tensor, eps: float, w_gate_up: torch.Tensor, out: torch.Tensor, *,
    pdl: bool = False, config: Config | None = None,
) -> torch.Tensor:
    """out[c] = silu(W[0:I] @ n_c) * (W[I:2I] @ n_c), n_c = rmsnorm(x[c]) * norm_w, for the n columns of
    x ([n, K] or [K]); out [n, I] (or [I]). Returns out."""
    i, k, xs, outs = gate_up_cols_args(x, norm_w, w_gate_up, out)
    _launch("gate_up", w_gate_up, xs, outs, i, xs.shape[0], config, norm_w=norm_w, eps=eps, pdl=pdl)
    return out


def cols_lm_head_argmax(
    x: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, token: torch.Tensor, pos: torch.Tensor,
    embed: torch.Tensor, scratch: torch.Tensor, norm_w: torch.Tensor | None = None, eps: float = 1e-6,
    ring: torch.Tensor | None = None, *, draft: torch.Tensor | None = None, klen: torch.Tensor | None = None,
    x_next: torch.Tensor | None = None, result: torch.Tensor | None = None, pdl: bool = False,
    config: Config | None = None,
) -> torch.Tensor:
    """kernels.lm_head_mma_cols.lm_head_argmax_mma's contract (reference: lm_head_argmax_mma_ref; scratch:
    mma_scratch's): the n columns' logits and argmaxes (the largest logit, the lowest row among equal ones);
    with a draft the accepted length a; token = argmax of column a, pos += a + 1, ring[pos % R] = token,
    x_next (default: x, one column only) = embed[token]; result = (argmaxes, a). Returns token."""
    n, k, xs, lg, x_next = head_cols_args(x, w, logits, token, pos, embed, scratch, norm_w, ring, draft, klen,
                                          x_next, result)
    cols = xs.shape[0]
    assert embed.dtype == w.dtype, "embed and W: the same 16-bit dtype"
    head = dict(scratch=scratch, draft=draft, klen=klen, token=token, pos=pos, embed=embed, x_next=x_next,
                result=result, ring=ring)
    _launch("lm_head", w, xs, lg, n, cols, config, norm_w=norm_w, eps=eps, pdl=pdl, head=head)
    return token
