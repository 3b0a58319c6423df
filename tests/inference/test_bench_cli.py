"""Spec for `python -m inference.bench`'s arguments: bad ones are refused before any work starts (no checkpoint
written, no GPU needed)."""

import pytest

from inference.bench import main


def test_an_unknown_verify_family_is_one_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--workload", "verify", "--families", "overlap,bogus"])
    assert e.value.code == 2
    assert "--families takes a comma-separated list of triton, mma, cols, overlap, not 'overlap,bogus'" in \
        capsys.readouterr().err


def test_an_empty_family_list_is_refused_too(capsys):
    with pytest.raises(SystemExit):
        main(["--workload", "verify", "--families", ","])
    assert "--families takes" in capsys.readouterr().err


def test_a_bad_drafter_setting_is_one_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--workload", "edit", "--model", "default", "--draft", "lag=1,bogus=2"])
    assert e.value.code == 2
    assert "--draft: 'bogus=2': expected FIELD=VALUE with a DraftConfig field" in capsys.readouterr().err


def test_the_edit_and_verify_workloads_take_one_weight_format(capsys):
    for workload in ("edit", "verify"):
        with pytest.raises(SystemExit) as e:
            main(["--workload", workload, "--model", "default", "--weights", "fp8,bf16"])
        assert e.value.code == 2
        assert f"--workload {workload} takes one weight format, not 'fp8,bf16'" in capsys.readouterr().err


def test_fp8_weights_have_no_verify_step_to_time(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--workload", "verify", "--weights", "fp8"])
    assert e.value.code == 2
    assert "FP8 weights do not speculate" in capsys.readouterr().err


def test_the_edit_workload_loads_the_weight_format_asked_for(monkeypatch, capsys):
    """fp8 runs the edit prompts on FP8 weights (plain steps only: FP8 does not speculate); left out, the device's
    dtype as before."""
    from inference.engine import Engine

    asked = []

    def load(path, **kw):
        asked.append(kw.get("weights"))
        raise RuntimeError("loaded")

    monkeypatch.setattr(Engine, "from_pretrained", staticmethod(load))
    for argv in (["--weights", "fp8"], []):
        with pytest.raises(RuntimeError, match="loaded"):
            main(["--workload", "edit", "--model", "default", *argv])
    assert asked == ["fp8", None]
