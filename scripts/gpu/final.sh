#!/usr/bin/env bash
# The lead's last device window of a session (single-GPU part; TP: scripts/gpu/tpfuse.sh with
# SHAPES="qwen2.5-coder-1.5b qwen2.5-coder-3b"). The figures README's Performance, FP8 and Speculative
# sections cite: FP8 and bf16 in one bench call per shape (random weights, batch 1, ctx 512), the FP8
# quality gate on the GPU fast path (real default model, then bf16 for comparison), the speculative GPU
# tests, the verify step's cost and the edit workload on the real model. Each step under a timeout; a table last.
# env: OUT, MODEL (the real default model .gguf; /tmp/smollm2.gguf), SHAPES (FP8 bench shapes)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}/final; LOG=$OUT; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=$PYTHONPATH:/tmp/site
MODEL=${MODEL:-/tmp/smollm2.gguf}
SHAPES=${SHAPES:-qwen2.5-coder-1.5b llama-3.2-1b qwen2.5-coder-3b}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
source scripts/gpu/lib.sh
for s in $SHAPES; do
  step "fp8-bench-$s" 70 python3 -m inference.bench --shape "$s" --weights fp8,bf16 --tokens 256 --json "$OUT/fp8-bench-$s.json"
done
step quality-fp8 60 python3 -m inference.quality --model "$MODEL" --device cuda --weights fp8 --json "$OUT/quality-fp8.json"
step quality-bf16 60 python3 -m inference.quality --model "$MODEL" --device cuda --json "$OUT/quality-bf16.json"
step spec-gpu-tests 80 python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts= tests/inference/test_speculative_gpu.py
step verify-smollm2 50 python3 -m inference.bench --workload verify --model "$MODEL" --context 512 --json "$OUT/verify-smollm2.json"
step verify-1.5b 60 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 --json "$OUT/verify-1.5b.json"
step edit 100 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$OUT/edit.json"
summary
