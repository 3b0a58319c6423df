#!/usr/bin/env bash
# Issue 25, thirteenth session: speculation on the streamed GEMVs ("overlap": kernels.stream_gemv over k tokens a
# launch in the verify step, beside the Triton attention), one GPU, one call: the streamed kernels' gpu tests,
# speculative vs plain greedy and the verify step's bits on them (tests/inference/test_speculative_gpu.py -k
# overlap), lab.probe_stream_tokens, then `inference.bench --workload verify` on the 1.5B shape (every family this
# GPU runs: verify k against its own one-token step and the default step), random weights, ctx 512.
# Usage: OUT=... BUDGET=400 bash scripts/gpu/streamverify.sh   logs: $OUT/streamverify/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window streamverify
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONFAULTHANDLER=1
T=(python3 -m pytest -q -x -s -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=120)
step kernel-tests 120 "${T[@]}" -m gpu tests/kernels/test_stream_gemv.py
step spec-tests 200 "${T[@]}" tests/inference/test_speculative_gpu.py -k "${SPEC_K:-overlap}"
step probe 90 python3 -m lab.probe_stream_tokens
step verify-1.5b 150 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 \
  --json "$LOG/verify_1.5b.json"
tar -czf "$OUT/logs.tgz" -C "$OUT" streamverify
summary
grep -hE "verify steps|FAILED|Error|passed|failed" "$LOG/spec-tests.log" | head -12
grep -E "^\|" "$LOG/probe.log"
grep -E "^\||one-token" "$LOG/verify-1.5b.log"
true
