"""Spec for kernels.lm_head_argmax: the greedy step's last launch.

logits = W @ (rmsnorm(x) * norm_w), token = argmax(logits) (lowest row among equal maxima, as
torch.argmax), pos += 1, x = embed[token]; the scratch is left ready for the next launch.
"""

import pytest
import torch

from kernel_helpers import DEVICE, gpu, poisoned, randn, rel_err

from kernels.lm_head_argmax import NO_KEY, argmax_scratch, lm_head_argmax, lm_head_argmax_ref


def run(x, w, embed, norm_w=None, pos=7, scratch=None, pdl=False, ring=None):
    n = w.shape[0]
    logits, token = poisoned(n), torch.full((1,), -1, dtype=torch.int64, device=DEVICE)
    p = torch.tensor([pos], dtype=torch.int32, device=DEVICE)
    scratch = argmax_scratch(DEVICE) if scratch is None else scratch
    lm_head_argmax(x, w, logits, token, p, embed, scratch, norm_w=norm_w, eps=1e-6, ring=ring, pdl=pdl)
    return logits, int(token), int(p), scratch


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n,k", [(37, 100), (300, 64), (5, 33)])
@pytest.mark.parametrize("with_norm", [True, False])
def test_logits_token_pos_and_next_embedding(n, k, dtype, with_norm, gen):
    x0 = randn(k, gen=gen, scale=3.0)
    w = randn(n, k, gen=gen, dtype=dtype)
    norm_w = randn(k, gen=gen, dtype=dtype) if with_norm else None
    embed = randn(n + 3, k, gen=gen, dtype=dtype)
    x = x0.clone()
    logits, token, pos, scratch = run(x, w, embed, norm_w)
    ref_logits, _ = lm_head_argmax_ref(x0, w, norm_w, 1e-6)
    assert rel_err(logits, ref_logits) <= 1e-4
    assert token == int(torch.argmax(logits))  # exactly the argmax of the logits it wrote
    assert pos == 8
    assert torch.equal(x, embed[token].float())
    assert scratch.tolist() == [NO_KEY, 0]  # ready for the next launch


def test_ties_go_to_the_lowest_row_across_programs(gen):
    # Rows 3, 40 and 41 are the same row, and the largest logit: torch.argmax says 3.
    n, k = 64, 32
    w = randn(n, k, gen=gen, scale=0.1)
    w[3] = w[40] = w[41] = 1.0
    x = torch.ones(k, device=DEVICE)
    logits, token, _, _ = run(x, w, randn(n, k, gen=gen))
    assert logits[3] == logits[40] == logits[41] == logits.max()
    assert token == 3


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_negative_and_positive_logits_are_ordered_like_floats(sign, gen):
    # All logits of one sign: the key must order negatives by value too (-0.5 beats -2.0).
    n, k = 50, 16
    w = sign * (torch.rand(n, k, generator=gen) + 0.5).to(DEVICE)
    x = torch.ones(k, device=DEVICE)
    logits, token, _, _ = run(x, w, randn(n, k, gen=gen))
    assert token == int(torch.argmax(logits))


def test_repeated_launches_reuse_the_scratch(gen):
    n, k = 40, 24
    w, embed = randn(n, k, gen=gen), randn(n, k, gen=gen)
    scratch = argmax_scratch(DEVICE)
    x = randn(k, gen=gen)
    for step in range(3):  # feed each token back, as the decode loop does
        expect = int(torch.argmax(lm_head_argmax_ref(x, w)[0]))
        _, token, _, _ = run(x, w, embed, scratch=scratch)
        assert token == expect, f"step {step}"


def test_token_goes_to_the_ring_slot_of_the_new_position(gen):
    n, k = 30, 16
    w, embed = randn(n, k, gen=gen), randn(n, k, gen=gen)
    ring = torch.full((5,), -1, dtype=torch.int64, pin_memory=torch.cuda.is_available())
    _, token, pos, _ = run(randn(k, gen=gen), w, embed, pos=11, ring=ring)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    assert pos == 12 and ring.tolist() == [-1, -1, token, -1, -1]  # slot 12 % 5


def test_rejects_bad_arguments(gen):
    w, embed, x = randn(8, 16, gen=gen), randn(8, 16, gen=gen), randn(16, gen=gen)
    token, pos = torch.zeros(1, dtype=torch.int64, device=DEVICE), torch.zeros(1, dtype=torch.int32, device=DEVICE)
    with pytest.raises(AssertionError):  # embedding table smaller than the vocabulary
        lm_head_argmax(x, w, poisoned(8), token, pos, embed[:4], argmax_scratch(DEVICE))
    with pytest.raises(AssertionError):  # pos must be int32
        lm_head_argmax(x, w, poisoned(8), token, pos.long(), embed, argmax_scratch(DEVICE))


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("n,k", [(151936, 1536), (151936, 2048), (1000, 1000)])
def test_gpu_real_shapes(n, k, pdl, gen):
    x0 = randn(k, gen=gen, scale=3.0)
    w = randn(n, k, gen=gen, dtype=torch.bfloat16, scale=0.02)
    norm_w = randn(k, gen=gen, dtype=torch.bfloat16)
    embed = randn(n, k, gen=gen, dtype=torch.bfloat16)
    scratch = argmax_scratch(DEVICE)
    ring = torch.zeros(16, dtype=torch.int64, pin_memory=True)  # host memory, written by the kernel
    for _ in range(2):
        x = x0.clone()
        logits, token, pos, _ = run(x, w, embed, norm_w, scratch=scratch, pdl=pdl, ring=ring)
        torch.cuda.synchronize()
        assert rel_err(logits, lm_head_argmax_ref(x0, w, norm_w, 1e-6)[0]) <= 1e-4
        assert token == int(torch.argmax(logits)) and pos == 8 and int(ring[8]) == token
        assert torch.equal(x, embed[token].float())
        assert scratch.tolist() == [NO_KEY, 0]
