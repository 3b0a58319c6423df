"""Spec for kernels.gumbel_argmax: the sampled step's last launch draws exactly the token that
inference.sampling.Sampler draws (same seed, same step), then feeds it back like feed_token."""

import pytest
import torch

from kernel_helpers import DEVICE, gpu, poisoned, randn

from inference.sampling import Sampler, SamplingParams
from kernels.gumbel_argmax import gumbel_argmax
from kernels.lm_head_argmax import NO_KEY, argmax_scratch

MODES = {
    "temperature": dict(temperature=0.7),
    "top_p + top_k": dict(temperature=1.3, top_p=0.9, top_k=40),
    "min_p + penalty": dict(temperature=0.9, min_p=0.05, repetition_penalty=1.3),
}


def samplers(v, params):
    prompt = torch.tensor([1, 2, 3], device=DEVICE)
    a, b = Sampler(v, DEVICE), Sampler(v, DEVICE)
    a.configure(params, prompt)
    b.configure(params, prompt)
    return a, b


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("v", [300, 2500])
def test_draws_what_the_torch_sampler_draws(mode, v, gen):
    params = SamplingParams(seed=11, **MODES[mode])
    torch_side, kernel_side = samplers(v, params)
    k = 48
    embed = randn(v, k, gen=gen)
    token, pos = torch.zeros(1, dtype=torch.int64, device=DEVICE), torch.tensor([20], dtype=torch.int32, device=DEVICE)
    ring = torch.full((8,), -1, dtype=torch.int64, device=DEVICE)
    scratch = argmax_scratch(DEVICE)
    for step in range(6):
        logits = randn(v, gen=gen, scale=2.0)
        want = int(torch_side(logits.clone()))
        scores, divide = kernel_side.scores(logits.clone())
        x = poisoned(k)
        gumbel_argmax(scores, kernel_side.seed_key, kernel_side.step, scratch, token, pos, embed, x,
                      temperature=kernel_side.temperature if divide else None,
                      seen=kernel_side.seen if params.repetition_penalty != 1.0 else None, ring=ring)
        assert int(token) == want, f"step {step}"
        assert int(pos) == 21 + step and int(ring[(21 + step) % 8]) == want
        assert torch.equal(x, embed[want])
        assert int(kernel_side.step) == int(torch_side.step) == step + 1
        assert torch.equal(kernel_side.seen, torch_side.seen)
        assert scratch.tolist() == [NO_KEY, 0]


def test_different_seeds_draw_differently(gen):
    v, k = 5000, 16
    logits = torch.zeros(v, device=DEVICE)  # uniform: the draw is all noise
    drawn = set()
    for seed in range(4):
        s, _ = samplers(v, SamplingParams(seed=seed, temperature=1.0))
        token = torch.zeros(1, dtype=torch.int64, device=DEVICE)
        pos = torch.zeros(1, dtype=torch.int32, device=DEVICE)
        gumbel_argmax(logits, s.seed_key, s.step, argmax_scratch(DEVICE), token, pos, randn(v, k, gen=gen),
                      poisoned(k), temperature=s.temperature)
        drawn.add(int(token))
    assert len(drawn) == 4


def test_rejects_bad_arguments(gen):
    s, _ = samplers(64, SamplingParams(seed=1, temperature=1.0))
    token, pos = torch.zeros(1, dtype=torch.int64, device=DEVICE), torch.zeros(1, dtype=torch.int32, device=DEVICE)
    with pytest.raises(AssertionError):  # embedding table smaller than the vocabulary
        gumbel_argmax(randn(64, gen=gen), s.seed_key, s.step, argmax_scratch(DEVICE), token, pos,
                      randn(32, 8, gen=gen), poisoned(8))
    with pytest.raises(AssertionError):  # step must be int64
        gumbel_argmax(randn(64, gen=gen), s.seed_key, s.step.int(), argmax_scratch(DEVICE), token, pos,
                      randn(64, 8, gen=gen), poisoned(8))


@pytest.mark.gpu
@gpu
def test_gpu_full_vocabulary_matches_the_torch_sampler(gen):
    v = 151936
    for mode in MODES:
        params = SamplingParams(seed=3, **MODES[mode])
        torch_side, kernel_side = samplers(v, params)
        token, pos = torch.zeros(1, dtype=torch.int64, device=DEVICE), torch.zeros(1, dtype=torch.int32, device=DEVICE)
        ring = torch.zeros(16, dtype=torch.int64, pin_memory=True)
        embed, scratch = randn(v, 1536, gen=gen, dtype=torch.bfloat16), argmax_scratch(DEVICE)
        for step in range(20):
            logits = randn(v, gen=gen, scale=3.0)
            want = int(torch_side(logits.clone()))
            scores, divide = kernel_side.scores(logits.clone())
            gumbel_argmax(scores, kernel_side.seed_key, kernel_side.step, scratch, token, pos, embed,
                          poisoned(1536), temperature=kernel_side.temperature if divide else None,
                          seen=kernel_side.seen if params.repetition_penalty != 1.0 else None, ring=ring)
            torch.cuda.synchronize()
            assert int(token) == want == int(ring[(step + 1) % 16]), f"{mode} step {step}"
