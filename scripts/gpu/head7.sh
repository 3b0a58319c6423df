#!/usr/bin/env bash
# The column LM head on tensor cores (kernels.cols_gemv.default_config, issue 25) against the CUDA-core one in the
# same call (default_config patched back to config_for: a measurement, not a setting): the kernel tests, the
# speculative gpu tests, the verify bench and the edit workload on the default model in $MODEL; and Nsight
# Compute's source counters of the tensor-core kernel on the 135M down_proj (lab/ncu_cols.py --mma).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=500 bash scripts/gpu/head7.sh     logs: $OUT/head7/ + $OUT/logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window head7
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
FMA="import kernels.cols_gemv as c; c.default_config = lambda m, n, k, dt, cols=1: c.config_for(m, n, k, cols)"
step kernel-tests 120 python3 -m pytest "${PYTEST[@]}" tests/kernels/test_cols_gemv.py
step spec-tests 150 python3 -m pytest "${PYTEST[@]}" tests/inference/test_speculative_gpu.py
step_patched verify-fma 60 "$FMA" inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-fma.json"
step verify-now 60 python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-now.json"
step_patched edit-fma 60 "$FMA" inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-fma.json"
step edit-now 60 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-now.json"
step_patched edit-fma-again 60 "$FMA" inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
step ncu-mma 90 ncu -k regex:cols_gemv_residual --launch-skip 2 --launch-count 1 --section SourceCounters \
  --section InstructionStats --section WarpStateStats python3 -m lab.ncu_cols --mma
tar -czf "$OUT/logs.tgz" -C "$OUT" head7
summary
grep -hE "FAILED|Error" "$LOG/kernel-tests.log" "$LOG/spec-tests.log" | head -12
for f in verify-fma verify-now; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in edit-fma edit-now edit-fma-again; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
grep -iE "Executed Instructions|Issued Instructions|stall|Warp Cycles" "$LOG/ncu-mma.log" | head -20
true
