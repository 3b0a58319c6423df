"""Which model the worker serves, and loading it: --model / PLAYGROUND_MODEL, else a
synthetic checkpoint written once into the cache dir.

  --model PATH_OR_HUB_ID   a local Hugging Face folder, or a hub id (the engine fetches it
                           with huggingface_hub when a network is there; clear error offline)
  neither                  inference.synth.write_checkpoint: "tiny" on CPU, the
                           "qwen2.5-coder-1.5b" shape on a GPU. Random weights: the page shows
                           a "random weights — speed demo only" banner (engine.info).
Not here: the engine itself, or any download logic (inference.hub owns that).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from django.conf import settings

SYNTH_SHAPE = {"cpu": "tiny", "cuda": "qwen2.5-coder-1.5b"}


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def synthetic_checkpoint(device: str, cache_dir: Path | None = None) -> Path:
    """Path of the synthetic checkpoint for `device`, written on first use (atomically)."""
    shape = SYNTH_SHAPE["cuda" if device.startswith("cuda") else "cpu"]
    root = Path(cache_dir or settings.PLAYGROUND_CACHE_DIR) / "synth"
    out = root / shape
    if (out / "config.json").exists():
        return out
    from inference.synth import write_checkpoint

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{shape}-", dir=root))
    try:
        write_checkpoint(shape, tmp, device="cuda" if device.startswith("cuda") else "cpu")
        try:
            os.rename(tmp, out)  # another worker may have won the race: keep theirs
        except OSError:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def model_argument(model: str | None, device: str) -> str:
    """--model, else PLAYGROUND_MODEL, else the synthetic checkpoint's folder."""
    model = model or settings.PLAYGROUND_MODEL
    return model if model else str(synthetic_checkpoint(device))


def load_engine(model: str | None, device: str | None = None, dtype: str | None = None, weights: str | None = None,
                tp: int = 1):
    """Engine for the worker; raises EngineError (CheckpointError etc.) with a clear message. weights: None
    (the checkpoint's, in dtype) or "fp8" (Engine.from_pretrained); tp > 1: split over tp GPUs or processes."""
    from inference.engine import Engine
    from inference.errors import EngineError

    device = device or default_device()
    if device.startswith("cuda") and default_device() != "cuda":  # before writing a GPU-sized synthetic model
        raise EngineError(f"device {device!r} requested but no CUDA GPU is available (use --device cpu)")
    if device != "cpu" and not device.startswith("cuda"):
        raise EngineError(f"unknown device {device!r} (use cpu, cuda or cuda:N)")
    return Engine.from_pretrained(model_argument(model, device), device=device, dtype=dtype, weights=weights, tp=tp)
