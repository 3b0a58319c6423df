"""Batch-1 GEMVs in CUDA C whose weights stream through a shared-memory ring (TMA bulk copies),
several GEMVs per launch. Hopper (sm_90+) with NVRTC only; weights bf16/fp16 with K a multiple of 16.
The runner's "overlap" GEMVs (FastRunner.use_gemv; the default at short context) run o_proj, and
for hidden sizes <= 1536 also QKV and gate/up, with it, in rings small enough (`budget`) to share an
SM with the kernel before them, which releases them early, so their weights arrive while that
kernel runs (kernels/PERF.md, eighth to tenth sessions); chains and stream_mlp are correct but not
faster in the step (opt-in / probes only).

The ops are those of the Triton kernels, with the same contracts and references:
    "rmsnorm_gemv"  out = W @ (rmsnorm(x) * norm_w) + bias    (kernels.rmsnorm_gemv; QKV)
    "residual"      x += W @ a                                (kernels.gemv_residual; o_proj, down)
    "gate_up"       out = silu(Wg @ n) * (Wu @ n)             (kernels.gate_up_silu)
stream_chain([Op, ...]) runs up to MAX_PHASES of them in ONE launch (the runner: o_proj + gate/up +
down + the next layer's QKV), with a grid barrier between two ops; stream_rmsnorm_gemv,
stream_gemv_residual and stream_gate_up_silu are one-op launches. stream_mlp is the whole MLP in one
launch (gate/up, SiLU*up, then down_proj as a split-K over the CTA's own intermediate units with
W_down stored transposed, partials added into x with atomics).

The idea: weights do not depend on the previous op, so a producer warp per CTA copies them into a
ring of shared-memory slots without a break, across the ops of the launch and from before the PDL
wait, while 8 consumer warps wait for the activation (previous kernel, or grid barrier) and stage it
once per op in shared memory. gate/up runs its dots on tensor cores: the activation staged as MMA
fragments (each fp32 value split into three 16-bit parts: ~fp32 precision), per slot (MT = 16 rows x
KC columns, rows padded so that ldmatrix is conflict-free) each warp takes KC / 128 steps of 16
columns (ldmatrix + mma.sync m16n8k16), keeps the row tile's partial sums in registers over its K
chunks and writes them once per tile; the epilogue adds the 8 warps' partials and applies the norm
scale and SiLU*up. QKV and residual ops (a few rows per CTA, on the step's critical path) run on CUDA
cores instead (consume_cc: fp32 activation, each warp two whole rows, shuffle reductions; twelfth
session: 1.5B step -13 us, Qwen3 / 3B -4 to -5 us). One CTA per SM (grid = min(#SMs, units)); CTA b owns
a balanced contiguous range of units (rows; gate/up row pairs).

Measured (H200, 1.5B shapes, kernels/PERF.md): one bulk copy per row and slot, so slots are as
wide as the budget allows (copies of 0.75 / 1.5 / 3 KB stream gate/up at 1.8 / 2.8 / 4.0 TB/s);
gate/up alone 15.4 us vs 16.7 for Triton, a chained layer 35.6 us vs 31.5 (down, the activation
round trips and the grid barriers lose it). In the decode step (eighth session): QKV (64 KB ring) +
gate/up (120 KB) launched early 1099 -> 1068-1072 us on 1.5B; slower for hidden 2048 and beside the
Triton attention; stream_mlp level (1073.5 with the same QKV). Ninth session: o_proj (80 KB ring,
its whole slice) launched at the attention's start (early=True there) and releasing gate/up at its
own start (early=True): 1.5B 1068 -> ~1056 us; o_proj alone for hidden 2048: Qwen3 1178 -> 1127, 3B
1933 -> 1891 (streamed gate/up at K = 2048 is still much slower there). Tenth session (1.5B): gate/up
with three slots (164 KB) under the all-shared carveout (`carveout=100`, so that it fits beside
o_proj's CTAs) and a split skewed towards the CTAs that start first (`skew`): 1042 -> ~1018 us.
Eleventh session (opt-in, not faster in the step): `tickets` (one gate/up op takes 8-unit tiles from a
ticket counter as its CTAs go) and `tensor_map` (those tiles' slots copied as 3-D tensor-map boxes with
the 128-byte swizzle); a CTA fits beside another kernel's only if the registers of its 3 warps in one SM
quarter fit there too (kernels/PERF.md). Thirteenth session: `l2_prefetch` (the producers prefetch spans
of the next kernel's weights into L2 once their own have landed): the runner's hidden-2048 o_proj fetches
the Triton gate/up's first 6 MB during attention, 3B step -18 us, Qwen3 -16.
PROBE_DEFINES (NO_COMPUTE, NO_BARRIER, TRACE) are for the probes only (scripts/probe_stream_gemv.py;
TRACE 2: every CTA's timeline, scripts/trace_step_ctas.py).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._util import check_vec

NWARP = 8  # consumer warps
THREADS = 32 * (NWARP + 1)  # + one producer warp
MT = 16  # rows per ring slot (one MMA tile)
MAX_KC = 2048  # columns per ring slot at most (one bulk copy per row and slot: the bigger, the faster)
ROW_PAD = 16  # bytes after each row of a slot: rows 16 bytes apart mod 128 make ldmatrix conflict-free
MAX_PHASES = 4
SMEM_BUDGET = 200 * 1024  # ring + row sums + activation (at 150 KB the chains' slots get narrow: slower)
# for scripts/probe_stream_gemv.py only (NO_COMPUTE / NO_BARRIER = 1 give wrong results, for timing)
# MMA_SMALL = 1: modes 0 and 1 on tensor cores as gate/up (the tenth session's path, for A/B probes)
PROBE_DEFINES = {"NO_COMPUTE": 0, "NO_BARRIER": 0, "TRACE": 0, "MMA_SMALL": 0}
# mode -> (MODE, kernel name of a one-op launch: what profilers show), rows per unit
MODES = {"rmsnorm_gemv": (0, "stream_rmsnorm_gemv", 1), "residual": (1, "stream_gemv_residual", 1),
         "gate_up": (2, "stream_gate_up_silu", 2), "down_t": (3, "stream_mlp", 1)}
MLP_CLUSTER = 1  # CTAs per cluster of stream_mlp (> 1: they add their down_proj partials in shared memory first)
_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}

_SOURCE = _cuda_rtc.load_source("stream_gemv.cu")  # CUDA C: kernels/csrc/stream_gemv.cu (+ common.cuh)


class _Phase(ctypes.Structure):
    _fields_ = [("w", ctypes.c_void_p), ("act", ctypes.c_void_p), ("norm_w", ctypes.c_void_p),
                ("bias", ctypes.c_void_p), ("out", ctypes.c_void_p), ("tmap", ctypes.c_void_p),
                ("units", ctypes.c_int), ("K", ctypes.c_int), ("late", ctypes.c_int), ("deficit", ctypes.c_int)]


class _Params(ctypes.Structure):
    _fields_ = [("p", _Phase * MAX_PHASES), ("sync", ctypes.c_void_p), ("trace", ctypes.c_void_p),
                ("eps", ctypes.c_float), ("pad", ctypes.c_int), ("pf", ctypes.c_void_p * 2),
                ("pf_bytes", ctypes.c_uint64 * 2)]


@dataclass(frozen=True)
class Op:
    """One GEMV of a chain. mode "rmsnorm_gemv": out = W @ (rmsnorm(act) * norm_w) + bias (no norm
    without norm_w); "residual": out += W @ act; "gate_up": out = silu(Wg @ n) * (Wu @ n)."""
    mode: str
    w: torch.Tensor
    act: torch.Tensor
    out: torch.Tensor
    norm_w: torch.Tensor | None = None
    bias: torch.Tensor | None = None

    @property
    def units(self) -> int:
        return self.w.shape[0] // MODES[self.mode][2]


def chunk(k: int, cap: int = MAX_KC) -> int:
    """Columns per ring slot for rows of k weights: a multiple of 128 (16 per consumer warp), at most
    `cap`; rows longer than that take several slots of about equal width (no narrow tail: a bulk
    copy's cost grows with their number more than with their size)."""
    n = -(-k // cap)
    return -(-(-(-k // n)) // 128) * 128


def plan(ops: list[Op] | tuple, sms: int, budget: int | None = None, cluster: int = 1, skew: tuple = (0, 0),
         dynamic: bool = False, tmap: bool = False) -> dict:
    """Grid, ring stages and dynamic shared memory (bytes, at most `budget`, default SMEM_BUDGET) of
    a launch running `ops` in order. ops: Op or (mode, units, K) tuples. The grid is a multiple of
    `cluster`. skew: (late, deficit), see stream_chain. dynamic: one gate/up op whose CTAs take 8-unit
    tiles from a ticket counter, at most "tiles" each (twice the mean); tmap: and copied as tensor maps
    (slots without row padding, 1 KB aligned: "pad" 0, 1 KB more shared memory)."""
    budget = budget or SMEM_BUDGET
    shapes = [(o.mode, o.units, o.w.shape[1]) if isinstance(o, Op) else o for o in ops]
    grid = max(1, min(sms, min(u for _, u, _ in shapes)))  # one CTA per SM
    tiles = 0  # dynamic: tiles per CTA at most
    if dynamic:
        assert len(shapes) == 1 and shapes[0][0] == "gate_up" and shapes[0][1] % 8 == 0 and skew == (0, 0), \
            "dynamic tiles: one gate_up op, units a multiple of 8, no skew"
        grid = min(grid, shapes[0][1] // 8)
        tiles = min(64, 2 * -(-shapes[0][1] // 8 // grid))
    grid = max(cluster, grid // cluster * cluster)
    late, deficit = skew
    assert 0 <= late <= grid and deficit >= 0 and all(u + late * deficit >= grid * deficit for _, u, _ in shapes), \
        "skew leaves a late CTA without units"
    sums = max(-(-MODES[m][2] * -(-(u + late * deficit) // grid) // MT) * MT * NWARP
               for m, u, _ in shapes) if not tiles else tiles * MT * NWARP  # partial sums, floats
    # the activation as MMA fragments (consume_cc needs only k words, but the smaller footprint changes which
    # CTAs share an SM: the 1.5B step 1002 -> 1050 us, kernels/PERF.md twelfth session)
    xwords = max(k for _, _, k in shapes) * 3 // 2
    hs = 0
    if any(m == "down_t" for m, _, _ in shapes):  # stream_mlp: h and the down_proj partial
        per_cta = -(-shapes[0][1] // grid)
        hs = -(-per_cta // 4) * 4  # units per CTA, rounded up to 4
    assert not tmap or (dynamic and shapes[0][2] % 64 == 0), "tensor-map copies: dynamic tiles, K % 64 == 0"
    pad = 0 if tmap else ROW_PAD
    fixed = 4 * (sums + xwords + (hs + shapes[-1][2] if hs else 0)) + (1024 if tmap else 0)
    cap = MAX_KC  # the widest slots (fewest, biggest bulk copies) of which two fit the budget
    while cap > 128 and fixed + 2 * MT * (max(chunk(k, cap) for _, _, k in shapes) * 2 + pad) > budget:
        cap -= 128
    kc = max(chunk(k, cap) for _, _, k in shapes)
    stage = MT * (kc * 2 + pad)  # bytes of a ring slot (48.25 KB for K = 1536)
    stages = max(2, min(8, (budget - fixed) // stage))
    return {"grid": grid, "stages": stages, "smem": stages * stage + fixed, "sums": sums, "kc": kc, "xwords": xwords,
            "hs": hs, "tiles": tiles, "pad": pad}


def supported(w: torch.Tensor) -> bool:
    """Whether these kernels take weight `w` ([rows, K]) on its device."""
    return (w.dim() == 2 and w.dtype in (torch.bfloat16, torch.float16) and w.is_contiguous()
            and w.shape[1] % 16 == 0 and w.data_ptr() % 16 == 0 and w.device.type == "cuda"
            and _cuda_rtc.available(w.device))


@lru_cache(maxsize=None)
def source(phases: tuple, w_half: bool, stages: int, sums: int, layout: tuple, cluster: int = 1,
           xwords: int = 0, hs: int = 0, early: bool = False, probe: tuple | None = None,
           cap: int = 0) -> tuple[str, str]:
    """(CUDA source, kernel name) for phases ((mode, norm_kind, bias_kind, K), ...), kinds -1 for none;
    probe: the values of PROBE_DEFINES (default: as they are now); cap > 0: dynamic tiles (plan)."""
    produce, consume = [], []
    mlp = any(mode == "down_t" for mode, *_ in phases)
    probe = dict(zip(PROBE_DEFINES, probe)) if probe is not None else PROBE_DEFINES
    for i, (mode, norm_kind, bias_kind, k) in enumerate(phases):
        m, kc = MODES[mode][0], chunk(k, layout[0])
        produce.append(f"produce_dyn<{kc}>(prm.p[{i}], s, ring, full, empty, prm.sync);" if cap else
                       f"produce<{m}, {kc}>(prm.p[{i}], s, ring, full, empty);")
        if mode == "down_t":
            consume.append(f"consumers_sync(); consume_down_t<{kc}>(prm.p[{i}], s, ring, full, empty, hs, part);")
        elif m < 2 and not probe["MMA_SMALL"]:
            consume.append(f"consume_cc<{m}, {kc}, {norm_kind}, {bias_kind}>(prm.p[{i}], s, ring, full, empty, "
                           f"(float*)xb, red, prm.eps, {i}, prm.sync, {i}u * gridDim.x, trace, tn);")
        else:
            consume.append(f"consume<{m}, {kc}, {norm_kind}, {bias_kind}>(prm.p[{i}], s, ring, full, empty, "
                           f"acc, xb, red, prm.eps, {i}, prm.sync, {i}u * gridDim.x, trace, tn"
                           f"{', hs' if mlp else ''});")
    name = MODES["down_t"][1] if mlp else MODES[phases[0][0]][1] if len(phases) == 1 else "stream_gemv_chain"
    defines = {**probe, "KERNEL_NAME": name, "W_HALF": int(w_half), "SLOT_KC": layout[0],
               "ROW_PAD": layout[1], "NS": stages, "SUMS": sums, "MAXP": MAX_PHASES, "NPH": len(phases),
               "MLP": int(mlp), "CLUSTER": cluster, "XWORDS": xwords, "HS": hs, "EARLY": int(early),
               "DYN": int(cap > 0), "DYN_CAP": cap, "TMAP": int(cap > 0 and layout[1] == 0),
               "PRODUCE": " ".join(produce), "CONSUME": " ".join(consume)}
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE, name


@lru_cache(maxsize=None)
def _kernel(device_index: int, phases: tuple, w_half: bool, stages: int, sums: int, smem: int,
            carveout: int | None, layout: tuple, probe: tuple = (), cluster: int = 1, xwords: int = 0, hs: int = 0,
            early: bool = False, cap: int = 0):
    src, name = source(phases, w_half, stages, sums, layout, cluster, xwords, hs, early, probe, cap)
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", ("--use_fast_math",))
    return _cuda_rtc.CudaKernel(cubin, name, torch.device("cuda", device_index), smem, cluster, carveout)


@lru_cache(maxsize=None)
def _sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _check(op: Op) -> None:
    n, k = op.w.shape
    assert op.mode in MODES, f"unknown mode {op.mode!r}"
    assert supported(op.w), "stream_gemv needs contiguous bf16/fp16 weights, K % 16 == 0, a Hopper GPU with NVRTC"
    assert n % MODES[op.mode][2] == 0, "gate_up must have an even number of rows"
    check_vec(op.act, k, "act")
    check_vec(op.out, op.units, "out")
    assert op.act.data_ptr() % 16 == 0, "the activation must be 16-byte aligned"
    assert op.act.device == op.out.device == op.w.device
    if op.mode == "residual":
        assert op.act.data_ptr() != op.out.data_ptr(), "a and x must be different buffers"
    for t, name, size in ((op.norm_w, "norm_w", k), (op.bias, "bias", op.units)):
        if t is not None:
            check_vec(t, size, name, tuple(_KIND))


def stream_chain(ops: list[Op], sync: torch.Tensor | None = None, eps: float = 1e-6, *, pdl: bool = False,
                 trace: torch.Tensor | None = None, budget: int | None = None, early: bool = False,
                 carveout: int | None = None, skew: tuple[int, int] = (0, 0), tickets: torch.Tensor | None = None,
                 tensor_map: bool = False, l2_prefetch: tuple[torch.Tensor, ...] = ()) -> None:
    """Run `ops` (1 to MAX_PHASES GEMVs, same weight dtype) in order in ONE launch: the weights of
    all of them stream through the shared-memory ring without a break; between two ops every CTA
    waits at a grid barrier (counters in `sync`, int32 [2] zeros, needed for more than one op; they
    are back at zero after the launch). budget: shared memory per CTA in bytes (default SMEM_BUDGET;
    less lets the CTAs share an SM with the neighbouring kernels'). early: release the next kernel (PDL) as
    soon as this one starts instead of after its wait. carveout: the kernel's preferred shared-memory
    carveout in percent (None: the driver's choice; 100 keeps SMs configured for the most shared memory,
    so that a large ring still fits beside the kernel before it: the runner's 1.5B gate/up). skew: (late,
    deficit): the last `late` CTAs (the scheduler starts CTAs in index order, so those that wait for a
    free SM are the last ones) take `deficit` fewer units each, the others more. tickets (one gate_up op
    with units % 8 == 0): int32 [2] zeros (back at zero after the launch); CTAs then take tiles of 8 units
    from this counter as they go instead of a fixed share (those that stream faster take more); launches
    sharing `tickets` must not overlap (between two of them, a kernel that waits for the first before it
    releases the next: the runner's down_proj). tensor_map (with tickets, K % 64 == 0): each slot's 8 gate
    and 8 up rows arrive as two tensor-map copies (kernels/PERF.md: faster than row copies at small slots).
    l2_prefetch: up to two contiguous tensors (16-byte aligned, sizes multiples of 16 bytes) whose bytes the
    CTAs prefetch into L2 after issuing their own copies, each CTA an even share: weights of the kernel after
    this one, fetched while HBM would idle (the runner's hidden-2048 o_proj: gate/up's first rows)."""
    assert 1 <= len(ops) <= MAX_PHASES, f"1 to {MAX_PHASES} ops per launch"
    for op in ops:
        _check(op)
    w_dtype = ops[0].w.dtype
    assert all(op.w.dtype == w_dtype for op in ops), "all weights of a chain must have one dtype"
    if len(ops) > 1:
        assert sync is not None and sync.dtype == torch.int32 and sync.numel() >= 2, "a chain needs sync counters"
    dev = ops[0].w.device.index if ops[0].w.device.index is not None else torch.cuda.current_device()
    if tickets is not None:
        assert tickets.dtype == torch.int32 and tickets.numel() >= 2 and tickets.device == ops[0].w.device, \
            "tickets must be int32 [2] zeros on the weights' device"
        assert sync is None, "a chain has no dynamic tiles"
        sync = tickets
    p = plan(ops, _sms(dev), budget, skew=skew, dynamic=tickets is not None, tmap=tensor_map)
    sig = tuple((op.mode, -1 if op.norm_w is None else _KIND[op.norm_w.dtype],
                 -1 if op.bias is None else _KIND[op.bias.dtype], op.w.shape[1]) for op in ops)
    kern = _kernel(dev, sig, w_dtype == torch.float16, p["stages"], p["sums"], p["smem"], carveout,
                   (p["kc"], p["pad"]), tuple(PROBE_DEFINES.values()), 1, p["xwords"], 0, early, p["tiles"])
    prm = _Params()
    for i, op in enumerate(ops):
        tmap = _tensor_map(op.w, p["kc"]).data_ptr() if tensor_map else 0
        prm.p[i] = _Phase(op.w.data_ptr(), op.act.data_ptr(), op.norm_w.data_ptr() if op.norm_w is not None else 0,
                          op.bias.data_ptr() if op.bias is not None else 0, op.out.data_ptr(), tmap, op.units,
                          op.w.shape[1], *skew)
    prm.sync = sync.data_ptr() if sync is not None else 0
    prm.trace = trace.data_ptr() if trace is not None else 0  # int64 [240] (TRACE 1), [16 * grid] (TRACE 2)
    prm.eps = eps
    assert len(l2_prefetch) <= 2, "at most two l2_prefetch spans"
    for j, t in enumerate(l2_prefetch):
        n = t.numel() * t.element_size()
        assert t.is_contiguous() and t.data_ptr() % 16 == 0 and n % 16 == 0 and t.device == ops[0].w.device, \
            "l2_prefetch spans: contiguous, on the weights' device, 16-byte aligned, sizes multiples of 16 bytes"
        prm.pf[j], prm.pf_bytes[j] = t.data_ptr(), n
    kern.launch((p["grid"], 1, 1), THREADS, [prm], pdl=pdl)


_TMAPS: dict = {}


def _tensor_map(w: torch.Tensor, kc: int, rows: int = 8) -> torch.Tensor:
    """w [R, K] (16-bit) as a CUtensorMap in device memory (kept per weight): the 3-D view (64 columns, R
    rows, K / 64 chunks) in boxes of (64, rows, kc / 64) with the 128-byte swizzle, so a copy lands as
    [chunk][rows][128 B], each row's 16-byte units XOR-ed by its row index % 8 (conflict-free ldmatrix)."""
    key = (w.data_ptr(), tuple(w.shape), w.dtype, kc, rows)
    if key not in _TMAPS:
        r, k = w.shape
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        raw = (ctypes.c_ubyte * 128)()
        dtype = 9 if w.dtype == torch.bfloat16 else 6  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 / FLOAT16
        # dims, byte strides of dims 1-2, box, element strides; no interleave, 128-byte swizzle, L2 promotion
        # of 128 B, out-of-bounds columns zero-filled
        res = _cuda_rtc._driver().cuTensorMapEncodeTiled(
            raw, dtype, 3, ctypes.c_void_p(w.data_ptr()), (u64 * 3)(64, r, k // 64), (u64 * 2)(k * 2, 128),
            (u32 * 3)(64, rows, kc // 64), (u32 * 3)(1, 1, 1), 0, 3, 2, 0)
        _cuda_rtc._check(res, "cuTensorMapEncodeTiled")
        _TMAPS[key] = torch.tensor(bytearray(raw), dtype=torch.uint8).to(w.device)
    return _TMAPS[key]


# The one-op launches; `launch`: stream_chain's keyword options (pdl, budget, early, carveout, trace).
def stream_rmsnorm_gemv(x, w, out, norm_w=None, eps: float = 1e-6, bias=None, **launch):
    """Same contract as kernels.rmsnorm_gemv.rmsnorm_gemv (reference: rmsnorm_gemv_ref)."""
    stream_chain([Op("rmsnorm_gemv", w, x, out, norm_w, bias)], eps=eps, **launch)
    return out


def stream_gemv_residual(a, w, x, **launch):
    """Same contract as kernels.gemv_residual.gemv_residual (reference: gemv_residual_ref)."""
    stream_chain([Op("residual", w, a, x)], **launch)
    return x


def stream_gate_up_silu(x, norm_w, eps: float, w_gate_up, out, **launch):
    """Same contract as kernels.gate_up_silu.rmsnorm_gate_up_silu (reference: rmsnorm_gate_up_silu_ref)."""
    stream_chain([Op("gate_up", w_gate_up, x, out, norm_w)], eps=eps, **launch)
    return out


def stream_mlp(x, norm_w, eps: float, w_gate_up, w_down_t, sync, *, pdl: bool = False, budget: int | None = None,
               cluster: int = MLP_CLUSTER):
    """The whole MLP in ONE launch: x += W_down @ (silu(Wg @ n) * (Wu @ n)), n = rmsnorm(x) * norm_w.
    w_gate_up: [2I, H] (gate rows, then up rows); w_down_t: W_down transposed, contiguous [I, H] (H <=
    MAX_KC). Each CTA streams the gate, up and down rows of its own intermediate units, keeps h in shared
    memory and adds its down_proj partial into x with its cluster (no grid barrier, no h round trip).
    sync: int32 [2] zeros (back at zero after the launch). The atomic adds make x's last bits depend on
    their order (~1e-7 relative). References: rmsnorm_gate_up_silu_ref + gemv_residual_ref."""
    i2, h = w_gate_up.shape
    assert i2 % 2 == 0 and tuple(w_down_t.shape) == (i2 // 2, h), "w_down_t must be [I, H] for w_gate_up [2I, H]"
    assert supported(w_gate_up) and supported(w_down_t) and w_down_t.dtype == w_gate_up.dtype, \
        "stream_mlp needs contiguous bf16/fp16 weights of one dtype, H % 16 == 0, a Hopper GPU with NVRTC"
    assert h <= MAX_KC, f"stream_mlp needs H <= {MAX_KC}"
    check_vec(x, h, "x")
    check_vec(norm_w, h, "norm_w", tuple(_KIND))
    assert x.data_ptr() % 16 == 0, "x must be 16-byte aligned"
    assert sync is not None and sync.dtype == torch.int32 and sync.numel() >= 2, "stream_mlp needs sync counters"
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    ops, sig = [("gate_up", i2 // 2, h), ("down_t", i2 // 2, h)], (("gate_up", _KIND[norm_w.dtype], -1, h),
                                                                  ("down_t", -1, -1, h))
    sms = _sms(dev)
    while True:  # all CTAs must be resident at once: at most as many clusters as the GPU holds
        p = plan(ops, sms, budget, cluster)
        kern = _kernel(dev, sig, w_gate_up.dtype == torch.float16, p["stages"], p["sums"], p["smem"], None,
                       (p["kc"], ROW_PAD), tuple(PROBE_DEFINES.values()), cluster, p["xwords"], p["hs"])
        fit = kern.max_active_clusters(THREADS) * cluster if cluster > 1 else sms
        if p["grid"] <= fit:
            break
        sms = fit
    prm = _Params()
    prm.p[0] = _Phase(w_gate_up.data_ptr(), x.data_ptr(), norm_w.data_ptr(), 0, 0, 0, i2 // 2, h, 0, 0)
    prm.p[1] = _Phase(w_down_t.data_ptr(), 0, 0, 0, x.data_ptr(), 0, i2 // 2, h, 0, 0)
    prm.sync, prm.trace, prm.eps = sync.data_ptr(), 0, eps
    kern.launch((p["grid"], 1, 1), THREADS, [prm], pdl=pdl)
    return x
