#!/usr/bin/env bash
# The decode loop with 2 plain steps in flight while drafts land and drafts that repeat a loop (DraftConfig.lag /
# lag_window, PromptLookupDrafter.continuation, issue 25), against the tree in $BEFORE (`git archive <rev> inference
# kernels`) in the same call: the speculative gpu tests (speculative greedy = plain greedy) and
# the edit workload on the default model in $MODEL, before / now / before again / now again, and now with a
# 16-token window, an endless one (2 in flight once a draft has landed) and 8 in flight.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BEFORE=.before BUDGET=500 bash scripts/gpu/draft7.sh   logs: $OUT/draft7/
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/lib.sh
window draft7
step spec-tests 150 "${now[@]}" python3 -m pytest "${PYTEST[@]}" tests/inference/test_speculative_gpu.py
step edit-before 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-before.json"
step edit-now 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1 --json "$LOG/edit-now.json"
step edit-before-again 60 "${before[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
step edit-now-again 60 "${now[@]}" python3 -m inference.bench --workload edit --model "$MODEL" --tokens 192 --repeats 1
for v in "win16 'lag_window': 16" "winall 'lag_window': 1000000" "lag8 'lag': 8"; do  # DraftConfig patched: measurements
  set -- $v; name=$1; shift
  step "edit-$name" 60 "${now[@]}" python3 -c "import sys, inference.engine as e; C = e.DraftConfig
e.DraftConfig = lambda **k: C(**{$*, **k})
from inference.bench import main; sys.exit(main(sys.argv[1:]))" --workload edit --model "$MODEL" --tokens 192 --repeats 1
done
tar -czf "$OUT/logs.tgz" -C "$OUT" draft7
summary
grep -hE "FAILED|Error" "$LOG/spec-tests.log" | head -12
for f in edit-before edit-now edit-before-again edit-now-again edit-win16 edit-winall edit-lag8; do echo "$f"; grep -E "\(all\)" "$LOG/$f.log"; done
true
