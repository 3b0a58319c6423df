#!/usr/bin/env bash
# Issue 25, ninth session: the edit workload on this tree (best of 3 per prompt), twice, and with the eighth
# session's drafter (max_match 4, start_near off, patched), and the verify bench: for an H200 figure when one is lent.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=300 bash scripts/gpu/h200e9.sh   logs: $OUT/h200e9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window h200e9
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step edit-now-1 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step_patched edit-old-drafter 70 "$(draft_cfg max_match=4 start_near=0)" inference.bench "${EDIT[@]}"
step edit-now-2 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
tar -czf "$OUT/logs.tgz" -C "$OUT" h200e9
summary
for f in edit-now-1 edit-old-drafter edit-now-2; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
grep -E "^\| cols" "$LOG/verify-now.log"
true
