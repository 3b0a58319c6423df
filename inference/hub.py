"""Resolve a model argument to a local folder: a path as is, or a Hugging Face hub id.

A hub id ("Qwen/Qwen2.5-Coder-1.5B-Instruct") is fetched with huggingface_hub into its usual
cache, only the files the engine reads. Without a network this fails with one clear message
telling the user to download the folder elsewhere and pass its path.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import CheckpointError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
FILES = ["*.json", "*.safetensors", "tokenizer*", "*.jinja"]


def looks_like_hub_id(name: str) -> bool:
    return bool(HUB_ID.match(name)) and not Path(name).exists()


def resolve_model_path(name: str | Path) -> Path:
    path = Path(name).expanduser()
    if path.exists() or not looks_like_hub_id(str(name)):
        return path
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        raise CheckpointError(f"{name}: not a folder, and huggingface_hub is not installed to fetch it") from None
    try:
        return Path(snapshot_download(str(name), allow_patterns=FILES))
    except Exception as e:  # network errors, gated repos, unknown ids: one message
        raise CheckpointError(
            f"{name}: not a local folder and could not be downloaded from the Hugging Face hub "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no detail'}). On a machine with a "
            f"network run `huggingface-cli download {name} --local-dir DIR` and pass DIR.") from None
