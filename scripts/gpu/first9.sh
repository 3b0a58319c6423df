#!/usr/bin/env bash
# Issue 25, ninth session, third window: the edit workload with the first token read from a pinned copy (a device
# tensor's .item() waited for the 8 plain steps launched behind it) and the bench's off rate over the tokens its
# device timer timed; the drafter's settings as patched variants of this tree (measurements, not settings):
# defaults (max_match 6, start_near), the old drafter (max_match 4, start_near off), each change alone; $BEFORE's
# tree and bench for reference; lab.probe_first_token (the first token's wait and the span against device time, the
# first read both ways); the speculative gpu tests.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=420 bash scripts/gpu/first9.sh   logs: $OUT/first9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window first9
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step probe 60 "${now[@]}" python3 -m lab.probe_first_token --model "$MODEL" --lags 8,2
step edit-now 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step_patched edit-old-drafter 70 "$(draft_cfg max_match=4 start_near=0)" inference.bench "${EDIT[@]}"
step_patched edit-m4 70 "$(draft_cfg max_match=4)" inference.bench "${EDIT[@]}"
step_patched edit-far 70 "$(draft_cfg start_near=0)" inference.bench "${EDIT[@]}"
step edit-before 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step tests 120 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -rf tests/inference/test_speculative_gpu.py
tar -czf "$OUT/logs.tgz" -C "$OUT" first9
summary
grep -E "^\||^host us" "$LOG/probe.log" | tail -8
for f in edit-now edit-old-drafter edit-m4 edit-far edit-before; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
true
