#!/usr/bin/env bash
# Issue 25, tenth session: the Triton decode attention with 2 warps and 2 stages for head_dim <= 64
# (kernels.decode_attention.attention_config) against $BEFORE (4 warps, 3 stages): per launch by column count and
# context for the 135M's heads and Llama-3.2-1B's (head_dim 64), and the 1.5B's (head_dim 128, unchanged: for the
# record), the attention and speculative gpu tests, the edit workload (best of 3 per prompt) before / now / now,
# the verify bench, plain decode and the quality gate on the GPU, before and now.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=560 bash scripts/gpu/attn10.sh   logs: $OUT/attn10/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window attn10
EDIT=(--workload edit --model "$MODEL" --tokens 192 --repeats 3)
PROBE=(python3 -m lab.probe_attention_splits --only-programs --programs 11 --configs w4s3,w2s2)
step probe-135m 40 "${now[@]}" "${PROBE[@]}" --contexts 512,640,1024,4096 --columns 2,4,8,16
step probe-llama 40 "${now[@]}" "${PROBE[@]}" --heads 32,8,64 --contexts 1024,4096,16384 --columns 8
step probe-1.5b 40 "${now[@]}" "${PROBE[@]}" --heads 12,2,128 --contexts 1024,4096,16384 --columns 8
step tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" -x -rfE tests/kernels/test_decode_attention.py \
  tests/kernels/test_decode_attention_cols.py tests/inference/test_speculative_gpu.py
step edit-before 70 "${before[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-1 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step edit-now-2 70 "${now[@]}" python3 -m inference.bench "${EDIT[@]}"
step verify-now 40 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step verify-before 40 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL"
step decode-now 40 "${now[@]}" python3 -m inference.bench --model "$MODEL" --context 512 --contexts 4096 --tokens 256
step decode-before 40 "${before[@]}" python3 -m inference.bench --model "$MODEL" --context 512 --contexts 4096 --tokens 256
step quality-now 60 "${now[@]}" python3 -m inference.quality --model "$MODEL" --device cuda
tar -czf "$OUT/logs.tgz" -C "$OUT" attn10
summary
for f in probe-135m probe-llama probe-1.5b; do grep -E "^\| [0-9]" "$LOG/$f.log"; done
for f in edit-before edit-now-1 edit-now-2; do echo "$f"; grep -E "\(all\)|^\| new" "$LOG/$f.log"; done
for f in verify-now verify-before; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in decode-now decode-before; do echo "$f"; grep -E "tok/s" "$LOG/$f.log" | tail -3; done
grep -iE "perplexity|agreement" "$LOG/quality-now.log" | tail -3
true
