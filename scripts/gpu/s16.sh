#!/usr/bin/env bash
# Sixteenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b and
# .before = `git archive <rev> inference kernels`): the speculative loop's last plain token before a verify step read
# by waiting on the device (inference.engine._read_token's last_on) instead of the sleep(0) poll. Its GPU tests, then
# the edit workload (speculation off and on, best of 3 per prompt) before ($BEFORE), now, and now with the drafter
# variant $VARIANT (`inference.bench --draft`), ROUNDS times in turn on the same machine.
# Usage: OUT=... BUDGET=560 [TESTS=0] [SPEC_K=...] [ROUNDS=3] [VARIANT=lag=1] bash scripts/gpu/s16.sh
#   logs: $OUT/s16/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s16
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
ab_setup
if [ "${TESTS:-1}" = 1 ]; then
  step spec-tests 200 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x tests/inference/test_speculative_gpu.py \
    -k "${SPEC_K:-speculative_greedy_equals_plain}"
fi
VARIANT=${VARIANT-lag=1}
for r in $(seq 1 "${ROUNDS:-3}"); do
  step "edit-before-$r" 100 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 \
    --repeats 3
  step "edit-now-$r" 100 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
  [ -n "$VARIANT" ] && step "edit-variant-$r" 100 "${now[@]}" python3 -m inference.bench --workload edit \
    --model "$MODEL" --tokens 192 --repeats 3 --draft "$VARIANT"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s16
summary
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f"): $(grep -E "\(all\)" "$f" | tr -s ' ' | tr '\n' ' ')"; done
true
