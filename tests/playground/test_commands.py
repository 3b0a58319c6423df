"""Management commands and model selection: the default model is the real SmolLM2 GGUF; a
synthetic checkpoint is served only when asked for (synthetic:SHAPE), written once and reused;
bad model arguments and a worker without Redis fail with one clear message."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from inference.errors import EngineError
from inference.hub import resolve_model_path
from playground.modelsource import load_engine, model_argument, synthetic_checkpoint


def test_synthetic_checkpoint_is_written_once_into_the_cache_dir(tmp_path):
    path = synthetic_checkpoint("cpu", cache_dir=tmp_path)
    assert path == tmp_path / "synth" / "tiny" and (path / "config.json").exists()
    stamp = (path / "config.json").stat().st_mtime_ns
    assert synthetic_checkpoint("cpu", cache_dir=tmp_path) == path
    assert (path / "config.json").stat().st_mtime_ns == stamp
    assert not [p for p in (tmp_path / "synth").iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_the_default_model_is_smollm2(settings):
    settings.PLAYGROUND_MODEL = ""
    assert model_argument(None) == "default"
    assert model_argument("synthetic:tiny") == "synthetic:tiny"
    settings.PLAYGROUND_MODEL = "/models/x.gguf"
    assert model_argument(None) == "/models/x.gguf"
    assert resolve_model_path(model_argument("default")).name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_synthetic_weights_are_served_when_asked_for_and_say_so(tmp_path, settings):
    settings.PLAYGROUND_CACHE_DIR = tmp_path
    engine = load_engine("synthetic:tiny", "cpu")
    assert engine.info["random_weights"] and engine.info["model"] == "tiny"
    assert engine.info["path"] == str(tmp_path / "synth" / "tiny")


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(EngineError, match="does-not-exist"):
        load_engine(str(tmp_path / "does-not-exist"), "cpu")


def test_playground_worker_needs_redis(settings):
    with pytest.raises(CommandError, match="REDIS_URL"):
        call_command("playground_worker", "--device", "cpu")


def test_cuda_without_a_gpu_is_refused_before_writing_anything(tmp_path, settings):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    settings.PLAYGROUND_CACHE_DIR = tmp_path
    with pytest.raises(EngineError, match="no CUDA GPU"):
        load_engine("synthetic:tiny", "cuda")
    assert not (tmp_path / "synth").exists()
