"""Real-weights quality gate: perplexity and top-1 agreement of a serving path vs float32.

    python -m inference.quality [--model default] [--device cpu|cuda] [--dtype bfloat16]
        [--weights NAME] [--engine-arg KEY=VALUE ...] [--tokens 2048] [--window 512]
        [--files textwrap.py,json/decoder.py,...] [--json out.json]

Teacher-forces a fixed code corpus (named files of the running interpreter's standard library,
read in order and cut into windows, up to a token budget) through two paths:
  - the float32 reference: `inference.reference` over the checkpoint's weights in float32, one
    forward per window (on --device; the oracle every path is judged by);
  - the path under test: an `Engine` built with --device / --dtype and any extra
    `Engine.from_pretrained` arguments (--weights NAME is --engine-arg weights=NAME, for weight
    formats such as FP8), decoding the window one token at a time with `runner.forced_logits`:
    on a GPU that is the fast path's decode kernels, on the CPU the reference runner.
For each it reports perplexity on the corpus and top-1 accuracy (argmax = the file's next
token); for the path under test also top-1 agreement with the float32 reference and the
relative logit error. Prints a table last; --json writes the same numbers.

Another path plugs in as an Engine argument (its runner must implement `start` and
`forced_logits`, as ReferenceRunner, FastRunner and the TP runner do).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .errors import EngineError

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ("textwrap.py", "json/decoder.py", "heapq.py", "shlex.py", "fractions.py", "argparse.py")


@dataclass
class PathScore:
    name: str
    tokens: int = 0
    nll: float = 0.0  # summed over scored tokens
    correct: int = 0  # argmax == next token
    agree: int = 0  # argmax == the float32 reference's argmax
    err_sq: float = 0.0  # sum over windows of |logits - ref|^2
    ref_sq: float = 0.0

    def add(self, logits: torch.Tensor, targets: torch.Tensor, ref: torch.Tensor | None):
        logp = torch.log_softmax(logits.float(), -1)
        self.nll -= logp.gather(1, targets[:, None]).sum().item()
        top = logits.argmax(-1)
        self.correct += (top == targets).sum().item()
        self.tokens += targets.numel()
        if ref is not None:
            self.agree += (top == ref.argmax(-1)).sum().item()
            self.err_sq += (logits.float() - ref).pow(2).sum().item()
            self.ref_sq += ref.pow(2).sum().item()

    def summary(self, vs_ref: bool) -> dict:
        out = {"path": self.name, "tokens": self.tokens, "perplexity": math.exp(self.nll / self.tokens),
               "top1_accuracy": self.correct / self.tokens}
        if vs_ref:
            out["top1_agreement"] = self.agree / self.tokens
            out["logits_rel_err"] = math.sqrt(self.err_sq / self.ref_sq)
        return out


def corpus_paths(files) -> list[Path]:
    paths = [STDLIB / name for name in files]
    for name, path in zip(files, paths):
        if not path.is_file():
            raise EngineError(f"corpus file {name} is not in this Python's standard library ({STDLIB})")
    return paths


@dataclass
class Corpus:
    files: tuple[str, ...]
    windows: list[list[int]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, tokenizer, files=FILES, tokens: int = 2048, window: int = 512) -> "Corpus":
        """Windows of at most `window` tokens from `files`, in order, until `tokens` are scored
        (each window scores len - 2 tokens: see `score_window`)."""
        if window < 8:
            raise EngineError(f"--window must be at least 8 tokens, got {window}")
        corpus, left = cls(tuple(files)), tokens
        for path in corpus_paths(files):
            name = path.relative_to(STDLIB).as_posix()
            ids = tokenizer.encode(path.read_text(encoding="utf-8"), add_special_tokens=False)
            for start in range(0, len(ids) - 8, window):
                if left <= 0:
                    return corpus
                n = min(window, left + 2, len(ids) - start)
                corpus.windows.append(ids[start:start + n])
                corpus.sources.append(f"{name}@{start}")
                left -= n - 2
        if left > 0:
            raise EngineError(f"the corpus files hold fewer than {tokens} tokens; name more --files")
        return corpus


def score_window(ids: list[int], ref_model, engine, cache, ref_score: PathScore, test_score: PathScore):
    """Teacher-force one window. Scored: the predictions made at positions 1..T-2 (the path
    under test prefills ids[0] and then decodes ids[1..T-2] one at a time)."""
    from .sampling import SamplingParams

    t = len(ids)
    dev = ref_model.w.device
    x = torch.tensor(ids, device=dev)
    ref = ref_model.forward(x, 0, cache)[1:t - 1].float()
    targets = x[2:]
    ref_score.add(ref, targets, None)
    runner = engine.runner
    runner.start(ids[:1], SamplingParams(max_tokens=t))
    test = torch.stack([runner.forced_logits(tok) for tok in ids[1:t - 1]]).to(dev)
    test_score.add(test, targets, ref)


def run(model: str | None, device: str = "cpu", dtype: str | None = None, tokens: int = 2048, window: int = 512,
        files=FILES, engine_args: dict | None = None, cache_dir=None) -> dict:
    from .engine import Engine
    from .hub import resolve_model_path
    from .reference import KVCache, ReferenceModel
    from .source import open_checkpoint

    t0 = time.perf_counter()
    corpus_paths(files)  # before loading anything
    engine = Engine.from_pretrained(model, device=device, dtype=dtype, max_context=window + 8, cache_dir=cache_dir,
                                    **(engine_args or {}))
    ckpt = open_checkpoint(resolve_model_path(model, cache_dir=cache_dir))
    ref_weights = ckpt.load_weights(engine.runner.device, torch.float32)
    ref_model = ReferenceModel(ckpt.config, ref_weights, window)
    cache = KVCache(ckpt.config, window, ref_weights.device, torch.float32)
    corpus = Corpus.build(engine.tokenizer, files, tokens, window)
    label = (f"{engine.info['runner']} {engine.info['dtype']} {engine.info['device']}"
             + "".join(f" {k}={v}" for k, v in (engine_args or {}).items()))
    ref_score, test_score = PathScore(f"float32 reference {ref_weights.device.type}"), PathScore(label)
    for ids in corpus.windows:
        score_window(ids, ref_model, engine, cache, ref_score, test_score)
    return {
        "model": engine.info["model"], "card": engine.info.get("card"), "device": engine.info["device"],
        "python": platform.python_version(), "files": list(corpus.files), "windows": corpus.sources,
        "window": window, "reference": ref_score.summary(False), "test": test_score.summary(True),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def table(result: dict) -> str:
    rows = [result["reference"], result["test"]]
    lines = [f"{result['model']}: {result['test']['tokens']} tokens of Python {result['python']} stdlib "
             f"({', '.join(result['files'][:3])}{', ...' if len(result['files']) > 3 else ''}), "
             f"windows of {result['window']}",
             "| path | tokens | perplexity | top-1 accuracy | top-1 agreement vs float32 | logits rel. err |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        agree = f"{100 * r['top1_agreement']:.2f}%" if "top1_agreement" in r else "-"
        err = f"{r['logits_rel_err']:.2e}" if "logits_rel_err" in r else "-"
        lines.append(f"| {r['path']} | {r['tokens']} | {r['perplexity']:.3f} | {100 * r['top1_accuracy']:.2f}% "
                     f"| {agree} | {err} |")
    return "\n".join(lines)


def _engine_args(pairs: list[str], weights: str | None) -> dict:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise EngineError(f"--engine-arg takes KEY=VALUE, got {p!r}")
        out[key] = int(value) if value.isdigit() else value
    if weights:
        out["weights"] = weights
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m inference.quality", description=__doc__.split("\n")[0])
    p.add_argument("--model", default="default", help="as for inference.generate (default: SmolLM2-135M-Instruct)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda: the fast path is the path under test)")
    p.add_argument("--dtype", default=None, help="the path under test's dtype (default: float32 on cpu, bfloat16 on cuda)")
    p.add_argument("--weights", default=None, help="a weight format the Engine accepts (Engine.from_pretrained weights=)")
    p.add_argument("--engine-arg", action="append", default=[], help="KEY=VALUE for Engine.from_pretrained (repeatable)")
    p.add_argument("--tokens", type=int, default=2048, help="tokens scored (the corpus budget)")
    p.add_argument("--window", type=int, default=512, help="tokens per teacher-forced window")
    p.add_argument("--files", default=",".join(FILES), help="stdlib files, in order")
    p.add_argument("--json", default=None, help="write the result here")
    args = p.parse_args(argv)
    try:
        result = run(args.model, args.device, args.dtype, args.tokens, args.window,
                     tuple(f for f in args.files.split(",") if f), _engine_args(args.engine_arg, args.weights))
    except (EngineError, TypeError) as e:  # TypeError: an --engine-arg the Engine does not take
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
