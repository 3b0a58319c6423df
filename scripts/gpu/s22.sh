#!/usr/bin/env bash
# Twenty-second session, one GPU, issue 24's last open item (FP8 as the GPU default?): the real default model at
# $MODEL (after `bash scripts/gpu/model.sh join`, PYTHONPATH=/tmp/site) with FP8 and bf16 weights in one bench call
# (plain decode, TTFT), the edit workload on bf16 (speculation off / on), and the quality gate on both formats.
# EDIT=1: only the edit workload, FP8 weights (which do not speculate) then bf16, in one call.
# Usage: OUT=... BUDGET=400 [EDIT=1] bash scripts/gpu/s22.sh      logs: $OUT/s22/, logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s22
if [ "${EDIT:-0}" = 1 ]; then  # the edit workload on FP8 weights (no speculation) and on bf16 (speculation), one call
  for w in fp8 bf16; do
    step "edit-$w" 150 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 \
      --weights "$w" --json "$LOG/edit-$w.json"
  done
  tar -czf "$OUT/logs.tgz" -C "$OUT" s22
  summary
  for w in fp8 bf16; do grep -E "\*\*(edit|new code) \(all\)" "$LOG/edit-$w.log"; done
  exit 0
fi
step bench-default 120 "${now[@]}" python3 -m inference.bench --model "$MODEL" --weights fp8,bf16 --tokens 256 \
  --contexts 4096 --ttft 128 --json "$LOG/bench-default.json"
step edit-bf16 150 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 \
  --json "$LOG/edit-bf16.json"
for w in fp8 bf16; do
  step "quality-$w" 90 "${now[@]}" python3 -m inference.quality --model "$MODEL" --device cuda --weights "$w" \
    --tokens 2048 --window 512 --json "$LOG/quality-$w.json"
done
tar -czf "$OUT/logs.tgz" -C "$OUT" s22
summary
grep -E "^\| (fp8|bfloat16) |speed-up|sampled" "$LOG/bench-default.log"
grep -E "\*\*(edit|new code) \(all\)" "$LOG/edit-bf16.log"
for w in fp8 bf16; do echo "quality-$w" && tail -3 "$LOG/quality-$w.log"; done
true
