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


def split_k(k: int) -> tuple[int, int]:
    """K = KA + rest with KA the largest power of two <= K, rest padded to KB (0 if none).

    A program loads its whole [BLOCK_N, K] weight slice as two power-of-two-wide tiles
    ([BLOCK_N, KA] unmasked along K, [BLOCK_N, KB] masked), e.g. 1536 = 1024 + 512,
    8960 = 8192 + 1024 (768 used): at most a few % of idle lanes, and no K loop.
    """
    assert 16 <= k <= 65536, f"K={k} outside the supported range 16..65536"
    ka = 1 << (k.bit_length() - 1)
    rest = k - ka
    return ka, (1 << (rest - 1).bit_length()) if rest else 0


def gemv_configs():
    """Autotune candidates (BLOCK_N, num_warps) for the whole-slice batch-1 GEMVs.

    Under the interpreter: one small config (autotuning there is slow and meaningless).
    """
    import triton

    if interpreting():
        return [triton.Config({"BLOCK_N": 4}, num_warps=4, num_stages=1)]
    return [triton.Config({"BLOCK_N": bn}, num_warps=w, num_stages=1)
            for bn in (1, 2, 4, 8, 16, 32) for w in (2, 4, 8)]


MIN_PROGRAMS = 128  # ~one per SM on an H200 (132 SMs); fewer leaves HBM bandwidth unused
MAX_ELEMS_PER_THREAD = 128  # weight elements each thread holds in registers (whole slice in flight)


def prune_gemv_configs(configs, named_args, rows_per_block: int = 1, **kwargs):
    """Keep configs whose slice fits in registers (<= MAX_ELEMS_PER_THREAD weights per thread)
    and whose grid has >= MIN_PROGRAMS programs; for small N keep the most-programs ones."""
    n, k = named_args["N"], named_args["K"]
    ka, kb = split_k(k)

    def per_thread(c):
        return rows_per_block * c.kwargs["BLOCK_N"] * (ka + kb) / (32 * c.num_warps)

    fits = [c for c in configs if 8 <= per_thread(c) <= MAX_ELEMS_PER_THREAD] or \
        [min(configs, key=per_thread)]
    keep = [c for c in fits if -(-n // c.kwargs["BLOCK_N"]) >= MIN_PROGRAMS]
    if keep:
        return keep
    smallest = min(c.kwargs["BLOCK_N"] for c in fits)
    return [c for c in fits if c.kwargs["BLOCK_N"] == smallest]


def prune_gate_up_configs(configs, named_args, **kwargs):
    """As prune_gemv_configs, for kernels holding two row blocks (gate and up) per program."""
    return prune_gemv_configs(configs, named_args, rows_per_block=2)
