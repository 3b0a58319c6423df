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
