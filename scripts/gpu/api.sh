#!/usr/bin/env bash
# OpenAI-compatible API's device side (helper "api", issue 23): the GPU test of per-token logprobs
# on the fast path (vs a float32 reference forward), and the decode speed with logprobs off / top 0
# / 5 / 20 on the real model in $MODEL when it is set. Logs under $OUT/api/; a short table last.
# ~2 minutes on an H100/H200.
set -u
cd "$(dirname "$0")/../.."
LOG="${OUT:-/tmp}/api"
mkdir -p "$LOG"
timeout 150 python -m pytest -q -p no:randomly -p no:cacheprovider -m gpu tests/inference/test_logprobs.py \
    > "$LOG/gpu_tests.log" 2>&1
if [ -n "${MODEL:-}" ]; then
    PYTHONPATH=".:${PYTHONPATH:-}" timeout 90 python scripts/gpu/api_logprobs.py "$MODEL" > "$LOG/logprobs_speed.log" 2>&1
fi
echo "GPU logprobs tests: $(tail -1 "$LOG/gpu_tests.log")"
[ -n "${MODEL:-}" ] && grep -E "^\||^model" "$LOG/logprobs_speed.log"
true
