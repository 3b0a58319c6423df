"""Lab instrument (no GPU needed): the SASS of a CUDA column-GEMV variant (kernels/csrc/cols_gemv.cu) as the
launcher builds it, by opcode, with its registers and local memory, optionally against another tree's source.

    python -m lab.sass_cols MODE K [--cg 2] [--r 2] [--wk 1] [--nw 8] [--u 4] [--norm bf16|none]
        [--against .before/kernels/csrc] [--cuobjdump PATH] [--dump FILE]

MODE: rmsnorm_gemv, residual, gate_up or lm_head; K the weight's columns; the launch config as kernels.cols_gemv's
Config (R rows a warp, WK warps splitting K, NW warps, U chunks a batch, CG columns a CTA). It compiles with NVRTC
for sm_90a (a CPU machine with the NVRTC wheel on PYTHONPATH: `pip install --target DIR nvidia-cuda-nvrtc-cu12`)
and disassembles with cuobjdump (the device image's nvcc has it; here: `pip download --no-deps
nvidia-cuda-cuobjdump`, unzip, bin/cuobjdump). Static counts: a loop's body counts once. This is how the
seventeenth session found that the 135M gate/up at 16 columns spent 50 of its 992 instructions in shuffles
(lab/HISTORY.md). Not a test and not a timing: lab.probe_cols_gemv times launches on a GPU.
"""
from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from kernels import _cuda_rtc
from kernels.cols_gemv import COMPILE_OPTIONS, Config, source
from lab.probe_cols_gemv import source_from

KINDS = {"bf16": 0, "none": -1}


def sass(cubin: bytes, cuobjdump: str) -> tuple[collections.Counter, str, str]:
    """(opcode counts, the resource line, the SASS text) of a cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
        res = subprocess.run([cuobjdump, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    ops = collections.Counter()
    for line in text.splitlines():
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if m:
            ops[m.group(2).split(".")[0]] += 1
    usage = " ".join(re.findall(r"(REG:\d+|STACK:\d+|SHARED:\d+|LOCAL:\d+)", res))
    return ops, usage, text


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["rmsnorm_gemv", "residual", "gate_up", "lm_head"])
    p.add_argument("k", type=int)
    p.add_argument("--cg", type=int, default=2, help="columns per CTA (compiled in)")
    p.add_argument("--r", type=int, default=2)
    p.add_argument("--wk", type=int, default=1)
    p.add_argument("--nw", type=int, default=8)
    p.add_argument("--u", type=int, default=4)
    p.add_argument("--norm", choices=list(KINDS), default=None, help="default: bf16 but for residual")
    p.add_argument("--against", type=Path, help="a kernels/csrc folder: its cols_gemv.cu as well")
    p.add_argument("--cuobjdump", default=shutil.which("cuobjdump") or "cuobjdump")
    p.add_argument("--dump", type=Path, help="write this tree's SASS here")
    args = p.parse_args()
    if args.against and not (args.against / "cols_gemv.cu").is_file():
        p.error(f"--against {args.against}: no cols_gemv.cu there (a kernels/csrc folder, e.g. .before/kernels/csrc)")
    if not shutil.which(args.cuobjdump):
        p.error(f"no cuobjdump at {args.cuobjdump!r} (--cuobjdump PATH; see the docstring for where to get one)")
    if args.k % 8:
        p.error(f"K={args.k}: the column GEMVs take K a multiple of 8")
    norm = KINDS[args.norm] if args.norm else (-1 if args.mode == "residual" else 0)
    cfg = Config(R=args.r, WK=args.wk, NW=args.nw, U=args.u, CG=args.cg)
    variants = {"now": None} | ({"before": source_from(args.against)} if args.against else {})
    counts = {}
    for name, text in variants.items():
        src, _ = source(args.mode, args.k, args.cg, replace(cfg, source=text), 0, norm)
        ops, usage, sass_text = sass(_cuda_rtc.nvrtc_compile(src, "sm_90a", COMPILE_OPTIONS), args.cuobjdump)
        counts[name] = ops
        print(f"{name}: {sum(ops.values())} instructions, {usage}")
        if name == "now" and args.dump:
            args.dump.write_text(sass_text)
    names = sorted(set().union(*counts.values()), key=lambda o: -counts["now"][o])
    print("| opcode | " + " | ".join(variants) + " |")
    print("|---|" + "---:|" * len(variants))
    for op in names:
        print(f"| {op} | " + " | ".join(str(counts[v][op]) for v in variants) + " |")


if __name__ == "__main__":
    main()
