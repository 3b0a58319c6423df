#!/usr/bin/env bash
# The verify step's attention in one launch (the window's k/v rows computed by the attention's own programs, the
# K/V rows kernel gone; issue 25), against the tree in $BEFORE (`git archive <rev> inference kernels`) in the same
# call: the attention and speculative gpu tests, the verify bench, the edit workload and plain decode on the
# default model in $MODEL, before / now; then where the edit workload's device time goes (lab.probe_spec_timeline).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=520 bash scripts/gpu/fold8.sh   logs: $OUT/fold8/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window fold8
step tests 200 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/kernels/test_decode_attention_cols.py \
  tests/kernels/test_decode_attention.py tests/inference/test_speculative_gpu.py
step verify-before 60 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step edit-before 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
step edit-now 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
step timeline 60 "${now[@]}" python3 -m lab.probe_spec_timeline --model "$MODEL" --off
step decode-before 45 "${before[@]}" python3 -m inference.bench --model "$MODEL" --tokens 256 --context 512 --ttft 128
step decode-now 45 "${now[@]}" python3 -m inference.bench --model "$MODEL" --tokens 256 --context 512 --ttft 128
tar -czf "$OUT/logs.tgz" -C "$OUT" fold8
summary
grep -hE "FAILED|Error" "$LOG/tests.log" | head -12
for f in verify-before verify-now; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in edit-before edit-now; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
for f in decode-before decode-now; do echo "$f"; grep -E "tok/s" "$LOG/$f.log" | tail -2; done
tail -30 "$LOG/timeline.log"
true
