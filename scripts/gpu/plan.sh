#!/usr/bin/env bash
# The step plan (inference/fast/plan.py, step.py) on the GPU: the plan each runner picks here (printed), that the
# runner's measured Target is the one the CPU equivalence test assumes, and the fast-path GPU tests (bf16 + FP8:
# graph vs eager vs unfused tail, CUDA vs Triton attention and GEMVs, the generic fallback) on the bound launches.
# Speed before/after the plan (a63d7fc is the last commit without it), from the repo root on this machine:
#   mkdir -p .before-plan && git archive a63d7fc inference kernels | tar -x -C .before-plan
#   BEFORE=.before-plan bash scripts/gpu/restructure.sh        (on the device; logs under $OUT/restructure)
# Usage: bash scripts/gpu/plan.sh   env: OUT (logs under $OUT/plan), MODEL (unused). Prints a table last. ~3 min.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; L=$OUT/plan; mkdir -p "$L"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$L/gpu.txt" 2>&1
timeout 60 python3 -m pytest -m gpu tests/inference/test_step_plan.py -q -s -p no:cacheprovider -o addopts="" \
  > "$L/plans.log" 2>&1
echo "plans: $(tail -1 "$L/plans.log")"
timeout 170 python3 -m pytest -m gpu tests/inference/test_fast_path.py tests/inference/test_fp8_fast_path.py -q \
  -p no:cacheprovider -o addopts="" -rfE --tb=short > "$L/fast-path.log" 2>&1
echo "fast path: $(tail -1 "$L/fast-path.log")"
grep -E "^(FAILED|ERROR)" "$L/plans.log" "$L/fast-path.log" | head -20
echo
tail -1 "$L/gpu.txt"
grep -E "^(tuning|positions|every|  [a-z_]+:)" "$L/plans.log" | head -40
