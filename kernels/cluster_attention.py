"""Decode attention in CUDA C with thread-block clusters: the same op as kernels.decode_attention
(q/k RMSNorm + RoPE + KV-cache append + split-KV GQA attention + combine, one launch, CUDA-graph
safe), built for latency at short context, on Hopper (sm_90) and newer.

Grid S * Hkv of 256-thread CTAs in clusters of C (one kv head per cluster); CTA (split, kvh) takes the G query heads
of kv head kvh over cache rows [split*chunk, min((split+1)*chunk, pos)), chunk = max(MIN_CHUNK,
roundup(cdiv(pos+1, S), 64)). What Triton cannot do and this kernel does:
  - K/V rows < pos do not change within a step, so each CTA starts copying its first two 64-row
    tiles into shared memory (cp.async) BEFORE waiting on the QKV kernel (programmatic dependent
    launch); only q, the new k/v row and RoPE come after the wait.
  - The split-KV combine happens in distributed shared memory: each of the C CTAs of a cluster
    merges a 1/C slice of the heads' outputs; the CTAs push their (max, sum, acc) partials of
    every slice into the shared memory of the slice's CTA with st.async, which counts the bytes
    on the receiver's mbarrier, so each CTA merges as soon as its own slice is complete (no
    cluster barrier, no remote loads). With C=16 and 64-row splits, a context of up to 1024 rows
    is one cluster: no global workspace, no atomics.
  - early=True releases the next kernel (PDL) at the start, so that a next kernel whose CTAs fit
    beside these (the runner's streamed o_proj) loads its weights while attention runs.
  - Longer contexts have several active clusters; each writes its merged partial to a global
    workspace and the last cluster to draw a ticket (acq_rel atomic) merges them.
Dots run on tensor cores (mma.sync m16n8k16, fp32 accumulate) with the heads as the 8-wide MMA
dimension; q and p are split into a 16-bit high part and a 16-bit remainder (two MMAs each), so
the products are about as exact as fp32 ones, like the Triton kernel. The new token's row is
merged in fp32 by the CTA whose split holds pos.

Limits (the launcher checks; the runner falls back to the Triton kernel): head_dim 128, G <= 8,
bf16/fp16 caches, compute capability >= 9.0, NVRTC present. Reference: decode_attention_ref.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import torch

from kernels import _cuda_rtc
from kernels._util import check_vec
from kernels.decode_attention import LOG2E

HEAD_DIM = 128
MAX_GROUP = 8
THREADS = 256
TILE = 64
NBUF = 2
MIN_CHUNK = 64
CLUSTER = 16  # CTAs per cluster: 16 x 64-row splits = contexts up to 1024 rows merge in one cluster

_SOURCE = _cuda_rtc.load_source("cluster_attention.cu")  # CUDA C: kernels/csrc/cluster_attention.cu


def smem_bytes(group: int, cluster: int = CLUSTER) -> int:
    """Dynamic shared memory of one CTA for G = group query heads per kv head in clusters of `cluster`
    (the kernel's layout)."""
    kv = NBUF * 2 * TILE * HEAD_DIM * 2
    floats = 8 * HEAD_DIM + 2 * HEAD_DIM + 32 + 32 + 8 * 2 + group * HEAD_DIM + 4 + group * HEAD_DIM + 16 * cluster
    return kv + floats * 4 + 2 * 8 * 72 * 2


_NORM_KIND = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}


@lru_cache(maxsize=None)
def _kernel(device_index: int, hq: int, hkv: int, cluster: int, min_chunk: int, cache_half: bool,
            norm_kind: int | None, early: bool = False, carveout: int | None = None):
    g = hq // hkv
    defines = {"G": g, "HQ": hq, "HKV": hkv, "CLUSTER": cluster, "MIN_CHUNK": min_chunk,
               "CACHE_HALF": int(cache_half), "HAS_NORM": int(norm_kind is not None), "NORM_KIND": norm_kind or 0,
               "EARLY": int(early)}
    src = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE
    major, minor = torch.cuda.get_device_capability(device_index)
    cubin = _cuda_rtc.nvrtc_compile(src, f"sm_{major}{minor}{'a' if major == 9 else ''}", ("--use_fast_math",))
    return _cuda_rtc.CudaKernel(cubin, "attn_cluster", torch.device("cuda", device_index), smem_bytes(g, cluster),
                               cluster, carveout)


def supported(num_heads: int, num_kv_heads: int, head_dim: int, cache_dtype: torch.dtype, device) -> bool:
    """Whether this kernel runs for the model's attention layout on `device`."""
    return (head_dim == HEAD_DIM and num_heads % num_kv_heads == 0 and num_heads // num_kv_heads <= MAX_GROUP
            and cache_dtype in (torch.bfloat16, torch.float16) and _cuda_rtc.available(device))


class ClusterWorkspace:
    """Per-cluster partials and ticket counters (reused across layers and steps; counters stay 0
    between launches). num_splits: S, a multiple of the cluster size; min_chunk: rows per split at
    least (a multiple of 64)."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, num_splits: int, cluster: int, device,
                 min_chunk: int = MIN_CHUNK):
        assert num_splits % cluster == 0, "num_splits must be a multiple of the cluster size"
        assert min_chunk % TILE == 0 and min_chunk > 0, "min_chunk must be a positive multiple of 64"
        self.num_splits, self.cluster, self.min_chunk = num_splits, cluster, min_chunk
        ncl = num_splits // cluster
        f32 = dict(dtype=torch.float32, device=device)
        self.m = torch.empty(num_heads, ncl, **f32)
        self.l = torch.empty(num_heads, ncl, **f32)
        self.acc = torch.empty(num_heads, ncl, head_dim, **f32)
        self.tickets = torch.zeros(num_kv_heads, dtype=torch.int32, device=device)
        self.num_kv_heads = num_kv_heads


def default_splits(num_kv_heads: int, cluster: int, device) -> int:
    """About two CTAs per SM over all kv heads, rounded down to whole clusters (at least one)."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    per_head = -(-2 * sms // num_kv_heads)
    return max(cluster, per_head // cluster * cluster)


def cluster_attention(qkv, pos, k_cache, v_cache, cos, sin, out, workspace: ClusterWorkspace, scale: float,
                      q_norm=None, k_norm=None, eps: float = 1e-6, *, pdl: bool = False,
                      early: bool = False, carveout: int | None = None) -> torch.Tensor:
    """Same contract as kernels.decode_attention.decode_attention, with a ClusterWorkspace. early: release
    the next kernel (PDL) as soon as this one starts, not after its main loop, so that a next kernel
    whose CTAs fit beside these can load its weights meanwhile. carveout: preferred shared-memory
    carveout in percent (None: the driver's choice; see kernels.stream_gemv.stream_op)."""
    assert k_cache.dim() == 3 and k_cache.shape == v_cache.shape and k_cache.is_contiguous() and v_cache.is_contiguous()
    hkv, t_max, d = k_cache.shape
    ws = workspace
    hq = ws.m.shape[0]
    assert d == HEAD_DIM and hq % hkv == 0 and hq // hkv <= MAX_GROUP and ws.num_kv_heads == hkv
    assert k_cache.dtype == v_cache.dtype and k_cache.dtype in (torch.bfloat16, torch.float16)
    check_vec(qkv, (hq + 2 * hkv) * d, "qkv")
    check_vec(out, hq * d, "out")
    assert pos.shape == (1,) and pos.dtype == torch.int32
    assert cos.shape == sin.shape == (t_max, d // 2) and cos.dtype == sin.dtype == torch.float32
    assert cos.is_contiguous() and sin.is_contiguous()
    assert (q_norm is None) == (k_norm is None)
    if q_norm is not None:
        assert q_norm.is_contiguous() and k_norm.is_contiguous() and q_norm.dtype == k_norm.dtype
    dev = qkv.device
    kern = _kernel(dev.index if dev.index is not None else torch.cuda.current_device(), hq, hkv, ws.cluster,
                   ws.min_chunk, k_cache.dtype == torch.float16, None if q_norm is None else _NORM_KIND[q_norm.dtype],
                   early, carveout)
    p = ctypes.c_void_p
    args = [p(qkv.data_ptr()), p(pos.data_ptr()), p(k_cache.data_ptr()), p(v_cache.data_ptr()),
            p(cos.data_ptr()), p(sin.data_ptr()),
            p(q_norm.data_ptr() if q_norm is not None else 0), p(k_norm.data_ptr() if k_norm is not None else 0),
            p(ws.m.data_ptr()), p(ws.l.data_ptr()), p(ws.acc.data_ptr()), p(ws.tickets.data_ptr()),
            p(out.data_ptr()), ctypes.c_int(t_max), ctypes.c_int(ws.num_splits),
            ctypes.c_float(scale * LOG2E), ctypes.c_float(eps)]
    kern.launch((ws.num_splits * hkv, 1, 1), THREADS, args, pdl=pdl)
    return out
