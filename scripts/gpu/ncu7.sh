#!/usr/bin/env bash
# Nsight Compute on the 135M down_proj as a column GEMV, CUDA cores vs tensor cores (lab/ncu_cols.py), 1 and 8
# columns: why the tensor-core kernel's one-column launch costs more (issue 25).
# Usage: OUT=... bash scripts/gpu/ncu7.sh     logs: $OUT/ncu7/{fma,mma}.txt
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/ncu7"); mkdir -p "$LOG"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
for fam in fma mma; do
  timeout 120 ncu -k regex:cols_gemv_residual --launch-skip 2 --launch-count 2 --section SpeedOfLight \
    --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis python3 -m lab.ncu_cols $([ $fam = mma ] && echo --mma) > "$LOG/$fam.txt" 2>&1
  grep -E "Duration|Registers|Block Size|Grid Size|Achieved Occupancy|Stall|Issued Warp|Memory Throughput|Dynamic Shared|Warp Cycles Per Issued" "$LOG/$fam.txt" | head -40
done
