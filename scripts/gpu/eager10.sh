#!/usr/bin/env bash
# The step's first launch without PDL (inference.fast.step.bind_step): every GPU test (scripts/gpu/check.sh), the
# eager / graph determinism probe (scripts/gpu/determinism10.py), and plain decode on the 1.5B shape before ($BEFORE)
# and now (graph mode: the first launch of a replay had no predecessor to overlap anyway).
# Usage: OUT=... BEFORE=.before BUDGET=560 bash scripts/gpu/eager10.sh   (gguf on PYTHONPATH)   logs: $OUT/eager10/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window eager10
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
step determinism 90 "${now[@]}" python3 scripts/gpu/determinism10.py
step bench-before 60 "${before[@]}" python3 -m inference.bench --shape qwen2.5-coder-1.5b --tokens 256
step bench-now 60 "${now[@]}" python3 -m inference.bench --shape qwen2.5-coder-1.5b --tokens 256
step gpu-tests 430 env OUT="$LOG" LIMIT_TESTS=420 bash scripts/gpu/check.sh
tar -czf "$OUT/logs.tgz" -C "$OUT" eager10
summary
grep -E "^[a-z].*first diff" "$LOG/determinism.log" | cut -c1-110
for f in bench-before bench-now; do echo "$f"; grep -E "context 512" "$LOG/$f.log" | head -2; done
grep -E "^(FAILED|ERROR)|passed|failed" "$LOG/gpu-tests.log" | tail -8
true
