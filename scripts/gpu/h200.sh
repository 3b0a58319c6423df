#!/usr/bin/env bash
# One short H200 window: FP8 and bf16 in one bench call per shape (random weights, batch 1, ctx 512, 256 tokens),
# then with TESTS=1 the FP8 gpu tests (CUDA-core and streamed kernels, the fast path), with MODEL (the default
# model's GGUF, scripts/gpu/model.sh) the FP8 quality gate on the GPU; steps as fit in BUDGET seconds; a table last.
# Usage: OUT=... BUDGET=165 [TESTS=1] [MODEL=/tmp/smollm2.gguf] bash scripts/gpu/h200.sh      logs: $OUT/h200/
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/h200; mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
SHAPES=${SHAPES:-qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b}
BUDGET=${BUDGET:-170}
source scripts/gpu/lib.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv > "$LOG/gpu.txt" 2>&1
cat "$LOG/gpu.txt"
for s in $SHAPES; do
  step "bench-$s" 75 python3 -m inference.bench --shape "$s" --weights fp8,bf16 --tokens 256 --json "$LOG/bench-$s.json"
done
if [ "${TESTS:-0}" = 1 ]; then
  step fp8-gpu-tests 120 python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="" -rfE -m gpu \
    tests/kernels/test_fp8_stream_gemv.py tests/kernels/test_fp8_cuda_gemv.py tests/inference/test_fp8_fast_path.py
fi
if [ -f "${MODEL:-}" ]; then
  step quality-fp8 60 python3 -m inference.quality --model "$MODEL" --device cuda --weights fp8 --json "$LOG/quality-fp8.json"
fi
summary
python3 scripts/gpu/fp8_table.py "$LOG" $SHAPES
