#!/usr/bin/env bash
# Issue 25, ninth session: no back-off after a miss (DraftConfig.max_backoff 0) with drafts turned down by the
# cost check holding the drafter on their own count (max_hold 64), against $BEFORE (this session's tree before it):
# the edit workload (best of 3 per prompt) before / now / before / now.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=300 bash scripts/gpu/hold9.sh   logs: $OUT/hold9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window hold9
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step edit-before-1 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-1 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-before-2 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-2 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
tar -czf "$OUT/logs.tgz" -C "$OUT" hold9
summary
for f in edit-before-1 edit-now-1 edit-before-2 edit-now-2; do echo "$f"; grep -E "\(all\)|^\| new" "$LOG/$f.log"; done
true
