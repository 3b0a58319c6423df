"""Which kernel choice makes the 1.5B shape's greedy fast path differ between runs (tests/inference/test_fast_path.py
fails on an H100: graph vs eager at token ~19). Runs each variant's greedy 64 tokens 4 times (graph, graph, eager,
eager) and prints the first index where a run differs from the first."""
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from inference.engine import Engine, FinishEvent
from inference.prompts import Prompt
from inference.sampling import SamplingParams
from inference.synth import write_checkpoint
from kernels.tuning import for_device

tmp = tempfile.mkdtemp()
path = write_checkpoint("qwen2.5-coder-1.5b", Path(tmp) / "m", layers=4, device="cuda")
engine = Engine.from_pretrained(path, device="cuda", dtype="bfloat16", max_context=1024)
prompt = Prompt.from_ids(list(range(200, 230)))
params = SamplingParams(max_tokens=64, ignore_eos=True, speculate=False)
row = for_device("cuda")
VARIANTS = {
    "default": (row, "auto", "auto", True),
    "no pdl": (row, "auto", "auto", False),
    "no early": (row, "auto", "auto", True),
    "default again": (row, "auto", "auto", True),
}
import inference.fast.step as step_mod
ORIG = dict(step_mod.KERNELS)


def patched(name):
    """KERNELS with `early` dropped from the streamed / cluster launches ("no early")."""
    out = dict(ORIG)
    drop = {"no early": "early"}.get(name)
    if drop:
        for k in ("stream_rmsnorm_gemv", "stream_gemv_residual", "stream_gate_up_silu", "cluster_attention"):
            f = ORIG[k]
            out[k] = lambda *a, _f=f, **kw: _f(*a, **{x: y for x, y in kw.items() if x != drop})
    return out


def run():
    return [t for ev in engine.generate(prompt, params) if not isinstance(ev, FinishEvent) for t in ev.token_ids]


def first_diff(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


for name, (t, att, gemv, pdl) in VARIANTS.items():
    r = engine.runner
    step_mod.KERNELS.clear()
    step_mod.KERNELS.update(patched(name))
    r.use_tuning(t, attention=att, gemv=gemv)
    r.pdl = pdl
    runs = []
    for g in (True, True, False, False, True):
        r.use_graph = g
        runs.append(run())
    diffs = [first_diff(runs[0], x) for x in runs[1:]]
    print(f"{name:18s} kernels {r.attention_mode}/{r.gemv_kind}: first diff vs run 0 (graph, eager, eager, graph): "
          f"{diffs}  tokens 17-21 {runs[0][17:22]} / {[x[17:22] for x in runs[1:]]}", flush=True)
