"""One opened checkpoint, whatever its format: config, tokenizer, EOS ids, model card, weights.

`open_checkpoint(path)` takes a resolved path (`inference.hub.resolve_model_path`): a file (GGUF,
whatever its name: Ollama's blobs have none) goes to `inference.gguf_model` / `inference.gguf_tokenizer`, a folder to `inference.checkpoint`,
`inference.config` and `inference.tokenizer`. Config, tokenizer and card are read at once (cheap);
weights only when `load_weights(device, dtype)` (or a picklable `loader(dtype)`) is called.

The model card is what the page and the dashboard show about the model: name, parameters, file,
the quantization the weights were dequantized from, license, context length.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import ModelConfig
from .tokenizer import Tokenizer
from .weights import ModelWeights

# A quantization suffix on a GGUF file name ("SmolLM2-135M-Instruct.Q4_1", "model-Q4_K_M").
_QUANT_SUFFIX = re.compile(r"[.-](?:[QqIi]Q?\d[\w]*|[Ff]16|[Ff]32|[Bb][Ff]16)$")


class WeightsLoader:
    """`loader(device=...)` -> ModelWeights in one dtype. Picklable, so tensor-parallel ranks can
    each load in their own process (an open GGUF reader stays behind; a rank re-opens the file)."""

    def __init__(self, path: Path, config: ModelConfig, dtype: torch.dtype, gguf=None):
        self.path, self.config, self.dtype, self._gguf = path, config, dtype, gguf

    def __getstate__(self):
        return {**self.__dict__, "_gguf": None}

    def __call__(self, device="cpu", linear=None) -> ModelWeights:
        """linear: applied to each layer's linear weight as it is loaded (FP8 quantization)."""
        if self.path.is_file():
            from .gguf_model import GGUFCheckpoint

            return (self._gguf or GGUFCheckpoint.open(self.path)).load_weights(device, self.dtype, linear=linear)
        from .checkpoint import load_weights

        return load_weights(self.path, self.config, device=device, dtype=self.dtype, linear=linear)


@dataclass
class Checkpoint:
    path: Path
    config: ModelConfig
    tokenizer: Tokenizer
    eos_ids: tuple[int, ...]
    card: dict
    random_weights: bool
    gguf: object = None  # the open GGUFCheckpoint, for GGUF files

    def loader(self, dtype: torch.dtype) -> WeightsLoader:
        return WeightsLoader(self.path, self.config, dtype, self.gguf)

    def load_weights(self, device="cpu", dtype: torch.dtype = torch.float32) -> ModelWeights:
        return self.loader(dtype)(device=device)


def open_checkpoint(path: str | Path) -> Checkpoint:
    path = Path(path)
    if path.is_file() or path.suffix == ".gguf":
        return _open_gguf(path)
    return _open_folder(path)


def _open_gguf(path: Path) -> Checkpoint:
    try:
        st = path.stat()
    except OSError:
        st = None
    ck, tok = _read_gguf(str(path), st.st_mtime_ns if st else 0, st.st_size if st else 0)
    card = ck.card()
    card["name"] = _QUANT_SUFFIX.sub("", path.stem) or card["name"]
    card["fim"] = tok.fim_tokens is not None
    card["chat"] = tok.chat_template is not None
    eos = tuple(dict.fromkeys([*ck.config.eos_token_ids, *tok.eos_token_ids]))
    return Checkpoint(path, ck.config, tok, eos, card, False, ck)


@functools.lru_cache(maxsize=2)
def _read_gguf(path: str, mtime_ns: int, size: int):
    """Header and tokenizer of a GGUF file, once per process and file version (parsing a
    49k-token vocabulary takes seconds; the engine and the quality harness both open the file)."""
    from .gguf_model import GGUFCheckpoint
    from .gguf_tokenizer import tokenizer_from_gguf

    ck = GGUFCheckpoint.open(Path(path))
    return ck, tokenizer_from_gguf(ck.reader, ck.metadata, Path(path).name)


def _open_folder(path: Path) -> Checkpoint:
    from .checkpoint import check_model_dir, load_generation_config

    path = check_model_dir(path)
    cfg = ModelConfig.from_file(path / "config.json")
    tok = Tokenizer.from_dir(path)
    gen = load_generation_config(path)
    eos = tuple(dict.fromkeys([*gen["eos_token_ids"], *cfg.eos_token_ids, *tok.eos_token_ids]))
    random_weights = (path / "synth.json").exists()
    card = {
        "name": path.name,
        "params": cfg.num_params(),
        "file": path.name,
        "format": "safetensors",
        "quantization": None,  # unquantized: the weights are served in their own dtype
        "source_dtype": cfg.torch_dtype,
        "license": _readme_license(path),
        "context_length": cfg.max_position_embeddings,
        "architecture": cfg.model_type,
        "fim": tok.fim_tokens is not None,
        "chat": tok.chat_template is not None,
    }
    return Checkpoint(path, cfg, tok, eos, card, random_weights)


def _readme_license(path: Path) -> str | None:
    """`license:` from a model card's YAML front matter (README.md), when there is one."""
    readme = path / "README.md"
    try:
        text = readme.read_text(encoding="utf-8", errors="replace")[:4000] if readme.is_file() else ""
    except OSError:
        return None
    if not text.startswith("---"):
        return None
    m = re.search(r"^license:\s*(\S+)\s*$", text.split("\n---", 1)[0], re.MULTILINE)
    return m.group(1).strip("'\"") if m else None
