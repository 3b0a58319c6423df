"""The fast path's kernel choices on a command line (inference.generate, inference.bench): their flags and
the one place their environment defaults ($INFERENCE_ATTENTION, $INFERENCE_GEMV) are read. The engine
itself takes them as arguments only."""
from __future__ import annotations

import argparse
import os


def add_kernel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attention", choices=["auto", "cuda", "triton"], default=None,
                   help="fast path's decode attention kernel (default: $INFERENCE_ATTENTION or auto)")
    p.add_argument("--gemv", choices=["auto", "overlap", "triton", "mma", "cols"], default=None,
                   help="fast path's GEMV kernels (default: $INFERENCE_GEMV or auto)")
    p.add_argument("--tuning", default="auto", help="kernels.tuning row: auto (this GPU's), generic, or a row name")


def kernel_choice(args: argparse.Namespace) -> dict:
    """Engine.from_pretrained's attention / gemv / tuning arguments from the parsed flags."""
    return {"attention": args.attention or os.environ.get("INFERENCE_ATTENTION", "auto"),
            "gemv": args.gemv or os.environ.get("INFERENCE_GEMV", "auto"), "tuning": args.tuning}
