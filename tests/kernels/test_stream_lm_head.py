"""Spec for kernels.stream_lm_head: a speculating run's last launches on the streamed GEMVs.

The logits of every column are kernels.stream_gemv's (a one-column launch's bits for any column count, GPU);
the argmax launch (CPU too, under the interpreter) picks each column's largest logit, the lowest row among equal
ones, accepts the draft's agreeing prefix, feeds the token back (pos, ring, the next embedding) and leaves the
scratch ready for the next launch.
"""

import pytest
import torch

from kernel_helpers import DEVICE, HAS_CUDA, poisoned, randn, rel_err

from kernels import stream_gemv as sg
from kernels.lm_head_argmax import NO_KEY
from kernels.lm_head_mma_cols import SCRATCH, mma_scratch
from kernels.stream_lm_head import logits_argmax, stream_lm_head_argmax, stream_lm_head_argmax_ref

hopper = pytest.mark.skipif(
    not (HAS_CUDA and sg.supported(torch.zeros(16, 16, dtype=torch.bfloat16, device="cuda"))),
    reason="needs a CUDA GPU of compute capability >= 9.0 and NVRTC")


def state(k, pos=7):
    token = torch.full((1,), -1, dtype=torch.int64, device=DEVICE)
    return token, torch.tensor([pos], dtype=torch.int32, device=DEVICE), poisoned(k)


def accepted(g, draft, klen):
    a = 0
    while a < min(klen, len(g) - 1) and int(draft[a]) == int(g[a]):
        a += 1
    return a


@pytest.mark.parametrize("cols,n", [(1, 300), (2, 9000), (5, 1000), (8, 20000), (16, 3000)])
@pytest.mark.parametrize("agree", [0, 2, 99])
def test_each_columns_argmax_the_drafts_agreeing_prefix_and_the_token_fed_back(cols, n, agree, gen):
    k = 64
    logits = randn(cols, n, gen=gen, scale=4.0)
    g = logits.argmax(-1)
    draft = g[:-1].clone() if cols > 1 else torch.zeros(1, dtype=torch.int64, device=DEVICE)
    if agree < cols - 1:
        draft[agree] = (draft[agree] + 1) % n  # the first disagreement
    klen = torch.tensor([cols - 1], dtype=torch.int64, device=DEVICE)
    embed = randn(n + 5, k, gen=gen, dtype=torch.bfloat16)
    token, pos, x_next = state(k)
    result = torch.full((cols + 1,), -1, dtype=torch.int64, device=DEVICE)
    scratch = mma_scratch(DEVICE)
    logits_argmax(logits, token, pos, embed, scratch, draft=draft, klen=klen, x_next=x_next, result=result)
    a = accepted(g, draft, cols - 1)
    assert result.tolist() == g.tolist() + [a]
    assert int(token) == int(g[a]) and int(pos) == 7 + a + 1
    assert torch.equal(x_next, embed[int(g[a])].float())
    assert scratch.tolist() == [NO_KEY] * (SCRATCH - 1) + [0]  # ready for the next launch


def test_a_plain_step_feeds_its_token_to_the_ring_and_ties_go_to_the_lowest_row(gen):
    n, k = 20000, 32
    logits = randn(1, n, gen=gen)
    logits[0, [17, 9000, 19999]] = 50.0  # equal maxima in different programs
    embed = randn(n, k, gen=gen)
    ring = torch.full((5,), -1, dtype=torch.int64, device=DEVICE)
    token, pos, x = state(k, pos=11)
    logits_argmax(logits, token, pos, embed, mma_scratch(DEVICE), ring, x_next=x)
    assert int(token) == 17 and int(pos) == 12 and int(ring[12 % 5]) == 17
    assert torch.equal(x, embed[17])


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("mma", [False, True])
@pytest.mark.parametrize("n,k", [(151936, 1536), (5000, 272)])
def test_every_column_gets_the_logits_of_its_one_column_launch_and_their_argmax(n, k, mma, gen):
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda", scale=0.05)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16, device="cuda")
    embed = randn(n, k, gen=gen, dtype=torch.bfloat16, device="cuda")
    x = randn(16, k, gen=gen, device="cuda", scale=3.0)
    scratch = mma_scratch("cuda")
    one = torch.zeros(16, n, device="cuda")
    for c in range(16):
        token, pos, _ = state(k)
        stream_lm_head_argmax(x[c].clone(), w, one[c], token, pos, embed, scratch, norm_w, 1e-6, pdl=True, mma=mma)
        assert int(token) == int(one[c].argmax())
    ref, g, _ = stream_lm_head_argmax_ref(x, w, norm_w=norm_w)
    assert rel_err(one, ref) <= 1e-4
    for cols in (2, 3, 8, 16):
        logits = poisoned(cols, n, device="cuda")
        draft = one[:cols - 1].argmax(-1)  # every drafted token agrees
        klen = torch.tensor([cols - 1], dtype=torch.int64, device="cuda")
        result = torch.zeros(cols + 1, dtype=torch.int64, device="cuda")
        token, pos, x_next = state(k)
        stream_lm_head_argmax(x[:cols], w, logits, token, pos, embed, scratch, norm_w, 1e-6, draft=draft, klen=klen,
                              x_next=x_next, result=result, pdl=True, mma=mma)
        torch.cuda.synchronize()
        assert torch.equal(logits, one[:cols]), cols
        assert result.tolist() == one[:cols].argmax(-1).tolist() + [cols - 1]
        assert int(pos) == 7 + cols and torch.equal(x_next, embed[int(token)].float())
