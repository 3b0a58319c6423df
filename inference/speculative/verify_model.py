"""The verify forward: T tokens at positions pos..pos+T-1 over the static KV cache, logits for all T.

The fast path's prefill math (`inference.fast.prefill.PrefillModel`: cuBLAS GEMMs, SDPA, a float32
residual stream, FP8 weights dequantized per GEMM) at an offset held in a device tensor, so one CUDA graph serves every position:
RoPE tables and cache rows are indexed by that tensor, and attention reads a fixed window of the
first `span` cache rows with a mask (key position <= query position). Rows past the window's live
part hold stale K/V (of rejected drafts or earlier requests); the mask keeps them out, and each
forward writes its own rows before attending. Device-agnostic (tests run it on CPU in float32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fast.prefill import PrefillModel
from ..quant import linear
from ..reference import KVCache, rms_norm


class VerifyModel(PrefillModel):
    def __init__(self, cfg, weights, max_len: int):
        super().__init__(cfg, weights, max_len)
        self.fp32_logits = isinstance(weights.lm_head, Tensor) and _mm_out_dtype_works(weights.lm_head)

    @torch.inference_mode()
    def forward_window(self, ids: Tensor, positions: Tensor, span: int, cache: KVCache) -> Tensor:
        """ids, positions: [T] int64 on the device (positions consecutive, all < span <= cache.max_len)
        -> logits [T, V] float32. Writes the T cache rows first."""
        cfg, w = self.cfg, self.w
        T = ids.shape[0]
        Hq, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        cos = self.cos_full.index_select(0, positions)[:, None]  # [T, 1, D]
        sin = self.sin_full.index_select(0, positions)[:, None]
        keys = torch.arange(span, device=ids.device)
        mask = (keys[None, :] <= positions[:, None])[None, None]  # [1, 1, T, span]
        x = w.embed.index_select(0, ids).float()  # [T, H] float32 residual stream
        for i, layer in enumerate(w.layers):
            qkv = linear(self._norm(x, layer.attn_norm), layer.qkv, layer.qkv_bias)
            q, k, v = qkv.split([cfg.q_size, cfg.kv_size, cfg.kv_size], dim=-1)
            q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
            if layer.q_norm is not None:
                q, k = rms_norm(q, layer.q_norm, cfg.rms_norm_eps), rms_norm(k, layer.k_norm, cfg.rms_norm_eps)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            cache.k[i].index_copy_(1, positions, k.transpose(0, 1).to(cache.k.dtype))
            cache.v[i].index_copy_(1, positions, v.transpose(0, 1).to(cache.v.dtype))
            kw = cache.k[i, :, :span].to(q.dtype)[None]
            vw = cache.v[i, :, :span].to(q.dtype)[None]
            attn = F.scaled_dot_product_attention(q.transpose(0, 1)[None], kw, vw, attn_mask=mask,
                                                  enable_gqa=Hq != Hkv)  # [1, Hq, T, D]
            x = x + linear(attn[0].transpose(0, 1).reshape(T, cfg.q_size), layer.o)
            gate, up = linear(self._norm(x, layer.mlp_norm), layer.gate_up).chunk(2, dim=-1)
            x = x + linear(F.silu(gate) * up, layer.down)
        h = self._norm(x, w.norm)  # [T, H]
        if self.fp32_logits:  # bf16 weights, float32 products: the decode LM head's precision
            return torch.mm(h, w.lm_head.t(), out_dtype=torch.float32)
        return linear(h, w.lm_head).float()


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


def _mm_out_dtype_works(w: Tensor) -> bool:
    """Whether torch.mm(..., out_dtype=float32) runs for these weights (CUDA, 16-bit)."""
    if w.dtype == torch.float32:
        return False
    try:
        a = torch.zeros(2, w.shape[1], device=w.device, dtype=w.dtype)
        return torch.mm(a, w[:16].t(), out_dtype=torch.float32).dtype == torch.float32
    except (RuntimeError, NotImplementedError, TypeError):
        return False
