#!/usr/bin/env bash
# Chained verify steps (inference.speculative.decode, issue 25) on one GPU: the speculative gpu tests (plain =
# speculative greedy with chaining on the graphs' two slots), and the edit workload on the default model in
# $MODEL with chaining off, after 1 whole draft, after CHAIN_AFTER (the default) - one call, the same machine.
# Usage: OUT=... MODEL=/tmp/smollm2.gguf BUDGET=300 bash scripts/gpu/chain.sh     logs: $OUT/chain/ + $OUT/logs.tgz
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; LOG=$(realpath -m "$OUT/chain"); mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MODEL=${MODEL:-/tmp/smollm2.gguf}
source scripts/gpu/lib.sh
PYTEST=(python3 -m pytest -q -p no:cacheprovider -p no:randomly -o addopts="")
edit() {  # edit NAME CHAIN_AFTER: the edit bench with decode.CHAIN_AFTER set (a measurement, not a setting)
  step "edit-$1" 60 python3 -c "import sys, inference.speculative.decode as d; d.CHAIN_AFTER = $2
from inference.bench import main; sys.exit(main(sys.argv[1:]))" --workload edit --model "$MODEL" --tokens 192 \
    --repeats 1 --json "$LOG/edit-$1.json"
}
edit off 1000000
edit after1 1
edit default "d.CHAIN_AFTER"
edit off-again 1000000
step spec-tests 150 "${PYTEST[@]}" -s tests/inference/test_speculative_gpu.py
tar -czf "$OUT/logs.tgz" -C "$OUT" chain
summary
grep -hE "FAILED" "$LOG/spec-tests.log" | head -12
for f in off after1 default off-again; do echo "$f"; grep -E "\(all\)" "$LOG/edit-$f.log"; done
true
