#!/usr/bin/env bash
# Issue 25, ninth session: lab.probe_first_token with the run's steps in flight from its start (start_near off):
# the first token's wait read with .item() vs from a pinned copy, 8 / 4 / 2 plain steps in flight.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=120 bash scripts/gpu/probe9.sh   logs: $OUT/probe9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window probe9
step probe 90 "${now[@]}" python3 -m lab.probe_first_token --model "$MODEL" --lags 8,4,2
summary
grep -E "^\||^host us" "$LOG/probe.log" | tail -9
true
