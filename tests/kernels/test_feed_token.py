"""Spec for kernels.feed_token: the end of a sampled decode step, on the device.

token = sampled, pos += 1, ring[new pos % len(ring)] = token, x = embed[token] as float32.
"""

import pytest
import torch

from kernel_helpers import DEVICE, gpu, poisoned, randn

from kernels.feed_token import feed_token, feed_token_ref


def state(pos):
    return (torch.full((1,), -1, dtype=torch.int64, device=DEVICE),
            torch.tensor([pos], dtype=torch.int32, device=DEVICE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k", [16, 100, 1536])
def test_token_pos_ring_and_next_embedding(k, dtype, gen):
    embed = randn(50, k, gen=gen, dtype=dtype)
    sampled = torch.tensor([37], dtype=torch.int64, device=DEVICE)
    token, pos = state(9)
    x = poisoned(k)
    ring = torch.full((4,), -1, dtype=torch.int64, device=DEVICE)
    feed_token(sampled, token, pos, embed, x, ring=ring)
    ref_token, ref_pos, ref_x = feed_token_ref(sampled, 9, embed)
    assert torch.equal(token, ref_token) and int(pos) == ref_pos == 10
    assert ring.tolist() == [-1, -1, 37, -1]  # slot 10 % 4
    assert torch.equal(x, ref_x)


def test_without_a_ring(gen):
    embed = randn(8, 32, gen=gen)
    token, pos = state(0)
    x = poisoned(32)
    feed_token(torch.tensor([5], dtype=torch.int64, device=DEVICE), token, pos, embed, x)
    assert int(token) == 5 and int(pos) == 1 and torch.equal(x, embed[5])


def test_rejects_bad_arguments(gen):
    embed, x = randn(8, 32, gen=gen), poisoned(32)
    token, pos = state(0)
    sampled = torch.tensor([1], dtype=torch.int64, device=DEVICE)
    with pytest.raises(AssertionError):  # embedding width must match x
        feed_token(sampled, token, pos, randn(8, 16, gen=gen), x)
    with pytest.raises(AssertionError):  # int32 ring
        feed_token(sampled, token, pos, embed, x, ring=torch.zeros(4, dtype=torch.int32, device=DEVICE))


@pytest.mark.gpu
@gpu
def test_gpu_ring_in_pinned_host_memory(gen):
    embed = randn(151936, 1536, gen=gen, dtype=torch.bfloat16)
    token, pos = state(511)
    x = poisoned(1536)
    ring = torch.zeros(256, dtype=torch.int64, pin_memory=True)
    feed_token(torch.tensor([151935], dtype=torch.int64, device=DEVICE), token, pos, embed, x, ring=ring)
    torch.cuda.synchronize()
    assert int(ring[0]) == 151935 and int(pos) == 512 and torch.equal(x, embed[151935].float())
