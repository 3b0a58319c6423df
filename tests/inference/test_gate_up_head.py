"""Spec for inference.fast.step.gate_up_head: the rows of a packed [2I, K] gate/up weight that the Triton
gate/up's first programs read, which the streamed o_proj prefetches into L2 (runs on CPU)."""

import torch

from inference.fast.step import gate_up_head


def test_head_is_the_first_gate_rows_and_their_up_rows_in_whole_tiles():
    i, k = 11008, 2048
    w = torch.arange(2 * i, dtype=torch.float32)[:, None].expand(2 * i, k).to(torch.bfloat16).contiguous()
    gate, up = gate_up_head(w, 6 << 20)
    assert gate.shape == up.shape == (768, k)  # 6 MB / (2 x 4 KB rows) = 768 rows, a multiple of 16
    assert gate.data_ptr() == w.data_ptr() and up.data_ptr() == w[i].data_ptr()
    assert gate.is_contiguous() and up.is_contiguous()


def test_head_is_capped_at_the_whole_matrix_and_empty_below_one_tile():
    w = torch.zeros(2 * 40, 64, dtype=torch.bfloat16)
    gate, up = gate_up_head(w, 1 << 30)
    assert gate.shape[0] == up.shape[0] == 40 and up.data_ptr() == w[40].data_ptr()
    assert gate_up_head(w, 15 * 2 * 64 * 2) == ()
