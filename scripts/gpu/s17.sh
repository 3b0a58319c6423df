#!/usr/bin/env bash
# Seventeenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b and
# .before = `git archive <rev> inference kernels lab`): kernels/csrc/cols_gemv.cu's warp sums scattered over the
# lanes (a butterfly that halves what a lane carries, the same bits) and one weight pointer per row. The column
# GEMV kernel tests, each launch before / now (bits compared, `lab.probe_cols_gemv --against`), the edit workload
# before / now ROUNDS times in turn, the default model's verify step before / now, the speculative gpu tests.
# SWEEP=1: the launch configs that keep the bits at 8 and 16 columns (`lab.probe_cols_gemv --same-bits`, the
# launches SWEEP_ONLY) last.
# Usage: OUT=... BUDGET=560 [ROUNDS=3] [SPEC=1] [TESTS=1] [SWEEP=0] bash scripts/gpu/s17.sh
#   logs: $OUT/s17/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s17
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
ab_setup
[ "${TESTS:-1}" = 1 ] && step kernel-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x tests/kernels/test_cols_gemv.py
step against 120 "${now[@]}" python3 -m lab.probe_cols_gemv --against "$BEFORE/kernels/csrc" --columns 1,8,16
for r in $(seq 1 "${ROUNDS:-3}"); do
  step "edit-before-$r" 100 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 \
    --repeats 3
  step "edit-now-$r" 100 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
done
step verify-before 60 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --families cols
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --families cols
[ "${SPEC:-1}" = 1 ] && step spec-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x \
  tests/inference/test_speculative_gpu.py -k speculative_greedy_equals_plain
[ "${SWEEP:-0}" = 1 ] && step sweep 240 "${now[@]}" python3 -m lab.probe_cols_gemv --same-bits --columns 8,16 \
  --only "${SWEEP_ONLY:-qkv,o_proj,gate_up,down}"
tar -czf "$OUT/logs.tgz" -C "$OUT" s17
summary
grep -E "^\| [a-z_]+ \| (now / before|same bits)" "$LOG/against.log"
for f in "$LOG"/edit-*.log; do echo "== $(basename "$f"): $(grep -E "\(all\)" "$f" | tr -s ' ' | tr '\n' ' ')"; done
for f in "$LOG"/verify-*.log; do echo "== $(basename "$f")"; tail -8 "$f"; done
true
