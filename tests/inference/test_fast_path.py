"""The GPU fast path (Triton kernels + one CUDA graph per step) against the reference forward.

GPU only (marker `gpu`); run on the device with
    python -m pytest -m gpu tests/ -q
Random bf16 checkpoints of each model family. Targets from the issue: teacher-forced top-1
agreement >= 99% over 256 positions and logits relative error <= 2e-2.
"""

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SHAPES = [("qwen2.5-coder-1.5b", 4), ("qwen3-1.7b", 4), ("llama-3.2-1b", 4)]


@pytest.fixture(scope="module", params=SHAPES, ids=[s for s, _ in SHAPES])
def checkpoint(request, tmp_path_factory):
    from inference.synth import write_checkpoint

    shape, layers = request.param
    return write_checkpoint(shape, tmp_path_factory.mktemp(shape) / "m", layers=layers, device="cuda")


def _engine(path, **kw):
    from inference.engine import Engine

    return Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=1024, **kw)


def test_teacher_forced_logits_match_the_reference(checkpoint):
    from inference.checkpoint import load_weights
    from inference.reference import KVCache, ReferenceModel
    from inference.sampling import SamplingParams

    engine = _engine(checkpoint)
    cfg, runner = engine.cfg, engine.runner
    assert engine.info["runner"] == "cuda-graph"
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, min(cfg.vocab_size, 30000), (32 + 256,), generator=g)
    prompt, forced = ids[:32].tolist(), ids[32:].tolist()

    # Oracle: the reference forward on the same bf16 weights upcast to float32, computing in
    # float32 but storing K/V in bfloat16 like the fast path's cache. (Against an all-float32
    # cache, bf16 K/V storage alone flips ~1.5% of random-weight argmaxes: their top-2 logit
    # gaps average 0.18 while bf16 rounding moves logits by ~3e-3. Printed below for the record.)
    ref_w = load_weights(checkpoint, cfg, device="cuda", dtype=torch.float32)
    oracle = ReferenceModel(cfg, ref_w, 1024)
    ref = oracle.forward(ids.cuda(), 0, KVCache(cfg, 1024, "cuda", torch.bfloat16))
    ref32 = oracle.forward(ids.cuda(), 0, KVCache(cfg, 1024, "cuda", torch.float32))[31:31 + 256]

    runner.start(prompt, SamplingParams(max_tokens=300))
    fast = [runner.model.prefill(torch.tensor(prompt, device="cuda"), runner.cache)]
    fast += [runner.forced_logits(t) for t in forced[:-1]]
    fast = torch.stack(fast)  # [256, V]: positions 31 .. 286
    want = ref[31:31 + 256]

    agree = (fast.argmax(-1) == want.argmax(-1)).float().mean().item()
    rel = ((fast - want).norm() / want.norm()).item()
    agree32 = (fast.argmax(-1) == ref32.argmax(-1)).float().mean().item()
    rel32 = ((fast - ref32).norm() / ref32.norm()).item()
    print(f"fast path vs oracle with bf16 KV: top-1 agreement {agree:.4f}, logits rel err {rel:.2e}; "
          f"vs all-float32 oracle: {agree32:.4f}, {rel32:.2e}")
    assert agree >= 0.99
    assert rel <= 2e-2


def test_graph_replay_generates_what_eager_kernels_generate(checkpoint):
    from inference.engine import FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams

    prompt = Prompt.from_ids(list(range(100, 140)))
    params = SamplingParams(max_tokens=64, ignore_eos=True)
    runs = []
    for use_graph in (True, False):
        engine = _engine(checkpoint)
        engine.runner.use_graph = use_graph
        runs.append([t for ev in engine.generate(prompt, params) if not isinstance(ev, FinishEvent) for t in ev.token_ids])
    assert len(runs[0]) == 64
    assert runs[0] == runs[1]


def test_seeded_sampling_in_the_graph_is_deterministic(checkpoint):
    from inference.engine import FinishEvent
    from inference.prompts import Prompt
    from inference.sampling import SamplingParams

    engine = _engine(checkpoint)
    params = SamplingParams(max_tokens=48, temperature=0.8, top_p=0.9, top_k=50, seed=7, ignore_eos=True,
                            repetition_penalty=1.1)

    def run(p):
        return [t for ev in engine.generate(Prompt.from_ids([5, 6, 7, 8]), p)
                if not isinstance(ev, FinishEvent) for t in ev.token_ids]

    a, b = run(params), run(params)
    assert a == b and len(a) == 48
    assert run(SamplingParams(**{**params.__dict__, "seed": 8})) != a


def test_long_context_decode_matches_reference_at_position_2000(tmp_path):
    """Split-KV attention over a long live context (many splits, all of them non-empty)."""
    from inference.checkpoint import load_weights
    from inference.engine import Engine
    from inference.reference import KVCache, ReferenceModel
    from inference.sampling import SamplingParams
    from inference.synth import write_checkpoint

    path = write_checkpoint("qwen2.5-coder-1.5b", tmp_path / "m", layers=2, device="cuda")
    engine = Engine.from_pretrained(path, device="cuda", max_context=4096)
    cfg = engine.cfg
    ids = torch.randint(0, 30000, (2001,), generator=torch.Generator().manual_seed(3))
    engine.runner.start(ids[:2000].tolist(), SamplingParams(max_tokens=8))
    fast = engine.runner.forced_logits(int(ids[2000]))
    ref_w = load_weights(path, cfg, device="cuda", dtype=torch.float32)
    ref = ReferenceModel(cfg, ref_w, 4096).forward(ids.cuda(), 0, KVCache(cfg, 4096, "cuda", torch.float32))[-1]
    assert ((fast - ref).norm() / ref.norm()).item() <= 2e-2
