"""FP8 weights: e4m3 values with a float32 scale and offset per group of 32 columns, quantized at load.

    w[n, k]  ~=  offset[n, g] + scale[n, g] * q[n, k],   g = k // 32,   q in float8_e4m3fn
    offset = (max + min) / 2 of the group,   scale = (max - min) / 2 / 7.5   (q in [-7.5, 7.5])

with K % 32 == 0 (the decode kernels read a row as int32 words of four e4m3 values, a group as 8 words).
Why groups with an offset, and why 7.5 (lab/probe_fp8_quality.py; README's FP8 section has the table):
e4m3 keeps 3 mantissa bits, so one scale per output channel leaves every weight ~2^-5 off, which took
SmolLM2-135M-Instruct from 100% to 87% top-1 agreement with float32 (+6.6% perplexity); finer symmetric
scales do not help (a float format's error is relative to each value). A 4-bit source grid does: GGUF
Q4_1 blocks hold 32 values min + d * i, i = 0..15, with both ends present, so the mid-range offset and
a half range mapped to 7.5 put every value on an e4m3 half-integer (i - 7.5): exact. On other weights
the format costs nothing over 448 (values below 0.2% of the half range go subnormal, step 2^-9).
Bytes per weight: 1 + 8/32 = 1.25 (bf16: 2).

The LM head is 8-bit too, in int8 with a float16 scale per group of 32 (`Int8Weight`, w = scale * q: GGUF
Q8_0's own format, 1.0625 bytes a weight): an e4m3 head failed the quality gate on SmolLM2-135M-Instruct,
whose tied head is Q8_0 (255 levels a block: 96.09% top-1 agreement, the gate asks 97%), and int8 holds a
Q8_0 block exactly (its largest value is 127 * d, so the fitted scale is d and q the block's integers).

`quantize_model` turns a loaded `ModelWeights` (bf16/fp16/fp32, from safetensors or GGUF) into one
whose linear layers (QKV, o_proj, gate/up, down) are `Fp8Weight`s and whose LM head is an `Int8Weight`
(`lm_head` picks: "int8", "fp8" or None for 16-bit); norms, biases and the embedding table stay as they
are (the embedding is read one row per token: 8 bits would save memory, not time). The GPU fast path
(inference.fast.fp8) decodes with these directly; `dequantize_model` gives the same numbers back as plain
tensors, so the reference forward on CPU runs the FP8 model exactly (the "FP8 reference" of the quality
gate and the tests). The GPU prefill dequantizes each FP8 weight just before its GEMM
(inference.fast.prefill.linear).

Not here: FP8 activations or KV cache, the kernels (kernels/fp8_*.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from .weights import LayerWeights, ModelWeights

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0  # largest finite e4m3 value
GROUP = 32  # columns per scale and offset (kernels/_fp8.py GROUP: 8 int32 words)
Q_HALF_RANGE = 7.5  # the e4m3 value a group's half range maps to (4-bit grids land on half-integers)
LINEAR_FIELDS = ("qkv", "o", "gate_up", "down")  # the LayerWeights fields that FP8 replaces
# The FP8 engine's LM head: int8 (scale per 32). On SmolLM2-135M-Instruct (its tied head is GGUF Q8_0, 255 levels
# a block) an e4m3 head alone costs 3.9 points of top-1 agreement (96.09% < the gate's 97%;
# lab/probe_fp8_quality.py); int8 holds Q8_0 exactly. "fp8" (e4m3, this module's format) and None (16-bit) remain.
LM_HEAD = "int8"
HEAD_FORMATS = ("int8", "fp8", None)
INT8_MAX = 127
CHUNK_ELEMENTS = 1 << 24  # rows quantized per pass stay below this many elements (bounded fp32 temporaries)


class _Quantized:
    """What an 8-bit weight (Fp8Weight, Int8Weight) offers beside its q, scale and offset (None: symmetric)."""

    q: Tensor
    scale: Tensor
    offset: Tensor | None

    @property
    def shape(self) -> torch.Size:
        return self.q.shape

    @property
    def device(self) -> torch.device:
        return self.q.device

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.q, self.scale, self.offset) if t is not None)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """offset + scale * q as a [N, K] tensor of `dtype` (computed in float32, then cast)."""
        return dequantize(self.q, self.scale, self.offset).to(dtype)


@dataclass
class Fp8Weight(_Quantized):
    """One linear layer's weight in FP8: q [N, K] e4m3 (row-major, contiguous), scale and offset [N, K/32]
    float32 (contiguous)."""

    q: Tensor
    scale: Tensor
    offset: Tensor

    def __post_init__(self):
        assert self.q.dtype == E4M3 and self.q.dim() == 2 and self.q.is_contiguous(), "q must be contiguous [N, K] e4m3"
        groups = (self.q.shape[0], self.q.shape[1] // GROUP)
        for t in (self.scale, self.offset):
            assert t.dtype == torch.float32 and t.shape == groups and t.is_contiguous(), \
                f"scale and offset must be contiguous {list(groups)} float32"


@dataclass
class Int8Weight(_Quantized):
    """The LM head in 8 bits: q [N, K] int8 (row-major, contiguous), scale [N, K/32] float16 (contiguous):
    w = scale * q per group of 32 columns. No offset (`offset` is None: the 8-bit GEMVs' symmetric case)."""

    q: Tensor
    scale: Tensor
    offset = None

    def __post_init__(self):
        assert self.q.dtype == torch.int8 and self.q.dim() == 2 and self.q.is_contiguous(), \
            "q must be contiguous [N, K] int8"
        groups = (self.q.shape[0], self.q.shape[1] // GROUP)
        assert self.scale.dtype == torch.float16 and self.scale.shape == groups and self.scale.is_contiguous(), \
            f"scale must be contiguous {list(groups)} float16"



QUANTIZED = (Fp8Weight, Int8Weight)  # the weight types the 8-bit kernels read


def dequantize(q: Tensor, scale: Tensor, offset: Tensor | None) -> Tensor:
    """float32 [N, K] = offset + scale * q, one scale and offset per group of GROUP columns (no offset: scale * q)."""
    n, k = q.shape
    w = q.float().view(n, k // GROUP, GROUP) * scale.float()[..., None]
    return (w if offset is None else w + offset[..., None]).view(n, k)


def quantize_fp8(w: Tensor) -> Fp8Weight:
    """e4m3 quantization of a [N, K] weight, K % 32 == 0: per group of 32 columns the mid-range is the offset
    and the half range maps to +-7.5 (round to nearest; a constant group gets scale 1 and q = 0)."""
    assert w.dim() == 2 and w.shape[1] % GROUP == 0, f"expected a [N, K] weight with K a multiple of {GROUP}"
    n, k = w.shape
    q = torch.empty((n, k), dtype=E4M3, device=w.device)
    scale = torch.empty((n, k // GROUP), dtype=torch.float32, device=w.device)
    offset = torch.empty_like(scale)
    step = max(1, CHUNK_ELEMENTS // max(k, 1))
    for r in range(0, n, step):
        g = w[r:r + step].float().view(-1, k // GROUP, GROUP)
        lo, hi = g.amin(dim=-1), g.amax(dim=-1)
        mid, half = (hi + lo) / 2, (hi - lo) / 2
        s = torch.where(half > 0, half / Q_HALF_RANGE, torch.ones_like(half))
        scale[r:r + step], offset[r:r + step] = s, mid
        q[r:r + step] = ((g - mid[..., None]) / s[..., None]).clamp_(-E4M3_MAX, E4M3_MAX).view(-1, k).to(E4M3)
    return Fp8Weight(q, scale, offset)


def quantize_int8(w: Tensor) -> Int8Weight:
    """int8 quantization of a [N, K] weight, K % 32 == 0: per group of 32 columns the scale is max |w| / 127 in
    float16, q = round(w / scale) (an all-zero group, or one below float16's smallest scale: scale 0, q 0).
    A GGUF Q8_0 block (d * i, |i| <= 127 with 127 present) comes back exactly: scale d, q = i."""
    assert w.dim() == 2 and w.shape[1] % GROUP == 0, f"expected a [N, K] weight with K a multiple of {GROUP}"
    n, k = w.shape
    q = torch.empty((n, k), dtype=torch.int8, device=w.device)
    scale = torch.empty((n, k // GROUP), dtype=torch.float16, device=w.device)
    step = max(1, CHUNK_ELEMENTS // max(k, 1))
    for r in range(0, n, step):
        g = w[r:r + step].float().view(-1, k // GROUP, GROUP)
        s = (g.abs().amax(dim=-1) / INT8_MAX).to(torch.float16)
        sf = s.float()[..., None]
        v = torch.where(sf > 0, g / torch.where(sf > 0, sf, 1.0), 0.0)
        scale[r:r + step] = s
        q[r:r + step] = v.round_().clamp_(-INT8_MAX, INT8_MAX).view(-1, k).to(torch.int8)
    return Int8Weight(q, scale)


def source_dtype(card: dict, dtype: torch.dtype) -> torch.dtype:
    """The dtype to load a checkpoint in before quantizing it to FP8 for a model that runs in `dtype`: float32
    where the checkpoint's values are finer than `dtype` (GGUF blocks, float32 files), so each group is fitted
    to its own values. A GGUF Q4_1 block's 16 levels then come back exactly (through bf16 first, 10% do)."""
    if card.get("format") == "gguf" or card.get("source_dtype") == "float32":
        return torch.float32
    return dtype


def quantize_model(weights: ModelWeights, lm_head: str | None = LM_HEAD,
                   dtype: torch.dtype | None = None) -> ModelWeights:
    """The same model with every layer's linear weights in FP8 and its LM head in `lm_head`'s format ("int8":
    Int8Weight, "fp8": Fp8Weight, None: 16-bit), its other tensors (norms, biases, the embedding, a 16-bit LM
    head) cast to `dtype` (None: left as they are).

    Each source tensor is dropped as soon as its FP8 copy exists (peak memory: the model plus one
    weight's temporaries); fields already in FP8 (a loader's `linear=quantize_fp8`) stay as they are. A tied
    LM head gets its own 8-bit copy, or stays the embedding tensor."""
    assert lm_head in HEAD_FORMATS, f"lm_head must be one of {HEAD_FORMATS}, got {lm_head!r}"
    def cast(t):
        return t if t is None or dtype is None else t.to(dtype)

    layers = []
    for i, layer in enumerate(weights.layers):
        fp8 = {f: w if isinstance(w := getattr(layer, f), Fp8Weight) else quantize_fp8(w) for f in LINEAR_FIELDS}
        layers.append(replace(layer, **fp8, **{f.name: cast(getattr(layer, f.name)) for f in fields(layer)
                                                   if f.name not in fp8}))
        weights.layers[i] = layers[-1]  # the caller's source copies go as we go
    embed = cast(weights.embed)
    quantize_head = {"int8": quantize_int8, "fp8": quantize_fp8}.get(lm_head)
    head = quantize_head(weights.lm_head) if quantize_head else embed if weights.tied else cast(weights.lm_head)
    return ModelWeights(embed=embed, layers=layers, norm=cast(weights.norm), lm_head=head)


def dequantize_model(weights: ModelWeights, dtype: torch.dtype = torch.float32) -> ModelWeights:
    """Plain tensors of `dtype` holding exactly offset + scale * q for every 8-bit weight (other tensors cast to
    `dtype`): what the reference forward runs as the FP8 model."""

    def plain(t):
        if t is None:
            return None
        return t.dequantize(dtype) if isinstance(t, QUANTIZED) else t.to(dtype)

    embed = plain(weights.embed)
    layers = [LayerWeights(**{f.name: plain(getattr(layer, f.name)) for f in fields(layer)}) for layer in weights.layers]
    head = embed if weights.lm_head is weights.embed else plain(weights.lm_head)
    return ModelWeights(embed=embed, layers=layers, norm=plain(weights.norm), lm_head=head)


def is_fp8(weights: ModelWeights) -> bool:
    return isinstance(weights.layers[0].qkv, Fp8Weight)


def describe(weights: ModelWeights) -> str:
    """What the engine info shows as its weights: e.g. "fp8-e4m3 (scale+offset per 32; LM head int8)"."""
    if not is_fp8(weights):
        return str(weights.dtype).removeprefix("torch.")
    h = weights.lm_head
    head = "int8" if isinstance(h, Int8Weight) else "fp8" if isinstance(h, Fp8Weight) else \
        str(h.dtype).removeprefix("torch.")
    return f"fp8-e4m3 (scale+offset per {GROUP}; LM head {head})"
