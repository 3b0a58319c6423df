"""Prefill for the GPU fast path: the reference forward with fused attention and a last-row head.

Same math as `inference.reference` (whose RMSNorm and RoPE it reuses), but attention goes through
PyTorch's scaled_dot_product_attention (flash kernels, no [T, T] score matrix) and only the last
position goes through the final norm and the LM head. The GEMMs are cuBLAS. It fills the same
[L, Hkv, Tmax, D] KV cache the decode kernels read. Prefill always starts at position 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..reference import KVCache, ReferenceModel, apply_rope, rms_norm


class PrefillModel(ReferenceModel):
    @torch.inference_mode()
    def prefill(self, ids: Tensor, cache: KVCache) -> Tensor:
        """ids [T] int64 -> logits of the last position [V] float32."""
        cfg, w = self.cfg, self.w
        x = w.embed[ids]  # [T, H]
        for i, layer in enumerate(w.layers):
            x = x + self._attention_sdpa(i, layer, rms_norm(x, layer.attn_norm, cfg.rms_norm_eps), cache)
            h = rms_norm(x, layer.mlp_norm, cfg.rms_norm_eps)
            gate, up = F.linear(h, layer.gate_up).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer.down)
        last = rms_norm(x[-1:], w.norm, cfg.rms_norm_eps)
        return F.linear(last, w.lm_head)[0].float()

    def _attention_sdpa(self, i, layer, h: Tensor, cache: KVCache) -> Tensor:
        cfg, T = self.cfg, h.shape[0]
        Hq, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv = F.linear(h, layer.qkv, layer.qkv_bias)
        q, k, v = qkv.split([cfg.q_size, cfg.kv_size, cfg.kv_size], dim=-1)
        q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
        if layer.q_norm is not None:
            q = rms_norm(q, layer.q_norm, cfg.rms_norm_eps)
            k = rms_norm(k, layer.k_norm, cfg.rms_norm_eps)
        q, k = apply_rope(q, self.cos[:T], self.sin[:T]), apply_rope(k, self.cos[:T], self.sin[:T])
        k, v = k.transpose(0, 1), v.transpose(0, 1)  # [Hkv, T, D]
        cache.k[i, :, :T] = k
        cache.v[i, :, :T] = v
        out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k[None], v[None], is_causal=True,
                                             enable_gqa=Hq != Hkv)  # [1, Hq, T, D]
        return F.linear(out[0].transpose(0, 1).reshape(T, cfg.q_size), layer.o)
