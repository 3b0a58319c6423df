"""FP8 weights: e4m3 values with one float32 scale per output channel, quantized at load.

    w[n, k]  ~=  q[n, k] * scale[n],   q in float8_e4m3fn,  scale[n] = max_k |w[n, k]| / 448

with K % 4 == 0 (the decode kernels read a row as int32 words of four e4m3 values).

`quantize_model` turns a loaded `ModelWeights` (bf16/fp16/fp32, from safetensors or GGUF) into one
whose linear layers (QKV, o_proj, gate/up, down and, when asked, the LM head) are `Fp8Weight`s; norms,
biases and the embedding table stay as they are (the embedding is read one row per token: FP8 would
save memory, not time). The GPU fast path (inference.fast.fp8) decodes with these directly;
`dequantize_model` gives the same numbers back as plain tensors, so the reference forward on CPU runs
the FP8 model exactly (the "FP8 reference" of the quality gate and the tests). `linear` is F.linear
for either kind (the prefill dequantizes each FP8 weight just before its GEMM).

Not here: FP8 activations or KV cache, per-group scales, the kernels (kernels/fp8_*.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from .weights import LayerWeights, ModelWeights

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0  # largest finite e4m3 value
LINEAR_FIELDS = ("qkv", "o", "gate_up", "down")  # the LayerWeights fields that FP8 replaces
# Whether the LM head is FP8 too (the quality gate on SmolLM2-135M-Instruct decides; see README's FP8 section).
FP8_LM_HEAD = True
CHUNK_ELEMENTS = 1 << 24  # rows quantized per pass stay below this many elements (bounded fp32 temporaries)


@dataclass
class Fp8Weight:
    """One linear layer's weight in FP8: q [N, K] e4m3 (row-major, contiguous), scale [N] float32."""

    q: Tensor
    scale: Tensor

    def __post_init__(self):
        assert self.q.dtype == E4M3 and self.q.dim() == 2 and self.q.is_contiguous(), "q must be contiguous [N, K] e4m3"
        assert self.scale.dtype == torch.float32 and self.scale.shape == self.q.shape[:1], "scale must be [N] float32"

    @property
    def shape(self) -> torch.Size:
        return self.q.shape

    @property
    def device(self) -> torch.device:
        return self.q.device

    def nbytes(self) -> int:
        return self.q.numel() + 4 * self.scale.numel()

    def dequantize(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """q * scale as a [N, K] tensor of `dtype` (computed in float32, then cast)."""
        return (self.q.float() * self.scale[:, None]).to(dtype)


def quantize_fp8(w: Tensor) -> Fp8Weight:
    """Per-output-channel e4m3 quantization of a [N, K] weight, K % 4 == 0 (round to nearest; all-zero rows get
    scale 1)."""
    assert w.dim() == 2 and w.shape[1] % 4 == 0, "expected a [N, K] weight with K a multiple of 4"
    n, k = w.shape
    q = torch.empty((n, k), dtype=E4M3, device=w.device)
    scale = torch.empty(n, dtype=torch.float32, device=w.device)
    step = max(1, CHUNK_ELEMENTS // max(k, 1))
    for r in range(0, n, step):
        rows = w[r:r + step].float()
        amax = rows.abs().amax(dim=1)
        s = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
        scale[r:r + step] = s
        q[r:r + step] = (rows / s[:, None]).clamp_(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return Fp8Weight(q, scale)


def linear(x: Tensor, w: Tensor | Fp8Weight, bias: Tensor | None = None) -> Tensor:
    """F.linear for a plain weight or an Fp8Weight (dequantized to x's dtype first)."""
    if isinstance(w, Fp8Weight):
        w = w.dequantize(x.dtype)
    return F.linear(x, w, bias)


def quantize_model(weights: ModelWeights, lm_head: bool = True) -> ModelWeights:
    """The same model with every layer's linear weights (and the LM head if `lm_head`) in FP8.

    Each bf16 tensor is dropped as soon as its FP8 copy exists (peak memory: the model plus one
    weight's temporaries). A tied LM head gets its own FP8 copy; the embedding stays as it is."""
    layers = []
    for i, layer in enumerate(weights.layers):
        layers.append(replace(layer, **{f: quantize_fp8(getattr(layer, f)) for f in LINEAR_FIELDS}))
        weights.layers[i] = layers[-1]  # the caller's bf16 copies go as we go
    head = quantize_fp8(weights.lm_head) if lm_head else weights.lm_head
    return ModelWeights(embed=weights.embed, layers=layers, norm=weights.norm, lm_head=head)


def dequantize_model(weights: ModelWeights, dtype: torch.dtype = torch.float32) -> ModelWeights:
    """Plain tensors of `dtype` holding exactly q * scale for every Fp8Weight (other tensors cast to
    `dtype`): what the reference forward runs as the FP8 model."""

    def plain(t):
        if t is None:
            return None
        return t.dequantize(dtype) if isinstance(t, Fp8Weight) else t.to(dtype)

    embed = plain(weights.embed)
    layers = [LayerWeights(**{f.name: plain(getattr(layer, f.name)) for f in fields(layer)}) for layer in weights.layers]
    head = embed if weights.lm_head is weights.embed else plain(weights.lm_head)
    return ModelWeights(embed=embed, layers=layers, norm=plain(weights.norm), lm_head=head)


def is_fp8(weights: ModelWeights) -> bool:
    return isinstance(weights.layers[0].qkv, Fp8Weight)


def describe(weights: ModelWeights) -> str:
    """What the engine info shows as its weights: e.g. "fp8-e4m3 (per-channel scales; LM head fp8)"."""
    if not is_fp8(weights):
        return str(weights.dtype).removeprefix("torch.")
    head = "fp8" if isinstance(weights.lm_head, Fp8Weight) else str(weights.lm_head.dtype).removeprefix("torch.")
    return f"fp8-e4m3 (per-channel scales; LM head {head})"
