"""The static KV cache every runner writes: per-layer K and V as [L, Hkv, Tmax, D] tensors.

One layout for the reference forward, the fast path's kernels and prefill, speculation and tensor
parallelism (each shard holds its own heads). Not here: what writes it (the runners, the attention kernels).
"""

from __future__ import annotations

import torch

from .config import ModelConfig


class KVCache:
    """Static per-layer K and V: [L, Hkv, Tmax, D]. Shared layout with the fast path."""

    def __init__(self, cfg: ModelConfig, max_len: int, device, dtype: torch.dtype):
        shape = (cfg.num_layers, cfg.num_kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = max_len

    def nbytes_per_position(self) -> int:
        L, Hkv, _, D = self.k.shape
        return 2 * L * Hkv * D * self.k.element_size()
