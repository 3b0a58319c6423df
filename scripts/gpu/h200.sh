#!/usr/bin/env bash
# One short H200 window (the session had ~4.5 min of device time): FP8 and bf16 in one bench call per
# shape (random weights, batch 1, ctx 512), as many shapes as fit in BUDGET seconds; a table last.
# env: OUT, SHAPES, BUDGET
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}/h200; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
SHAPES=${SHAPES:-qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b}
BUDGET=${BUDGET:-170}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
for s in $SHAPES; do
  left=$((BUDGET - SECONDS)); [ "$left" -lt 30 ] && { echo "skip $s (budget)"; continue; }
  t0=$SECONDS
  timeout -s INT -k 5 "$((left < 75 ? left : 75))" python3 -m inference.bench --shape "$s" --weights fp8,bf16 \
    --tokens 256 --json "$OUT/bench-$s.json" > "$OUT/bench-$s.log" 2>&1
  echo "=== $s rc=$? $((SECONDS - t0))s"; tail -6 "$OUT/bench-$s.log"
done
