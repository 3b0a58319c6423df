#!/usr/bin/env bash
# Fifteenth session: where the default model's speculating run spends the device's time, after
# `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b): lab.profile_edit (idle gaps of the
# edit workload, speculation on and off), lab.profile_verify of the column GEMVs (kernel by kernel), the verify bench.
# Usage: OUT=... BUDGET=300 bash scripts/gpu/s15b.sh   logs: $OUT/s15b/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s15b
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
step profile-edit 150 python3 -m lab.profile_edit --model "$MODEL"
step profile-verify 90 python3 -m lab.profile_verify --model "$MODEL" --families cols --widths 2,4,8,16
step verify 60 python3 -m inference.bench --workload verify --model "$MODEL" --families cols
tar -czf "$OUT/logs.tgz" -C "$OUT" s15b
summary
grep -vi warn "$LOG/profile-edit.log" | tail -22
grep -vi warn "$LOG/profile-verify.log" | tail -16
grep -E "^\| cols|one-token" "$LOG/verify.log"
true
