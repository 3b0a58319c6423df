#!/usr/bin/env bash
# Issue 25, ninth session, second window: the drafter's settings one by one against $BEFORE (edit workload, best of
# 3 per prompt): now (max_match 6, no back-off after a miss, turned-down drafts hold the drafter on their own
# count), now with max_match 4, now with max_backoff 64 (patched: measurements, not settings); and why plain steps
# with 2 in flight decode slower than with 8: the timeline of plain decode through the speculative loop (a drafter
# that never drafts) with the engine's LAG patched to 8, 4 and 2 (device busy and idle per step, host tok/s).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=400 bash scripts/gpu/draft9b.sh   logs: $OUT/draft9b/
# Ran on an intermediate tree that was not committed (bench-results/h100-2026-11-26-session9/README.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window draft9b
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
step edit-before 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step_patched edit-now-m4 70 "$(draft_cfg max_match=4)" inference.bench "${EDIT[@]}"
step_patched edit-now-b64 70 "$(draft_cfg max_backoff=64)" inference.bench "${EDIT[@]}"
for L in 8 4 2; do
  step_patched plain-lag$L 40 "$(draft_cfg min_match=1048576 max_match=1048576)
import inference.engine as E; E.LAG = $L" lab.probe_spec_timeline --model "$MODEL"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" draft9b
summary
for f in edit-before edit-now edit-now-m4 edit-now-b64; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
for L in 8 4 2; do echo "lag $L"; grep -E "^smollm2, speculation|^\| plain" "$LOG/plain-lag$L.log"; done
true
