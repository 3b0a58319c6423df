#!/usr/bin/env bash
# Fifteenth session, one GPU, the call after `bash scripts/gpu/model.sh stash` (carry .gpu/a; this call carries
# .gpu/b): joins the default model; where the GPU is an H200 the edit workload (speculation off and on, best of 3
# per prompt) and the default model's decode; then the streamed family's GPU tests and verify bench
# (scripts/gpu/ringdown.sh, the first GPU run of session 14's review mends) and the 1.5B's default step.
# Usage: OUT=... BUDGET=540 bash scripts/gpu/s15.sh   logs: $OUT/s15/, $OUT/ringdown/ (and $OUT/logs*.tgz)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window s15
step join 60 bash scripts/gpu/model.sh join
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  step edit 150 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 3
  step decode 60 python3 -m inference.bench --model "$MODEL" --context 512 --tokens 256
fi
step step-1.5b 90 python3 -m inference.bench --shape qwen2.5-coder-1.5b --context 512 --tokens 256
tar -czf "$OUT/logs-s15.tgz" -C "$OUT" s15
summary
grep -hE "\(all\)|tok/s|^\| " "$LOG"/edit.log "$LOG"/decode.log "$LOG"/step-1.5b.log 2>/dev/null | head -40
left=$((${BUDGET:-540} - SECONDS))
OUT=$OUT BUDGET=$left bash scripts/gpu/ringdown.sh
