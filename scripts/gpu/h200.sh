#!/usr/bin/env bash
# One short H200 window (session 4 had ~4.5 min of device time): FP8 and bf16 in one bench call per shape
# (random weights, batch 1, ctx 512, 256 tokens), as many shapes as fit in BUDGET seconds; a table last.
# Usage: OUT=... BUDGET=165 bash scripts/gpu/h200.sh      logs: $OUT/h200/
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/h200; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
SHAPES=${SHAPES:-qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b}
BUDGET=${BUDGET:-170}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$LOG/gpu.txt" 2>&1
cat "$LOG/gpu.txt"
for s in $SHAPES; do
  step "bench-$s" 75 python3 -m inference.bench --shape "$s" --weights fp8,bf16 --tokens 256 --json "$LOG/bench-$s.json"
done
summary
python3 scripts/gpu/fp8_table.py "$LOG" $SHAPES
