#!/usr/bin/env bash
# Where the speculative verify step's time goes on the real default model (issue 25): lab.profile_verify on
# the model in $MODEL (both GEMV families, the Triton family's columns per program), then the edit workload.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf bash scripts/gpu/verify_profile.sh     logs: $OUT/vprof/. ~3 min.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/vprof; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
source scripts/gpu/lib.sh
step profile-model 150 python3 -m lab.profile_verify --model "$MODEL" --groups 1,2,4,8 ${VP_ARGS:-}
step edit 60 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 \
  --json "$LOG/edit.json"
summary
cat "$LOG/profile-model.log" | grep -v Warning | tail -60
grep -E "^\|" "$LOG/edit.log" | tail -14
true
