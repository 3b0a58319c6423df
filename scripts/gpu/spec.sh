#!/usr/bin/env bash
# Speculative decoding on one GPU (helper "spec", issue 25): the k-column verify kernels against the one-column
# decode kernels bit for bit (tests/kernels/test_cols_kernels.py on the real shapes), speculative vs plain greedy
# on the Triton kernels (random weights, tests/inference/test_speculative_gpu.py), the k-token verify step's cost
# vs a one-token step on the 1.5B shape (k = 2, 4, 8), and the edit workload on the real model in $MODEL
# (speculation off / on / plain on the speculation's kernels, one call; "identical" = on vs plain), and
# lab.probe_cols_kernels (each k-column kernel vs its one-column twin, us per launch).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf bash scripts/gpu/spec.sh      logs: $OUT/spec/, a table last. ~4 min.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/spec; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
source scripts/gpu/lib.sh
# the 1.5B's column kernels compile in the first step; the later ones find them in Triton's cache
step verify-1.5b 60 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 \
  --json "$LOG/verify_1.5b.json"
step gpu-tests 70 python3 -m pytest -q -s -p no:cacheprovider -p no:randomly -o addopts="" \
  tests/inference/test_speculative_gpu.py
if [ -f "$MODEL" ]; then
  step edit 50 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 \
    --json "$LOG/edit.json"
else
  echo "no model at $MODEL: edit workload skipped"
fi
step probe 60 python3 -m lab.probe_cols_kernels --shape qwen2.5-coder-1.5b
step kernel-tests 55 python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="" \
  tests/kernels/test_mma_cols.py tests/kernels/test_decode_attention_cols.py
echo
grep -hE "verify steps|FAILED|Error" "$LOG/gpu-tests.log" | head -12
grep -hE "FAILED" "$LOG/kernel-tests.log" | head -8
echo
summary
echo
grep -E "^\||kernels|context" "$LOG/verify-1.5b.log" | tail -9
[ -f "$LOG/edit.log" ] && grep -E "^\||real weights|random weights|^off" "$LOG/edit.log"
grep -E "^\||context" "$LOG/probe.log" | tail -34
true
