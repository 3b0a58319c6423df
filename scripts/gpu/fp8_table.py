"""The FP8-vs-bf16 bench table of a device window's logs (scripts/gpu/fp8.sh, fp8cuda.sh): one row per weight
format of each shape's bench-SHAPE.json (`inference.bench --weights fp8,bf16 --json ...`).

    python3 scripts/gpu/fp8_table.py LOG_DIR SHAPE...
"""
import json
import sys
from pathlib import Path


def main(log: Path, shapes: list[str]) -> None:
    print("| shape | weights | tok/s | ms/token | GB read/token | MBU | read at copy bw | rest | FP8/bf16 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape in shapes:
        p = log / f"bench-{shape}.json"
        if not p.exists():
            print(f"| {shape} | (no result) | | | | | | | |")
            continue
        runs = {r["weights"]: r["decode"][0] for r in json.loads(p.read_text())["runs"]}
        ratio = runs["fp8"]["tok_s"] / runs["bfloat16"]["tok_s"] if {"fp8", "bfloat16"} <= runs.keys() else None
        for i, (w, r) in enumerate(runs.items()):
            cell = f"{ratio:.2f}x" if ratio and i == 0 else ""
            print(f"| {shape if i == 0 else ''} | {w} | {r['tok_s']:.0f} | {r['ms_per_token']:.3f} | "
                  f"{r['bytes_per_token'] / 1e9:.3f} | {100 * r['mbu']:.0f}% | {r['read_ms']:.3f} ms | "
                  f"{r['rest_ms']:.3f} ms | {cell} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
