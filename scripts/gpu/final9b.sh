#!/usr/bin/env bash
# Issue 25, ninth session's end state in one call: the edit workload (best of 3 per prompt) on this tree twice, with
# the old drafter (max_match 4, start_near off: the honest baseline, this tree's engine and bench), with
# DraftConfig.lag 1 and max_backoff 0 (patched variants: measurements, not settings), $BEFORE's tree and bench once
# (the figure the old bench reported); the verify bench.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=400 bash scripts/gpu/final9b.sh  logs: $OUT/final9b/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window final9b
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step edit-now-1 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step_patched edit-old-drafter 70 "$(draft_cfg max_match=4 start_near=0)" inference.bench "${EDIT[@]}"
step_patched edit-lag1 70 "$(draft_cfg lag=1)" inference.bench "${EDIT[@]}"
step_patched edit-b0 70 "$(draft_cfg max_backoff=0)" inference.bench "${EDIT[@]}"
step edit-now-2 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-before 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
tar -czf "$OUT/logs.tgz" -C "$OUT" final9b
summary
for f in edit-now-1 edit-old-drafter edit-lag1 edit-b0 edit-now-2 edit-before; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
grep -E "^\| cols" "$LOG/verify-now.log"
true
