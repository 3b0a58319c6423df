"""Decode benchmark: tokens/s, bytes/token and MBU against this GPU's measured copy bandwidth.

    python -m inference.bench --shape qwen2.5-coder-1.5b [--context 512] [--tokens 512]
        [--contexts 4096,16384] [--ttft 128,1024,4096] [--vs hf] [--json FILE] [--model DIR]
    python -m inference.bench --workload edit --model DIR [--tokens 256] [--weights fp8]   (speculation off and on)
    python -m inference.bench --workload verify --shape qwen2.5-coder-1.5b  (verify step vs one-token step)
        [--attention auto|cuda|triton] [--gemv auto|overlap|triton|mma] [--tuning auto|generic|ROW]
        [--weights bf16 | fp8 | fp8,bf16] [--tp N] [--tp-reduce auto|nccl|symm|flag|fused]

Writes a synthetic (random-weight) checkpoint of the shape on the fly unless --model is given,
then measures in one run: copy bandwidth (device-to-device, bytes read + written); decode tok/s
and ms/token at batch 1 (greedy, EOS ignored, median of --repeats runs; plus the rate with
temperature 0.8 / top-p 0.95 sampling at the first context); bytes read per token (all decode
weights, FP8 scales included, + the live KV cache at the mean context); MBU = bytes/token x tok/s /
bandwidth, and the step split into the time those bytes take at that bandwidth and the rest (what is
not reading: launches, tails, attention's latency); TTFT at several prompt lengths; optionally the
transformers static-cache + torch.compile baseline on the same checkpoint. --weights lists the weight
formats to measure, each loaded in turn from the same checkpoint (fp8: inference.quant). Prints a
table last. GPU only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from .kernel_args import add_kernel_args, kernel_choice


def copy_bandwidth(nbytes: int = 2 << 30, iters: int = 20) -> float:
    """Bytes/s of a large device-to-device copy, counting bytes read plus bytes written."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1000)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / statistics.median(times)


def random_prompt(n: int, vocab: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(100, min(vocab, 30000), (n,), generator=g).tolist()


SAMPLED = {"temperature": 0.8, "top_p": 0.95, "seed": 0}  # the sampled-decode row's parameters


def decode_rate(engine, context: int, tokens: int, repeats: int, sampling: dict | None = None) -> dict:
    """Plain greedy decode rate (or with `sampling`: SamplingParams fields) at batch 1, EOS ignored.
    Speculation stays off here (a random-weight model's greedy output often repeats, which the
    drafter would copy): `--workload edit` measures it on real prompts."""
    from .engine import FinishEvent
    from .prompts import Prompt
    from .sampling import SamplingParams

    prompt = Prompt.from_ids(random_prompt(context, engine.cfg.vocab_size))
    params = SamplingParams(max_tokens=tokens, ignore_eos=True, speculate=False,
                            **(sampling or {"temperature": 0.0}))
    rates = []
    for _ in range(repeats + 1):  # the first run also captures the graph: not counted
        for ev in engine.generate(prompt, params):
            if isinstance(ev, FinishEvent):
                rates.append(ev.stats.decode_tok_s)
    tok_s = statistics.median(rates[1:])
    return {"context": context, "tokens": tokens, "tok_s": tok_s, "ms_per_token": 1000 / tok_s, "runs": rates[1:]}


def ttft(engine, n: int, repeats: int = 5) -> float:
    from .engine import FinishEvent
    from .prompts import Prompt
    from .sampling import SamplingParams

    prompt = Prompt.from_ids(random_prompt(n, engine.cfg.vocab_size, seed=n))
    out = []
    for _ in range(repeats + 1):
        for ev in engine.generate(prompt, SamplingParams(max_tokens=1, ignore_eos=True)):
            if isinstance(ev, FinishEvent):
                out.append(ev.stats.ttft_ms)
    return statistics.median(out[1:])


def bytes_per_token(engine, context: int, tokens: int) -> float:
    """Weights read per step (every layer + LM head) + KV cache read at the mean live context."""
    w = engine.runner.w
    weight_bytes = w.nbytes() - (0 if w.tied else w.embed.numel() * w.embed.element_size())
    kv = engine.runner.cache.nbytes_per_position() * (context + tokens / 2)
    return weight_bytes + kv


def hf_baseline(model_dir: Path, context: int, tokens: int) -> float:
    """transformers generate() with a static cache and torch.compile (reduce-overhead), tok/s."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda().eval()
    # A static cache makes generate() compile the forward itself (CompileConfig: torch.compile,
    # mode "reduce-overhead", i.e. CUDA graphs) - transformers' own fast single-request path.
    model.generation_config.cache_implementation = "static"
    ids = torch.tensor([random_prompt(context, model.config.vocab_size)], device="cuda")

    class Stamps:  # a generate() streamer: put() is called with the prompt, then once per new token
        def __init__(self):
            self.t = []

        def put(self, value):
            torch.cuda.synchronize()
            self.t.append(time.perf_counter())

        def end(self):
            pass

    rates = []
    for i in range(3):  # the first run compiles
        s = Stamps()
        model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, streamer=s)
        gen = s.t[1:]  # one stamp per generated token
        if i:
            rates.append((len(gen) - 1) / (gen[-1] - gen[0]))
    return statistics.median(rates)


def measure(engine, contexts: list[int], ttft_lens: list[int], args, bw: float) -> dict:
    """Decode rates by context (with bytes/token, MBU and the split), the sampled rate, TTFTs."""
    rows = []
    for c in contexts:
        r = decode_rate(engine, c, args.tokens, args.repeats)
        r["bytes_per_token"] = bytes_per_token(engine, c, args.tokens)
        r["mbu"] = r["bytes_per_token"] * r["tok_s"] / bw
        r["read_ms"] = 1000 * r["bytes_per_token"] / bw  # the bytes at the measured copy bandwidth
        r["rest_ms"] = r["ms_per_token"] - r["read_ms"]
        rows.append(r)
        print(f"{engine.info['weights']} context {c}: {r['tok_s']:.0f} tok/s", file=sys.stderr)
    if args.tp > 1:
        from .parallel.profile import split
        rows[0].update(split(engine, random_prompt(args.context, engine.cfg.vocab_size), args.tokens,
                             rows[0]["ms_per_token"]))
    sampled = decode_rate(engine, args.context, args.tokens, args.repeats, SAMPLED)
    ttfts = {n: ttft(engine, n) for n in ttft_lens}
    info = engine.info
    return {"weights": info["weights"], "weights_detail": info["weights_detail"], "pdl": engine.runner.pdl,
            "runner": info["runner"], "tp_reduce": info.get("tp_reduce"),
            "tuning": info["tuning"], "attention": info["attention"], "gemv": info["gemv"], "decode": rows, "sampled_decode": {**sampled, "params": SAMPLED},
            "ttft_ms": ttfts}


WEIGHTS = ("bf16", "fp8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m inference.bench", description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="qwen2.5-coder-1.5b")
    p.add_argument("--model", default=None, help="benchmark this model instead of a synthetic checkpoint: a folder, "
                   "a .gguf file, or 'default' (SmolLM2-135M-Instruct)")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--contexts", default="", help="extra contexts to report, e.g. 4096,16384")
    p.add_argument("--ttft", default="128,1024,4096", help="prompt lengths for TTFT")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--weights", default=None, help="weight formats to measure, comma-separated: bf16 (the default), "
                   "fp8; one for --workload edit (default: the device's dtype) and verify")
    p.add_argument("--vs", choices=["hf"], default=None)
    p.add_argument("--no-pdl", action="store_true", help="disable programmatic dependent launch")
    add_kernel_args(p)
    p.add_argument("--tp", type=int, default=1, help="tensor parallel over cuda:0..N-1 (fast ranks for greedy "
                   "decode, the reference path for sampling; adds the compute vs sync split)")
    p.add_argument("--tp-reduce", choices=["auto", "nccl", "symm", "flag", "fused"], default="auto",
                   help="the fast ranks' all-reduce: NCCL, symmetric memory's one-shot, our flag reduction, or fused "
                        "into the streamed GEMVs; auto: fused where the GPUs can read each "
                        "other's memory, else NCCL")
    p.add_argument("--json", default=None)
    p.add_argument("--workload", choices=["decode", "edit", "verify"], default="decode",
                   help="decode (default); edit: code-edit prompts, speculation off and on (inference.speculative.bench; "
                        "CPU too); verify: the speculative verify step's cost vs a one-token step")
    p.add_argument("--draft", default="", help="edit: the drafter's settings as DraftConfig overrides, "
                   "field=value,... (e.g. lag=1,short_draft=5); the defaults if empty")
    p.add_argument("--families", default="triton,mma,cols,overlap",
                   help="verify: the speculation's GEMV families to time (comma-separated; those this model and GPU "
                        "run)")
    args = p.parse_args(argv)
    if args.workload == "verify":
        from .speculative.fast_verify import GEMVS

        families = [f for f in args.families.split(",") if f]
        if not families or set(families) - set(GEMVS):
            p.error(f"--families takes a comma-separated list of {', '.join(GEMVS)}, not {args.families!r}")
    formats = [w for w in (args.weights or "bf16").split(",") if w]
    if not formats or any(w not in WEIGHTS for w in formats):
        p.error(f"--weights takes a comma-separated list of {', '.join(WEIGHTS)}, not {args.weights!r}")
    if args.workload != "decode" and len(formats) != 1:
        p.error(f"--workload {args.workload} takes one weight format, not {args.weights!r}")
    if args.workload == "verify" and formats == ["fp8"]:
        p.error("--workload verify: FP8 weights do not speculate (the verify step's kernels take 16-bit weights)")
    if args.workload == "edit":
        from .speculative import DraftConfig

        try:
            draft = DraftConfig.parse(args.draft)
        except ValueError as e:
            p.error(f"--draft: {e}")
        return _edit(args, draft, args.weights)
    kernels = kernel_choice(args)
    if not torch.cuda.is_available():
        print("error: inference.bench needs a CUDA GPU", file=sys.stderr)
        return 2

    from .engine import Engine
    from .synth import write_checkpoint

    contexts = [args.context] + [int(c) for c in args.contexts.split(",") if c]
    ttft_lens = [int(c) for c in args.ttft.split(",") if c]
    need_ctx = max(contexts + ttft_lens) + args.tokens + 8
    tmp = None
    if args.model:
        model_dir, weights_note = Path(args.model), "checkpoint weights"
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-")
        t = time.perf_counter()
        model_dir = write_checkpoint(args.shape, Path(tmp.name) / args.shape, device="cuda")
        print(f"wrote synthetic {args.shape} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        weights_note = "random weights"

    if args.workload == "verify":
        from .speculative.bench import verify_main

        engine = Engine.from_pretrained(model_dir, device="cuda", dtype="bfloat16", max_context=need_ctx,
                                        weights=formats[0], **kernels)
        result = verify_main(args, engine)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
        return 0
    bw = copy_bandwidth()
    runs = []
    for fmt in formats:
        t = time.perf_counter()
        engine = Engine.from_pretrained(model_dir, device="cuda", dtype="bfloat16", max_context=need_ctx,
                                        weights=fmt, **kernels, tp=args.tp, tp_reduce=args.tp_reduce)
        if args.no_pdl:
            engine.runner.pdl = False
        print(f"loaded in {time.perf_counter() - t:.1f} s: {engine.info}", file=sys.stderr)
        runs.append(measure(engine, contexts, ttft_lens, args, bw))
        engine.close()
        del engine
        torch.cuda.empty_cache()
    result = {
        "shape": args.shape if not args.model else str(model_dir), "weights": weights_note,
        "gpu": torch.cuda.get_device_name(), "dtype": "bfloat16", "batch": 1, "tp": args.tp,
        "copy_bandwidth_GBs": bw / 1e9, "runs": runs,
    }
    if args.vs == "hf":
        try:
            result["hf_static_compile_tok_s"] = hf_baseline(model_dir, args.context, args.tokens)
            result["speedup_vs_hf"] = runs[0]["decode"][0]["tok_s"] / result["hf_static_compile_tok_s"]
        except Exception as e:  # the baseline is a comparison, not the product: report it, keep ours
            result["hf_error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))

    first = runs[0]
    print(f"\n{result['shape']} ({weights_note}), bf16 activations, batch 1, {result['gpu']}, "
          f"copy bandwidth {bw / 1e9:.0f} GB/s, PDL {'on' if first['pdl'] else 'off'}, tuning {first['tuning']} "
          f"(attention {first['attention']}; GEMVs " + ", ".join(f"{r['weights']} {r['gemv']}" for r in runs) + ")"
          + (f", tensor parallel over {args.tp} GPUs ({first['runner']} ranks, {first['tp_reduce']} all-reduce; "
             "GB read/token per GPU)"
             if args.tp > 1 else ""))
    print("| weights | context | tokens | tok/s | ms/token | GB read/token | MBU | read at copy bw, ms | rest, ms |")
    print("|:--------|--------:|-------:|------:|---------:|--------------:|----:|-------------------:|---------:|")
    for run in runs:
        for r in run["decode"]:
            print(f"| {run['weights']} | {r['context']} | {r['tokens']} | {r['tok_s']:.0f} | {r['ms_per_token']:.3f} | "
                  f"{r['bytes_per_token'] / 1e9:.3f} | {100 * r['mbu']:.0f}% | {r['read_ms']:.3f} | "
                  f"{r['rest_ms']:.3f} |")
    for run in runs:
        sampled, ttfts = run["sampled_decode"], run["ttft_ms"]
        print(f"{run['weights']}: sampled ({', '.join(f'{k} {v}' for k, v in SAMPLED.items() if k != 'seed')}) at "
              f"context {args.context}: {sampled['tok_s']:.0f} tok/s; TTFT: "
              + ", ".join(f"{n} tokens {ms:.1f} ms" for n, ms in ttfts.items()))
        if "sync_ms_per_token" in run["decode"][0]:
            r = run["decode"][0]
            print(f"{run['weights']}: tp {args.tp} at context {r['context']}: compute {r['compute_ms_per_token']:.3f} "
                  f"ms/token, sync {r['sync_ms_per_token']:.3f} ms/token ({r['collectives_per_token']} collectives, "
                  f"{r['sync_us_per_collective']:.1f} us each)"
                  + (f"; step graph {r['graph_ms_per_token']:.3f} ms" if "graph_ms_per_token" in r else ""))
    if len(runs) > 1:
        base = runs[-1]["decode"][0]["tok_s"]
        print("speed-up at context " + str(args.context) + ": "
              + ", ".join(f"{run['weights']}/{runs[-1]['weights']} {run['decode'][0]['tok_s'] / base:.2f}x"
                          for run in runs[:-1]))
    if "hf_static_compile_tok_s" in result:
        print(f"transformers static cache + torch.compile: {result['hf_static_compile_tok_s']:.0f} tok/s "
              f"-> {result['speedup_vs_hf']:.2f}x")
    if "hf_error" in result:
        print(f"transformers baseline failed: {result['hf_error']}")
    return 0


def _edit(args, draft, weights: str | None) -> int:
    """--workload edit: inference.speculative.bench on a real model (--model), speculation off and on, the drafter's
    settings `draft` (a DraftConfig), the weight format `weights` (fp8 does not speculate: "on" runs plain steps)."""
    from .engine import Engine
    from .speculative.bench import edit_main

    if not args.model:
        print("error: --workload edit needs --model (a real model: acceptance on random weights means nothing)",
              file=sys.stderr)
        return 2
    device = "cuda" if torch.cuda.is_available() else "cpu"
    kernels = kernel_choice(args) if device == "cuda" else {}
    engine = Engine.from_pretrained(args.model, device=device, max_context=4096, weights=weights, **kernels)
    engine.draft_config = draft
    print(f"loaded: {engine.info}; drafter: {draft}", file=sys.stderr)
    if weights == "fp8":
        print("FP8 weights do not speculate: the 'on' runs decode plain steps (compare with bf16's)", file=sys.stderr)
    result = edit_main(args, engine)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
