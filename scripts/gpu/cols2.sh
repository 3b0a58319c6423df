#!/usr/bin/env bash
# Follow-up of scripts/gpu/cols.sh (issue 25): the attention / speculative gpu tests after the K/V rows kernel's
# PDL, the column GEMVs per launch on the 0.5B / 0.6B / 1.5B shapes (where the row's cols_gemv_max_hidden should
# stop), the verify bench and the edit workload on the default model in $MODEL.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=400 bash scripts/gpu/cols2.sh     logs: $OUT/cols2/ + $OUT/logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/cols2"); mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
source scripts/gpu/lib.sh
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="")
step tests 150 "${PYTEST[@]}" tests/kernels/test_decode_attention_cols.py tests/inference/test_speculative_gpu.py
step verify-model 60 python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-model.json"
step edit 50 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit.json"
for s in qwen2.5-coder-0.5b qwen3-0.6b qwen2.5-coder-1.5b; do
  step "probe-$s" 60 python3 -m lab.probe_cols_gemv --shape "$s"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" cols2
summary
grep -hE "FAILED" "$LOG/tests.log" | head
grep -E "^\| cols" "$LOG/verify-model.log"
grep -E "\(all\)" "$LOG/edit.log"
for s in qwen2.5-coder-0.5b qwen3-0.6b qwen2.5-coder-1.5b; do echo "$s"; grep -E "^\| [a-z]" "$LOG/probe-$s.log"; done
true
