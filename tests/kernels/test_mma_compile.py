"""Spec: the tensor-core GEMVs compile for a Hopper GPU (sm_90, down to a cubin, without one), and their dots
are tensor-core MMAs for bf16 weights (fp32 dots for fp32 weights): a compile error would otherwise first show
on a GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_mma_gemvs_compile_for_sm90_with_tensor_core_dots():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("mma_compile.py"))], env=env, cwd=root,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0 and not any(w in r.stdout for w in ("FAILED", "WRONG")):
        pytest.skip(f"cannot compile for sm_90 here: {r.stderr.strip().splitlines()[-1:]}")
    assert r.returncode == 0, r.stdout
