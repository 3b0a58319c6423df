"""The FP8 quality gate on real weights, on CPU: SmolLM2-135M-Instruct with `weights="fp8"` (the FP8 reference:
the quantized values, dequantized, through the reference forward, decoding one token at a time) against the
float32 reference on a slice of the quality corpus: perplexity within 1% and top-1 agreement >= 97% (issue 24;
the full corpus: `python -m inference.quality --weights fp8`, README's FP8 section)."""

import pytest

from inference.quality import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # ~1 CPU-minute: the harness decodes token by token


def test_fp8_weights_pass_the_quality_gate_on_cpu():
    result = run("default", "cpu", "float32", tokens=128, window=66, engine_args={"weights": "fp8"})
    ref, test = result["reference"], result["test"]
    assert test["tokens"] == 128 and "weights=fp8" in test["path"]
    assert test["perplexity"] <= 1.01 * ref["perplexity"]
    assert test["top1_agreement"] >= 0.97
