"""Management commands and model selection: the synthetic default checkpoint is written
once and reused; bad model arguments and a worker without Redis fail with one clear message."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from inference.errors import EngineError
from playground.modelsource import load_engine, synthetic_checkpoint


def test_synthetic_checkpoint_is_written_once_into_the_cache_dir(tmp_path):
    path = synthetic_checkpoint("cpu", cache_dir=tmp_path)
    assert path == tmp_path / "synth" / "tiny" and (path / "config.json").exists()
    stamp = (path / "config.json").stat().st_mtime_ns
    assert synthetic_checkpoint("cpu", cache_dir=tmp_path) == path
    assert (path / "config.json").stat().st_mtime_ns == stamp
    assert not [p for p in (tmp_path / "synth").iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_default_model_is_the_synthetic_one_and_says_so(tmp_path, settings):
    settings.PLAYGROUND_CACHE_DIR = tmp_path
    settings.PLAYGROUND_MODEL = ""
    engine = load_engine(None, "cpu")
    assert engine.info["random_weights"] and engine.info["model"] == "tiny"


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
        load_engine(None, "cuda")
    assert not (tmp_path / "synth").exists()
