#!/usr/bin/env bash
# The verify step's attention with 11 programs per kv head and column taking the splits in turn up to 704 rows
# of context (AttentionConfig.verify_split_programs, FastVerifier.graph_at, issue 25), against the tree in
# $BEFORE (`git archive <rev> inference kernels`) in the same call: the attention and speculative gpu tests (a
# column's bits = the one-token kernel's; speculative greedy = plain greedy), the verify bench and the edit
# workload on the default model in $MODEL, before / now / before again / now again.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=500 bash scripts/gpu/attn7.sh   logs: $OUT/attn7/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window attn7
step tests 200 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/kernels/test_decode_attention_cols.py \
  tests/kernels/test_decode_attention.py tests/inference/test_speculative_gpu.py
step verify-before 60 "${before[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-before.json"
step verify-now 60 "${now[@]}" python3 -m inference.bench --workload verify --model "$MODEL" --json "$LOG/verify-now.json"
step edit-before 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-before.json"
step edit-now 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-now.json"
step edit-before-again 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
step edit-now-again 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
tar -czf "$OUT/logs.tgz" -C "$OUT" attn7
summary
grep -hE "FAILED|Error" "$LOG/tests.log" | head -12
for f in verify-before verify-now; do echo "$f"; grep -E "^\| cols" "$LOG/$f.log"; done
for f in edit-before edit-now edit-before-again edit-now-again; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
true
