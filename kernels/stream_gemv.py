"""Batch-1 GEMVs in CUDA C whose weights stream through a shared-memory ring (TMA bulk copies), one GEMV per
launch. Hopper (sm_90+) with NVRTC only; weights bf16/fp16 with K a multiple of 16. The runner's "overlap"
GEMVs (FastRunner.use_gemv; the default at short context) run o_proj, and for hidden sizes up to the tuning
row's stream_max_hidden also QKV and gate/up, with it, in rings small enough (`budget`) to share an SM with
the kernel before them, which releases them early, so their weights arrive while that kernel runs.

The ops are those of the Triton kernels, with the same contracts and references:
    "rmsnorm_gemv"  out = W @ (rmsnorm(x) * norm_w) + bias    (kernels.rmsnorm_gemv; QKV)
    "residual"      x += W @ a                                (kernels.gemv_residual; o_proj)
    "residual_ring" the same, the activation fed through the ring (down_proj: any K, any tokens)
    "rmsnorm_gemv_mma" the same as rmsnorm_gemv on tensor cores (a speculating run's LM head)
    "gate_up"       out = silu(Wg @ n) * (Wu @ n)             (kernels.gate_up_silu)
stream_rmsnorm_gemv, stream_gemv_residual (ring=True: "residual_ring") and stream_gate_up_silu launch one each
(stream_op).

The idea: weights do not depend on the previous op, so a producer warp per CTA copies them into a ring of
shared-memory slots from before the PDL wait, while 8 consumer warps wait for the activation and stage it
once in shared memory. gate/up runs its dots on tensor cores (the activation as MMA fragments, each fp32
value split into three 16-bit parts: ~fp32 precision; ldmatrix + mma.sync m16n8k16 over MT = 16 rows x KC
columns per slot, rows padded so that ldmatrix is conflict-free); QKV and residual ops (a few rows per CTA,
on the step's critical path) run on CUDA cores (consume_cc: fp32 activation, two rows per warp, shuffle
sums). One CTA per SM (grid = min(#SMs, units)); CTA b owns a balanced contiguous range of units (rows;
gate/up row pairs), optionally skewed away from the CTAs that start last (`skew`). `l2_prefetch`: the
producers prefetch the next kernel's first weights into L2 once their own copies are issued. `fuse`: a
tensor-parallel reduction inside the launch (inference.parallel.reduce's "fused"): a residual GEMV pushes its rows
to every rank (`Push`), a normalizing one takes the ranks' rows, summed in rank order, as its input (`ReduceIn`);
each value travels with its epoch in one 8-byte word (NCCL's LL protocol), compiled in only where asked (FUSE).
Several tokens a launch (act [T, K], out [T, units]; a speculative verify step's columns, NTOK compiled in): the
weights are read once, each token's sums run in the order a one-token launch of the same slot width gives it
(gate/up: tokens 2b and 2b + 1 in MMA columns 0-2 and 4-6 of n-block b), so every token gets those bits.
The staged activation of a residual GEMV's tokens outgrows shared memory at down_proj's K (8 x 8,960 floats):
"residual_ring" has the producer copy each slot's columns of every token's activation into the slot beside its
rows (after the PDL wait; the first fill's rows before it), so nothing is staged and the consumers start on the
first slot; its consumers (consume_ring) give a warp four rows and every other 256-column block, so that a token's
activation is read from shared memory by half as many warps, and a lane sums its blocks in the same order
whatever the slot width (a multiple of 512): every token gets the same bits at any budget and token count.
Where every CTA holds one tile of at most 12 rows (the 1.5B's 11-12 of 1,536), a warp takes three rows (`rw`, the
plan's rows a warp), so no warp sums the tile's unfilled rows (a row's sums do not depend on the warp or CTA
taking it); each product goes straight into its chain (1.5B verify 8 on an H200: 1,880 -> 1,803 us).
On CUDA cores every consumer warp reads every token's activation for its two rows of a tile, which bounds a
launch of several tokens; "rmsnorm_gemv_mma" runs gate/up's tensor-core loop instead (the activation as hi / mid /
lo 16-bit parts, two tokens an n-block), warp w taking the 16-column steps w, w + 8, ... of a row into chain
(step / 8) % 2, so no slot width (a multiple of 256) changes a token's sums; each tile's partial sums are added
before the next tile (any rows a CTA: the LM head's 1,151).
CUDA C: kernels/csrc/stream_gemv.cu. Measurements: kernels/PERF.md.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._util import check_vec
from kernels.flag_reduce import MAX_RANKS  # the fused reduction's ranks at most

NWARP = 8  # consumer warps
THREADS = 32 * (NWARP + 1)  # + one producer warp
MT = 16  # rows per ring slot (one MMA tile)
MAX_KC = 2048  # columns per ring slot at most (one bulk copy per row and slot: the bigger, the faster)
ROW_PAD = 16  # bytes after each row of a slot: rows 16 bytes apart mod 128 make ldmatrix conflict-free
SMEM_BUDGET = 200 * 1024  # ring + row sums + activation, default
SMEM_MAX = 227 * 1024  # what a CTA may take (sm_90)
MAX_TOKENS = 16  # tokens a launch at most (a verify step's widest bucket)
# mode -> (MODE, kernel name: what profilers show), rows per unit
MODES = {"rmsnorm_gemv": (0, "stream_rmsnorm_gemv", 1), "residual": (1, "stream_gemv_residual", 1),
         "gate_up": (2, "stream_gate_up_silu", 2), "residual_ring": (1, "stream_gemv_residual_ring", 1),
         "rmsnorm_gemv_mma": (0, "stream_rmsnorm_gemv_mma", 1)}
RING_KC = 512  # residual_ring's slot widths: multiples of this (a lane's order of sums then does not depend on them)
RING_STAGES = 3  # residual_ring: the widest slots of which this many fit the budget
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}

_SOURCE = _cuda_rtc.load_source("stream_gemv.cu")  # CUDA C: kernels/csrc/stream_gemv.cu (+ common.cuh)


class _Phase(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p),
                ("bias", ctypes.c_void_p), ("out", ctypes.c_void_p),
                ("units", ctypes.c_int), ("K", ctypes.c_int), ("late", ctypes.c_int), ("deficit", ctypes.c_int)]


class _Fuse(ctypes.Structure):
    _fields_ = [("slot", ctypes.c_void_p * MAX_RANKS), ("x", ctypes.c_void_p), ("step", ctypes.c_void_p),
                ("rank", ctypes.c_int), ("world", ctypes.c_int), ("per_step", ctypes.c_int), ("use", ctypes.c_int)]


class _Params(ctypes.Structure):
    _fields_ = [("p", _Phase), ("eps", ctypes.c_float), ("pad", ctypes.c_int), ("pf", ctypes.c_void_p * 2),
                ("pf_bytes", ctypes.c_uint64 * 2), ("f", _Fuse)]


@dataclass(frozen=True)
class Push:
    """A residual GEMV's tensor-parallel reduction, fused (its producer side): each output row, rank 0's with the
    residual x added, the others' without, goes to slot `rank` of every rank's receive buffer (slots[q]: rank q's
    buffer of world x rows int64 words, as mapped on this device) as one 8-byte word, value bits low and epoch high
    (epoch = (step[0] - 1) * per_step + use + 1; step: a one-element int64 device counter of the fused steps, this
    one included). x is read, not written."""
    slots: tuple[int, ...]
    rank: int
    step: torch.Tensor
    per_step: int
    use: int


@dataclass(frozen=True)
class ReduceIn:
    """A normalizing GEMV's input as a tensor-parallel reduction, fused (its consumer side): the activation passed
    to the launch is this rank's receive buffer (world x K int64 words, slot q from rank q, Push's format); the
    kernel reads each word until it carries this use's epoch (Push's rule) and uses the slots' sum in rank order,
    which CTA 0 also writes to x. Each consumer thread issues the loads of all its words before checking any
    (world is compiled into the variant)."""
    step: torch.Tensor
    world: int
    per_step: int
    use: int
    x: torch.Tensor


@dataclass(frozen=True)
class Op:
    """The GEMV of a launch. mode "rmsnorm_gemv": out = W @ (rmsnorm(act) * norm_w) + bias (no norm
    without norm_w); "residual": out += W @ act; "gate_up": out = silu(Wg @ n) * (Wu @ n). act [K] and out
    [units] for one token, or act [T, K] and out [T, units] for T tokens (a verify step's columns), each token
    computed as a one-token launch computes it (the same bits, given the same slot width)."""
    mode: str
    w: torch.Tensor
    act: torch.Tensor
    out: torch.Tensor
    norm_w: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    @property
    def units(self) -> int:
        return self.w.shape[0] // MODES[self.mode][2]

    @property
    def tokens(self) -> int:
        return self.out.shape[0] if self.out.dim() == 2 else 1


def chunk(k: int, cap: int = MAX_KC, unit: int = 128) -> int:
    """Columns per ring slot for rows of k weights: a multiple of `unit` (128: 16 per consumer warp), at most
    `cap`; rows longer than that take several slots of about equal width (no narrow tail: a bulk
    copy's cost grows with their number more than with their size)."""
    n = -(-k // cap)
    return -(-(-(-k // n)) // unit) * unit


def plan(op: Op | tuple, sms: int, budget: int | None = None, skew: tuple = (0, 0)) -> dict:
    """Grid, ring stages and dynamic shared memory (bytes, at most `budget`, default SMEM_BUDGET) of a
    launch running `op` (an Op or a (mode, units, K[, tokens]) tuple). skew: (late, deficit), see stream_op.
    The slot width is a one-token launch's at this budget whatever the tokens (it fixes each token's order of
    sums); more tokens take ring stages, down to two (then the shared memory may pass the budget)."""
    budget = budget or SMEM_BUDGET
    mode, units, k, tokens = (op.mode, op.units, op.w.shape[1], op.tokens) if isinstance(op, Op) else (*op, 1)[:4]
    grid = max(1, min(sms, units))  # one CTA per SM
    late, deficit = skew
    assert 0 <= late <= grid and deficit >= 0 and units + late * deficit >= grid * deficit, \
        "skew leaves a late CTA without units"
    sums = -(-MODES[mode][2] * -(-(units + late * deficit) // grid) // MT) * MT * NWARP  # partial sums, floats
    mma = mode == "rmsnorm_gemv_mma"
    if mma:
        sums = MT * NWARP  # one tile's partial sums a token (added before the next tile)
    if mode == "residual_ring":  # a slot: MT rows and every token's activation chunk; nothing staged
        sums = 2 * MT  # a tile's two column halves' sums a token
        fixed = 4 * tokens * sums

        def ring_stage(kc):
            return MT * (kc * 2 + ROW_PAD) + tokens * kc * 4
        cap = MAX_KC
        while cap > RING_KC and RING_STAGES * ring_stage(chunk(k, cap, RING_KC)) + fixed > budget:
            cap -= RING_KC
        kc = chunk(k, cap, RING_KC)
        stages = max(2, min(8, (budget - fixed) // ring_stage(kc)))
        starts = unit_starts(units, grid, skew)
        most = max(b - a for a, b in zip(starts, starts[1:]))  # the most rows a CTA takes
        rw = -(-most // 4) if most <= MT else 4  # rows a consumer warp: one tile a CTA, a quarter of it each
        return {"grid": grid, "stages": stages, "smem": stages * ring_stage(kc) + fixed, "sums": sums, "kc": kc,
                "xwords": 0, "rw": rw}
    # the activation as MMA fragments (consume_cc needs only k words, but the smaller footprint changes which
    # CTAs share an SM: the 1.5B step 1002 -> 1050 us, kernels/PERF.md)
    xwords = k * 3 // 2
    fixed = 4 * (sums + xwords)
    unit = 256 if mma else 128  # (the tensor-core mode's chains need whole 256-column slots)
    cap = MAX_KC  # the widest slots (fewest, biggest bulk copies) of which two fit the budget
    while cap > unit and fixed + 2 * MT * (chunk(k, cap, unit) * 2 + ROW_PAD) > budget:
        cap -= unit
    kc = chunk(k, cap, unit)
    stage = MT * (kc * 2 + ROW_PAD)  # bytes of a ring slot (48.25 KB for K = 1536)
    if tokens > 1:  # every token's staged activation (fp32 for consume_cc: k words) and, on tensor cores, sums
        frags = mode == "gate_up" or mma
        if not frags:
            sums = 0  # consume_cc keeps its sums in registers (a one-token launch reserves them for its footprint)
        fixed = 4 * tokens * (sums + (xwords if frags else k))
    stages = max(2, min(8, (budget - fixed) // stage))
    return {"grid": grid, "stages": stages, "smem": stages * stage + fixed, "sums": sums, "kc": kc, "xwords": xwords}


def unit_starts(units: int, grid: int, skew: tuple = (0, 0)) -> list[int]:
    """The first unit of each CTA, and `units` last (the kernel's unit_start)."""
    late, deficit = skew
    return [b * (units + late * deficit) // grid - deficit * max(0, b - (grid - late)) for b in range(grid + 1)]


def supported(w: torch.Tensor) -> bool:
    """Whether these kernels take weight `w` ([rows, K]) on its device."""
    return (w.dim() == 2 and w.dtype in (torch.bfloat16, torch.float16) and w.is_contiguous()
            and w.shape[1] % 16 == 0 and w.data_ptr() % 16 == 0 and w.device.type == "cuda"
            and _cuda_rtc.available(w.device))


@lru_cache(maxsize=None)
def source(sig: tuple, w_half: bool, stages: int, sums: int, kc: int, early: bool = False,
           fuse: int = 0, world: int = 1, tokens: int = 1, rw: int = 4) -> tuple[str, str]:
    """(CUDA source, kernel name) for sig = (mode, norm_kind, bias_kind, K), kinds -1 for none; fuse: 0 none,
    1 Push, 2 ReduceIn (of `world` ranks' slots: compiled in); tokens: per launch (NTOK); rw: residual_ring's rows
    a consumer warp (the plan's)."""
    mode, norm_kind, bias_kind, k = sig
    m, name = MODES[mode][:2]
    ring = mode == "residual_ring"
    kc = chunk(k, kc, RING_KC if ring else 256 if mode == "rmsnorm_gemv_mma" else 128)
    if ring:
        consume = f"consume_ring<{kc}>(prm.p, s, ring, full, empty, acc);"
    elif mode == "rmsnorm_gemv_mma":
        consume = (f"consume_mma<{kc}, {norm_kind}, {bias_kind}>(prm.p, s, ring, full, empty, acc, xb, red, "
                   f"prm.eps, prm.f);")
    elif m < 2:
        consume = (f"consume_cc<{m}, {kc}, {norm_kind}, {bias_kind}>(prm.p, s, ring, full, empty, (float*)xb, red, "
                   f"prm.eps, prm.f);")
    else:
        consume = f"consume_gate_up<{kc}, {norm_kind}>(prm.p, s, ring, full, empty, acc, xb, red, prm.eps, prm.f);"
    defines = {"KERNEL_NAME": name, "W_HALF": int(w_half), "SLOT_KC": kc, "ROW_PAD": ROW_PAD, "NS": stages,
               "SUMS": sums, "EARLY": int(early), "FUSE": fuse, "WORLD": world, "NTOK": tokens, "MAX_RANKS": MAX_RANKS,
               "ACT_RING": int(ring), **({"RING_RW": rw} if ring and rw != 4 else {}),
               "PRODUCE": f"produce<{m}, {kc}>(prm.p, s, ring, full, empty);", "CONSUME": consume}
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE, name


@lru_cache(maxsize=None)
def _kernel(device_index: int, sig: tuple, w_half: bool, stages: int, sums: int, smem: int, carveout: int | None,
            kc: int, early: bool = False, fuse: int = 0, world: int = 1, tokens: int = 1, rw: int = 4):
    src, name = source(sig, w_half, stages, sums, kc, early, fuse, world, tokens, rw)
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", ("--use_fast_math",))
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem, 1, carveout)


@lru_cache(maxsize=None)
def _sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _check(op: Op, fuse: Push | ReduceIn | None = None) -> None:
    n, k = op.w.shape
    assert op.mode in MODES, f"unknown mode {op.mode!r}"
    assert fuse is None or op.mode != "rmsnorm_gemv_mma", "the tensor-core rmsnorm_gemv fuses no reduction"
    if isinstance(fuse, Push):
        assert op.mode == "residual", "only a residual GEMV with its activation staged pushes its rows"
        assert 1 <= len(fuse.slots) <= MAX_RANKS and 0 <= fuse.rank < len(fuse.slots)
    if isinstance(fuse, ReduceIn):
        assert MODES[op.mode][0] != 1, "a residual GEMV's input is not a reduction"
    if fuse is not None:
        assert 0 <= fuse.use < fuse.per_step
        assert fuse.step.dtype == torch.int64 and fuse.step.numel() == 1 and fuse.step.device == op.w.device
    assert supported(op.w), "stream_gemv needs contiguous bf16/fp16 weights, K % 16 == 0, a Hopper GPU with NVRTC"
    assert n % MODES[op.mode][2] == 0, "gate_up must have an even number of rows"
    t = op.tokens
    assert 1 <= t <= MAX_TOKENS and (t == 1 or fuse is None), \
        f"stream_gemv takes 1..{MAX_TOKENS} tokens a launch, one with a fused reduction"
    if isinstance(fuse, ReduceIn):
        assert 1 <= fuse.world <= MAX_RANKS
        check_vec(fuse.x, k, "x")
        check_vec(op.act, fuse.world * k, "act (the receive slots)", (torch.int64,))
    elif t == 1:
        check_vec(op.act, k, "act")
    else:
        assert op.act.shape == (t, k) and op.act.dtype == torch.float32 and op.act.is_contiguous(), \
            f"act must be contiguous float32 [{t}, {k}] for {t} tokens"
    if t == 1:
        check_vec(op.out, op.units, "out")
    else:
        assert op.out.shape == (t, op.units) and op.out.dtype == torch.float32 and op.out.is_contiguous(), \
            f"out must be contiguous float32 [{t}, {op.units}]"
    assert op.act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert op.act.device == op.out.device == op.w.device
    if MODES[op.mode][0] == 1:
        assert op.act.data_ptr() != op.out.data_ptr(), "a and x must be different buffers"
    for t, name, size in ((op.norm_w, "norm_w", k), (op.bias, "bias", op.units)):
        if t is not None:
            check_vec(t, size, name, tuple(_KIND))


def stream_op(op: Op, eps: float = 1e-6, *, pdl: bool = False, budget: int | None = None, early: bool = False,
              carveout: int | None = None, skew: tuple[int, int] = (0, 0),
              l2_prefetch: tuple[torch.Tensor, ...] = (), fuse: Push | ReduceIn | None = None) -> None:
    """Run `op` in one launch, its weights streamed through the shared-memory ring. budget: shared memory
    per CTA in bytes (default SMEM_BUDGET; less lets the CTAs share an SM with the neighbouring kernels').
    early: release the next kernel (PDL) as soon as this one starts instead of after its wait. carveout:
    the kernel's preferred shared-memory carveout in percent (None: the driver's choice; 100 keeps SMs
    configured for the most shared memory, so that a large ring still fits beside the kernel before it: the
    runner's 1.5B gate/up). skew: (late, deficit): the last `late` CTAs (the scheduler starts CTAs in index
    order, so those that wait for a free SM are the last ones) take `deficit` fewer units each, the others
    more. l2_prefetch: up to two contiguous tensors (16-byte aligned, sizes multiples of 16 bytes) whose
    bytes the CTAs prefetch into L2 after issuing their own copies, each CTA an even share: weights of the
    kernel after this one, fetched while HBM would idle (the runner's hidden-2048 o_proj: gate/up's first
    rows). fuse: a tensor-parallel reduction fused into the launch (Push: a residual GEMV's output; ReduceIn:
    a normalizing GEMV's input)."""
    _check(op, fuse)
    dev = op.w.device.index if op.w.device.index is not None else torch.cuda.current_device()
    p = plan(op, _sms(dev), budget, skew=skew)
    sig = (op.mode, -1 if op.norm_w is None else _KIND[op.norm_w.dtype],
           -1 if op.bias is None else _KIND[op.bias.dtype], op.w.shape[1])
    fuse_kind = 1 if isinstance(fuse, Push) else 2 if isinstance(fuse, ReduceIn) else 0
    assert p["smem"] <= SMEM_MAX, f"{op.tokens} tokens of this GEMV need {p['smem']} bytes of shared memory"
    kern = _kernel(dev, sig, op.w.dtype == torch.float16, p["stages"], p["sums"], p["smem"], carveout, p["kc"],
                   early, fuse_kind, fuse.world if isinstance(fuse, ReduceIn) else 1, op.tokens, p.get("rw", 4))
    prm = _Params()
    prm.p = _Phase(op.w.data_ptr(), op.act.data_ptr(), op.norm_w.data_ptr() if op.norm_w is not None else 0,
                   op.bias.data_ptr() if op.bias is not None else 0, op.out.data_ptr(), op.units, op.w.shape[1],
                   *skew)
    prm.eps = eps
    if fuse is not None:
        prm.f.step, prm.f.per_step, prm.f.use = fuse.step.data_ptr(), fuse.per_step, fuse.use
    if isinstance(fuse, Push):
        for q, slot in enumerate(fuse.slots):
            prm.f.slot[q] = slot
        prm.f.rank, prm.f.world = fuse.rank, len(fuse.slots)
    elif isinstance(fuse, ReduceIn):
        prm.f.x, prm.f.world = fuse.x.data_ptr(), fuse.world
    assert len(l2_prefetch) <= 2, "at most two l2_prefetch spans"
    for j, t in enumerate(l2_prefetch):
        n = t.numel() * t.element_size()
        assert t.is_contiguous() and t.data_ptr() % 16 == 0 and n % 16 == 0 and t.device == op.w.device, \
            "l2_prefetch spans: contiguous, on the weights' device, 16-byte aligned, sizes multiples of 16 bytes"
        prm.pf[j], prm.pf_bytes[j] = t.data_ptr(), n
    kern.launch((p["grid"], 1, 1), THREADS, [prm], pdl=pdl)


# The one-op launches; `launch`: stream_op's keyword options (pdl, budget, early, carveout, skew, l2_prefetch).
def stream_rmsnorm_gemv(x, w, out, norm_w=None, eps: float = 1e-6, bias=None, **launch):
    """Same contract as kernels.rmsnorm_gemv.rmsnorm_gemv (reference: rmsnorm_gemv_ref); x [T, K] and out
    [T, N] for T tokens. launch may also hold mma=True: on tensor cores ("rmsnorm_gemv_mma")."""
    mode = "rmsnorm_gemv_mma" if launch.pop("mma", False) else "rmsnorm_gemv"
    stream_op(Op(mode, w, x, out, norm_w, bias), eps=eps, **launch)
    return out


def stream_gemv_residual(a, w, x, **launch):
    """Same contract as kernels.gemv_residual.gemv_residual (reference: gemv_residual_ref); a [T, K] and x
    [T, N] for T tokens. launch may also hold ring=True: the activation fed through the ring ("residual_ring";
    any K, any tokens)."""
    ring = launch.pop("ring", False)
    stream_op(Op("residual_ring" if ring else "residual", w, a, x), **launch)
    return x


def stream_gate_up_silu(x, norm_w, eps: float, w_gate_up, out, **launch):
    """Same contract as kernels.gate_up_silu.rmsnorm_gate_up_silu (reference: rmsnorm_gate_up_silu_ref); x
    [T, K] and out [T, I] for T tokens."""
    stream_op(Op("gate_up", w_gate_up, x, out, norm_w), eps=eps, **launch)
    return out
