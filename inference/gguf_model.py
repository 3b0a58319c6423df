"""Reading a GGUF file (llama.cpp's format): config from its metadata, weights dequantized.

`GGUFCheckpoint.open(path)` reads the header with the `gguf` package (llama.cpp's own reader,
memory-mapped, no tensor data read) and builds:
  - `config`: a ModelConfig from `{arch}.*` metadata (layers, sizes, heads, rope base, norm eps,
    context length; tied embeddings = no `output.weight` tensor), through the same checks as a
    config.json (`ModelConfig.from_dict`);
  - `card`: what the page shows about the file (name, license, quantization, ...).
Llama 3.1-style rope scaling arrives as the `rope_freqs` tensor (per-frequency divisors).
`load_weights(device, dtype)` dequantizes each tensor with `gguf.quants` (F32, F16, BF16, Q8_0,
Q4_0, Q4_1, Q4_K, Q5_K, Q6_K), undoes llama.cpp's Q/K row permutation for llama (its converter
interleaves the rotary halves for the GGML rope kernel), and packs q|k|v and gate|up as the
safetensors loader does. Architectures: llama, qwen2, qwen3. Anything else is one CheckpointError.

Not here: the tokenizer (`inference.gguf_tokenizer`), choosing which file to open (`inference.hub`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from .checkpoint import expected_tensors
from .config import ModelConfig
from .errors import CheckpointError, EngineError
from .weights import LayerWeights, ModelWeights

ARCHITECTURES = ("llama", "qwen2", "qwen3")
TENSOR_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K")
# llama.cpp tensor name (after "blk.N.") -> Hugging Face name (after "model.layers.N.")
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                 "output.weight": "lm_head.weight"}
# general.file_type (llama.cpp's LLAMA_FTYPE) -> the name users know, for the model card.
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
              17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}


def hf_name(gguf_name: str) -> str | None:
    """The Hugging Face tensor name for a llama.cpp one (None when we do not know it)."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    return None


def unpermute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's convert_hf_to_gguf `permute` of llama's q/k rows: per head, it moved
    the rotary halves [x0..x(D/2-1) | y0..] to interleaved pairs [x0 y0 x1 y1 ...]."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def permute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """llama.cpp's own permutation (what its converter writes); the inverse of `unpermute_qk`."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


@dataclass
class GGUFCheckpoint:
    path: Path
    reader: object  # gguf.GGUFReader
    metadata: dict
    config: ModelConfig
    tensors: dict = field(default_factory=dict)  # HF name -> gguf ReaderTensor

    @classmethod
    def open(cls, path: str | Path) -> "GGUFCheckpoint":
        path = Path(path)
        reader = _reader(path)
        meta = {}
        for key, f in reader.fields.items():
            if key.startswith("tokenizer.ggml.") and key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                                                              "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
                continue  # large arrays: read by the tokenizer when needed
            try:
                meta[key] = f.contents()
            except Exception:  # an exotic field we do not read anyway
                continue
        arch = meta.get("general.architecture")
        if arch not in ARCHITECTURES:
            raise CheckpointError(f"{path.name}: GGUF architecture {arch!r} is not supported "
                                  f"(supported: {', '.join(ARCHITECTURES)})")
        tensors, freq_factors = {}, ()
        for t in reader.tensors:
            name = hf_name(t.name)
            if name is None:
                if t.name == "rope_freqs.weight" and t.tensor_type.name == "F32":
                    freq_factors = tuple(float(x) for x in np.asarray(t.data, dtype=np.float32).reshape(-1))
                    continue
                raise CheckpointError(f"{path.name}: unexpected tensor {t.name} for architecture {arch}")
            if t.tensor_type.name not in TENSOR_TYPES:
                raise CheckpointError(f"{path.name}: tensor {t.name} has type {t.tensor_type.name}, which is not "
                                      f"supported (supported: {', '.join(TENSOR_TYPES)})")
            tensors[name] = t
        cfg = ModelConfig.from_dict(hf_config(meta, tensors, path.name))
        if freq_factors:
            if len(freq_factors) != cfg.head_dim // 2:
                raise CheckpointError(f"{path.name}: rope_freqs.weight has {len(freq_factors)} values, "
                                      f"head_dim {cfg.head_dim} needs {cfg.head_dim // 2}")
            cfg = replace(cfg, rope=replace(cfg.rope, freq_factors=freq_factors))
        ckpt = cls(path, reader, meta, cfg, tensors)
        ckpt._validate()
        return ckpt

    def _validate(self) -> None:
        expected = expected_tensors(self.config)
        for name, shape in expected.items():
            if name not in self.tensors:
                raise CheckpointError(f"{self.path.name}: missing tensor for {name} (expected shape {list(shape)})")
            got = tuple(int(x) for x in reversed(self.tensors[name].shape.tolist()))
            if got != shape:
                raise CheckpointError(f"{self.path.name}: tensor {self.tensors[name].name} has shape {list(got)}, "
                                      f"the metadata implies {list(shape)}")
        extra = [n for n in self.tensors if n not in expected and n != "lm_head.weight"]
        if extra:
            raise CheckpointError(f"{self.path.name}: unexpected tensor {self.tensors[extra[0]].name} "
                                  f"for {self.config.model_type} with this metadata")

    # -----------------------------------------------------------------------------------------

    def quantization(self) -> str:
        """The tensor types in the file, most common first, e.g. "Q4_1 (+F32, Q8_0)"."""
        ft = self.metadata.get("general.file_type")
        counts: dict[str, int] = {}
        for t in self.tensors.values():
            counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
        kinds = sorted(counts, key=lambda k: -counts[k])
        if isinstance(ft, int) and ft in FILE_TYPES:
            main = FILE_TYPES[ft]
        else:
            main = kinds[0]
        rest = [k for k in kinds if k != main]
        return main + (f" (+{', '.join(rest)})" if rest else "")

    def card(self) -> dict:
        m, cfg = self.metadata, self.config
        name = m.get("general.name") or self.path.stem
        base = m.get("general.basename")
        size = m.get("general.size_label")
        finetune = m.get("general.finetune")
        return {
            "name": str(name),
            "display_name": "-".join(str(x) for x in (base, size) if x) if base else str(name),
            "finetune": finetune,
            "organization": m.get("general.organization"),
            "params": cfg.num_params(),
            "file": self.path.name,
            "format": "gguf",
            "quantization": self.quantization(),
            "license": m.get("general.license"),
            "context_length": cfg.max_position_embeddings,
            "architecture": cfg.model_type,
        }

    def load_weights(self, device="cpu", dtype: torch.dtype = torch.float32, linear=None) -> ModelWeights:
        """Every tensor dequantized onto `device` as `dtype`, q|k|v and gate|up packed; linear: applied to each
        layer's linear weight as soon as it is built (as inference.checkpoint.load_weights)."""
        cfg = self.config
        linear = linear or (lambda t: t)
        try:
            def one(name: str) -> torch.Tensor:
                return _dequantize(self.tensors[name]).to(device=device, dtype=dtype)

            def qk(name: str, heads: int) -> torch.Tensor:
                w = _dequantize(self.tensors[name])
                return unpermute_qk(w, heads) if cfg.model_type == "llama" else w

            def packed(parts: list[torch.Tensor]) -> torch.Tensor:
                return torch.cat([p.to(dtype) for p in parts]).to(device)

            embed = one("model.embed_tokens.weight")
            layers = []
            for n in range(cfg.num_layers):
                p = f"model.layers.{n}."
                a = p + "self_attn."
                bias = None
                if cfg.attention_bias:
                    bias = packed([_dequantize(self.tensors[a + f"{x}_proj.bias"]) for x in "qkv"])
                layers.append(LayerWeights(
                    attn_norm=one(p + "input_layernorm.weight"),
                    qkv=linear(packed([qk(a + "q_proj.weight", cfg.num_heads),
                                       qk(a + "k_proj.weight", cfg.num_kv_heads),
                                       _dequantize(self.tensors[a + "v_proj.weight"])])),
                    qkv_bias=bias,
                    q_norm=one(a + "q_norm.weight") if cfg.qk_norm else None,
                    k_norm=one(a + "k_norm.weight") if cfg.qk_norm else None,
                    o=linear(one(a + "o_proj.weight")),
                    mlp_norm=one(p + "post_attention_layernorm.weight"),
                    gate_up=linear(packed([_dequantize(self.tensors[p + "mlp.gate_proj.weight"]),
                                           _dequantize(self.tensors[p + "mlp.up_proj.weight"])])),
                    down=linear(one(p + "mlp.down_proj.weight")),
                ))
            norm = one("model.norm.weight")
            lm_head = embed if cfg.tie_word_embeddings else one("lm_head.weight")
        except torch.OutOfMemoryError:
            raise EngineError(f"out of memory on {device} while loading {self.path.name} as "
                              f"{str(dtype).removeprefix('torch.')} ({cfg.num_params() / 1e9:.2f}B parameters)") from None
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{self.path.name}: could not read weights ({e})") from None
        return ModelWeights(embed=embed, layers=layers, norm=norm, lm_head=lm_head)


def _reader(path: Path):
    if not path.is_file():
        raise CheckpointError(f"{path}: no such GGUF file")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise CheckpointError(f"{path.name} is not a GGUF file (no GGUF magic at its start): pass a .gguf file "
                              f"or a model folder")
    try:
        import gguf
    except ImportError:  # pragma: no cover - gguf is a dependency
        raise CheckpointError("the 'gguf' package is needed to read .gguf files (pip install gguf)") from None
    try:
        return gguf.GGUFReader(str(path))
    except Exception as e:  # truncated or corrupt: the reader raises ValueError/struct errors
        raise CheckpointError(f"{path.name}: not a readable GGUF file ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else 'no detail'})") from None


def _dequantize(t) -> torch.Tensor:
    """A tensor as float32 in the Hugging Face [rows, cols] layout."""
    from gguf import quants

    name = t.tensor_type.name
    if name == "F32":
        arr = np.asarray(t.data, dtype=np.float32)
    elif name == "F16":
        arr = np.asarray(t.data).astype(np.float32)
    else:  # BF16 and the block formats: gguf.quants knows them all
        arr = quants.dequantize(t.data, t.tensor_type)
    shape = tuple(int(x) for x in reversed(t.shape.tolist()))
    arr = np.ascontiguousarray(arr, dtype=np.float32).reshape(shape)
    return torch.from_numpy(arr if arr.flags.writeable else arr.copy())  # F32 data is the read-only mmap


def hf_config(meta: dict, tensors: dict, fname: str = "model.gguf") -> dict:
    """A config.json-style dict from GGUF metadata (checked by ModelConfig.from_dict)."""
    arch = meta["general.architecture"]

    def need(key):
        full = f"{arch}.{key}"
        if full not in meta:
            raise CheckpointError(f"{fname}: GGUF metadata has no {full}")
        return meta[full]

    heads = int(need("attention.head_count"))
    hidden = int(need("embedding_length"))
    head_dim = int(meta.get(f"{arch}.attention.key_length") or hidden // heads)
    kv = meta.get(f"{arch}.attention.head_count_kv", heads)
    if isinstance(kv, list):
        raise CheckpointError(f"{fname}: per-layer head counts are not supported")
    rope_dims = meta.get(f"{arch}.rope.dimension_count")
    if rope_dims is not None and int(rope_dims) != head_dim:
        raise CheckpointError(f"{fname}: partial rotary embeddings ({rope_dims} of {head_dim} dims) are not supported")
    scaling = meta.get(f"{arch}.rope.scaling.type")
    if scaling not in (None, "none") and float(meta.get(f"{arch}.rope.scaling.factor", 1.0)) != 1.0:
        raise CheckpointError(f"{fname}: rope scaling {scaling!r} is not supported")
    if meta.get(f"{arch}.expert_count"):
        raise CheckpointError(f"{fname}: mixture-of-experts models are not supported")
    vocab = meta.get(f"{arch}.vocab_size")
    if vocab is None and "model.embed_tokens.weight" in tensors:
        vocab = int(tensors["model.embed_tokens.weight"].shape[1])
    eos = meta.get("tokenizer.ggml.eos_token_id")
    return {
        "model_type": arch,
        "vocab_size": int(vocab) if vocab is not None else None,
        "hidden_size": hidden,
        "intermediate_size": int(need("feed_forward_length")),
        "num_hidden_layers": int(need("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(kv),
        "head_dim": head_dim,
        "rms_norm_eps": _f32(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        "max_position_embeddings": int(need("context_length")),
        "rope_theta": _f32(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        "tie_word_embeddings": "lm_head.weight" not in tensors,
        "attention_bias": "model.layers.0.self_attn.q_proj.bias" in tensors,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": eos,
        "torch_dtype": "float32",
    }


def _f32(x) -> float:
    """A float32 metadata value as the decimal it was written from (1e-06, not 9.99999997e-07):
    the shortest repr that round-trips in float32, so configs compare equal to config.json's."""
    return float(str(np.float32(x)))
