#!/usr/bin/env bash
# The CUDA column GEMVs (kernels.cols_gemv, issue 25) on one GPU: their kernel tests, the speculative gpu tests
# on them, lab.profile_verify (triton vs cols) on the real default model in $MODEL and on the 1.5B shape, and
# the edit workload with --gemv cols (plain and speculating steps on the column GEMVs).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=420 bash scripts/gpu/cols.sh    logs: $OUT/cols/, a table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/cols; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
source scripts/gpu/lib.sh
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="")
step kernel-tests 200 "${PYTEST[@]}" tests/kernels/test_cols_gemv.py tests/kernels/test_decode_attention.py \
  tests/kernels/test_decode_attention_cols.py
step profile-model 100 python3 -m lab.profile_verify --model "$MODEL" --families triton,cols
step edit-cols 60 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --gemv cols \
  --json "$LOG/edit-cols.json"
step spec-tests 200 "${PYTEST[@]}" -s tests/inference/test_speculative_gpu.py
step profile-1.5b 100 python3 -m lab.profile_verify --shape qwen2.5-coder-1.5b --families triton,cols
summary
grep -E "FAILED|Error|error" "$LOG/kernel-tests.log" "$LOG/spec-tests.log" | head -10
grep -vE "Warning|warn" "$LOG/profile-model.log" | tail -34
grep -E "^\|" "$LOG/edit-cols.log" | tail -14
grep -E "family|^triton col" "$LOG/profile-1.5b.log"
true
