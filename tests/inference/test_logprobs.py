"""Per-token log-probabilities (SamplingParams.logprobs = k): computed on the device with the
token, read back with it, and equal to the reference: log_softmax of the model's logits at the
same position, recomputed here by one teacher-forced forward over prompt + generated tokens."""
from __future__ import annotations

import math

import pytest
import torch

from inference.engine import Engine, FinishEvent
from inference.errors import ParamsError
from inference.sampling import SamplingParams, token_logprobs


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from inference.synth import write_checkpoint

    path = write_checkpoint("tiny", tmp_path_factory.mktemp("logprobs") / "tiny", device="cpu")
    return Engine.from_pretrained(path, device="cpu", max_context=256)


def generate(engine, prompt, **params):
    events = list(engine.generate(prompt, SamplingParams(**params)))
    tokens = [e for e in events[:-1] if e.token_ids]
    assert isinstance(events[-1], FinishEvent)
    return [t for e in tokens for t in e.token_ids], [lp for e in tokens for lp in e.logprobs], events[-1].stats


def reference_logprobs(engine, prompt_ids, generated, device="cpu"):
    """log_softmax (float64) of the reference forward's logits that predicted each generated token."""
    from inference.checkpoint import load_weights
    from inference.reference import KVCache, ReferenceModel

    cfg = engine.cfg
    weights = load_weights(engine.info["path"], cfg, device=device, dtype=torch.float32)
    model = ReferenceModel(cfg, weights, engine.max_context)
    ids = torch.tensor(prompt_ids + generated, device=device)
    logits = model.forward(ids, 0, KVCache(cfg, engine.max_context, device, torch.float32))
    rows = logits[len(prompt_ids) - 1:len(prompt_ids) - 1 + len(generated)]
    return torch.log_softmax(rows.double(), dim=-1).cpu()


@pytest.mark.parametrize("params", [dict(temperature=0.0), dict(temperature=0.9, top_p=0.9, seed=7)],
                         ids=["greedy", "sampled"])
def test_logprobs_equal_the_reference_forward(engine, params):
    prompt = "def quicksort(xs):"
    ids, lps, stats = generate(engine, prompt, max_tokens=24, logprobs=5, ignore_eos=True, **params)
    assert len(ids) == len(lps) == 24 and not stats.speculative
    ref = reference_logprobs(engine, engine.prompt_ids(prompt), ids)
    for j, (token, lp) in enumerate(zip(ids, lps)):
        assert lp.token_id == token
        assert lp.logprob == pytest.approx(ref[j, token].item(), abs=1e-4)
        top_values, top_ids = torch.topk(ref[j], 5)
        assert [i for i, _ in lp.top] == top_ids.tolist()
        assert [v for _, v in lp.top] == pytest.approx(top_values.tolist(), abs=1e-4)
        assert all(a >= b for (_, a), (_, b) in zip(lp.top, lp.top[1:]))
        if params["temperature"] == 0:  # greedy picks the most likely token
            assert lp.top[0][0] == token and lp.logprob == lp.top[0][1]


def test_logprobs_change_nothing_else(engine):
    plain, lps, _ = generate(engine, "x = [", max_tokens=16, logprobs=0, ignore_eos=True)
    events = list(engine.generate("x = [", SamplingParams(max_tokens=16, ignore_eos=True, speculate=False)))
    assert plain == [t for e in events[:-1] for t in e.token_ids]
    assert all(lp.top == [] and lp.logprob <= 0 for lp in lps)
    events = list(engine.generate("x = [", SamplingParams(max_tokens=4)))
    assert all(e.logprobs is None for e in events[:-1])


def test_token_logprobs_layout():
    logits = torch.tensor([0.0, 2.0, 1.0, -1.0])
    out = token_logprobs(logits, torch.tensor([2]), 2)
    logp = torch.log_softmax(logits, -1)
    assert out.tolist() == pytest.approx([logp[2].item(), logp[1].item(), logp[2].item(), 1.0, 2.0])
    assert sum(math.exp(v) for v in torch.log_softmax(logits, -1).tolist()) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [-1, 21, True, 1.5])
def test_logprobs_out_of_range_is_a_params_error(bad):
    with pytest.raises(ParamsError, match="logprobs"):
        SamplingParams(logprobs=bad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("params", [dict(temperature=0.0), dict(temperature=0.9, top_p=0.9, seed=7)],
                         ids=["greedy", "sampled"])
def test_fast_path_logprobs_match_the_reference(tmp_path, params):
    """The CUDA-graph runner computes them in the step's stream (unfused LM head when on)."""
    from inference.synth import write_checkpoint

    path = write_checkpoint("qwen2.5-coder-1.5b", tmp_path / "m", layers=4, device="cuda")
    engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=1024)
    assert engine.info["runner"] == "cuda-graph"
    prompt = "def quicksort(xs):"
    ids, lps, _ = generate(engine, prompt, max_tokens=64, logprobs=3, ignore_eos=True, **params)
    assert len(lps) == 64 and [lp.token_id for lp in lps] == ids
    ref = reference_logprobs(engine, engine.prompt_ids(prompt), ids, device="cuda")
    errors = [abs(lp.logprob - ref[j, t].item()) for j, (t, lp) in enumerate(zip(ids, lps))]
    assert max(errors) < 0.25, errors  # bf16 weights and cache vs the float32 reference
    agree = sum(lp.top[0][0] == ref[j].argmax().item() for j, lp in enumerate(lps)) / len(lps)
    assert agree >= 0.9
    if params["temperature"] == 0:
        assert all(lp.top[0][0] == t and lp.top[0][1] == lp.logprob for t, lp in zip(ids, lps))
