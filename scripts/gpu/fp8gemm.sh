#!/usr/bin/env bash
# The FP8 prefill GEMM (kernels/fp8_gemm.py, issue 24) on one GPU: its tests and the FP8 fast path's, the 1.5B
# shape's FP8 TTFT before (the tree in $BEFORE, run from inside it) and now, the quality gate of FP8 on the
# default model in $MODEL.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=400 bash scripts/gpu/fp8gemm.sh   logs: $OUT/fp8gemm/
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/fp8gemm"); mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
BEFORE=${BEFORE:-.before}
source scripts/gpu/lib.sh
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="")
BENCH=(-m inference.bench --shape qwen2.5-coder-1.5b --weights fp8 --tokens 64 --repeats 1 --ttft 128,1024,4096)
BEFORE_RUN=(env -C "$BEFORE" PYTHONPATH="$(realpath "$BEFORE"):${PYTHONPATH#*:}" python3)
step tests 150 "${PYTEST[@]}" tests/kernels/test_fp8_gemm.py tests/inference/test_fp8_fast_path.py
step ttft-before 90 "${BEFORE_RUN[@]}" "${BENCH[@]}" --json "$LOG/ttft-before.json"
step ttft-now 90 python3 "${BENCH[@]}" --json "$LOG/ttft-now.json"
[ -f "$MODEL" ] && step quality-fp8 90 python3 -m inference.quality --model "$MODEL" --device cuda --weights fp8 \
  --json "$LOG/quality-fp8.json"
tar -czf "$OUT/logs.tgz" -C "$OUT" fp8gemm
summary
grep -hE "FAILED" "$LOG/tests.log" | head
for f in ttft-before ttft-now; do echo "$f:"; grep -E "TTFT|^\| fp8" "$LOG/$f.log"; done
tail -3 "$LOG/quality-fp8.log" 2>/dev/null
true
