#!/usr/bin/env bash
# Issue 25, ninth session: the 135M model's layer column GEMVs at 8 and 16 columns, every launch config that keeps
# a column's bits (kernels.cols_gemv.bits_key), to pick the 16-column verify step's launch shapes.
# Usage: OUT=... BUDGET=200 bash scripts/gpu/cols9.sh   logs: $OUT/cols9/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window cols9
step sweep 180 "${now[@]}" python3 -m lab.probe_cols_gemv --same-bits --columns 8,16 --only qkv,o_proj,gate_up,down
summary
grep -E "^\| (qkv|o_proj|gate_up|down)" "$LOG/sweep.log"
true
