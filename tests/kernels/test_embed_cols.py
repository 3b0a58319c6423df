"""Spec for kernels.embed_cols: a verify step's input columns, the last token's embedding and then each drafted
token's embedding row, in float32, exactly."""

import pytest
import torch

from kernel_helpers import DEVICE, poisoned, randn

from kernels.embed_cols import embed_cols, embed_cols_ref


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("k,kc", [(576, 16), (100, 3), (1536, 8), (32, 1)])
def test_columns_are_x_then_the_drafted_rows(k, kc, dtype, gen):
    embed = randn(50, k, gen=gen, dtype=dtype)
    x = randn(k, gen=gen)
    draft = torch.tensor([(7 * i + 3) % 50 for i in range(15)], dtype=torch.int64, device=DEVICE)
    out = poisoned(kc, k)
    assert embed_cols(x, draft, embed, out) is out
    assert torch.equal(out, embed_cols_ref(x, draft, embed, kc))


def test_a_short_draft_is_a_clear_error(gen):
    with pytest.raises(AssertionError, match="draft"):
        embed_cols(randn(32, gen=gen), torch.zeros(2, dtype=torch.int64, device=DEVICE), randn(4, 32, gen=gen),
                   poisoned(8, 32))
