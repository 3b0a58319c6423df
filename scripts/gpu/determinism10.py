"""Whether the 1.5B shape's greedy fast path gives the same tokens graph-replayed and launched eagerly, per variant:
the default kernels, PDL off, the streamed / cluster kernels without early release. Each variant's 64 greedy tokens
run 5 times (graph, graph, eager, eager, graph); prints the first index where a run differs from the first. It
located the eager-step race on pos fixed in inference.fast.step.bind_step (lab/HISTORY.md, tenth session).
    python3 scripts/gpu/determinism10.py   (GPU; logs: bench-results/h100-2026-11-26-session10/eager10/)"""
import tempfile
from dataclasses import replace
from pathlib import Path

import inference.fast.step as step_mod
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
ORIG = dict(step_mod.KERNELS)


def patched(name):
    """KERNELS, with `early` dropped from the streamed / cluster launches for "no early"."""
    out = dict(ORIG)
    if name == "no early":
        for k in ("stream_rmsnorm_gemv", "stream_gemv_residual", "stream_gate_up_silu", "cluster_attention"):
            out[k] = lambda *a, _f=ORIG[k], **kw: _f(*a, **{x: y for x, y in kw.items() if x != "early"})
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
