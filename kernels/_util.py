"""Small helpers shared by the kernel launchers: interpreter detection, PDL launch options, split-K scratch.

Not a place for kernels; each op lives in its own module.
"""

import os

import torch


_SCRATCH: dict[tuple, torch.Tensor] = {}
_OUTGROWN: list[torch.Tensor] = []


def split_scratch(device, kind: str, numel: int, dtype) -> torch.Tensor:
    """A zeroed buffer of at least `numel` cached per (device, kind, dtype), shared by the split-K launches
    (kernels.gemv_mma_cols; a step runs them one after another): "partials" or
    "tickets" (each launch leaves its tickets at 0). An outgrown buffer stays allocated, so a CUDA graph
    captured with it keeps a valid pointer."""
    key = (str(device), kind, dtype)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        if buf is not None:
            _OUTGROWN.append(buf)
        buf = _SCRATCH[key] = torch.zeros(max(numel, 1), dtype=dtype, device=device)
    return buf


def interpreting() -> bool:
    """True when Triton runs kernels in its NumPy interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def pdl_launch_kwargs(pdl: bool, device: torch.device) -> dict:
    """Extra kernel[grid](...) kwargs for programmatic dependent launch (Hopper and newer)."""
    if not pdl:
        return {}
    assert device.type == "cuda" and not interpreting(), "pdl=True needs a CUDA device (not the interpreter)"
    assert torch.cuda.get_device_capability(device)[0] >= 9, "pdl=True needs sm_90 or newer"
    return {"launch_pdl": True}


def check_vec(t: torch.Tensor, n: int, name: str, dtypes=(torch.float32,)) -> None:
    assert t.dim() == 1 and t.shape[0] == n, f"{name}: expected shape [{n}], got {tuple(t.shape)}"
    assert t.dtype in dtypes, f"{name}: dtype {t.dtype} not in {dtypes}"
    assert t.is_contiguous(), f"{name} must be contiguous"


def check_gate_up_vecs(x: torch.Tensor, norm_w: torch.Tensor, out: torch.Tensor, w: torch.Tensor) -> tuple[int, int]:
    """The vectors of out[I] = silu(gate) * up, [gate; up] = w[2I, K] @ rmsnorm(x) * norm_w, against the weight's
    (or its FP8 values') shape -> (I, K)."""
    two_i, k = w.shape
    assert two_i % 2 == 0, "gate_up must have an even number of rows"
    check_vec(x, k, "x")
    check_vec(norm_w, k, "norm_w", WEIGHT_DTYPES)
    check_vec(out, two_i // 2, "out")
    assert x.device == w.device == out.device
    return two_i // 2, k


WEIGHT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def tuned_config(n: int, k: int, tuning) -> dict | None:
    """The tuning row's measured override for an [n, k] GEMV as launch kwargs, or None (never under the
    interpreter). N is the launcher's row count per program set: rows of W for rmsnorm_gemv / gemv_residual,
    I for rmsnorm_gate_up_silu (each program then takes BLOCK_N gate and BLOCK_N up rows)."""
    if interpreting() or (o := tuning.override(n, k)) is None:
        return None
    bn, bk, w, s = o
    return {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s}


def gemv_config(n: int, k: int, tuning) -> dict:
    """Launch config {BLOCK_N, BLOCK_K, num_warps} for a batch-1 GEMV over an [n, k] weight: the tuning
    row's (kernels.tuning) measured override for the shape, else this rule.

    A fixed rule instead of @triton.autotune: autotuning times one launch at a time, which for
    these 2-20 us kernels measures Python launch overhead (we saw 32 us for a 4 us kernel) and
    picked different configs from run to run. The rule comes from a sweep inside the whole decode
    step (one CUDA graph, PDL on, each kernel's config varied alone, H200; kernels/PERF.md):
        k >= 4096 (down_proj)           BN=4  BK=1024 w8   (was BN=2: 3B step 2217 -> 2062 us)
        n <= 8192 (qkv, o_proj)         BN=4  BK=512  w4   (qkv: 1188 -> 1176 us, 1.5B step)
        larger n (LM head)              about n/2048 rows per program (<= 32), 4096 weights per tile
    The gate/up projection has its own rule (gate_up_config).
    """
    import triton

    if interpreting():
        return {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4}
    if (tuned := tuned_config(n, k, tuning)) is not None:
        return tuned
    if k >= 4096:
        return {"BLOCK_N": 4, "BLOCK_K": 1024, "num_warps": 8}
    if n <= 8192:
        return {"BLOCK_N": 4, "BLOCK_K": min(512, triton.next_power_of_2(k)), "num_warps": 4}
    bn = max(2, min(32, 1 << max(0, (n // 2048).bit_length() - 1)))
    bk = max(64, min(4096 // bn, 1024, triton.next_power_of_2(k)))
    return {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4}


def gate_up_config(i: int, k: int, tuning) -> dict:
    """Launch config for rmsnorm_gate_up_silu over a packed [2i, k] gate/up weight: BLOCK_N gate rows
    and BLOCK_N up rows per program. From the same in-step sweep (kernels/PERF.md): BN=16, BK=256,
    8 warps was the best of ten configs for all three model shapes (3B step 2217 -> 2150 us,
    Qwen3-1.7B 1316 -> 1288, 1.5B 1188 -> 1170; the old rule gave BN=4, BK=512, 4 warps)."""
    import triton

    if interpreting():
        return {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4}
    if (tuned := tuned_config(i, k, tuning)) is not None:
        return tuned
    return {"BLOCK_N": 16, "BLOCK_K": min(256, triton.next_power_of_2(k)), "num_warps": 8}


# The main loops of gemv_residual and rmsnorm_gate_up_silu can issue the next tile's loads before the FMAs
# of the current one (AHEAD: two tiles in flight per program instead of one); gate/up sums RED neighbouring
# columns in-thread so that its two accumulators keep registers (and programs per SM) low. The 1.5B's
# down_proj config (4, 2048, 8) is too wide to look ahead beside the L2 prefetch of the next QKV; QKV and the
# LM head measured level or slower with it. Measurements: kernels/PERF.md, "Two tiles in flight".
def residual_lookahead(k: int, cfg: dict, tuning) -> bool:
    """AHEAD for gemv_residual with launch config cfg over K = k: where the tuning row says so, down_proj
    (k >= 4096) loads ahead where its [BLOCK_N, BLOCK_K] accumulator is small enough (<= 4096 elements)."""
    return not interpreting() and tuning.lookahead and k >= 4096 and cfg["BLOCK_N"] * cfg["BLOCK_K"] <= 4096


def gate_up_lookahead(cfg: dict, tuning) -> dict:
    """{AHEAD, RED} for rmsnorm_gate_up_silu with launch config cfg (the tuning row's lookahead and RED)."""
    if interpreting() or not tuning.lookahead:
        return {"AHEAD": False, "RED": 1}
    return {"AHEAD": True, "RED": tuning.gate_up_red}
