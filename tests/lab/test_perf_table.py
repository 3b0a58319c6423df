"""Spec for lab.perf_table: README's Performance tables are read from inference.bench's JSON files, never made up."""

import json

import pytest

from lab import perf_table


def bench(weights_note, runs):
    return {"shape": "x", "weights": weights_note, "gpu": "NVIDIA H200", "copy_bandwidth_GBs": 4200.0,
            "runs": [{"weights": w, "decode": [{"context": c, "tok_s": t, "bytes_per_token": b, "mbu": 0.5,
                                                "read_ms": 0.25, "rest_ms": 0.5} for c, t in decode],
                      "sampled_decode": {"tok_s": 900.0}, "ttft_ms": {"1024": 10.25}} for w, b, decode in runs]}


def test_rows_come_from_the_json_and_missing_figures_print_a_dash(tmp_path, capsys):
    (tmp_path / "bench-big.json").write_text(json.dumps(bench("random weights", [
        ("bfloat16", 3e9, [(512, 1002.4), (4096, 814.0)]), ("fp8", 1.9e9, [(512, 1128.0)])])))
    (tmp_path / "bench-small.json").write_text(json.dumps(bench("checkpoint weights", [
        ("bfloat16", 2.8e8, [(512, 2479.0)])])))
    assert perf_table.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| small") or line.startswith("| big")]
    assert rows[0].startswith("| small (real weights) | bfloat16 | 2,479 | - |")  # real weights first
    assert rows[1].startswith("| big (random weights) | bfloat16 | 1,002 | 814 |")
    assert rows[2].startswith("| big (random weights) | fp8 | 1,128 | - |")
    assert "big: fp8 / bf16 1.13x" in out and "small: fp8" not in out
    assert "10.2 ms" in out


def test_the_edit_workload_and_verify_step(tmp_path, capsys):
    (tmp_path / "bench-m.json").write_text(json.dumps(bench("checkpoint weights", [("bfloat16", 1e9, [(512, 10.0)])])))
    run = {"tokens": 11, "s": 0.0}
    (tmp_path / "edit.json").write_text(json.dumps({"edit": {
        "rows": [{"on": run}, {"on": run}], "off_tok_s": 100.0, "on_tok_s": 270.0, "accepted_per_verify": 7.02,
        "identical": True}}))
    (tmp_path / "verify.json").write_text(json.dumps({"default_step_us": 1000.0, "default_kernels": "cuda/overlap",
        "overlap": {"step_us": 1100.0, "kernels": "triton/overlap", "8": {"verify_us": 1830.0, "ratio": 1.66}}}))
    perf_table.main([str(tmp_path)])
    out = capsys.readouterr().out
    assert "| edit (2 prompts) | 22 | 100 | 270 | 2.70x | 7.02 | yes |" in out
    assert "overlap: verify 8 tokens 1830.0 us = 1.83x the default step" in out


def test_an_empty_folder_says_so(tmp_path, capsys):
    assert perf_table.main([str(tmp_path)]) == 1
    assert "no bench JSON files" in capsys.readouterr().out


def test_a_missing_folder_or_a_broken_file_is_one_clear_error(tmp_path, capsys):
    assert perf_table.main([str(tmp_path / "nowhere")]) == 2
    assert "DIR must be a folder of inference.bench JSON files" in capsys.readouterr().err
    (tmp_path / "bench-x.json").write_text("{not json")
    with pytest.raises(SystemExit, match="bench-x.json: not an inference.bench JSON file"):
        perf_table.main([str(tmp_path)])
