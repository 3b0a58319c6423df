"""The model's weights in the layout the engine decodes with.

`checkpoint.load_weights` fills these from Hugging Face safetensors; the reference forward and
the GPU fast path both read them. Projections that consume the same input are packed at load
time (q|k|v into `qkv`, gate|up into `gate_up`) so a decode step reads each input once. With FP8
weights (inference.quant) the linear fields hold `Fp8Weight`s (e4m3 values + scales) and the LM head an
`Int8Weight` (int8 values + scales).
This file only describes the layout; it does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor


@dataclass
class LayerWeights:
    attn_norm: Tensor  # [H]
    qkv: Tensor  # [q_size + 2*kv_size, H]  rows: q heads, then k heads, then v heads
    qkv_bias: Tensor | None  # [q_size + 2*kv_size]  (qwen2 / attention_bias)
    q_norm: Tensor | None  # [head_dim]  (qwen3)
    k_norm: Tensor | None  # [head_dim]
    o: Tensor  # [H, q_size]
    mlp_norm: Tensor  # [H]
    gate_up: Tensor  # [2*I, H]  rows 0..I-1 gate_proj, I..2I-1 up_proj
    down: Tensor  # [H, I]

    def tensors(self) -> list[Tensor]:
        return [t for f in fields(self) if (t := getattr(self, f.name)) is not None]


@dataclass
class ModelWeights:
    embed: Tensor  # [V, H]
    layers: list[LayerWeights]
    norm: Tensor  # [H]
    lm_head: Tensor  # [V, H]; the same tensor object as `embed` when embeddings are tied

    @property
    def tied(self) -> bool:
        return self.lm_head is self.embed

    @property
    def device(self) -> torch.device:
        return self.embed.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    def nbytes(self) -> int:
        """Bytes held on the device (a tied embedding counted once; FP8 weights with their scales)."""
        ts = [self.embed, self.norm] + [t for layer in self.layers for t in layer.tensors()]
        if not self.tied:
            ts.append(self.lm_head)
        return sum(t.numel() * t.element_size() if isinstance(t, Tensor) else t.nbytes() for t in ts)
