#!/usr/bin/env bash
# Issue 28, thirteenth session: where a tensor-parallel rank's step goes, kernel by kernel, on one GPU
# (`python -m lab.profile_step --tp N`: rank 0's shard alone, no reductions) against the whole model's step; with
# PATCHES="gate_up_budget=98304 ..." the same again at those values of int or bool knobs of kernels/tuning.py's row
# (patched in this copy of the tree, put back after: measurements, not settings).
# RANKS="fused flag" (on as many GPUs as TPS asks): the tensor-parallel engine itself with each reduction, rank 0's
# kernels profiled (`--ranks --reduce R`) instead of the rank alone.
# Usage: OUT=... BUDGET=300 [SHAPES="..."] [TPS="1 2 4"] [RANKS=...] [PATCHES=...] bash scripts/gpu/rankprof.sh
# logs: $OUT/rankprof/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
tp_window rankprof
profile() {  # profile SUFFIX
  for shape in ${SHAPES:-qwen2.5-coder-1.5b qwen2.5-coder-3b}; do
    for tp in ${TPS:-1 2 4}; do
      if [ -n "${RANKS:-}" ] && [ "$tp" -gt 1 ]; then
        for r in $RANKS; do
          step "prof-$shape-tp$tp-$r$1" 120 python3 -m lab.profile_step "$shape" --tp "$tp" --ranks --reduce "$r" --no-floor
        done
      else
        step "prof-$shape-tp$tp$1" 90 python3 -m lab.profile_step "$shape" --tp "$tp" --no-floor
      fi
    done
  done
}
profile ""
for patch in ${PATCHES:-}; do
  field=${patch%%=*}; value=${patch#*=}
  cp kernels/tuning.py /tmp/tuning.py.orig
  sed -i -E "s/$field: (int|bool) = knob\([^,]*,/$field: \1 = knob($value,/" kernels/tuning.py
  grep -qE "$field: (int|bool) = knob\($value," kernels/tuning.py && profile "-$field-$value"
  cp /tmp/tuning.py.orig kernels/tuning.py
done
summary
tar -czf "$OUT/logs.tgz" -C "$OUT" rankprof
for f in "$LOG"/prof-*.log; do echo "== $(basename "$f" .log)"; grep -A16 "^\[" "$f" | grep -v "^  kernel"; done
true
