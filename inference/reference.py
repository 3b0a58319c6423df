"""Reference forward pass in plain PyTorch: the oracle every faster path is tested against.

Written to mirror Hugging Face transformers' eager Qwen2/Qwen3/Llama modelling op for op
(RMSNorm in float32 then cast, rotate-half RoPE, softmax in float32), so float32 runs agree with
transformers token for token. It runs on CPU and CUDA, float32 and bfloat16, over a static KV
cache: prefill is `forward(ids, start=0)`, a decode step is `forward(ids[1], start=pos)`.
It is not fast and does not try to be.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .config import ModelConfig, rope_inv_freq
from .kv_cache import KVCache  # noqa: F401  (the cache the forward writes; importable from here)
from .weights import LayerWeights, ModelWeights


def rope_tables(cfg: ModelConfig, max_len: int, device) -> tuple[Tensor, Tensor]:
    """cos, sin: [max_len, head_dim/2] float32, angles = position * inv_freq (as transformers)."""
    inv = rope_inv_freq(cfg).to(device)
    pos = torch.arange(max_len, device=device, dtype=torch.int64).float()
    freqs = pos[:, None] * inv[None, :]
    return freqs.cos(), freqs.sin()


def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor:
    dtype = x.dtype
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return w * x32.to(dtype)


def rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: [T, heads, D]; cos/sin: [T, D/2] float32 (cast to x's dtype like transformers)."""
    cos = torch.cat([cos, cos], -1)[:, None, :].to(x.dtype)
    sin = torch.cat([sin, sin], -1)[:, None, :].to(x.dtype)
    return x * cos + rotate_half(x) * sin


class ReferenceModel:
    """Weights + config + RoPE tables; `forward` fills the given KV cache as it goes."""

    def __init__(self, cfg: ModelConfig, weights: ModelWeights, max_len: int):
        self.cfg, self.w = cfg, weights
        self.cos, self.sin = rope_tables(cfg, max_len, weights.device)

    @torch.inference_mode()
    def forward(self, ids: Tensor, start: int, cache: KVCache) -> Tensor:
        """ids: [T] int64 at positions start..start+T-1 -> logits [T, V] float32."""
        T = ids.shape[0]
        assert start + T <= cache.max_len, "KV cache overflow (the engine checks lengths first)"
        x = self.w.embed[ids]  # [T, H]
        for i, layer in enumerate(self.w.layers):
            x = x + self._attention(i, layer, rms_norm(x, layer.attn_norm, self.cfg.rms_norm_eps), start, cache)
            h = rms_norm(x, layer.mlp_norm, self.cfg.rms_norm_eps)
            gate, up = (h @ layer.gate_up.T).chunk(2, dim=-1)  # [T, I] each
            x = x + (F.silu(gate) * up) @ layer.down.T
        x = rms_norm(x, self.w.norm, self.cfg.rms_norm_eps)
        return (x @ self.w.lm_head.T).float()

    def _attention(self, i: int, layer: LayerWeights, h: Tensor, start: int, cache: KVCache) -> Tensor:
        cfg, T = self.cfg, h.shape[0]
        Hq, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv = h @ layer.qkv.T
        if layer.qkv_bias is not None:
            qkv = qkv + layer.qkv_bias
        q, k, v = qkv.split([cfg.q_size, cfg.kv_size, cfg.kv_size], dim=-1)
        q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
        if layer.q_norm is not None:
            q = rms_norm(q, layer.q_norm, cfg.rms_norm_eps)
            k = rms_norm(k, layer.k_norm, cfg.rms_norm_eps)
        cos, sin = self.cos[start:start + T], self.sin[start:start + T]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)

        end = start + T
        cache.k[i, :, start:end] = k.transpose(0, 1)
        cache.v[i, :, start:end] = v.transpose(0, 1)
        group = Hq // Hkv
        # The cache may be stored in a narrower dtype than we compute in (the fast path's bf16
        # cache under a float32 oracle): read it back in the compute dtype.
        keys = cache.k[i, :, :end].to(q.dtype).repeat_interleave(group, dim=0)  # [Hq, S, D]
        values = cache.v[i, :, :end].to(q.dtype).repeat_interleave(group, dim=0)

        scores = (q.transpose(0, 1) @ keys.transpose(1, 2)) * (D ** -0.5)  # [Hq, T, S]
        q_pos = torch.arange(start, end, device=h.device)[:, None]
        k_pos = torch.arange(end, device=h.device)[None, :]
        scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = (probs @ values).transpose(0, 1).reshape(T, cfg.q_size)  # [T, Hq*D]
        return out @ layer.o.T
