"""Small helpers shared by the kernel launchers: interpreter detection and PDL launch options.

Not a place for kernels; each op lives in its own module.
"""

import os

import torch


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


WEIGHT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


# Measured overrides: (N, K) -> [(BLOCK_N, BLOCK_K, num_warps, num_stages), ...] (first one used).
# N is the launcher's row count per program set: rows of W for rmsnorm_gemv / gemv_residual, I for
# rmsnorm_gate_up_silu (each program then takes BLOCK_N gate and BLOCK_N up rows). Fill it from an
# in-graph sweep (e.g. kernels.tune_gemv); shapes not listed use the rule in gemv_config.
TUNED: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}


def tuned_config(n: int, k: int) -> dict | None:
    """The TUNED entry for (n, k) as launch kwargs, or None (never under the interpreter)."""
    if interpreting() or (n, k) not in TUNED:
        return None
    bn, bk, w, s = TUNED[(n, k)][0]
    return {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s}


def gemv_config(n: int, k: int) -> dict:
    """Launch config {BLOCK_N, BLOCK_K, num_warps} for a batch-1 GEMV over an [n, k] weight.

    A fixed rule instead of @triton.autotune: autotuning times one launch at a time, which for
    these 2-20 us kernels measures Python launch overhead (we saw 32 us for a 4 us kernel) and
    picked different configs from run to run. The rule reproduces the best configs of an
    in-CUDA-graph sweep on an H200 (24 launches over rotating weight copies, cold L2):
        2048x1536   BN=2  BK=1024 w4   4.3 us      17920x1536  BN=8  BK=512 w4  15.6 us
        1536x8960   BN=2  BK=1024 w8   9.5 us      1536x1536   BN=2  BK=1024 w4|8 3.9 us
        151936x1536 BN=16..32 BK=128..256 w4 (93% of copy bandwidth)
    i.e. about n/2048 rows per program (>= 2, <= 32), BLOCK_N * BLOCK_K = 4096 weights per tile.
    """
    import triton

    if interpreting():
        return {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4}
    if (tuned := tuned_config(n, k)) is not None:
        return tuned
    bn = max(2, min(32, 1 << max(0, (n // 2048).bit_length() - 1)))
    bk = max(64, min(4096 // bn, 1024, triton.next_power_of_2(k)))
    return {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 8 if k >= 4096 else 4}
