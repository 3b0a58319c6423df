#!/usr/bin/env bash
# Issue 25, ninth session: the default model's greedy outputs of the edit prompts on the GPU fast path (for the
# drafter's offline replay, lab.probe_drafter --load) and where the edit workload's time goes (timeline).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=300 bash scripts/gpu/runs9.sh   logs: $OUT/runs9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window runs9
step runs 120 "${now[@]}" python3 -m lab.probe_drafter --device cuda --model "$MODEL" --save "$LOG/runs.json" \
  --configs "" --lags 2 --bucket-costs 1.11,1.22,1.60,2.56
step timeline 90 "${now[@]}" python3 -m lab.probe_spec_timeline --model "$MODEL"
summary
tail -22 "$LOG/timeline.log"
tail -4 "$LOG/runs.log"
true
