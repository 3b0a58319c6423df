#!/usr/bin/env bash
# The lead's last device call of a session: all GPU tests (check.sh), then the real default model's
# plain decode (bf16) and the speculative edit workload (spec on/off) and verify cost. A table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export OUT PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
[ -d /tmp/site ] && export PYTHONPATH=$PYTHONPATH:/tmp/site
MODEL=${MODEL:-/tmp/smollm2.gguf}
LIMIT_TESTS=${LIMIT_TESTS:-240} bash scripts/gpu/check.sh
timeout 70 python3 -m inference.bench --model "$MODEL" --context 512 --tokens 512 --contexts 4096 --ttft 128,1024 \
  --json "$OUT/bench-default.json" > "$OUT/bench-default.log" 2>&1; echo "bench-default rc=$?"
timeout 60 python3 -m inference.bench --workload verify --shape qwen2.5-coder-1.5b --context 512 \
  --json "$OUT/verify-1.5b.json" > "$OUT/verify-1.5b.log" 2>&1; echo "verify rc=$?"
timeout 130 python3 -m inference.bench --workload edit --model "$MODEL" --tokens 256 --repeats 1 \
  --json "$OUT/edit.json" > "$OUT/edit.log" 2>&1; echo "edit rc=$?"
echo "=== default model"; tail -6 "$OUT/bench-default.log"
echo "=== verify"; tail -4 "$OUT/verify-1.5b.log"
echo "=== edit"; tail -16 "$OUT/edit.log"
