#!/usr/bin/env bash
# One GPU: the speculating run's ring-fed down_proj (kernels.stream_gemv's residual_ring; issue 25, nineteenth
# session). TESTS=1 (default): the streamed kernels' gpu tests named by KTESTS (pytest -k; default the ring-fed
# ones: every token the bits of its one-token launch; "not nothing": all, with the fused reduction's), the
# speculative gpu tests of the overlap family (verify columns = plain steps bit for bit) and the fast path's CUDA-GEMV
# tests. ALL=1: `lab.probe_stream_tokens` on every GEMV of it, this tree. Then for each tree of TREES (before =
# $BEFORE, `git archive <rev> inference kernels lab` plus this tree's probe; now = this one; variant = .variant, a
# trial copy): the probe on the GEMVs named by ONLY (default "down ring", comma-separated prefixes) at the row's
# down_proj budget, PTOK tokens a launch; then ROUNDS times, the trees in turn: `inference.bench --workload verify`
# on the 1.5B shape, overlap family. Random weights, ctx 512.
# Usage: OUT=... BUDGET=560 [TESTS=0] [KTESTS=...] [ALL=1] [ROUNDS=2] [TREES="before now variant"] [ONLY=...] [PTOK=1,8]
#        [PATCHES="name:field=value ..."]
#        bash scripts/gpu/s19.sh   logs: $OUT/s19/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s19
export PYTHONFAULTHANDLER=1
variant=(env -C "$PWD/.variant" PYTHONPATH="$PWD/.variant")
VERIFY=(inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 --families overlap)
T=(python3 -m pytest -q -x -p no:randomly -p no:cacheprovider -o addopts="" -o faulthandler_timeout=120)
if [ "${TESTS:-1}" = 1 ]; then
  step kernel-tests 200 "${now[@]}" "${T[@]}" -m gpu tests/kernels/test_stream_gemv.py tests/kernels/test_fused_reduce.py \
    -k "${KTESTS:-ring}"
  step spec-tests 200 "${now[@]}" "${T[@]}" tests/inference/test_speculative_gpu.py -k overlap
  step fast-tests 90 "${now[@]}" "${T[@]}" tests/inference/test_fast_path.py -k cuda_gemvs
fi
[ "${ALL:-0}" = 1 ] && step probe-all 150 "${now[@]}" python3 -m lab.probe_stream_tokens --ring-budgets 225280 \
  --tokens "${PTOK:-1,2,4,8}"
TREES=${TREES-before now variant}  # "": none
for t in $TREES; do
  eval "pre=(\"\${$t[@]}\")"
  step "probe-$t" 60 "${pre[@]}" python3 -m lab.probe_stream_tokens --only "${ONLY:-down ring}" --ring-budgets 225280 \
    --tokens "${PTOK:-1,2,4,8}"
done
for r in $(seq 1 "${ROUNDS:-2}"); do
  for t in $TREES; do
    eval "pre=(\"\${$t[@]}\")"
    step "verify-$t-$r" 90 "${pre[@]}" python3 -m "${VERIFY[@]}"
  done
done
# PATCHES="name:field=value ...": then ROUNDS times, each in turn, the same verify bench with every tuning row's
# (int or bool) field set to value (a measurement, not a setting)
for r in $(seq 1 "${ROUNDS:-2}"); do
  for p in ${PATCHES:-}; do
    name=${p%%:*}; kv=${p#*:}
    step_patched "verify-$name-$r" 90 "import dataclasses, kernels.tuning as T
T.ROWS = tuple((n, dataclasses.replace(r, ${kv%%=*}=${kv#*=})) for n, r in T.ROWS)" "${VERIFY[@]}"
  done
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s19
summary
for t in $TREES; do echo "== probe-$t"; grep -E "^\| [a-z]" "$LOG/probe-$t.log"; done
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f" .log)"; grep -E "^\| overlap|default kernels" "$f"; done
true
