#!/usr/bin/env bash
# The streamed FP8 GEMVs on tensor cores (kernels/fp8_stream_gemv.py tc=True, tuning knob fp8_mma): their tests,
# each layer GEMV per launch ("fp8 stream tc" rows of lab.probe_fp8_cuda --quick), then the FP8 step
# (lab.probe_fp8_step): the row's streaming on CUDA cores (cuda/M) vs tensor cores (cuda/m), + 3B's down streamed
# (cuda/mk), all four weights streamed on tensor cores (cuda/smk), on three shapes; bf16 vs FP8 through the bench.
# Usage: OUT=... BUDGET=300 bash scripts/gpu/fp8tc.sh   logs: $OUT/fp8tc/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window fp8tc
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
SHAPES=qwen2.5-coder-1.5b,llama-3.2-1b,qwen2.5-coder-3b
step kernel-tests 90 python3 -m pytest "${PYTEST[@]}" -x -rfE tests/kernels/test_fp8_stream_gemv.py
step probe 60 python3 -m lab.probe_fp8_cuda --shapes $SHAPES --quick
step step-fp8 100 python3 -m lab.probe_fp8_step --shapes $SHAPES --variants cuda/M,cuda/m,cuda/mk,cuda/smk
tar -czf "$OUT/logs.tgz" -C "$OUT" fp8tc
summary
grep -h "^|" "$LOG/probe.log" | grep -E "stream" 
grep "^|" "$LOG/step-fp8.log"
true
