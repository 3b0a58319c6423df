"""Reading a Hugging Face checkpoint folder: validation, safetensors loading, QKV/gate-up packing.

Everything that can be wrong with a model folder is caught here and reported as one
CheckpointError naming the file and tensor (missing files, a truncated or corrupt safetensors
file, a missing shard, a tensor missing / unexpected / of the wrong shape). We parse each
safetensors header ourselves (8-byte little-endian length, JSON, dtype/shape/offsets checked
against the file size) before the `safetensors` library touches the file, so users never see a
traceback from inside torch or safetensors.

Weights go straight to the target device (safe_open(device=...)), are converted to the target
dtype there, and q|k|v and gate|up are copied into preallocated packed tensors
(`inference.weights`), so no unpacked copy outlives its layer.

This file does not parse config.json (that is `inference.config`) nor the tokenizer
(`inference.tokenizer`); it only checks that tokenizer.json is present.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import ModelConfig, read_json_object
from .errors import CheckpointError, EngineError
from .weights import LayerWeights, ModelWeights

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

# safetensors dtype tag -> bytes per element. We load only the float ones.
_DTYPE_SIZES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}
_FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")
# The safetensors library refuses headers above 100 MB; a real one is a few hundred KB.
_MAX_HEADER_BYTES = 100 * 1024 * 1024
# Tensors some exporters add that carry nothing we need.
_IGNORED = re.compile(r".*\.rotary_emb\.inv_freq$")
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as described by a safetensors header (nothing is read yet)."""

    name: str
    file: Path
    dtype: str  # safetensors tag: "BF16", "F32", ...
    shape: tuple[int, ...]


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


# ---------------------------------------------------------------------------------------------
# Folder layout
# ---------------------------------------------------------------------------------------------

def check_model_dir(model_dir: str | Path) -> Path:
    """Return the folder as a Path if it looks like a model we can serve; CheckpointError otherwise.

    Checks presence only (config.json, weights, tokenizer.json); contents are checked by
    ModelConfig.from_file, load_weights and Tokenizer.from_dir.
    """
    path = Path(model_dir).expanduser()
    if not path.exists():
        raise CheckpointError(f"model folder {path} does not exist")
    if not path.is_dir():
        raise CheckpointError(f"{path} is not a folder (pass the model folder, not a file inside it)")
    if not (path / "config.json").is_file():
        raise CheckpointError(f"{path}: no config.json (is this a Hugging Face model folder?)")
    weight_files(path)  # raises when there are no safetensors weights
    if not (path / "tokenizer.json").is_file():
        raise CheckpointError(f"{path}: no tokenizer.json (the fast-tokenizer file is required)")
    return path


def weight_files(model_dir: str | Path) -> list[Path]:
    """The safetensors files holding the weights: the shards named by model.safetensors.index.json,
    else model.safetensors, else every *.safetensors in the folder."""
    path = Path(model_dir)
    index = path / INDEX_FILE
    if index.is_file():
        return sorted({path / shard for shard in _read_index(index).values()})
    if (path / SINGLE_FILE).is_file():
        return [path / SINGLE_FILE]
    found = sorted(p for p in path.glob("*.safetensors") if p.is_file())
    if found:
        return found
    hint = ""
    if list(path.glob("*.bin")) or list(path.glob("*.pt")) or list(path.glob("*.pth")):
        hint = " (found PyTorch .bin/.pt files: only safetensors weights are supported; convert them)"
    elif list(path.glob("*.gguf")):
        hint = " (found .gguf files: pass the .gguf file itself as the model)"
    raise CheckpointError(f"{path}: no weights: expected {SINGLE_FILE} or {INDEX_FILE}{hint}")


def _read_index(index: Path) -> dict[str, str]:
    try:
        data = json.loads(index.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{index.name} is not valid JSON ({e})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index.name}: no \"weight_map\" object mapping tensor names to shard files")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard.endswith(".safetensors") or "/" in shard or "\\" in shard:
            raise CheckpointError(f"{index.name}: tensor {name} maps to {shard!r}, not a .safetensors file name")
    for shard in sorted(set(weight_map.values())):
        if not (index.parent / shard).is_file():
            raise CheckpointError(
                f"{index.parent}: shard {shard} is missing ({index.name} lists it; "
                f"was the download interrupted?)")
    return weight_map


# ---------------------------------------------------------------------------------------------
# safetensors headers
# ---------------------------------------------------------------------------------------------

def read_safetensors_header(path: str | Path) -> dict[str, TensorInfo]:
    """Parse and validate one safetensors file's header against its size; read no tensor data.

    Format: u64 little-endian N, then N bytes of JSON {name: {dtype, shape, data_offsets:[b, e]},
    "__metadata__": {str: str}}, then the tensor bytes; offsets are relative to the data start,
    and the tensors tile the data area exactly.
    """
    path = Path(path)
    name = path.name
    size = path.stat().st_size
    if size < 8:
        raise CheckpointError(f"{name} is truncated: {size} bytes, not even a safetensors header length")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if n > _MAX_HEADER_BYTES or n < 2:
            raise CheckpointError(f"{name} is not a safetensors file: header length {n} is absurd (corrupt file?)")
        if 8 + n > size:
            raise CheckpointError(
                f"{name} is truncated: header says it is {n} bytes long, file has {size - 8} after the length")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{name} has a corrupt header: not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{name} has a corrupt header: expected a JSON object")

    data_size = size - 8 - n
    infos: dict[str, TensorInfo] = {}
    spans = []
    for tname, entry in header.items():
        if tname == "__metadata__":
            continue
        info, begin, end = _check_entry(name, tname, entry)
        infos[tname] = TensorInfo(tname, path, info[0], info[1])
        spans.append((begin, end, tname))

    # The tensors must tile [0, data_end) with no gaps or overlaps (the library insists on it).
    spans.sort()
    pos = 0
    for begin, end, tname in spans:
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap of {begin - pos} bytes"
            raise CheckpointError(f"{name} has a corrupt header: tensor {tname} {what}")
        pos = end
    if pos > data_size:
        raise CheckpointError(
            f"{name} is truncated: header says {pos} bytes of tensor data, file has {data_size}")
    if pos < data_size:
        raise CheckpointError(
            f"{name} is corrupt: header describes {pos} bytes of tensor data but the file has "
            f"{data_size} ({data_size - pos} unexplained trailing bytes)")
    return infos


def _check_entry(fname: str, tname: str, entry) -> tuple[tuple[str, tuple[int, ...]], int, int]:
    bad = f"{fname} has a corrupt header: tensor {tname}"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{bad} is not described by an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in _DTYPE_SIZES:
        raise CheckpointError(f"{bad} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise CheckpointError(f"{bad} has an invalid shape {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) and o >= 0 for o in offsets) or offsets[1] < offsets[0]):
        raise CheckpointError(f"{bad} has invalid data_offsets {offsets!r}")
    nbytes = math.prod(shape) * _DTYPE_SIZES[dtype]
    if offsets[1] - offsets[0] != nbytes:
        raise CheckpointError(
            f"{bad}: {dtype} {_shape_str(shape)} needs {nbytes} bytes but data_offsets span "
            f"{offsets[1] - offsets[0]}")
    return (dtype, tuple(shape)), offsets[0], offsets[1]


def scan_checkpoint(model_dir: str | Path) -> dict[str, TensorInfo]:
    """Every tensor in the folder's weight files, headers validated, no data read."""
    path = Path(model_dir)
    index = path / INDEX_FILE
    weight_map = _read_index(index) if index.is_file() else None
    tensors: dict[str, TensorInfo] = {}
    for file in weight_files(path):
        try:
            header = read_safetensors_header(file)
        except OSError as e:  # unreadable (permissions, I/O error): still one clear message
            raise CheckpointError(f"{file.name}: cannot read ({e.strerror or e})") from None
        for tname, info in header.items():
            if tname in tensors:
                raise CheckpointError(
                    f"tensor {tname} appears in both {tensors[tname].file.name} and {file.name}")
            tensors[tname] = info
    if weight_map is not None:
        for tname, shard in weight_map.items():
            if tname not in tensors or tensors[tname].file.name != shard:
                raise CheckpointError(f"{INDEX_FILE} says tensor {tname} is in {shard}, but that shard does not contain it")
    return tensors


# ---------------------------------------------------------------------------------------------
# Expected tensors and loading
# ---------------------------------------------------------------------------------------------

def expected_tensors(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """HF tensor name -> shape for a checkpoint of this config (lm_head only when untied)."""
    h, i, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (cfg.vocab_size, h), "model.norm.weight": (h,)}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = (cfg.vocab_size, h)
    for n in range(cfg.num_layers):
        p = f"model.layers.{n}."
        out[p + "input_layernorm.weight"] = (h,)
        out[p + "post_attention_layernorm.weight"] = (h,)
        for proj, rows in (("q", cfg.q_size), ("k", cfg.kv_size), ("v", cfg.kv_size)):
            out[p + f"self_attn.{proj}_proj.weight"] = (rows, h)
            if cfg.attention_bias:
                out[p + f"self_attn.{proj}_proj.bias"] = (rows,)
        out[p + "self_attn.o_proj.weight"] = (h, cfg.q_size)
        if cfg.qk_norm:
            out[p + "self_attn.q_norm.weight"] = (d,)
            out[p + "self_attn.k_norm.weight"] = (d,)
        out[p + "mlp.gate_proj.weight"] = (i, h)
        out[p + "mlp.up_proj.weight"] = (i, h)
        out[p + "mlp.down_proj.weight"] = (h, i)
    return out


def _validate(cfg: ModelConfig, present: dict[str, TensorInfo]) -> None:
    if cfg.model_type == "llama" and cfg.attention_bias:
        # transformers' Llama puts the bias on o_proj too; LayerWeights has no o_proj bias.
        raise CheckpointError("config.json: llama with attention_bias=true is not supported "
                              "(it adds a bias to o_proj as well, which this engine does not implement)")
    expected = expected_tensors(cfg)
    missing = [n for n in expected if n not in present]
    if missing:
        more = f" (and {len(missing) - 1} more, e.g. {', '.join(missing[1:4])})" if len(missing) > 1 else ""
        raise CheckpointError(
            f"checkpoint is missing tensor {missing[0]} (expected shape {_shape_str(expected[missing[0]])})"
            f"{more}; does config.json match these weights?")
    for tname, info in present.items():
        if tname in expected or _IGNORED.match(tname):
            continue
        if tname == "lm_head.weight" and cfg.tie_word_embeddings:
            continue  # some tied checkpoints still store the head; we use the embedding
        hint = ""
        m = _LAYER.match(tname)
        if m and int(m.group(1)) >= cfg.num_layers:
            hint = f" (config.json has num_hidden_layers={cfg.num_layers})"
        elif tname.endswith("_proj.bias") and not cfg.attention_bias:
            hint = " (config.json has no attention_bias)"
        elif tname.endswith(("q_norm.weight", "k_norm.weight")):
            hint = f" (model_type {cfg.model_type} has no q/k norm)"
        raise CheckpointError(
            f"{info.file.name}: unexpected tensor {tname} {_shape_str(info.shape)}{hint}; "
            f"config.json does not describe it")
    for tname, shape in expected.items():
        info = present[tname]
        if info.shape != shape:
            raise CheckpointError(
                f"{info.file.name}: tensor {tname} has shape {_shape_str(info.shape)}, "
                f"config.json implies {_shape_str(shape)}")
        if info.dtype not in _FLOAT_DTYPES:
            raise CheckpointError(
                f"{info.file.name}: tensor {tname} has dtype {info.dtype}; only unquantized "
                f"F32/F16/BF16 checkpoints are supported")


def _device_str(device) -> str:
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return str(dev)


def load_weights(model_dir: str | Path, cfg: ModelConfig, device="cpu",
                 dtype: torch.dtype = torch.float32, linear=None) -> ModelWeights:
    """Validate the folder's safetensors against `cfg`, then load every tensor onto `device` as
    `dtype`, packing q|k|v and gate|up. Raises CheckpointError before reading any data if a
    tensor is missing, unexpected or misshapen, or a file is truncated/corrupt. linear: applied to
    each layer's linear weight (qkv, o, gate_up, down) as soon as it is loaded (e.g. FP8
    quantization: the loaded tensor is freed before the next one is read)."""
    linear = linear or (lambda t: t)
    path = Path(model_dir)
    if not path.is_dir():
        raise CheckpointError(f"model folder {path} does not exist")
    present = scan_checkpoint(path)
    _validate(cfg, present)
    dev = _device_str(device)

    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:  # pragma: no cover - safetensors is a hard dependency
        raise CheckpointError("the 'safetensors' package is required to load weights") from None

    with contextlib.ExitStack() as stack:
        handles = {}

        def get(tname: str) -> torch.Tensor:
            file = present[tname].file
            if file not in handles:
                handles[file] = stack.enter_context(safe_open(str(file), framework="pt", device=dev))
            return handles[file].get_tensor(tname)

        def one(tname: str) -> torch.Tensor:
            t = get(tname)
            return t if t.dtype == dtype else t.to(dtype)

        def packed(names: list[str]) -> torch.Tensor:
            # Preallocate the packed tensor and copy each part in: no torch.cat double buffer,
            # and each part is freed as soon as it is copied.
            parts_rows = [present[n].shape[0] for n in names]
            out = torch.empty((sum(parts_rows),) + present[names[0]].shape[1:], dtype=dtype, device=dev)
            row = 0
            for n, rows in zip(names, parts_rows):
                out[row:row + rows].copy_(get(n))
                row += rows
            return out

        try:
            embed = one("model.embed_tokens.weight")
            layers = []
            for n in range(cfg.num_layers):
                p = f"model.layers.{n}."
                a = p + "self_attn."
                qkv_names = [a + f"{x}_proj.weight" for x in "qkv"]
                layers.append(LayerWeights(
                    attn_norm=one(p + "input_layernorm.weight"),
                    qkv=linear(packed(qkv_names)),
                    qkv_bias=packed([a + f"{x}_proj.bias" for x in "qkv"]) if cfg.attention_bias else None,
                    q_norm=one(a + "q_norm.weight") if cfg.qk_norm else None,
                    k_norm=one(a + "k_norm.weight") if cfg.qk_norm else None,
                    o=linear(one(a + "o_proj.weight")),
                    mlp_norm=one(p + "post_attention_layernorm.weight"),
                    gate_up=linear(packed([p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"])),
                    down=linear(one(p + "mlp.down_proj.weight")),
                ))
            norm = one("model.norm.weight")
            lm_head = embed if cfg.tie_word_embeddings else one("lm_head.weight")
        except torch.OutOfMemoryError:
            raise EngineError(
                f"out of memory on {dev} while loading {path.name} as {str(dtype).removeprefix('torch.')} "
                f"({cfg.num_params() / 1e9:.2f}B parameters)") from None
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{path}: could not read weights ({e})") from None
    return ModelWeights(embed=embed, layers=layers, norm=norm, lm_head=lm_head)


# ---------------------------------------------------------------------------------------------
# generation_config.json
# ---------------------------------------------------------------------------------------------

def load_generation_config(model_dir: str | Path) -> dict:
    """generation_config.json as a dict (empty when absent), plus `eos_token_ids`: the file's
    eos_token_id (int, list or null) normalised to a tuple of ints (() when absent).

    The engine merges these EOS ids with config.json's and the tokenizer's."""
    path = Path(model_dir) / "generation_config.json"
    data = read_json_object(path) if path.is_file() else {}
    eos = data.get("eos_token_id")
    ids = [] if eos is None else (eos if isinstance(eos, list) else [eos])
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
        raise CheckpointError(f"{path}: eos_token_id must be an id or a list of ids, got {eos!r}")
    return {**data, "eos_token_ids": tuple(dict.fromkeys(ids))}
