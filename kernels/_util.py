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


def gemv_configs():
    """Autotune candidates (BLOCK_N, BLOCK_K, num_warps, num_stages) for the batch-1 GEMVs.

    Under the interpreter: one small config (autotuning there is slow and meaningless).
    """
    import triton

    if interpreting():
        return [triton.Config({"BLOCK_N": 8, "BLOCK_K": 64}, num_warps=4, num_stages=1)]
    shapes = [
        (2, 1024, 4, 3), (4, 512, 4, 3), (4, 1024, 4, 3), (4, 1024, 8, 4),
        (8, 256, 4, 3), (8, 512, 4, 3), (8, 512, 8, 4), (8, 1024, 8, 3),
        (16, 256, 4, 3), (16, 256, 8, 4), (16, 512, 8, 3),
        (32, 128, 4, 3), (32, 256, 8, 3), (64, 128, 8, 3),
    ]
    return [triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s) for bn, bk, w, s in shapes]


MIN_PROGRAMS = 128  # ~one per SM on an H200 (132 SMs); fewer leaves HBM bandwidth unused


def prune_small_grids(configs, named_args, **kwargs):
    """Drop configs whose grid has fewer than MIN_PROGRAMS programs; for small N (where none
    reach it) keep only the configs with the smallest BLOCK_N, i.e. the most programs."""
    n = named_args["N"]
    keep = [c for c in configs if -(-n // c.kwargs["BLOCK_N"]) >= MIN_PROGRAMS]
    if keep:
        return keep
    smallest = min(c.kwargs["BLOCK_N"] for c in configs)
    return [c for c in configs if c.kwargs["BLOCK_N"] == smallest]
