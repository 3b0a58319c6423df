#!/usr/bin/env bash
# Eighteenth session, one GPU, issue 24: the streamed FP8 gate/up with K / 512 warps a row pair and four row pairs at
# once (kernels/fp8_stream_gemv.py's plan) in the step. TESTS=1 (default): the streamed FP8 kernel tests and the FP8
# fast path's gpu tests. Per launch (lab.probe_fp8_stream, gate/up), then before ($BEFORE = `git archive <rev>
# inference kernels lab`) and now the FP8 step twice in turn (lab.probe_fp8_step --variants cuda), and the bench
# (FP8 and bf16 in one call) of the 1.5B on the tree as it is.
# Usage: OUT=... BUDGET=560 [TESTS=0] [SHAPES=...] [ROUNDS=2] bash scripts/gpu/s18b.sh   logs: $OUT/s18b/ (+ logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s18b
SHAPES=${SHAPES:-qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b}
if [ "${TESTS:-1}" = 1 ]; then
  step kernel-tests 120 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x -m gpu tests/kernels/test_fp8_stream_gemv.py
  step fast-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x tests/inference/test_fp8_fast_path.py
fi
step probe 60 "${now[@]}" python3 -m lab.probe_fp8_stream --shapes "$SHAPES" --ops gate_up
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in before now; do
    eval "pre=(\"\${$t[@]}\")"
    step "step-$t-$r" 90 "${pre[@]}" python3 -m lab.probe_fp8_step --shapes "$SHAPES" --variants cuda
  done
done
step bench 120 "${now[@]}" python3 -m inference.bench --shape qwen2.5-coder-1.5b --weights fp8,bf16 --tokens 256 \
  --ttft 128
tar -czf "$OUT/logs.tgz" -C "$OUT" s18b
summary
sed -n '/^| shape | weight/,$p' "$LOG/probe.log"
for f in "$LOG"/step-*.log; do echo "== $(basename "$f")"; grep -E "^\| [a-z]" "$f" | grep -v "^| shape"; done
tail -6 "$LOG/bench.log"
true
