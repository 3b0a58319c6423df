#!/usr/bin/env bash
# Fifteenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b and
# .before = `git archive <rev> inference kernels`): the column GEMVs' per-count configs (o_proj and the LM head past
# 8 columns) and the verify step's draft copied by its graph: their GPU tests, lab.probe_verify_host (the host's
# side of a verify step), then before ($BEFORE) and now in one call: the verify bench and the edit workload
# (speculation off and on, best of 3 per prompt) on the default model.
# Usage: OUT=... BUDGET=540 [TESTS=0] [KTESTS_K=...] [SPEC_K=...] [HOST_WIDTHS="8 16"] [AGAIN=1] bash scripts/gpu/s15d.sh
#   logs: $OUT/s15d/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s15d
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
ab_setup
if [ "${TESTS:-1}" = 1 ]; then
  step kernel-tests 120 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -m gpu tests/kernels/test_cols_gemv.py \
    ${KTESTS_K:+-k "$KTESTS_K"}
  step spec-tests 240 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x tests/inference/test_speculative_gpu.py \
    ${SPEC_K:+-k "$SPEC_K"}
fi
for w in ${HOST_WIDTHS-8 16}; do step "host-$w" 60 "${now[@]}" python3 -m lab.probe_verify_host --model "$MODEL" --width $w; done
for t in before now; do
  eval "pre=(\"\${$t[@]}\")"
  step "verify-$t" 60 "${pre[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --families cols
done
for t in before now ${AGAIN:+before now}; do
  eval "pre=(\"\${$t[@]}\")"
  step "edit-$t" 100 "${pre[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
  [ -f "$LOG/edit-$t.log" ] && cp "$LOG/edit-$t.log" "$LOG/edit-$t-$SECONDS.log"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s15d
summary
grep -hE "^\| (phase|load|replay|record|wait|result|iteration|device)|columns at" "$LOG"/host-*.log
for t in before now; do echo "== $t"; grep -hE "^\| cols" "$LOG/verify-$t.log"; done
for f in "$LOG"/edit-*-*.log; do echo "== $f"; grep -E "\(all\)" "$f"; done
true
