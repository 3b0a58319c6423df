#!/usr/bin/env bash
# Twelfth session, one GPU, the call after `bash scripts/gpu/model.sh stash` (carry .gpu/a): joins the default model
# (carry .gpu/b); where the GPU is an H200, the figures issues 24 and 25 state on one: the edit workload
# (speculation off and on, best of 3 per prompt), the verify bench, FP8 against bf16 on the 1.5B shape; then every
# GPU test (scripts/gpu/check.sh, within LIMIT_TESTS seconds, default 450; CHECK=0 skips it).
# Usage: OUT=... BUDGET=570 bash scripts/gpu/one12.sh   logs: $OUT/one12/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window one12
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  step edit 90 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
  step verify 60 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b
  step fp8 90 python3 -m inference.bench --shape qwen2.5-coder-1.5b --weights fp8,bf16 --tokens 256
fi
if [ "${CHECK:-1}" = 1 ]; then
  OUT="$LOG" LIMIT_TESTS=${LIMIT_TESTS:-450} bash scripts/gpu/check.sh > "$LOG/check.txt" 2>&1
  summary_lines+=("check: $(grep -E "passed|failed" "$LOG/check.txt" | tail -1)")
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" one12
summary
grep -E "^(FAILED|ERROR)" "$LOG/check.txt" | head
grep -hE "\(all\)|^\| (bfloat16|float8|fp8|cols|mma|triton)" "$LOG"/edit.log "$LOG"/verify.log "$LOG"/fp8.log 2>/dev/null
true
