#!/usr/bin/env bash
# The Triton decode attention's q/k norm summed as a fixed pairwise tree (kernels/decode_attention.py _row_sums)
# and its RoPE as one explicit fma: the verify step's K rows then equal the one-token kernel's bit for bit
# (tests/kernels/test_decode_attention_cols.py failed on an H200 with QK norm before). Its GPU tests, the
# speculative GPU tests, then the decode bench before (tree in $BEFORE, default .before: `mkdir -p .before &&
# git archive <commit> inference kernels | tar -x -C .before`) and after, interleaved, at ctx 2048 (the Triton
# attention's range) on Qwen3-1.7B (QK norm) and the 1.5B. Usage: OUT=... bash scripts/gpu/attn_tree.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-out}; LOG=$OUT/attn_tree; mkdir -p "$LOG"; LOG=$(cd "$LOG" && pwd)
BEFORE=$(cd "${BEFORE:-.before}" && pwd)
export PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-280}
source scripts/gpu/lib.sh
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="" -rfE)
export PYTHONPATH=$ROOT
step attn-tests 120 "${PYTEST[@]}" tests/kernels/test_decode_attention_cols.py tests/kernels/test_decode_attention.py \
  tests/inference/test_speculative_gpu.py
for shape in qwen3-1.7b qwen2.5-coder-1.5b; do
  for tree in before after; do
    dir=$([ $tree = before ] && echo "$BEFORE" || echo "$ROOT")
    step "bench-$shape-$tree" 60 bash -c "cd $dir && PYTHONPATH=$dir python3 -m inference.bench --shape $shape \
      --context 2048 --tokens 256 --repeats 2 --ttft '' --json $LOG/bench-$shape-$tree.json"
  done
done
summary
grep -h "^| bfloat16\|^| bf16" "$LOG"/bench-*.log
for f in "$LOG"/bench-*.json; do python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); d=r['runs'][0]['decode'][0]; print(sys.argv[1].split('/')[-1], d['tok_s'], d['ms_per_token'])" "$f"; done
