#!/usr/bin/env bash
# GPU figures for the default model (issue 22): the fast path's decode speed on SmolLM2-135M-Instruct
# (GGUF dequantized to bf16 at load) and the quality gate (perplexity and top-1 agreement of the fast
# path's decode kernels vs the float32 reference, teacher-forced on stdlib code; bf16 weights, then the
# FP8 weights option through the same harness).
# Needs $MODEL (a SmolLM2 .gguf, default /tmp/smollm2.gguf) and `gguf` importable; logs under $OUT/gguf/.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$OUT/gguf; mkdir -p "$LOG"
MODEL=${MODEL:-/tmp/smollm2.gguf}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PY:-python}

$PY -m inference.bench --model "$MODEL" --weights bf16,fp8 --context 512 --tokens 512 --contexts 4096 --ttft 128,1024 \
    --json "$LOG/bench.json" > "$LOG/bench.log" 2>&1
bench_rc=$?
$PY -m inference.quality --model "$MODEL" --device cuda --tokens 2048 --window 512 \
    --json "$LOG/quality.json" > "$LOG/quality.log" 2>&1
quality_rc=$?
$PY -m inference.quality --model "$MODEL" --device cuda --weights fp8 --tokens 2048 --window 512 \
    --json "$LOG/quality_fp8.json" > "$LOG/quality_fp8.log" 2>&1
fp8_rc=$?

echo "--- bench (rc=$bench_rc)"; tail -8 "$LOG/bench.log"
echo "--- quality, fast path bf16 (rc=$quality_rc)"; tail -4 "$LOG/quality.log"
echo "--- quality, fast path FP8 weights (rc=$fp8_rc)"; tail -4 "$LOG/quality_fp8.log"
[ $bench_rc -eq 0 ] && [ $quality_rc -eq 0 ] && [ $fp8_rc -eq 0 ]
