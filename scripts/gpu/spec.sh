#!/usr/bin/env bash
# Speculative decoding on one GPU (helper "spec", issue 25): the GPU tests of the fast path's verify
# step, the verify step's cost vs a one-token step on the 1.5B shape (random weights), and the edit
# workload (speculation off and on, same call) on the real model in $MODEL when it is set.
# Logs under $OUT/spec/; a short table last. ~3 minutes on an H100/H200.
set -u
cd "$(dirname "$0")/../.."
LOG="${OUT:-/tmp}/spec"
mkdir -p "$LOG"
timeout 150 python -m pytest -q -p no:randomly -p no:cacheprovider -s tests/inference/test_speculative_gpu.py \
    > "$LOG/gpu_tests.log" 2>&1
tests=$(tail -1 "$LOG/gpu_tests.log")
timeout 60 python -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 \
    --json "$LOG/verify_1.5b.json" > "$LOG/verify_1.5b.log" 2>&1
if [ -n "${MODEL:-}" ]; then
    timeout 120 python -m inference.bench --workload edit --model "$MODEL" --tokens 256 --repeats 2 \
        --json "$LOG/edit.json" > "$LOG/edit.log" 2>&1
fi
grep -E "verify vs decode|float32:|bf16:|reference gap" "$LOG/gpu_tests.log"
echo
echo "GPU tests: $tests"
tail -1 "$LOG/verify_1.5b.log"
[ -n "${MODEL:-}" ] && grep -E "^\||real weights|random weights" "$LOG/edit.log"
true
