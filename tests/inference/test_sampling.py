"""Sampling: parameter validation, the filters against a straightforward reference on fixed
logits, the repetition penalty, and seeded determinism of the on-device sampler."""

import math

import pytest
import torch

from inference.errors import ParamsError
from inference.sampling import Sampler, SamplingParams, apply_repetition_penalty, filter_logits, hash32


def reference_filter(logits: list[float], temperature=1.0, top_k=0, top_p=1.0, min_p=0.0) -> set[int]:
    """The allowed token set, computed the obvious way in Python floats."""
    scaled = [x / temperature for x in logits]
    order = sorted(range(len(scaled)), key=lambda i: -scaled[i])
    if top_k:
        order = order[:top_k]
    z = sum(math.exp(scaled[i]) for i in range(len(scaled)))
    kept, mass = [], 0.0
    for i in order:  # smallest prefix of the sorted list whose mass reaches top_p
        if mass >= top_p and kept:
            break
        kept.append(i)
        mass += math.exp(scaled[i]) / z
    z2 = sum(math.exp(scaled[i]) for i in kept)
    pmax = max(math.exp(scaled[i]) / z2 for i in kept)
    return {i for i in kept if math.exp(scaled[i]) / z2 >= min_p * pmax}


def allowed(logits, **kw) -> set[int]:
    t = torch.tensor(logits)
    f = filter_logits(
        t, torch.tensor(kw.get("temperature", 1.0)), torch.tensor(kw.get("top_k", 0)),
        torch.tensor(kw.get("top_p", 1.0)), torch.tensor(kw.get("min_p", 0.0)),
        use_sort=kw.get("top_k", 0) > 0 or kw.get("top_p", 1.0) < 1, use_min_p=kw.get("min_p", 0.0) > 0)
    return set(torch.nonzero(torch.isfinite(f)).flatten().tolist())


LOGITS = [2.0, 1.5, -0.3, 0.9, 3.1, 0.0, -2.0, 1.49, 2.5, -1.0]


@pytest.mark.parametrize("kw", [
    dict(top_k=1), dict(top_k=3), dict(top_k=10), dict(top_p=0.5), dict(top_p=0.9), dict(top_p=0.999),
    dict(min_p=0.1), dict(min_p=0.5), dict(top_k=5, top_p=0.8), dict(top_k=4, min_p=0.3),
    dict(temperature=0.5, top_p=0.7), dict(temperature=2.0, top_p=0.7, min_p=0.05), dict(temperature=0.7, top_k=2),
])
def test_filters_keep_exactly_the_reference_set(kw):
    assert allowed(LOGITS, **kw) == reference_filter(LOGITS, **kw)


def test_filters_agree_with_reference_on_random_logits():
    g = torch.Generator().manual_seed(0)
    for trial in range(50):
        logits = (torch.randn(40, generator=g) * 3).tolist()
        kw = dict(temperature=0.3 + trial / 25, top_k=trial % 7, top_p=0.5 + (trial % 5) / 10, min_p=(trial % 3) / 10)
        assert allowed(logits, **kw) == reference_filter(logits, **kw), kw


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    logits = torch.tensor([2.0, -2.0, 1.0, -1.0])
    seen = torch.tensor([True, True, False, False])
    out = apply_repetition_penalty(logits, seen, torch.tensor(2.0))
    assert out.tolist() == [1.0, -4.0, 1.0, -1.0]


def run_sampler(params: SamplingParams, logits_seq, prompt=(1, 2)):
    s = Sampler(logits_seq[0].numel(), "cpu")
    s.configure(params, torch.tensor(prompt))
    return [int(s(logits)) for logits in logits_seq]


def random_logits(n=30, vocab=500, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(vocab, generator=g) * 2 for _ in range(n)]


def test_same_seed_same_tokens_different_seed_different_tokens():
    logits = random_logits()
    p = SamplingParams(temperature=1.0, seed=123)
    assert run_sampler(p, logits) == run_sampler(p, logits)
    assert run_sampler(p, logits) != run_sampler(SamplingParams(temperature=1.0, seed=124), logits)


def test_sampled_tokens_always_lie_in_the_filtered_set():
    logits = random_logits(n=200)
    p = SamplingParams(temperature=0.9, top_k=20, top_p=0.8, min_p=0.05, seed=5)
    tokens = run_sampler(p, logits)
    for tok, l in zip(tokens, logits):
        assert tok in reference_filter(l.tolist(), temperature=0.9, top_k=20, top_p=0.8, min_p=0.05)


def test_greedy_is_argmax_and_temperature_zero_means_greedy():
    logits = random_logits()
    assert run_sampler(SamplingParams(temperature=0.0), logits) == [int(l.argmax()) for l in logits]


def test_sampling_frequencies_follow_the_softmax():
    """Gumbel-max over the counter-based noise is an exact sampler: check it statistically."""
    logits = torch.tensor([1.0, 0.0, -1.0, 0.5])
    s = Sampler(4, "cpu")
    s.configure(SamplingParams(temperature=1.0, seed=42), torch.tensor([0]))
    counts = torch.zeros(4)
    n = 20000
    for _ in range(n):
        counts[int(s(logits))] += 1
    expected = torch.softmax(logits, 0) * n
    chi2 = (((counts - expected) ** 2) / expected).sum().item()
    assert chi2 < 16.3  # p = 0.001 for 3 degrees of freedom


def test_repetition_penalty_in_the_sampler_discourages_prompt_and_generated_tokens():
    logits = torch.zeros(5)
    logits[3] = 1.0
    logits[4] = 0.9
    # Token 3 is in the prompt: its logit 1.0 becomes 0.5 < 0.9, so greedy picks 4, then 4 is
    # penalised to 0.45, so 3 (0.5) wins next.
    assert run_sampler(SamplingParams(repetition_penalty=2.0), [logits, logits], prompt=(3,)) == [4, 3]


def test_hash32_matches_the_32_bit_reference_mixer():
    def lowbias32(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    xs = [0, 1, 2, 12345, 0xFFFFFFFF, 0x80000000, 987654321]
    assert hash32(torch.tensor(xs)).tolist() == [lowbias32(x) for x in xs]


@pytest.mark.parametrize("kw, message", [
    (dict(max_tokens=0), "max_tokens"), (dict(temperature=-1), "temperature"), (dict(top_p=0), "top_p"),
    (dict(top_p=1.5), "top_p"), (dict(top_k=-1), "top_k"), (dict(min_p=2), "min_p"),
    (dict(repetition_penalty=0), "repetition_penalty"), (dict(seed=-3), "seed"), (dict(stop=("",)), "stop"),
    (dict(temperature=float("nan")), "temperature"), (dict(max_tokens=2.5), "max_tokens"),
])
def test_bad_parameters_get_one_clear_error(kw, message):
    with pytest.raises(ParamsError, match=message):
        SamplingParams(**kw)


def test_params_from_json_reject_unknown_keys():
    with pytest.raises(ParamsError, match="unknown sampling parameter"):
        SamplingParams.from_dict({"temprature": 0.5})
    assert SamplingParams.from_dict({"temperature": 0.5, "stop": ["\n\n"]}).stop == ("\n\n",)
