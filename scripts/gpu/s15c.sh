#!/usr/bin/env bash
# Fifteenth session: the column GEMVs' launch configs at 8 and 16 columns on the 135M model's shapes (the verify
# steps of its speculating runs): every config with the default's bits (R 1-8, U 2-8, CG 1-16, NW where the mode
# has no norm), and the tensor-core LM head's sweep. Random weights; no model needed.
# Usage: OUT=... bash scripts/gpu/s15c.sh   logs: $OUT/s15c/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s15c
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
step same-bits 300 python3 -m lab.probe_cols_gemv --same-bits --columns 8,16 --only qkv,o_proj,gate_up,down
step head 120 python3 -m lab.probe_cols_gemv --sweep --columns 8,16 --only lm_head
summary
true
