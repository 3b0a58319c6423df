"""Spec for kernels.tuning: which row serves which GPU, what the generic fallback turns off, and that every
tuned number says why (runs on CPU: rows are chosen from device properties, given here as data)."""

from dataclasses import fields
from pathlib import Path

import pytest

from kernels import _util, tuning
from kernels.tuning import H200, DeviceInfo, Tuning

H200_INFO = DeviceInfo("NVIDIA H200", (9, 0), 132, 227 << 10, 50 << 20)
H100_INFO = DeviceInfo("NVIDIA H100 80GB HBM3", (9, 0), 132, 227 << 10, 50 << 20)
A100_INFO = DeviceInfo("NVIDIA A100-SXM4-80GB", (8, 0), 108, 163 << 10, 40 << 20)
NEW_HOPPER_INFO = DeviceInfo("NVIDIA Some Future Hopper", (9, 0), 100, 227 << 10, 75 << 20)


def test_the_h200_and_the_h100_are_served_by_the_h200_row():
    assert tuning.select(H200_INFO) is H200
    assert tuning.select(H100_INFO) is H200
    assert H200.name == "h200" and H200.cuda_attention and H200.stream_gemv


def test_a_gpu_not_in_the_table_gets_the_generic_fallback_without_clusters_or_streaming():
    row = tuning.select(A100_INFO)
    assert row.name == "generic"
    assert not row.cuda_attention and not row.stream_gemv
    assert row.gemv_overrides == () and row.gate_up_l2_prefetch == 0
    assert row.down_l2_prefetch == row.fp8_down_l2_prefetch == 0  # the bulk L2 prefetch: a Hopper instruction
    assert "108 SMs" in row.why and "40 MB L2" in row.why


def test_the_generic_l2_prefetch_scales_with_the_l2_on_hopper_class_gpus():
    assert tuning.generic(H200_INFO).down_l2_prefetch == H200.down_l2_prefetch  # same L2: same 2 MB
    assert tuning.generic(NEW_HOPPER_INFO).down_l2_prefetch == 3 << 20


def test_every_tuned_number_has_a_one_line_why_and_a_perf_pointer():
    tuned = [f for f in fields(Tuning) if f.name not in ("name", "why")]
    assert tuned and all(f.metadata.get("why") and f.metadata.get("perf", "").startswith("PERF.md") for f in tuned)
    assert all("\n" not in f.metadata["why"] for f in tuned)
    assert len(H200.explain()) == len(tuned)


def test_every_perf_pointer_names_a_section_of_perf_md():
    perf = (Path(tuning.__file__).parent / "PERF.md").read_text()
    for f in fields(Tuning):
        if f.metadata:
            assert f.metadata["perf"].removeprefix("PERF.md: ") in perf, (f.name, f.metadata["perf"])


def test_model_shape_conditions_are_read_from_the_row():
    assert H200.streams_qkv_gate_up(1536) and not H200.streams_qkv_gate_up(2048)
    assert H200.skew_for(8960, 132) == (32, 16)  # the 1.5B: every CTA keeps >= 4x the deficit
    assert H200.skew_for(8000, 132) == (0, 0)
    assert H200.override(1536, 8960) == (4, 2048, 8, 1) and H200.override(2048, 11008) is None


def test_launch_configs_take_the_rows_overrides_and_otherwise_the_rule(monkeypatch):
    monkeypatch.setattr(_util, "interpreting", lambda: False)
    generic = tuning.generic(A100_INFO)
    assert _util.gemv_config(1536, 1536, H200) == {"BLOCK_N": 4, "BLOCK_K": 2048, "num_warps": 8, "num_stages": 1}
    assert _util.gemv_config(1536, 1536, generic) == {"BLOCK_N": 4, "BLOCK_K": 512, "num_warps": 4}
    assert _util.gemv_config(2048, 11008, H200) == _util.gemv_config(2048, 11008, generic)
    assert _util.gate_up_lookahead({}, H200) == {"AHEAD": True, "RED": 4}


def test_rows_are_chosen_by_name_and_an_unknown_name_is_one_clear_error():
    assert tuning.by_name("h200", "cpu") is H200
    with pytest.raises(ValueError, match="unknown tuning 'b200'"):
        tuning.by_name("b200", "cpu")
