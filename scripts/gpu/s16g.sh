#!/usr/bin/env bash
# Sixteenth session, one GPU, after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries .gpu/b): where
# the default model's verify steps spend their time now, for the next session's work on them (issue 25). The verify
# step kernel by kernel at 2 / 4 / 8 / 16 columns (lab.profile_verify, cols family), then Nsight Compute on the
# 135M's gate/up and down_proj column GEMVs at 1 / 8 / 16 columns, each with its verify config (lab.ncu_cols).
# Usage: OUT=... BUDGET=300 bash scripts/gpu/s16g.sh   logs: $OUT/s16g/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s16g
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
step profile 120 python3 -m lab.profile_verify --model "$MODEL" --families cols --widths 2,4,8,16
for op in gate_up down; do
  step "ncu-$op" 120 ncu -k regex:cols_ --launch-skip 2 --launch-count 7 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 -m lab.ncu_cols --op "$op" --columns 1,8,16
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s16g
summary
grep -vi warning "$LOG/profile.log" | tail -12
for op in gate_up down; do
  echo "== $op"; grep -E "^  [a-z_]+cols|Duration|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Registers Per|Grid Size|Block Size" "$LOG/ncu-$op.log" | head -80
done
true
