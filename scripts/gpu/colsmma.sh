#!/usr/bin/env bash
# Tensor-core verify GEMVs (helper "colsmma", issue 25): the MMA GEMVs' gpu tests (each column the same bits for
# 1..16 columns, vs the float32 twin), speculative = plain greedy on the speculation's kernels
# (tests/inference/test_speculative_gpu.py), the k-token verify step vs a one-token step on the 1.5B shape, and
# lab.probe_cols_kernels (us per launch, 1/2/4/8 columns vs the one-column Triton kernels; --sweep: other launch
# configs incl. split-K for down and gate/up).
# Usage: OUT=... bash scripts/gpu/colsmma.sh      logs: $OUT/colsmma/, a table last. <= 150 s.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/colsmma; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
# the verify bench (both GEMV families of the speculation) compiles the PDL variants first
step verify-1.5b 40 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 \
  --json "$LOG/verify_1.5b.json"
step gpu-tests 50 python3 -m pytest -q -s -p no:cacheprovider -p no:randomly -o addopts="" \
  tests/inference/test_speculative_gpu.py
step sweep 25 python3 -m lab.probe_cols_kernels --shape qwen2.5-coder-1.5b --sweep --only gate_up,down
step kernel-tests 30 python3 -m pytest -q -x -p no:cacheprovider -p no:randomly -o addopts="" \
  tests/kernels/test_mma_cols.py
echo
grep -hE "verify steps|FAILED|Error|error" "$LOG/gpu-tests.log" "$LOG/kernel-tests.log" | head -16
echo
summary
echo
grep -E "^\| (down|gate_up)" "$LOG/sweep.log" | tail -32
grep -E "^\||kernels|context" "$LOG/verify-1.5b.log" | tail -10
true
