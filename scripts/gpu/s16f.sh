#!/usr/bin/env bash
# Sixteenth session, one GPU: the streamed FP8 GEMVs' tiles sized to a CTA's rows (kernels/fp8_stream_gemv.py plan's
# "mt": 12 for the 1.5B's down_proj, so all five slots of a row are in flight at once); the eighteenth session's
# gate/up consumer warps the same way (PROBE=stream, the former s18b.sh). TESTS=1 (default): the streamed FP8 kernel
# tests and the FP8 fast path's gpu tests. Then per launch: PROBE=cuda (default) each FP8 GEMV before ($BEFORE =
# `git archive <rev> inference lab kernels`) and now (lab.probe_fp8_cuda --quick), PROBE=stream the streamed gate/up's
# variants now (lab.probe_fp8_stream --ops gate_up); the FP8 step before / now ROUNDS times in turn
# (lab.probe_fp8_step --variants cuda), and the bench (FP8 and bf16 in one call) on the tree as it is.
# Usage: OUT=... BUDGET=540 [TESTS=0] [SHAPES=...] [PROBE=cuda|stream] [ROUNDS=2] bash scripts/gpu/s16f.sh
#   logs: $OUT/s16f/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s16f
SHAPES=${SHAPES:-qwen2.5-coder-1.5b,llama-3.2-1b}
T=(python3 -m pytest -q -x -p no:randomly -p no:cacheprovider -o addopts="")
if [ "${TESTS:-1}" = 1 ]; then
  step kernel-tests 90 "${now[@]}" "${T[@]}" -m gpu tests/kernels/test_fp8_stream_gemv.py
  step fast-tests 150 "${now[@]}" "${T[@]}" tests/inference/test_fp8_fast_path.py
fi
if [ "${PROBE:-cuda}" = stream ]; then
  step probe 60 "${now[@]}" python3 -m lab.probe_fp8_stream --shapes "$SHAPES" --ops gate_up
else
  for t in before now; do
    eval "pre=(\"\${$t[@]}\")"
    step "probe-$t" 60 "${pre[@]}" python3 -m lab.probe_fp8_cuda --shapes qwen2.5-coder-1.5b --quick
  done
fi
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in before now; do
    eval "pre=(\"\${$t[@]}\")"
    step "step-$t-$r" 90 "${pre[@]}" python3 -m lab.probe_fp8_step --shapes "$SHAPES" --variants cuda
  done
done
step bench 120 "${now[@]}" python3 -m inference.bench --shape qwen2.5-coder-1.5b --weights fp8,bf16 --tokens 256 \
  --ttft 128
tar -czf "$OUT/logs.tgz" -C "$OUT" s16f
summary
for f in "$LOG"/probe*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| .*(fp8 stream|gate_up)" "$f"; done
for f in "$LOG"/step-*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| (qwen|llama)" "$f"; done
grep -E "^\|" "$LOG/bench.log" | head -8
true
