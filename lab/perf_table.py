"""README's Performance tables from the JSON files of one `bash scripts/gpu/table.sh` call.

    python -m lab.perf_table DIR

DIR holds `bench-<name>.json` (inference.bench --json, one per shape or model, each with its bf16 and fp8 runs),
optionally `edit.json` (--workload edit) and `verify.json` (--workload verify). Prints markdown: decode rates
by context, MBU and TTFT per model and weight format; FP8 over bf16; the edit workload and the verify step.
Reads figures, never makes them up: a cell whose figure is missing prints "-".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _rate(run: dict, context: int) -> str:
    row = next((r for r in run["decode"] if r["context"] == context), None)
    return f"{row['tok_s']:,.0f}" if row else "-"


def decode_table(benches: dict[str, dict]) -> list[str]:
    """One row per model and weight format: tok/s at each context, MBU and the split at the first, sampled, TTFT."""
    contexts = sorted({r["context"] for b in benches.values() for run in b["runs"] for r in run["decode"]})
    ttfts = sorted({int(n) for b in benches.values() for run in b["runs"] for n in run["ttft_ms"]})
    gpus = sorted({b["gpu"] for b in benches.values()})
    out = [f"GPU: {', '.join(gpus)}; copy bandwidth "
           + ", ".join(f"{b['copy_bandwidth_GBs']:,.0f}" for b in benches.values()) + " GB/s (per bench call)", "",
           "| model | weights | " + " | ".join(f"tok/s @ {c}" for c in contexts)
           + f" | MBU @ {contexts[0]} | read / rest @ {contexts[0]}, ms | sampled @ {contexts[0]} | "
           + " | ".join(f"TTFT {n}" for n in ttfts) + " |",
           "|---|---|" + "---:|" * (len(contexts) + 3 + len(ttfts))]
    for name, b in benches.items():
        label = f"{name} ({'random weights' if b['weights'] == 'random weights' else 'real weights'})"
        for run in b["runs"]:
            first = run["decode"][0]
            out.append(f"| {label} | {run['weights']} | " + " | ".join(_rate(run, c) for c in contexts)
                       + f" | {100 * first['mbu']:.0f}% | {first['read_ms']:.3f} / {first['rest_ms']:.3f} | "
                       f"{run['sampled_decode']['tok_s']:,.0f} | "
                       + " | ".join(f"{run['ttft_ms'][str(n)]:.1f} ms" if str(n) in run["ttft_ms"] else "-"
                                    for n in ttfts) + " |")
    return out


def ratio_lines(benches: dict[str, dict]) -> list[str]:
    """FP8 / bf16 at the first context, per model measured in both."""
    out = []
    for name, b in benches.items():
        by = {run["weights"]: run["decode"][0]["tok_s"] for run in b["runs"]}
        if "fp8" in by and "bfloat16" in by:
            out.append(f"{name}: fp8 / bf16 {by['fp8'] / by['bfloat16']:.2f}x")
    return out


def edit_table(edit: dict) -> list[str]:
    out = ["| workload (greedy, real weights) | tokens | off tok/s | on tok/s | on / off | accepted per verify | "
           "outputs identical |", "|---|---:|---:|---:|---:|---:|:-:|"]
    for name, r in edit.items():
        tokens = sum(row["on"]["tokens"] for row in r["rows"])
        out.append(f"| {name} ({len(r['rows'])} prompts) | {tokens} | {r['off_tok_s']:,.0f} | {r['on_tok_s']:,.0f} | "
                   f"{r['on_tok_s'] / r['off_tok_s']:.2f}x | {r['accepted_per_verify']:.2f} | "
                   f"{'yes' if r['identical'] else 'NO'} |")
    return out


def verify_lines(verify: dict) -> list[str]:
    out = [f"default one-token step {verify['default_step_us']:.1f} us ({verify['default_kernels']})"]
    for family, f in verify.items():
        if isinstance(f, dict):
            for k, x in f.items():
                if isinstance(x, dict):
                    out.append(f"{family}: verify {k} tokens {x['verify_us']:.1f} us = "
                               f"{x['verify_us'] / verify['default_step_us']:.2f}x the default step "
                               f"({x['ratio']:.2f}x its own one-token step, {f['step_us']:.1f} us)")
    return out


def _order(item) -> tuple:
    """Real weights first, then by bytes read a token (the first run's)."""
    b = item[1]
    return b["weights"] == "random weights", b["runs"][0]["decode"][0]["bytes_per_token"]


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(f"usage: {__doc__.strip().splitlines()[2].strip()}\nerror: DIR must be a folder of inference.bench "
              f"JSON files, not {args[0] if args else 'nothing'!r}", file=sys.stderr)
        return 2
    d = Path(args[0])

    def read(path: Path) -> dict:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"error: {path}: not an inference.bench JSON file ({e})") from None

    benches = {p.stem.removeprefix("bench-"): read(p) for p in d.glob("bench-*.json")}
    benches = dict(sorted(benches.items(), key=_order))
    lines = decode_table(benches) + [""] + ratio_lines(benches) if benches else []
    if (d / "edit.json").exists():
        lines += ["", *edit_table(read(d / "edit.json"))]
    if (d / "verify.json").exists():
        lines += ["", *verify_lines(read(d / "verify.json"))]
    print("\n".join(lines) if lines else f"no bench JSON files in {d}")
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
