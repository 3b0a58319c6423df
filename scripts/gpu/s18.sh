#!/usr/bin/env bash
# Eighteenth session, one GPU, issue 24: where the streamed FP8 GEMVs' fixed ~2 us a launch goes. The streamed FP8
# kernel tests (TESTS=1, default: the warps / mt overrides included), each gate/up and down_proj per launch with
# other consumer warps, warps per row pair and rows per tile (lab.probe_fp8_stream), then Nsight Compute on the
# 1.5B's streamed gate/up and down_proj as planned and with NCU_VARIANT's overrides (lab.ncu_fp8 --stream).
# Usage: OUT=... BUDGET=400 [TESTS=0] [SHAPES=...] [OPS=gate_up,down] [NCU=1] [NCU_VARIANT="--warps 12 --wks 3"] bash scripts/gpu/s18.sh
#   logs: $OUT/s18/ (and $OUT/logs.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s18
SHAPES=${SHAPES:-qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b}
[ "${TESTS:-1}" = 1 ] && step kernel-tests 120 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x -m gpu \
  tests/kernels/test_fp8_stream_gemv.py
step probe 200 "${now[@]}" python3 -m lab.probe_fp8_stream --shapes "$SHAPES" --ops "${OPS:-gate_up,down}"
SECTIONS=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats
  --section LaunchStats --section MemoryWorkloadAnalysis)
if [ "${NCU:-1}" = 1 ]; then
  step ncu-plan 90 "${now[@]}" ncu -k regex:fp8_stream --launch-skip 1 --launch-count 4 "${SECTIONS[@]}" \
    python3 -m lab.ncu_fp8 --stream
  # shellcheck disable=SC2086
  step ncu-variant 90 "${now[@]}" ncu -k regex:fp8_stream --launch-skip 1 --launch-count 4 "${SECTIONS[@]}" \
    python3 -m lab.ncu_fp8 --stream ${NCU_VARIANT:---warps 12 --wks 3}
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" s18
summary
sed -n '/^| shape/,$p' "$LOG/probe.log"
for f in "$LOG"/ncu-*.log; do
  echo "== $(basename "$f")"
  grep -E "fp8_stream|Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|No Eligible|Warp Cycles Per Issued" "$f" | head -40
done
true
