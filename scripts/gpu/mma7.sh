#!/usr/bin/env bash
# Tensor-core column GEMVs (kernels/csrc/cols_gemv_mma.cu, issue 25) on one GPU, against the CUDA-core ones in the
# same call: the kernel tests of both families (each column the same bits for 1..16 columns, vs the float32 twin),
# each GEMV of the 135M default model per launch at 1/2/4/8 columns (--sweep), and with the tensor-core kernel as
# the launchers' default (kernels.cols_gemv.default_config patched: a measurement, not a setting): the verify
# bench and the edit workload on the default model in $MODEL, and the speculative gpu tests (speculative greedy =
# plain greedy on these kernels).
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=500 bash scripts/gpu/mma7.sh     logs: $OUT/mma7/ + $OUT/logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window mma7
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MMA="import torch, kernels.cols_gemv as c; _d = c.default_config
c.default_config = lambda m, n, k, dt, cols=1: (c.mma_config_for(m, n, k) if dt == torch.bfloat16 and c.mma_fits(k)
                                                else _d(m, n, k, dt, cols))"
step kernel-tests 200 python3 -m pytest "${PYTEST[@]}" tests/kernels/test_cols_gemv.py
step probe 150 python3 -m lab.probe_cols_gemv --shape smollm2-135m ${SWEEP:+--sweep}
step verify-fma 60 python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-fma.json"
step_patched verify-mma 60 "$MMA" inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-mma.json"
step edit-fma 60 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-fma.json"
step_patched edit-mma 60 "$MMA" inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-mma.json"
step_patched spec-tests-mma 150 "$MMA" pytest "${PYTEST[@]}" tests/inference/test_speculative_gpu.py
tar -czf "$OUT/logs.tgz" -C "$OUT" mma7
summary
grep -hE "FAILED|Error" "$LOG/kernel-tests.log" "$LOG/spec-tests-mma.log" | head -12
grep -E "^\| " "$LOG/probe.log" | grep -v "^| launch\|---"
for f in verify-fma verify-mma; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in edit-fma edit-mma; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
true
