#!/usr/bin/env bash
# README's Performance tables in one device call (one GPU): the real default model at $MODEL if present (after
# `bash scripts/gpu/model.sh join`, PYTHONPATH=/tmp/site) and random weights of each shape in SHAPES, bf16 and FP8
# in one inference.bench call per model; the edit workload on the default model (speculation off / on); the 1.5B's
# verify step; the transformers baseline last if time is left. Then `python -m lab.perf_table` prints the tables.
# Usage: OUT=... BUDGET=570 [SHAPES="a b"] [HF=0] bash scripts/gpu/table.sh      logs: $OUT/table/, logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window table
SHAPES=${SHAPES:-qwen2.5-coder-1.5b qwen3-1.7b llama-3.2-1b qwen2.5-coder-3b}
if [ -f "$MODEL" ]; then
  step bench-smollm2-135m 90 "${now[@]}" python3 -m inference.bench --model "$MODEL" --weights bf16,fp8 \
    --contexts 4096 --ttft 128,1024 --json "$LOG/bench-smollm2-135m.json"
  step edit 90 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 \
    --json "$LOG/edit.json"
fi
for s in $SHAPES; do
  step "bench-$s" 120 "${now[@]}" python3 -m inference.bench --shape "$s" --weights bf16,fp8 --contexts 4096,16384 \
    --ttft 1024 --json "$LOG/bench-$s.json"
done
step verify 90 "${now[@]}" python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --families overlap \
  --json "$LOG/verify.json"
[ "${HF:-1}" = 1 ] && step hf 150 "${now[@]}" python3 -m inference.bench --shape qwen2.5-coder-1.5b --tokens 256 \
  --contexts "" --ttft "" --vs hf --json "$LOG/hf.json"
tar -czf "$OUT/logs.tgz" -C "$OUT" table
summary
python3 -m lab.perf_table "$LOG"
[ -f "$LOG/hf.log" ] && grep -E "transformers static" "$LOG/hf.log"
true
