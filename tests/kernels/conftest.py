"""Kernel tests: run under Triton's interpreter when there is no GPU.

TRITON_INTERPRET must be set before any @triton.jit decorator runs, so it is set here at import
(kernels/__init__.py does the same for other importers). Helpers live in kernel_helpers.py.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def gen():
    """A seeded generator per test: fresh but reproducible random inputs."""
    return torch.Generator().manual_seed(1234)
