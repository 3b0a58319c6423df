"""Lab probe: the CUDA column GEMVs (kernels.cols_gemv) launch by launch, GPU only.

    python -m lab.probe_cols_gemv [--shape smollm2-135m|qwen2.5-coder-0.5b|qwen3-0.6b|qwen2.5-coder-1.5b] [--sweep]
        [--same-bits] [--only qkv,lm_head] [--columns 1,2,4,8] [--against .before/kernels/csrc [--rounds 3]]

For each GEMV of a decode layer (QKV, o_proj, gate/up, down) and the LM head (+ argmax) of the shape: us per
launch of the one-column Triton kernel and of the column GEMVs at 1, 2, 4, 8 columns (--columns; config_for's
config for the most columns given, and
the tensor-core kernel's mma_config_for where K fits; --sweep: other (R, WK, NW) configs, at most 1, 2, 4 columns
per CTA, other (WK, NW, U) of the tensor-core kernel), 24 launches back to back in one CUDA graph over rotating weight copies
(lab.bench_kernels.in_graph_us), PDL on. --against DIR: the default configs only, compiled from DIR's
cols_gemv.cu ("before") and from this tree ("now"), timed in turn over --rounds (the best of each) and their
outputs compared bit for bit (a kernel change that must keep every column's bits). Not a test; the end-to-end
number is `inference.bench --workload verify` / lab.profile_verify.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch

from kernels.cols_gemv import (bits_key, config_for, lane_chunks, cols_gemv_residual, cols_lm_head_argmax,
                               cols_rmsnorm_gate_up_silu, cols_rmsnorm_gemv, mma_config_for, mma_fits)
from kernels.gate_up_silu import rmsnorm_gate_up_silu
from kernels.gemv_residual import gemv_residual
from kernels.lm_head_argmax import argmax_scratch, lm_head_argmax
from kernels.lm_head_mma_cols import mma_scratch
from kernels.rmsnorm_gemv import rmsnorm_gemv
from lab.bench_kernels import copies, in_graph_us

# hidden, intermediate, q + 2 kv (QKV rows), q (o_proj's K), vocab
DIMS = {"smollm2-135m": (576, 1536, 960, 576, 49152), "qwen2.5-coder-0.5b": (896, 4864, 1152, 896, 151936),
        "qwen3-0.6b": (1024, 3072, 4096, 2048, 151936), "qwen2.5-coder-1.5b": (1536, 8960, 2048, 1536, 151936)}
MMA_SWEEP = {"lm_head": [(1, 1, 8, 3, 1), (1, 1, 8, 1, 1), (2, 1, 8, 2, 1), (1, 1, 4, 2, 1), (1, 1, 4, 4, 1),
                         (1, 2, 8, 2, 1), (1, 1, 16, 2, 1)],  # (R, WK, NW, U, SK)
             "other": [(1, 2, 2, 8, 4), (1, 4, 4, 8, 2), (1, 4, 4, 8, 8), (1, 8, 8, 8, 2), (1, 2, 2, 8, 8),
                       (1, 8, 8, 8, 1), (1, 4, 4, 8, 4), (1, 8, 8, 8, 4)]}
SWEEP = {"rmsnorm_gemv": [(1, 1, 4), (1, 1, 8), (2, 1, 8), (4, 1, 4), (1, 2, 8)],
         "residual": [(1, 1, 4), (2, 1, 4), (1, 2, 4), (1, 4, 8), (2, 2, 8)],
         "gate_up": [(1, 1, 4), (2, 1, 8), (1, 2, 8), (2, 1, 4)],
         "lm_head": [(4, 1, 8), (8, 1, 8), (4, 1, 4), (2, 1, 4)]}


def specs(shape: str):
    """(name, mode, W rows, K, output rows, one-column Triton launch(x, w, o), cols launch(X, w, O, config))."""
    h, i, qkv, q, v = DIMS[shape]
    bf = dict(device="cuda", dtype=torch.bfloat16)
    norm = torch.rand(h, **bf)
    embed = torch.randn(v, h, **bf)
    tok = torch.zeros(1, dtype=torch.int64, device="cuda")
    pos = torch.zeros(1, dtype=torch.int32, device="cuda")
    s1, s16 = argmax_scratch("cuda"), mma_scratch("cuda")
    draft = torch.zeros(15, dtype=torch.int64, device="cuda")
    klen = torch.zeros(1, dtype=torch.int64, device="cuda")
    x_next = torch.zeros(h, device="cuda")
    return [
        ("qkv", "rmsnorm_gemv", qkv, h, qkv, lambda x, w, o: rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True),
         lambda x, w, o, c: cols_rmsnorm_gemv(x, w, o, norm, 1e-6, pdl=True, config=c)),
        ("o_proj", "residual", h, q, h, lambda a, w, x: gemv_residual(a, w, x, pdl=True),
         lambda a, w, x, c: cols_gemv_residual(a, w, x, pdl=True, config=c)),
        ("gate_up", "gate_up", 2 * i, h, i, lambda x, w, o: rmsnorm_gate_up_silu(x, norm, 1e-6, w, o, pdl=True),
         lambda x, w, o, c: cols_rmsnorm_gate_up_silu(x, norm, 1e-6, w, o, pdl=True, config=c)),
        ("down", "residual", h, i, h, lambda a, w, x: gemv_residual(a, w, x, pdl=True),
         lambda a, w, x, c: cols_gemv_residual(a, w, x, pdl=True, config=c)),
        ("lm_head", "lm_head", v, h, v, lambda x, w, o: lm_head_argmax(x, w, o, tok, pos, embed, s1, norm, 1e-6, pdl=True),
         lambda x, w, o, c: cols_lm_head_argmax(x, w, o, tok, pos, embed, s16, norm, 1e-6, draft=draft, klen=klen,
                                                x_next=x_next, pdl=True, config=c)),
    ]


def effective(k: int, cfg):
    """The CUDA-core config as the kernel builds it: U at most a lane's chunks per row (kernels.cols_gemv.source)."""
    return replace(cfg, U=max(1, min(cfg.U, lane_chunks(k, cfg.WK))))


def source_from(csrc: Path, name: str = "cols_gemv.cu") -> str:
    """kernels._cuda_rtc.load_source's text of csrc/name from another folder (its includes from there too)."""
    return "".join(source_from(csrc, line.split('"')[1]) if line.startswith('#include "') else line
                   for line in (csrc / name).read_text().splitlines(keepends=True))


def against(spec, variants: dict, counts: list[int], rounds: int) -> None:
    """One launch's default config per column count, compiled from each variant's cols_gemv.cu text (None: this
    tree's; Config.source): each variant's best us over `rounds` in turn, and whether every variant's outputs equal
    the first's bit for bit."""
    name, mode, n, k, out_n, _, cols = spec
    ws = copies(lambda: torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, n * k * 2)
    best = {v: [float("inf")] * len(counts) for v in variants}
    same = []
    for i, kc in enumerate(counts):
        cfg = config_for(mode, out_n, k, kc)
        X, O0 = torch.randn(kc, k, device="cuda"), torch.randn(kc, out_n, device="cuda")
        outs = []
        for text in variants.values():
            O = O0.clone()
            cols(X, ws[0], O, replace(cfg, source=text))
            outs.append(O)
        same.append(all(torch.equal(outs[0], o) for o in outs[1:]))
        for _ in range(rounds):
            for v, text in variants.items():
                O, c = O0.clone(), replace(cfg, source=text)
                best[v][i] = min(best[v][i], in_graph_us(lambda w: cols(X, w, O, c), ws))
    for v in variants:
        print(f"| {name} | {v} | " + " | ".join(f"{u:.2f}" for u in best[v]) + " |", flush=True)
    first, last = list(variants)[0], list(variants)[-1]
    print(f"| {name} | {last} / {first} | " + " | ".join(f"{b / a:.3f}" for a, b in zip(best[first], best[last]))
          + " |", flush=True)
    print(f"| {name} | same bits | " + " | ".join("yes" if s else "NO" for s in same) + " |", flush=True)


@torch.inference_mode()
def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="smollm2-135m", choices=list(DIMS))
    p.add_argument("--sweep", action="store_true", help="also other (R, WK, NW) configs")
    p.add_argument("--same-bits", action="store_true",
                   help="the CUDA-core configs that give the default's bits (kernels.cols_gemv.bits_key): R, U, CG, "
                        "and NW where the mode has no norm")
    p.add_argument("--only", default="", help="comma-separated launches (default: all)")
    p.add_argument("--columns", default="1,2,4,8", help="column counts to time (the default config: the largest's)")
    p.add_argument("--against", type=Path, help="a kernels/csrc folder: its cols_gemv.cu (before) vs this tree's")
    p.add_argument("--rounds", type=int, default=3, help="--against: rounds in turn (the best of each)")
    args = p.parse_args()
    if args.against and not (args.against / "cols_gemv.cu").is_file():
        p.error(f"--against {args.against}: no cols_gemv.cu there (a kernels/csrc folder, e.g. .before/kernels/csrc)")
    counts = [int(c) for c in args.columns.split(",")]
    print(f"\n{args.shape}, bf16, {torch.cuda.get_device_name()}: us per launch, cold weights, PDL on")
    if args.against:
        variants = {"before": source_from(args.against), "now": None}
        print("| launch | variant | " + " | ".join(f"n={c}" for c in counts) + " |")
        print("|---|---|" + "---:|" * len(counts))
        for spec in specs(args.shape):
            if not args.only or spec[0] in args.only.split(","):
                against(spec, variants, counts, args.rounds)
        return
    print("| launch | variant | " + " | ".join(f"n={c}" for c in counts) + f" | n={counts[-1]} / n={counts[0]} |")
    print("|---|---|" + "---:|" * (len(counts) + 1))
    for name, mode, n, k, out_n, one, cols in specs(args.shape):
        if args.only and name not in args.only.split(","):
            continue
        ws = copies(lambda: torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, n * k * 2)
        x, o = torch.randn(k, device="cuda"), torch.zeros(out_n, device="cuda")
        print(f"| {name} | one-column Triton | {in_graph_us(lambda w: one(x, w, o), ws):.2f} |" + " |" * len(counts),
              flush=True)
        default = config_for(mode, out_n, k, max(counts))
        configs = [default] + ([replace(default, R=r, WK=wk, NW=nw) for r, wk, nw in SWEEP[mode]]
                               + [replace(default, CG=cg) for cg in (1, 2, 4)] if args.sweep else [])
        if args.same_bits and mode != "lm_head":
            seen = {effective(k, c) for c in configs}  # U past a lane's chunks per row builds the same kernel
            for c in (replace(default, R=r, U=u, CG=cg, NW=nw) for r in (1, 2, 4, 8) for u in (2, 4, 8)
                      for cg in (1, 2, 4, 8, 16) for nw in (4, 8)):
                if c.NW % c.WK == 0 and bits_key(mode, c) == bits_key(mode, default) and effective(k, c) not in seen:
                    seen.add(effective(k, c))
                    configs.append(c)
        if mma_fits(k):
            mma = mma_config_for(mode, out_n, k)
            configs += [mma] + ([replace(mma, R=r, WK=wk, NW=nw, U=u, SK=sk) for r, wk, nw, u, sk in
                                 MMA_SWEEP["lm_head" if mode == "lm_head" else "other"]
                                 if mma_fits(k, sk) and (r, wk, nw, u, sk) != (mma.R, mma.WK, mma.NW, mma.U, mma.SK)]
                                if args.sweep else [])
        for cfg in configs:
            us = []
            try:
                for kc in counts:
                    X, O = torch.randn(kc, k, device="cuda"), torch.zeros(kc, out_n, device="cuda")
                    us.append(in_graph_us(lambda w: cols(X, w, O, cfg), ws))
            except Exception as e:  # a config the kernel does not build or launch (registers, shared memory)
                print(f"| {name} | {cfg} | failed: {type(e).__name__}: {str(e)[:80]} |", flush=True)
                continue
            tag = (f"{'mma' if cfg.mma else 'cols'} R{cfg.R} WK{cfg.WK} NW{cfg.NW} U{cfg.U}"
                   + (f" SK{cfg.SK}" if cfg.mma else f" CG{cfg.CG}" if cfg.CG < 16 else "")
                   + (" default" if cfg == default else ""))
            print(f"| {name} | {tag} | " + " | ".join(f"{u:.2f}" for u in us) + f" | {us[-1] / us[0]:.2f}x |",
                  flush=True)
        del ws
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
