"""The quality harness on real weights (SmolLM2 on CPU, a small slice of the stdlib corpus):
the float32 reference is a real model (low perplexity on code), a float32 path under test agrees
with it exactly, a bfloat16 one nearly; the table and JSON carry the numbers."""
from __future__ import annotations

import json

import pytest

from inference.quality import main, run

pytestmark = pytest.mark.slow


def test_bfloat16_path_is_scored_against_the_float32_reference(tmp_path, capsys):
    out = tmp_path / "q.json"
    assert main(["--dtype", "bfloat16", "--tokens", "48", "--window", "26", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    ref, test = result["reference"], result["test"]
    assert ref["tokens"] == test["tokens"] == 48 and result["windows"] == ["textwrap.py@0", "textwrap.py@26"]
    assert ref["perplexity"] < 60  # a random model over 49,152 tokens sits near 49,152
    assert test["path"] == "reference bfloat16 cpu" and 0.85 <= test["top1_agreement"] <= 1.0
    assert 0 < test["logits_rel_err"] < 0.1 and abs(test["perplexity"] / ref["perplexity"] - 1) < 0.1
    table = capsys.readouterr().out
    assert "| float32 reference cpu | 48 |" in table and "| reference bfloat16 cpu | 48 |" in table


def test_a_float32_path_agrees_exactly():
    result = run("default", "cpu", "float32", tokens=24, window=26, files=("json/decoder.py",))
    assert result["test"]["top1_agreement"] == 1.0 and result["test"]["logits_rel_err"] < 1e-4
    assert result["test"]["perplexity"] == pytest.approx(result["reference"]["perplexity"], rel=1e-4)


def test_an_unknown_corpus_file_is_one_clear_line(capsys):
    assert main(["--tokens", "8", "--files", "no_such_module.py"]) == 2
    assert "no_such_module.py is not in this Python's standard library" in capsys.readouterr().err
