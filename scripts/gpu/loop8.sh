#!/usr/bin/env bash
# Issue 25, three trees in one call: $BEFORE (`git archive <rev> inference kernels`), $MID (the same with this
# tree's attention: the window's k/v rows computed in parallel by the attention's programs) and this tree (also
# the decode loop: a probe after each turned-down draft, the verify step after plain steps launched before the
# last plain token is handed over). The attention and speculative gpu tests, the verify bench, the edit workload
# (before / mid / now, then again), lab.probe_spec_timeline on this tree.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before MID=.mid BUDGET=520 bash scripts/gpu/loop8.sh   logs: $OUT/loop8/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window loop8
MID=$(realpath "${MID:-.mid}")
mid=(env -C "$MID" PYTHONPATH="$MID${PYTHONPATH:+:$PYTHONPATH}")
step tests 200 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/kernels/test_decode_attention_cols.py \
  tests/kernels/test_decode_attention.py tests/inference/test_speculative_gpu.py
step verify-before 60 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
for r in 1 2; do
  for t in before mid now; do
    declare -n pre=$t
    step "edit-$t-$r" 60 "${pre[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
  done
done
step timeline 40 "${now[@]}" python3 -m lab.probe_spec_timeline --model "$MODEL"
tar -czf "$OUT/logs.tgz" -C "$OUT" loop8
summary
grep -hE "FAILED|Error" "$LOG/tests.log" | head -12
for f in verify-before verify-now; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in "$LOG"/edit-*.log; do echo "$(basename "$f")"; grep -E "\(all\)|rgb_to_yiq" "$f"; done
tail -22 "$LOG/timeline.log"
true
