"""Where FP8's quality loss comes from, on CPU: which weights, which scale granularity.

    python -m lab.probe_fp8_quality [--model default] [--tokens 2048] [--window 512] [--variants a,b,...]

Each variant rounds some of the model's weights through e4m3 (quantize, then dequantize to float32) and
runs the corpus of `inference.quality` through the float32 reference forward, one forward per window
(teacher-forced: the same positions the quality gate scores). Reported per variant: perplexity, its change
against the unquantized float32 model, and top-1 agreement with it (the gate: within 1% and >= 97%).

Variant names: `<kinds>:<granularity>`, kinds a `+`-joined subset of qkv, o, gate_up, down, head (or `all` =
every linear layer + LM head, `linear` = the four per-layer ones), granularity `row` (one scale per output
channel), `g64` / `g32` (one scale per row and group of K columns), `a32` (groups of 32 with a scale and an
offset, w ~ offset + scale * q, the offset the group's mid-range, the half range mapped to 448), `fp8`
(inference.quant, what the engine runs: as a32 with the half range mapped to 7.5) or `bf16` (plain bf16
rounding, no FP8). Several specs joined by `&` apply in turn; `:layers=i-j` after a spec restricts it to
those layers.

Not the gate itself (inference.quality runs the engine's FP8 path token by token); a probe to pick what to build.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import torch

from inference.hub import resolve_model_path
from inference.quant import quantize_fp8
from inference.quality import FILES, Corpus
from inference.reference import KVCache, ReferenceModel
from inference.source import open_checkpoint

E4M3, E4M3_MAX = torch.float8_e4m3fn, 448.0
LAYER_KINDS = ("qkv", "o", "gate_up", "down")
DEFAULT = ("none", "all:bf16", "all:row", "linear:row", "qkv:row", "o:row", "gate_up:row", "down:row", "head:row",
           "linear:row:layers=0-9", "linear:row:layers=10-19", "linear:row:layers=20-29",
           "all:g64", "all:g32", "all:a32", "linear:a32", "head:a32", "all:fp8", "linear:fp8", "head:fp8")


def fake_quant(w: torch.Tensor, gran: str) -> torch.Tensor:
    """w [N, K] float32 -> the float32 values its e4m3 copy with `gran` scales holds."""
    if gran == "bf16":
        return w.bfloat16().float()
    if gran == "fp8":
        return quantize_fp8(w).dequantize()
    n, k = w.shape
    g = k if gran == "row" else int(gran[1:])
    assert k % g == 0, f"K={k} is not a multiple of the group {g}"
    x = w.reshape(n, k // g, g)
    if gran[0] == "a":
        lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
        off, s = (hi + lo) / 2, (hi - lo) / 2 / E4M3_MAX
    else:
        off, s = torch.zeros(()), x.abs().amax(-1, keepdim=True) / E4M3_MAX
    s = torch.where(s > 0, s, torch.ones_like(s))
    q = ((x - off) / s).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3).float()
    return (q * s + off).reshape(n, k)


def quantized(weights, variant: str):
    """A copy of `weights` with the variant's tensors replaced by their fake-quantized values."""
    if variant == "none":
        return weights
    for spec in variant.split("&"):
        weights = quantized_one(weights, spec)
    return weights


def quantized_one(weights, variant: str):
    kinds, gran, *rest = variant.split(":")
    kinds = set(kinds.split("+"))
    if "all" in kinds:
        kinds |= {*LAYER_KINDS, "head"}
    if "linear" in kinds:
        kinds |= set(LAYER_KINDS)
    lo, hi = 0, len(weights.layers) - 1
    if rest:
        lo, _, hi = rest[0].removeprefix("layers=").partition("-")
        lo, hi = int(lo), int(hi or lo)
    layers = [replace(layer, **{f: fake_quant(getattr(layer, f), gran) for f in LAYER_KINDS
                               if f in kinds and lo <= i <= hi})
              for i, layer in enumerate(weights.layers)]
    embed = fake_quant(weights.embed, gran) if "embed" in kinds else weights.embed
    head = fake_quant(weights.lm_head, gran) if "head" in kinds else (
        embed if weights.lm_head is weights.embed else weights.lm_head)
    return replace(weights, embed=embed, layers=layers, lm_head=head)


def score(ckpt, weights, windows, window: int, ref_logits=None):
    model = ReferenceModel(ckpt.config, weights, window)
    cache = KVCache(ckpt.config, window, weights.device, torch.float32)
    nll, agree, tokens, logits = 0.0, 0, 0, []
    for j, ids in enumerate(windows):
        x = torch.tensor(ids)
        out = model.forward(x, 0, cache)[1:len(ids) - 1]
        logp = torch.log_softmax(out, -1)
        nll -= logp.gather(1, x[2:, None]).sum().item()
        tokens += len(ids) - 2
        if ref_logits is not None:
            agree += (out.argmax(-1) == ref_logits[j].argmax(-1)).sum().item()
        logits.append(out)
    return math.exp(nll / tokens), agree / tokens, logits


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.probe_fp8_quality", description=__doc__.split("\n")[0])
    p.add_argument("--model", default="default")
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--variants", default=",".join(DEFAULT))
    args = p.parse_args(argv)
    torch.set_grad_enabled(False)
    ckpt = open_checkpoint(resolve_model_path(args.model))
    weights = ckpt.load_weights("cpu", torch.float32)
    windows = Corpus.build(ckpt.tokenizer, FILES, args.tokens, args.window).windows
    base_ppl, _, base = score(ckpt, weights, windows, args.window)
    print(f"{ckpt.card['name']}: {sum(len(w) - 2 for w in windows)} tokens, windows of {args.window}")
    print("| variant | perplexity | vs float32 | top-1 agreement | gate |")
    print("|---|---:|---:|---:|---|")
    for v in args.variants.split(","):
        t0 = time.perf_counter()
        ppl, agree, _ = score(ckpt, quantized(weights, v), windows, args.window, base)
        d = ppl / base_ppl - 1
        ok = "pass" if d <= 0.01 and agree >= 0.97 else "fail"
        print(f"| {v} | {ppl:.3f} | {100 * d:+.2f}% | {100 * agree:.2f}% | {ok} | ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
