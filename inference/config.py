"""Model configuration: one dataclass built from a checkpoint's config.json.

Supports the decoder-only families we serve: `qwen2` (bias on q/k/v), `qwen3`
(RMSNorm on q and k per head) and `llama` (optionally Llama-3 `rope_scaling`).
Anything we cannot run faithfully is refused here with a CheckpointError that
names the field, so no later layer has to guess.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CheckpointError

SUPPORTED_MODEL_TYPES = ("qwen2", "qwen3", "llama")


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding: base theta plus optional Llama-3 frequency scaling."""

    theta: float = 10000.0
    kind: str = "default"  # "default" | "llama3"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    # Per-frequency divisors of the inverse frequencies (GGUF's rope_freqs tensor: how llama.cpp
    # stores Llama 3.1-style scaling); () = none.
    freq_factors: tuple[float, ...] = ()


@dataclass(frozen=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope: RopeConfig = field(default_factory=RopeConfig)
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # bias on q/k/v projections (qwen2: always)
    qk_norm: bool = False  # per-head RMSNorm on q and k (qwen3)
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    torch_dtype: str = "bfloat16"

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers",
                     "num_heads", "num_kv_heads", "head_dim", "max_position_embeddings"):
            if getattr(self, name) <= 0:
                raise CheckpointError(f"config.json: {name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise CheckpointError(
                f"config.json: num_attention_heads ({self.num_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})")
        if self.head_dim % 2:
            raise CheckpointError(f"config.json: head_dim must be even for rotary embeddings, got {self.head_dim}")

    # Derived sizes, used by the loader (expected shapes) and the benchmarks (bytes/token).
    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def qkv_size(self) -> int:
        return self.q_size + 2 * self.kv_size

    def num_params(self) -> int:
        """Parameters in the checkpoint (embedding counted once when tied)."""
        h, i = self.hidden_size, self.intermediate_size
        per_layer = (h * self.qkv_size + self.q_size * h + 3 * h * i + 2 * h
                     + (self.qkv_size if self.attention_bias else 0)
                     + (2 * self.head_dim if self.qk_norm else 0))
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return self.vocab_size * h + self.num_layers * per_layer + h + head

    def decode_weight_params(self) -> int:
        """Parameters read per decoded token: every layer plus the LM head (not the embedding)."""
        return self.num_params() - (0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size)

    @classmethod
    def from_dict(cls, cfg: dict) -> "ModelConfig":
        model_type = cfg.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise CheckpointError(
                f"config.json: unsupported model_type {model_type!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
        if cfg.get("text_config"):
            raise CheckpointError("config.json: multimodal configs (text_config) are not supported")

        def need(key):
            if key not in cfg or cfg[key] is None:
                raise CheckpointError(f"config.json: missing required field {key!r}")
            return cfg[key]

        hidden = int(need("hidden_size"))
        heads = int(need("num_attention_heads"))
        head_dim = cfg.get("head_dim") or (hidden // heads)
        if model_type == "qwen2" and cfg.get("use_sliding_window"):
            raise CheckpointError("config.json: use_sliding_window=true is not supported")
        if cfg.get("mlp_bias"):
            raise CheckpointError("config.json: mlp_bias=true is not supported")
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise CheckpointError(f"config.json: hidden_act {act!r} is not supported (only 'silu')")

        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
        return cls(
            model_type=model_type,
            vocab_size=int(need("vocab_size")),
            hidden_size=hidden,
            intermediate_size=int(need("intermediate_size")),
            num_layers=int(need("num_hidden_layers")),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(need("max_position_embeddings")),
            rope=_rope_from_dict(cfg),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=model_type == "qwen2" or bool(cfg.get("attention_bias", False)),
            qk_norm=model_type == "qwen3",
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=eos_ids,
            torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> "ModelConfig":
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"{path.parent}: no config.json (is this a Hugging Face model folder?)")
        return cls.from_dict(read_json_object(path))


def read_json_object(path: Path) -> dict:
    """A checkpoint's JSON file as a dict, or a CheckpointError naming the file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def _rope_from_dict(cfg: dict) -> RopeConfig:
    # transformers 5 moves rope_theta into rope_parameters; accept both spellings.
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or None
    theta = float(cfg.get("rope_theta") or params.get("rope_theta") or 10000.0)
    spec = scaling or (params if params.get("rope_type", "default") != "default" else None)
    if not spec:
        return RopeConfig(theta=theta)
    kind = spec.get("rope_type") or spec.get("type") or "default"
    if kind == "default":
        return RopeConfig(theta=theta)
    if kind != "llama3":
        raise CheckpointError(f"config.json: rope_scaling type {kind!r} is not supported (only 'llama3')")
    return RopeConfig(
        theta=theta,
        kind="llama3",
        factor=float(spec["factor"]),
        low_freq_factor=float(spec.get("low_freq_factor", 1.0)),
        high_freq_factor=float(spec.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(spec.get("original_max_position_embeddings", 8192)),
    )


def rope_inv_freq(cfg: ModelConfig):
    """Inverse frequencies [head_dim/2] in float32, computed exactly as transformers does
    (same float32 ops, same order), Llama-3 scaling included, so parity is bit-level."""
    import torch

    r, d = cfg.rope, cfg.head_dim
    inv = 1.0 / (r.theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    if r.freq_factors:  # as ggml's rope: theta = pos * base^(-2i/d) / freq_factors[i]
        return inv / torch.tensor(r.freq_factors, dtype=torch.float32)
    if r.kind != "llama3":
        return inv
    old = r.original_max_position_embeddings
    low_wavelen, high_wavelen = old / r.low_freq_factor, old / r.high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / r.factor, inv)
    smooth = (old / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor)
    smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)
