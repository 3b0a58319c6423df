"""Spec for the k-column attention of the verify step (kernels/decode_attention_cols.py): it equals its PyTorch
twin, and column c equals, bit for bit, the one-token decode kernel run at pos, pos+1, ... one after another,
appending its rows, with a program per split or a few programs taking the splits in turn. Odd shapes under the
interpreter, every bucket width; on a GPU (gpu tests) the real shapes.
(The verify step's GEMVs: tests/kernels/test_mma_cols.py.)"""

import math

import pytest
import torch
from kernel_helpers import DEVICE, HAS_CUDA, poisoned, randn, rel_err

from kernels.decode_attention import AttentionConfig, AttentionWorkspace, decode_attention, few_split_rows, rope_tables
from kernels.decode_attention_cols import decode_attention_cols, decode_attention_cols_ref

WIDTHS = [1, 3, 4] if not HAS_CUDA else [1, 8, 16]



def attention_case(hq, hkv, d, t_max, kc, qk_norm, dtype, gen):
    qkv = randn(kc, (hq + 2 * hkv) * d, gen=gen, scale=2.0)
    k_cache = randn(hkv, t_max, d, gen=gen, dtype=dtype)
    v_cache = randn(hkv, t_max, d, gen=gen, dtype=dtype)
    cos, sin = rope_tables(t_max, d, device=DEVICE)
    norms = (randn(d, gen=gen), randn(d, gen=gen)) if qk_norm else (None, None)
    return qkv, k_cache, v_cache, cos, sin, norms


@pytest.mark.parametrize("kc", WIDTHS)
@pytest.mark.parametrize("hq,hkv,d,qk_norm", [(4, 2, 64, False), (6, 1, 64, True)] if not HAS_CUDA
                         else [(12, 2, 128, False), (16, 8, 128, True), (9, 3, 64, False)])
@pytest.mark.parametrize("p", [0, 14, 40] if not HAS_CUDA else [0, 500, 5000])
@pytest.mark.parametrize("few_splits", [False, True])
def test_decode_attention_cols_is_the_one_token_kernel_at_each_position(kc, hq, hkv, d, qk_norm, p, few_splits, gen):
    """few_splits: the config's verify_split_programs programs take the splits in turn (several each at long
    context): the same splits, so the same bits."""
    dtype = torch.bfloat16
    t_max = 80 if not HAS_CUDA else 6000
    qkv, k_cache, v_cache, cos, sin, (qn, kn) = attention_case(hq, hkv, d, t_max, kc, qk_norm, dtype, gen)
    scale = 1 / math.sqrt(d)
    splits = 4 if not HAS_CUDA else 66
    ref, k_rows, v_rows = decode_attention_cols_ref(qkv, p, k_cache, v_cache, cos, sin, scale, qn, kn)
    one_k, one_v = k_cache.clone(), v_cache.clone()
    ws1 = AttentionWorkspace(hq, d, splits, DEVICE)
    ones = [decode_attention(qkv[c].contiguous(), torch.tensor([p + c], dtype=torch.int32, device=DEVICE), one_k,
                             one_v, cos, sin, poisoned(hq * d), ws1, scale, qn, kn) for c in range(kc)]
    ws = AttentionWorkspace(hq, d, splits, DEVICE, columns=16)
    out = poisoned(kc, hq * d)
    pos = torch.tensor([p], dtype=torch.int32, device=DEVICE)
    assert decode_attention_cols(qkv, pos, k_cache, v_cache, cos, sin, out, ws, scale, qn, kn,
                                 few_splits=few_splits) is out
    assert rel_err(out, ref) <= 1e-2
    assert not ws.tickets.any(), "ticket counters not reset"
    assert torch.equal(k_cache, one_k) and torch.equal(v_cache, one_v), "cache rows differ from one-token steps'"
    for c in range(kc):
        assert torch.equal(out[c], ones[c]), f"column {c}"
    assert int(pos) == p  # the position is the caller's to advance


def test_the_few_split_programs_cover_contexts_where_each_takes_one_split():
    """Up to P x (the split's rows) of context, P programs hold every non-empty split one each: the verify step
    takes its few-programs graph there (FastVerifier.graph_at), a program per split past it."""
    assert few_split_rows(AttentionConfig(block_t=64, min_chunk=64, verify_split_programs=11)) == 704
    assert few_split_rows(AttentionConfig(block_t=64, min_chunk=128, verify_split_programs=4)) == 512
    assert few_split_rows(AttentionConfig(block_t=64)) == 0  # no split programs: always a program per split
