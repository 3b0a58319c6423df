#!/usr/bin/env bash
# "No speed lost" check for issue 27 (the restructure), on one GPU: the decode bench of the three README
# shapes at ctx 512 with the tree before the restructure and the tree now, interleaved in one call, then the
# GPU tests of kernels/ and inference/ (the generic tuning fallback included). Needs the before tree:
#   mkdir -p .before && git archive 1e3231e inference kernels | tar -x -C .before
# Usage: bash scripts/gpu/restructure.sh   env: OUT (logs under $OUT/restructure), BEFORE (default .before),
# SHAPES (space-separated; default the three below), TESTS (0: benches only),
# MODEL (unused: the bench runs random-weight checkpoints of each shape). Prints a table last. ~5 min.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-out}; L=$OUT/restructure; mkdir -p "$L"; L=$(cd "$L" && pwd)
BEFORE=$(cd "${BEFORE:-.before}" 2>/dev/null && pwd) || { echo "no before tree: see the header of $0"; exit 2; }
export PYTHONUNBUFFERED=1
BASE_PATH=${PYTHONPATH:-}
read -r -a SHAPES <<< "${SHAPES:-qwen2.5-coder-1.5b qwen3-1.7b qwen2.5-coder-3b}"
ARGS=(--context 512 --tokens 512 --repeats 3 --ttft "")

bench() {  # tree shape: one bench process with that tree first on the path (python -m puts the cwd first)
  local tree=$1 shape=$2 dir
  dir=$([ "$tree" = before ] && echo "$BEFORE" || echo "$ROOT")
  (cd "$dir" && PYTHONPATH=$dir${BASE_PATH:+:$BASE_PATH} timeout 120 python3 -m inference.bench --shape "$shape" \
    "${ARGS[@]}" --json "$L/$tree-$shape.json" > "$L/$tree-$shape.log" 2>&1) || echo "bench $tree $shape failed: $L/$tree-$shape.log"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$L/gpu.txt" 2>&1
for shape in "${SHAPES[@]}"; do  # interleaved: before, after, per shape
  bench before "$shape"
  bench after "$shape"
done
left=$((300 - SECONDS - 15)); [ $left -lt 60 ] && left=60
if [ "${TESTS:-1}" = 1 ]; then
  PYTHONPATH=$ROOT${BASE_PATH:+:$BASE_PATH} timeout $left python3 -m pytest -m gpu tests/kernels tests/inference -q \
    -p no:cacheprovider -o addopts="" > "$L/gpu-tests.log" 2>&1
  echo "GPU tests (timeout ${left}s): $(tail -1 "$L/gpu-tests.log")"
  grep -E "^(FAILED|ERROR)" "$L/gpu-tests.log" | head -20
fi

python3 - "$L" "${SHAPES[@]}" <<'PY'
import json, pathlib, sys
d, shapes = pathlib.Path(sys.argv[1]), sys.argv[2:]
print(f"\n{(d / 'gpu.txt').read_text().strip().splitlines()[-1]}")
print("| shape (ctx 512, greedy) | before tok/s | after tok/s | after/before | after's tuning row |")
print("|---|---:|---:|---:|---|")
for s in shapes:
    r = {}
    for tree in ("before", "after"):
        f = d / f"{tree}-{s}.json"
        r[tree] = json.loads(f.read_text()) if f.exists() else None
    run = {t: (r[t]["runs"][0] if "runs" in r[t] else r[t]) if r[t] else None for t in r}  # JSON before/after
    b, a = (run[t]["decode"][0]["tok_s"] if run[t] else None for t in ("before", "after"))
    ratio = f"{a / b:.3f}" if a and b else "-"
    row = run["after"].get("tuning", "?") if run["after"] else "-"
    print(f"| {s} | {b or 0:.1f} | {a or 0:.1f} | {ratio} | {row} |")
PY
