"""Random-weight checkpoints in the exact Hugging Face layout, for tests and GPU benchmarks.

    python -m inference.synth --shape qwen2.5-coder-1.5b --out /tmp/q15 [--layers N] [--seed S]
                              [--shards N] [--device cpu|cuda] [--dtype bfloat16]

writes config.json (the real model's fields), generation_config.json, model.safetensors (or
model-0000k-of-0000n.safetensors + model.safetensors.index.json), the tokenizer from
`inference.synth_tokenizer`, and synth.json (the marker that says "random weights": the engine
reports it). transformers' AutoModelForCausalLM loads the result with no missing or unexpected
keys, so the same folder drives our engine and the transformers oracle.

Weights: normal(0, std) for matrices and embeddings, 1 for norms, as transformers initialises
(std = initializer_range = 0.02 for the real shapes). Tiny test shapes use std 0.2 instead
and norms 1 + 0.1 * N(0, 1), biases N(0, std): with 0.02 a 64-wide model's attention scores are
~0.03 (uniform attention, so RoPE and masking bugs would be invisible) and its logits are
nearly flat (greedy decoding on near-ties); with 0.2 scores and logits are O(1-3), and swapped
norm weights (q_norm vs k_norm, attn vs mlp) change the output. config.json records the std.

Speed: tensors are generated on the device (CUDA when available) with a seeded
torch.Generator directly in the target dtype, one at a time, and streamed into the file
(header first, then each tensor's bytes), so a 3B bf16 checkpoint takes seconds on a GPU box
and host memory holds one tensor at a time. Weights are a function of (shape, layers, seed,
dtype, device): the same on every run and for any shard count, but CPU and CUDA generators
give different numbers.

Measured (2026-11-22, one H200, bf16, --device cuda; load = checkpoint.load_weights to cuda):
    qwen2.5-coder-1.5b  3.09 GB, 1 file     write 2.9 s   load 0.4-0.7 s
    qwen2.5-coder-3b    6.17 GB, 2 shards   write 6.1 s   load 1.0-1.5 s
    qwen3-1.7b          4.06 GB, 2 shards   write 2.9 s   load 0.5 s
    llama-3.2-1b        2.47 GB, 1 file     write 2.8 s   load 0.4 s
(peak GPU memory while loading = the weights themselves). Tiny shapes: ~10-40 ms each on CPU,
plus ~1 s once per process to train the synthetic tokenizer.

Not here: real tokenizers or real weights (nothing is ever downloaded), quantized formats.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from .checkpoint import INDEX_FILE, SINGLE_FILE, expected_tensors
from .config import ModelConfig

SHARD_BYTES = 4 * 10**9  # like the real releases: 1.5B / Llama-1B single file, 3B / Qwen3-1.7B two shards
_DTYPE_TAGS = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}
_DTYPE_NAMES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_LLAMA3_ROPE = {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192, "rope_type": "llama3"}


@dataclass(frozen=True)
class Shape:
    """One model shape: the fields of its config.json plus how we initialise it."""

    name: str
    model_type: str  # qwen2 | qwen3 | llama
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    max_position_embeddings: int
    head_dim: int | None = None  # written to config.json only when set (qwen3, llama do)
    tie_word_embeddings: bool = True
    rope_theta: float = 1_000_000.0
    rope_scaling: dict | None = None
    rms_norm_eps: float = 1e-6
    std: float = 0.02  # initializer_range; weights ~ N(0, std)
    norm_noise: float = 0.0  # norms = 1 + norm_noise * N(0, 1)
    bias_std: float = 0.0  # q/k/v biases ~ N(0, bias_std)
    add_bos: bool = False  # Llama-style tokenizer that prepends BOS
    store_tied_head: bool = False  # tied, yet the file also holds lm_head.weight (= the embedding), as Qwen3's do
    extra: dict = field(default_factory=dict)  # more config.json fields

    def config(self) -> ModelConfig:
        """The engine's config of this shape (placeholder special-token ids)."""
        return ModelConfig.from_dict(config_json(self, _ids_placeholder(self)))

    def params(self) -> int:
        return self.config().num_params()


_TINY = dict(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
             vocab_size=2048, max_position_embeddings=2048, std=0.2, norm_noise=0.1, bias_std=0.2)

SHAPES: dict[str, Shape] = {s.name: s for s in [
    Shape("qwen2.5-coder-1.5b", "qwen2", 1536, 8960, 28, 12, 2, 151936, 32768, bias_std=0.02),
    Shape("qwen2.5-coder-3b", "qwen2", 2048, 11008, 36, 16, 2, 151936, 32768, bias_std=0.02),
    # The real Qwen3-1.7B files store lm_head.weight although it is tied: 2.03B tensors, 4.06 GB, 2 shards.
    Shape("qwen3-1.7b", "qwen3", 2048, 6144, 28, 16, 8, 151936, 40960, head_dim=128, store_tied_head=True),
    Shape("llama-3.2-1b", "llama", 2048, 8192, 16, 32, 8, 128256, 131072, head_dim=64,
          rope_theta=500_000.0, rope_scaling=_LLAMA3_ROPE, rms_norm_eps=1e-5, add_bos=True),
    # Test shapes: a few MB, every code path of the loader and the forward.
    Shape("tiny", "qwen2", **_TINY),
    Shape("tiny-untied", "qwen2", **{**_TINY, "vocab_size": 1536}, tie_word_embeddings=False),
    # head_dim 32 != hidden/heads (16), as in Qwen3-0.6B: catches code that derives it.
    Shape("tiny-qwen3", "qwen3", **{**_TINY, "bias_std": 0.0}, head_dim=32),
    # Llama-3 RoPE scaling squeezed to a 2k context (original 512, high/low 4/1): with head_dim
    # 16 and theta 5e5 the frequencies hit all three branches (kept, smoothed, divided by factor).
    Shape("tiny-llama", "llama", **{**_TINY, "bias_std": 0.0, "vocab_size": 2304}, head_dim=16,
          tie_word_embeddings=False, rope_theta=500_000.0, rms_norm_eps=1e-5, add_bos=True,
          rope_scaling={**_LLAMA3_ROPE, "factor": 8.0, "original_max_position_embeddings": 512}),
]}


def _ids_placeholder(shape: Shape) -> dict:
    v = shape.vocab_size
    return {"bos_token_id": v - 1, "eos_token_id": v - 2, "eos_token_ids": [v - 2]}


def config_json(shape: Shape, ids: dict, dtype: torch.dtype = torch.bfloat16) -> dict:
    """config.json for `shape` with the fields (and field order) of the real model's file."""
    dtype_name = str(dtype).removeprefix("torch.")
    arch = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}
    cfg: dict = {"architectures": [arch[shape.model_type]]}
    if shape.model_type != "qwen2":
        cfg["attention_bias"] = False
    cfg |= {
        "attention_dropout": 0.0,
        "bos_token_id": ids["bos_token_id"],
        "dtype": dtype_name,
        "eos_token_id": ids["eos_token_id"],
    }
    if shape.head_dim is not None:
        cfg["head_dim"] = shape.head_dim
    cfg |= {
        "hidden_act": "silu",
        "hidden_size": shape.hidden_size,
        "initializer_range": shape.std,
        "intermediate_size": shape.intermediate_size,
        "max_position_embeddings": shape.max_position_embeddings,
    }
    if shape.model_type == "llama":
        cfg["mlp_bias"] = False
    else:
        cfg["max_window_layers"] = shape.num_layers
    cfg |= {
        "model_type": shape.model_type,
        "num_attention_heads": shape.num_heads,
        "num_hidden_layers": shape.num_layers,
        "num_key_value_heads": shape.num_kv_heads,
    }
    if shape.model_type == "llama":
        cfg["pretraining_tp"] = 1
    cfg |= {
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_scaling": dict(shape.rope_scaling) if shape.rope_scaling else None,
        "rope_theta": shape.rope_theta,
    }
    if shape.model_type != "llama":
        cfg["sliding_window"] = None if shape.model_type == "qwen3" else shape.max_position_embeddings
    cfg |= {
        "tie_word_embeddings": shape.tie_word_embeddings,
        "torch_dtype": dtype_name,
        "transformers_version": "4.51.0",
        "use_cache": True,
    }
    if shape.model_type != "llama":
        cfg["use_sliding_window"] = False
    cfg["vocab_size"] = shape.vocab_size
    return cfg | shape.extra


def generation_config_json(shape: Shape, ids: dict) -> dict:
    out = {"bos_token_id": ids["bos_token_id"], "do_sample": False, "eos_token_id": list(ids["eos_token_ids"])}
    if ids.get("pad_token_id") is not None:
        out["pad_token_id"] = ids["pad_token_id"]
    return out | {"transformers_version": "4.51.0"}


def _init_tensor(name: str, shape: tuple[int, ...], spec: Shape, gen: torch.Generator,
                 device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    # Draw in the target dtype on the device: no float32 detour, no host round-trip.
    if name.endswith("norm.weight"):
        t = torch.ones(shape, device=device, dtype=dtype)
        if spec.norm_noise:
            t.add_(torch.randn(shape, generator=gen, device=device, dtype=dtype), alpha=spec.norm_noise)
        return t
    std = spec.bias_std if name.endswith(".bias") else spec.std
    return torch.randn(shape, generator=gen, device=device, dtype=dtype).mul_(std)


def _shard_plan(entries: list[tuple[str, tuple[int, ...]]], itemsize: int, shards: int | None) -> list[list[int]]:
    """Split entry indices (kept in order) into contiguous shards of roughly equal bytes."""
    sizes = [math.prod(s) * itemsize for _, s in entries]
    total = sum(sizes)
    n = shards if shards is not None else max(1, math.ceil(total / SHARD_BYTES))
    if not 1 <= n <= len(entries):
        raise ValueError(f"shards must be between 1 and {len(entries)} (the number of tensors), got {n}")
    plan: list[list[int]] = [[] for _ in range(n)]
    acc, k = 0, 0
    for i, size in enumerate(sizes):
        # Move to the next shard when this one holds its share, keeping one tensor for each remaining shard.
        left = len(entries) - i
        if plan[k] and k < n - 1 and (acc >= total * (k + 1) / n or left <= n - 1 - k):
            k += 1
        plan[k].append(i)
        acc += size
    return plan


def _write_shard(path: Path, names: list[str], shapes: dict[str, tuple[int, ...]], make, dtype: torch.dtype) -> int:
    """Stream one safetensors file: header (8-byte length + JSON padded to 8), then each tensor."""
    tag, itemsize = _DTYPE_TAGS[dtype], torch.empty((), dtype=dtype).element_size()
    header: dict = {"__metadata__": {"format": "pt"}}
    off = 0
    for n in names:
        size = math.prod(shapes[n]) * itemsize
        header[n] = {"dtype": tag, "shape": list(shapes[n]), "data_offsets": [off, off + size]}
        off += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for n in names:
            host = make(n).contiguous().cpu()
            f.write(host.reshape(-1).view(torch.uint8).numpy().data)
            del host
    tmp.replace(path)
    return off


def _clear_old_weights(out: Path) -> None:
    for p in [out / SINGLE_FILE, out / INDEX_FILE, *out.glob("model-*-of-*.safetensors")]:
        if p.is_file():
            p.unlink()


def write_checkpoint(shape: str, out: str | Path, layers: int | None = None, seed: int = 0,
                     shards: int | None = None, device: str | None = None,
                     dtype: torch.dtype = torch.bfloat16, progress: bool | None = None) -> Path:
    """Write a random-weight checkpoint of `shape` into `out` (created; old weights replaced).

    layers overrides num_hidden_layers; shards=None picks ~4 GB shards like the real releases
    (1 = a single model.safetensors); device None = CUDA when available. progress prints a
    line per shard to stderr (default: for checkpoints over 100 MB). Returns `out`.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    if dtype not in _DTYPE_TAGS:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPE_NAMES)}, got {dtype}")
    spec = SHAPES[shape]
    if layers is not None:
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        spec = replace(spec, num_layers=layers)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    from .synth_tokenizer import write_tokenizer

    ids = write_tokenizer(out, spec.vocab_size, seed, add_bos=spec.add_bos)
    if not spec.add_bos:  # Qwen: bos_token_id is <|endoftext|>, though the tokenizer adds no BOS
        ids = {**ids, "bos_token_id": ids["special_tokens"]["<|endoftext|>"]}
    if spec.model_type in ("qwen2", "llama"):  # base models: config eos is <|endoftext|> (Llama: <|end_of_text|>)
        ids = {**ids, "eos_token_id": ids["special_tokens"]["<|endoftext|>"]}
    config = config_json(spec, ids, dtype)
    cfg = ModelConfig.from_dict(config)  # our own parser must accept what we write
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(generation_config_json(spec, ids), indent=2) + "\n")

    shapes = expected_tensors(cfg)
    if spec.store_tied_head and cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = shapes["model.embed_tokens.weight"]
    entries = list(shapes.items())
    assert entries[0][0] == "model.embed_tokens.weight"  # drawn first: a fresh generator redraws it
    itemsize = torch.empty((), dtype=dtype).element_size()
    plan = _shard_plan(entries, itemsize, shards)
    n_stored = sum(math.prod(s) for _, s in entries)
    total = n_stored * itemsize
    if progress is None:
        progress = total > 100 * 2**20
    gen = torch.Generator(device=dev).manual_seed(seed)

    def make(name: str) -> torch.Tensor:
        if name == "lm_head.weight" and cfg.tie_word_embeddings:  # stored copy of the tied embedding
            name, fresh = "model.embed_tokens.weight", torch.Generator(device=dev).manual_seed(seed)
            return _init_tensor(name, shapes[name], spec, fresh, dev, dtype)
        return _init_tensor(name, shapes[name], spec, gen, dev, dtype)

    _clear_old_weights(out)
    if progress:
        print(f"synth: {shape} ({n_stored / 1e9:.2f}B params, {total / 1e9:.2f} GB {config['dtype']}, "
              f"{cfg.num_layers} layers) on {dev} -> {out}", file=sys.stderr, flush=True)
    weight_map = {}
    for k, idx in enumerate(plan):
        names = [entries[i][0] for i in idx]
        fname = SINGLE_FILE if len(plan) == 1 else f"model-{k + 1:05d}-of-{len(plan):05d}.safetensors"
        t1 = time.perf_counter()
        nbytes = _write_shard(out / fname, names, shapes, make, dtype)
        weight_map.update((n, fname) for n in names)
        if progress:
            print(f"synth:   {fname}: {len(names)} tensors, {nbytes / 1e9:.2f} GB in {time.perf_counter() - t1:.1f} s",
                  file=sys.stderr, flush=True)
    if len(plan) > 1:
        index = {"metadata": {"total_parameters": n_stored, "total_size": total}, "weight_map": weight_map}
        (out / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    marker = {"shape": shape, "layers": cfg.num_layers, "seed": seed, "dtype": config["dtype"], "device": dev.type,
              "std": spec.std, "note": "random weights written by inference.synth; not a trained model"}
    (out / "synth.json").write_text(json.dumps(marker, indent=2) + "\n")
    if progress:
        print(f"synth: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m inference.synth", description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True, choices=list(SHAPES), help="model shape to imitate")
    p.add_argument("--out", required=True, type=Path, help="output folder (created)")
    p.add_argument("--layers", type=int, default=None, help="override num_hidden_layers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, default=None, help="number of safetensors files (default: ~4 GB each)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="where to draw weights (default: cuda if available)")
    p.add_argument("--dtype", choices=list(_DTYPE_NAMES), default="bfloat16")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    try:
        out = write_checkpoint(args.shape, args.out, layers=args.layers, seed=args.seed, shards=args.shards,
                               device=args.device, dtype=_DTYPE_NAMES[args.dtype])
    except ValueError as e:
        p.error(str(e))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
