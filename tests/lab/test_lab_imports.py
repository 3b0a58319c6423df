"""Spec for lab/: every instrument imports on a CPU machine (from the repo root, no PYTHONPATH), runs nothing
on import, and reaches the engine through public names only (no `runner._...` and no assignments into
product modules)."""

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import lab

MODULES = sorted(m.name for m in pkgutil.iter_modules(lab.__path__))


def test_the_lab_has_its_instruments():
    assert {"engine", "ab_step", "bench_kernels", "sweep_gemv", "profile_step"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_instrument_imports_without_running(name):
    module = importlib.import_module(f"lab.{name}")
    assert module.__doc__, f"lab.{name} needs a docstring saying what it measures"
    source = Path(module.__file__).read_text()
    assert name == "engine" or 'if __name__ == "__main__":' in source


@pytest.mark.parametrize("name", MODULES)
def test_instruments_use_public_hooks_only(name):
    source = Path(importlib.import_module(f"lab.{name}").__file__).read_text()
    assert not re.search(r"runner\._[a-z]", source), "a private runner method"
    assert not re.search(r"^\s*(kernels|inference|[a-z_]+_runner|stream|sg|_util)\.[A-Za-z_.]+ = ", source, re.M), \
        "an assignment into a product module"


def test_every_instrument_is_listed_in_the_readme():
    readme = (Path(lab.__file__).parent / "README.md").read_text()
    for name in MODULES:
        assert f"`{name}`" in readme, name
