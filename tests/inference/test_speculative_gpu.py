"""Speculative decoding on the GPU fast path (inference.speculative.fast_verify), random weights.

For each GEMV family of the speculation (the k-column twins of the Triton decode kernels, the tensor-core GEMVs
of 1..16 columns, the CUDA column GEMVs of kernels.cols_gemv, the streamed GEMVs over k tokens) column c of a verify step is bit for bit the plain step
of a speculating run at position pos + c. So, in bf16, speculative greedy output equals the plain greedy
output on those kernels token for token, and a verify step's logits and cache rows equal those of the plain
steps they replace, bit for bit.
"""

import random

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

REPEATING = [random.Random(1).randrange(10, 1000) for _ in range(40)] * 4


def engine_for(tmp_path_factory, shape, dtype, layers=4, gemv="triton"):
    """An engine on a random-weight checkpoint whose plain steps run the speculation's kernels of GEMV family
    `gemv` (asked for as the engine's GEMVs; "overlap+down": the streamed family with down_proj streamed too, the
    row's stream_down; "+mma": the LM head on tensor cores, head_mma; "+qkv": QKV too, qkv_mma), so that its plain runs
    are the twins of its speculating ones."""
    from dataclasses import replace

    from inference.engine import Engine
    from inference.speculative import DraftConfig
    from inference.synth import write_checkpoint

    path = write_checkpoint(shape, tmp_path_factory.mktemp(shape) / "m", layers=layers, device="cuda")
    e = Engine.from_pretrained(path, device="cuda", dtype=dtype, max_context=1024)
    e.draft_config = DraftConfig(min_match=1, max_backoff=0, cost_aware=False)  # verify at every chance
    family, *opts = gemv.split("+")
    row = e.runner.tuning.with_gemv_family(family)
    e.runner.use_tuning(replace(row, stream_down="down" in opts, head_mma="mma" in opts, qkv_mma="qkv" in opts),
                        "triton", family)
    assert e.runner.speculative_kernels == ("triton", family)
    assert (e.runner.plan.at(0).down.kernel == "stream_gemv_residual") == ("down" in opts)
    return e


def run(engine, ids, **kw):
    from inference.engine import FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams

    kw.setdefault("speculate", True)  # off by default
    events = list(engine.generate(Prompt.from_ids(ids), SamplingParams(**kw)))
    assert isinstance(events[-1], FinishEvent)
    return [t for e in events[:-1] for t in e.token_ids], events[-1].stats


@pytest.mark.parametrize("shape,gemv", [("qwen2.5-coder-1.5b", "triton"), ("qwen2.5-coder-1.5b", "mma"),
                                        ("qwen3-1.7b", "triton"), ("llama-3.2-1b", "mma"),
                                        ("qwen2.5-coder-1.5b", "cols"), ("qwen3-1.7b", "cols"), ("llama-3.2-1b", "cols"),
                                        ("qwen2.5-coder-1.5b", "overlap"), ("qwen2.5-coder-1.5b", "overlap+down"),
                                        ("qwen2.5-coder-1.5b", "overlap+down+mma"),
                                        ("qwen2.5-coder-1.5b", "overlap+down+mma+qkv")])
def test_speculative_greedy_equals_plain_greedy_on_the_speculation_kernels(tmp_path_factory, shape, gemv):
    dtype = "bfloat16"
    e = engine_for(tmp_path_factory, shape, dtype, layers=2, gemv=gemv)
    assert e.info["runner"] == "cuda-graph"
    for max_tokens in (200, 37):
        plain, _ = run(e, REPEATING, max_tokens=max_tokens, ignore_eos=True, speculate=False)
        spec, s = run(e, REPEATING, max_tokens=max_tokens, ignore_eos=True)
        assert s.speculative and s.verify_steps > 0
        print(f"\n{shape} {dtype} {gemv}: {s.verify_steps} verify steps, {s.accepted}/{s.drafted} accepted")
        assert spec == plain
    again, _ = run(e, REPEATING, max_tokens=200, ignore_eos=True, speculate=False)  # state left clean
    assert again == run(e, REPEATING, max_tokens=200, ignore_eos=True, speculate=False)[0]


@pytest.mark.parametrize("shape,gemv", [("qwen2.5-coder-1.5b", "triton"), ("qwen2.5-coder-1.5b", "mma"),
                                        ("qwen3-1.7b", "mma"), ("qwen2.5-coder-1.5b", "cols"), ("qwen3-1.7b", "cols"),
                                        ("qwen2.5-coder-1.5b", "overlap"), ("qwen2.5-coder-1.5b", "overlap+down"),
                                        ("qwen2.5-coder-1.5b", "overlap+down+mma"),
                                        ("qwen2.5-coder-1.5b", "overlap+down+mma+qkv")])
def test_a_verify_step_computes_the_plain_steps_logits_and_cache_rows_bit_for_bit(tmp_path_factory, shape, gemv):
    from inference.sampling import SamplingParams
    from inference.speculative.fast_verify import BUCKETS

    e = engine_for(tmp_path_factory, shape, "bfloat16", gemv=gemv)
    runner = e.runner
    prompt = REPEATING[:100]
    for kc in BUCKETS:
        runner.start(prompt, SamplingParams(max_tokens=40, ignore_eos=True))
        p = runner.host_pos
        tokens, logits = [], []
        for _ in range(kc):
            slot = runner.step()
            torch.cuda.synchronize()
            tokens.append(int(slot[0]))
            logits.append(runner.logits.clone())
        rows = runner.cache.k[:, :, p:p + kc].clone(), runner.cache.v[:, :, p:p + kc].clone()
        runner.start(prompt, SamplingParams(max_tokens=40, ignore_eos=True, speculate=True))
        assert runner.verify(tokens[:kc - 1]) == tokens  # every drafted token agrees
        v = runner.verifier
        assert torch.equal(v.logits[:kc], torch.stack(logits)), f"kc={kc}: logits differ"
        assert torch.equal(runner.cache.k[:, :, p:p + kc], rows[0]) and torch.equal(runner.cache.v[:, :, p:p + kc],
                                                                                    rows[1]), f"kc={kc}: cache rows"
        assert int(runner.pos) == p + kc and runner.host_pos == p + kc
        assert int(runner.token) == tokens[-1]


@pytest.mark.parametrize("gemv", ["triton", "mma", "cols", "overlap", "overlap+down", "overlap+down+mma"])
def test_verify_graph_equals_the_eager_verify(tmp_path_factory, gemv):
    from inference.sampling import SamplingParams

    e = engine_for(tmp_path_factory, "qwen2.5-coder-1.5b", "bfloat16", gemv=gemv)
    runner = e.runner
    outs = []
    for eager in (True, False):
        runner.use_graph = not eager
        runner.start(REPEATING[:100], SamplingParams(max_tokens=50, speculate=True))
        outs.append([runner.verify(REPEATING[100 + 7 * i:107 + 7 * i][:1 + 2 * i]) for i in range(4)])
        outs[-1].append((int(runner.pos), runner.host_pos))
    runner.use_graph = True
    assert outs[0] == outs[1]
