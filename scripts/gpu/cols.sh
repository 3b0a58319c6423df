#!/usr/bin/env bash
# The CUDA column GEMVs (kernels.cols_gemv, issue 25) on one GPU: their kernel tests (+ the attention's and the
# step plan's gpu tests), the speculative gpu tests, lab.profile_verify (triton vs cols) on the real default
# model in $MODEL, the edit workload and the plain decode bench on it before (the tree in $BEFORE, if present)
# and now, the real-weights quality gate of the now default kernels, and the 1.5B verify bench.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=560 bash scripts/gpu/cols.sh   logs: $OUT/cols/.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/cols; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
BEFORE=${BEFORE:-.before}
source scripts/gpu/lib.sh
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="")
BENCH=(python3 -m inference.bench --model "$MODEL" --context 512 --contexts 4096 --ttft 128,1024 --tokens 256)
step kernel-tests 150 "${PYTEST[@]}" tests/kernels/test_cols_gemv.py tests/kernels/test_decode_attention_cols.py \
  tests/inference/test_step_plan.py
step edit 60 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit.json"
step profile-model 80 python3 -m lab.profile_verify --model "$MODEL" --families triton,cols
if [ -d "$BEFORE/inference" ]; then
  step decode-before 60 env PYTHONPATH="$PWD/$BEFORE:${PYTHONPATH#*:}" "${BENCH[@]}" --json "$LOG/decode-before.json"
fi
step decode-now 60 "${BENCH[@]}" --json "$LOG/decode-now.json"
step quality 90 python3 -m inference.quality --model "$MODEL" --device cuda --json "$LOG/quality.json"
step spec-tests 150 "${PYTEST[@]}" -s tests/inference/test_speculative_gpu.py
step verify-1.5b 80 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --json "$LOG/verify-1.5b.json"
summary
grep -hE "FAILED|Error" "$LOG/kernel-tests.log" "$LOG/spec-tests.log" | head -10
grep -vE "Warning|warn" "$LOG/profile-model.log" | grep -E "family|cols_|_attn|lm_head" | head -20
grep -E "^\|" "$LOG/edit.log" | tail -14
for f in decode-before decode-now; do [ -f "$LOG/$f.log" ] && { echo "$f:"; grep -E "^\| bf16|TTFT" "$LOG/$f.log"; }; done
tail -8 "$LOG/quality.log"
grep -E "^\|" "$LOG/verify-1.5b.log" | tail -10
true
