"""Speculative decoding on the GPU fast path (inference.speculative.fast_verify), random weights.

float32 weights: the verify graph's GEMMs and the decode kernels agree to ~1e-6, so speculative
greedy output must equal plain greedy token for token. bfloat16: their roundings differ (cuBLAS vs
the GEMV kernels, like prefill vs decode), so the check is teacher-forced: the verify step's logits
against the decode step's for the same tokens, and a first divergence of the two outputs (if any)
must sit on a near-tie of the float32 reference.
"""

import random

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

REPEATING = [random.Random(1).randrange(10, 1000) for _ in range(40)] * 4


def engine_for(tmp_path_factory, shape, dtype, layers=4):
    from inference.engine import Engine
    from inference.speculative import DraftConfig
    from inference.synth import write_checkpoint

    path = write_checkpoint(shape, tmp_path_factory.mktemp(shape) / "m", layers=layers, device="cuda")
    e = Engine.from_pretrained(path, device="cuda", dtype=dtype, max_context=1024)
    e.draft_config = DraftConfig(min_match=1, max_backoff=0, cost_aware=False)  # verify at every chance
    return e


def run(engine, ids, **kw):
    from inference.engine import FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams

    kw.setdefault("speculate", True)  # off by default
    events = list(engine.generate(Prompt.from_ids(ids), SamplingParams(**kw)))
    assert isinstance(events[-1], FinishEvent)
    return [t for e in events[:-1] for t in e.token_ids], events[-1].stats


@pytest.mark.parametrize("shape", ["qwen2.5-coder-1.5b", "qwen3-1.7b", "llama-3.2-1b"])
def test_float32_speculative_greedy_equals_plain_greedy_on_the_fast_path(tmp_path_factory, shape):
    e = engine_for(tmp_path_factory, shape, "float32", layers=2)
    assert e.info["runner"] == "cuda-graph"
    for max_tokens in (200, 37):
        plain, _ = run(e, REPEATING, max_tokens=max_tokens, ignore_eos=True, speculate=False)
        spec, s = run(e, REPEATING, max_tokens=max_tokens, ignore_eos=True)
        assert s.speculative and s.verify_steps > 0
        print(f"\n{shape} float32: {s.verify_steps} verify steps, {s.accepted}/{s.drafted} accepted")
        assert spec == plain
    again, _ = run(e, REPEATING, max_tokens=200, ignore_eos=True, speculate=False)  # state left clean
    assert again == run(e, REPEATING, max_tokens=200, ignore_eos=True, speculate=False)[0]


def test_bfloat16_verify_logits_match_decode_logits_and_outputs_differ_only_at_near_ties(tmp_path_factory):
    from inference.checkpoint import load_weights
    from inference.reference import KVCache, ReferenceModel
    from inference.sampling import SamplingParams
    from inference.speculative.verify_model import VerifyModel

    e = engine_for(tmp_path_factory, "qwen2.5-coder-1.5b", "bfloat16")
    runner, cfg = e.runner, e.cfg
    prompt, forced = REPEATING[:60], REPEATING[60:124]
    runner.start(prompt, SamplingParams(max_tokens=80, speculate=False))
    decode = torch.stack([runner.forced_logits(t) for t in [prompt[-1]] + forced[:-1]][1:])  # positions 60..
    model = VerifyModel(cfg, runner.w, runner.max_context)
    window = []
    for i in range(0, len(forced) - 1, 8):  # verify windows of 8 over the same tokens
        ids = torch.tensor(forced[i:i + 8], device="cuda")
        pos = torch.arange(len(prompt) + i, len(prompt) + i + len(ids), device="cuda")
        window.append(model.forward_window(ids, pos, 256, runner.cache))
    window = torch.cat(window)[:len(decode)]
    top1 = (window.argmax(-1) == decode.argmax(-1)).float().mean().item()
    rel = ((window - decode).norm() / decode.norm()).item()
    print(f"\nbf16 verify vs decode logits: top-1 agreement {top1:.3f}, relative error {rel:.4f}")
    assert top1 >= 0.95 and rel <= 2e-2

    plain, _ = run(e, REPEATING, max_tokens=160, ignore_eos=True, speculate=False)
    spec, s = run(e, REPEATING, max_tokens=160, ignore_eos=True)
    assert s.verify_steps > 0
    j = next((i for i, (a, b) in enumerate(zip(plain, spec)) if a != b), None)
    print(f"bf16: {s.verify_steps} verify steps, {s.accepted}/{s.drafted} accepted; first divergence {j}")
    if j is not None:
        oracle = ReferenceModel(cfg, load_weights(e.info["path"], cfg, device="cuda", dtype=torch.float32), 1024)
        ids = torch.tensor(REPEATING + plain[:j], device="cuda")
        logits = oracle.forward(ids, 0, KVCache(cfg, 1024, "cuda", torch.bfloat16))[-1]
        gap = (logits[plain[j]] - logits[spec[j]]).abs().item()
        print(f"reference gap between the two tokens {gap:.4f} (logit std {logits.std().item():.3f})")
        assert gap <= 0.03 * logits.std().item()


def test_verify_graph_equals_the_eager_verify(tmp_path_factory):
    from inference.sampling import SamplingParams

    e = engine_for(tmp_path_factory, "qwen2.5-coder-1.5b", "bfloat16")
    runner = e.runner
    outs = []
    for eager in (True, False):
        runner.use_graph = not eager
        runner.start(REPEATING[:100], SamplingParams(max_tokens=50))
        outs.append([runner.verify(REPEATING[100 + 8 * i:108 + 8 * i]) for i in range(5)])
        outs[-1].append((int(runner.pos), runner.host_pos))
    runner.use_graph = True
    assert outs[0] == outs[1]
