#!/usr/bin/env bash
# Issue 25, fourteenth session: down_proj streamed with its activation fed through the ring (kernels.stream_gemv
# "residual_ring", tuning knob stream_down), one GPU, one call. TESTS=1 (default): the streamed kernels' gpu tests
# (the ring's tokens get their one-token bits at any budget), the CUDA GEMVs vs Triton in the step (stream_down
# on), the speculative gpu tests of the overlap family with and without it, lab.probe_stream_tokens (down_proj
# ring-fed at 64/100/200 KB). PROFILE=1: lab.profile_verify of the overlap family (kernel by kernel). Then
# `inference.bench --workload verify` on the 1.5B shape for the overlap family: the row as it is and each of
# VARIANTS (NAME:FIELD=VALUE,... of the row). Random weights, ctx 512. (Also the streamed LM head's tests.)
# Usage: OUT=... BUDGET=500 [TESTS=0] [KTESTS_K=pytest -k of the kernel tests] [PROFILE=1] [VARIANTS="nohead:stream_head=False down160:down_budget=163840"]
#   bash scripts/gpu/ringdown.sh
#   logs: $OUT/ringdown/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window ringdown
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONFAULTHANDLER=1
T=(python3 -m pytest -q -x -s -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=120)
if [ "${TESTS:-1}" = 1 ]; then
  step kernel-tests 150 "${T[@]}" -m gpu tests/kernels/test_stream_gemv.py tests/kernels/test_stream_lm_head.py \
    ${KTESTS_K:+-k "$KTESTS_K"}
  step fast-tests 90 "${T[@]}" tests/inference/test_fast_path.py -k cuda_gemvs
  step spec-tests 240 "${T[@]}" tests/inference/test_speculative_gpu.py -k "${SPEC_K:-overlap}"
  step probe 120 python3 -m lab.probe_stream_tokens
fi
[ "${PROFILE:-0}" = 1 ] && step profile 150 python3 -m lab.profile_verify --families overlap --widths 2,4,8
verify() {  # verify NAME [ROW FIELDS...]: the overlap family's verify costs with the H100/H200 row's fields replaced
  local name=$1; shift
  step_patched "verify-$name" 100 "from dataclasses import replace; from kernels import tuning as T
T.ROWS = ((('H200', 'H100'), replace(T.H200, ${*:-})),)" inference.bench --workload verify \
    --shape qwen2.5-coder-1.5b --context 512 --families overlap --json "$LOG/verify_$name.json"
}
verify row
for v in ${VARIANTS:-}; do verify "${v%%:*}" "${v#*:}"; done  # NAME:FIELD=VALUE,FIELD=VALUE
tar -czf "$OUT/logs.tgz" -C "$OUT" ringdown
summary
[ -f "$LOG/spec-tests.log" ] && grep -hE "verify steps|FAILED|Error|passed|failed" "$LOG/spec-tests.log" | head -12
[ -f "$LOG/probe.log" ] && grep -E "^\| (down|o_proj)" "$LOG/probe.log"
[ -f "$LOG/profile.log" ] && grep -vi warning "$LOG/profile.log" | tail -40
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| overlap|one-token" "$f"; done
true
